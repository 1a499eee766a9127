//! Resources of `apiextensions.k8s.io/v1` CustomResourceDefinitions: one per served
//! version, with the version's `openAPIV3Schema` as the source of its Rust types.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::{ObjectType, Resource};

/// The verbs every custom resource serves.
const CRD_VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// The OpenAPI definition name the API server publishes for a custom resource: the group's
/// labels reversed, then version and kind (`monitoring.coreos.com`, `v1`, `ServiceMonitor` →
/// `com.coreos.monitoring.v1.ServiceMonitor`). `Config::lean_type` takes it.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').filter(|s| !s.is_empty()).rev().collect();
    parts.push(version);
    parts.push(kind);
    parts.join(".")
}

/// One resource per served version of `crd` (at JSON pointer `at` in `file`).
pub fn resources(file: &Path, mut crd: Value, at: &str) -> Result<Vec<Resource>> {
    let str_at = |ptr: &str| {
        crd.pointer(ptr)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Error::new(file, format!("{at}{ptr}"), "missing or not a string"))
    };
    let group = str_at("/spec/group")?;
    let kind = str_at("/spec/names/kind")?;
    let plural = str_at("/spec/names/plural")?;
    let namespaced = match str_at("/spec/scope")?.as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        other => return Err(Error::new(file, format!("{at}/spec/scope"), format!("unknown scope {other:?}"))),
    };
    let versions = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| Error::new(file, format!("{at}/spec/versions"), "missing or not a list"))?;
    let mut out = Vec::new();
    for (i, v) in versions.iter_mut().enumerate() {
        let vat = format!("{at}/spec/versions/{i}");
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::new(file, format!("{vat}/name"), "missing or not a string"))?
            .to_string();
        // Taken, not cloned: the document is dropped once its resources are read.
        let schema = v
            .pointer_mut("/schema/openAPIV3Schema")
            .map(Value::take)
            .unwrap_or_else(|| serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        out.push(Resource {
            group: group.clone(),
            version,
            kind: kind.clone(),
            plural: plural.clone(),
            namespaced,
            verbs: CRD_VERBS.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
            source: file.to_path_buf(),
            object: ObjectType::Crd { schema, pointer: format!("{vat}/schema/openAPIV3Schema") },
        });
    }
    Ok(out)
}
