//! What the generator knows about one resource, independent of where it was read from.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

/// One group/version/resource found in the inputs.
#[derive(Debug, Clone)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind, from `x-kubernetes-group-version-kind` or the CRD's `spec.names.kind`.
    pub kind: String,
    /// Plural, from the path templates or the CRD's `spec.names.plural`.
    pub plural: String,
    /// Namespaced (true) or cluster-scoped, from the paths or the CRD's `spec.scope`.
    pub namespaced: bool,
    /// Verbs the server offers (`get`, `list`, `watch`, …), sorted.
    pub verbs: BTreeSet<String>,
    /// The file it came from.
    pub source: PathBuf,
    /// Where its object type comes from.
    pub object: ObjectType,
}

impl Resource {
    /// client-go's informer-gen rule: informers for kinds with list and watch.
    pub fn has_informer(&self) -> bool {
        self.verbs.contains("list") && self.verbs.contains("watch")
    }
}

/// The Rust type of a resource's objects.
#[derive(Debug, Clone)]
pub enum ObjectType {
    /// An existing type, by OpenAPI definition name (mapped to a Rust path by the extern
    /// paths, `io.k8s.` → `k8s_openapi` by default).
    Definition(String),
    /// No operation names the schema (only for resources without list, which get no
    /// informer).
    Unknown,
    /// A type generated from a CRD version's `openAPIV3Schema`.
    Crd {
        /// The schema.
        schema: Value,
        /// JSON pointer of the schema in its file, for errors.
        pointer: String,
    },
}
