//! [`LeanPartialObjectMeta`]: what a metadata-only informer caches — kube's
//! `PartialObjectMeta<K>` with [`LeanMeta`] in place of k8s-openapi's `ObjectMeta`, so
//! `managedFields` are interned compact JSON text instead of `serde_json::Value` trees.
//!
//! Invariants: the object holds only `metadata`; the type fields are the API's constant
//! `meta.k8s.io/v1` / `PartialObjectMetadata` and are written back, not stored. The JSON
//! form equals kube's `PartialObjectMeta<K>` as the server sends it, so
//! [`to_kube`](LeanPartialObjectMeta::to_kube) / [`from_kube`](LeanPartialObjectMeta::from_kube)
//! are lossless.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::{PartialObjectMeta, Resource};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::{LeanMeta, LeanRoot};

/// The `apiVersion` the API server gives metadata-only objects.
pub const PARTIAL_OBJECT_METADATA_API_VERSION: &str = "meta.k8s.io/v1";
/// The `kind` the API server gives metadata-only objects.
pub const PARTIAL_OBJECT_METADATA_KIND: &str = "PartialObjectMetadata";

/// The metadata of one `K` object, lean (see the module documentation).
#[derive(Deserialize)]
#[serde(bound = "")]
pub struct LeanPartialObjectMeta<K> {
    /// The object's metadata.
    #[serde(default)]
    pub metadata: LeanMeta,
    #[serde(skip)]
    resource: PhantomData<fn() -> K>,
}

impl<K> LeanPartialObjectMeta<K> {
    /// Wraps `metadata`.
    pub fn new(metadata: LeanMeta) -> Self {
        LeanPartialObjectMeta { metadata, resource: PhantomData }
    }

    /// kube's form of this object (lossless).
    pub fn to_kube(&self) -> Result<PartialObjectMeta<K>, serde_json::Error> {
        super::convert(self)
    }

    /// The lean form of kube's `PartialObjectMeta` (lossless; the type fields are the API's).
    pub fn from_kube(object: &PartialObjectMeta<K>) -> Result<Self, serde_json::Error> {
        super::convert(object)
    }

    /// Drops `managedFields` (for `SharedIndexInformer::set_transform`).
    pub fn without_managed_fields(mut self) -> Self {
        self.metadata.strip_managed_fields();
        self
    }
}

impl<K> LeanRoot for LeanPartialObjectMeta<K> {
    fn lean_meta(&self) -> &LeanMeta {
        &self.metadata
    }
    fn lean_meta_mut(&mut self) -> &mut LeanMeta {
        &mut self.metadata
    }
}

impl<K> Clone for LeanPartialObjectMeta<K> {
    fn clone(&self) -> Self {
        LeanPartialObjectMeta::new(self.metadata.clone())
    }
}

impl<K> PartialEq for LeanPartialObjectMeta<K> {
    fn eq(&self, other: &Self) -> bool {
        self.metadata == other.metadata
    }
}

impl<K> Default for LeanPartialObjectMeta<K> {
    fn default() -> Self {
        LeanPartialObjectMeta::new(LeanMeta::default())
    }
}

impl<K> fmt::Debug for LeanPartialObjectMeta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeanPartialObjectMeta").field("metadata", &self.metadata).finish()
    }
}

impl<K> Serialize for LeanPartialObjectMeta<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("apiVersion", PARTIAL_OBJECT_METADATA_API_VERSION)?;
        map.serialize_entry("kind", PARTIAL_OBJECT_METADATA_KIND)?;
        map.serialize_entry("metadata", &self.metadata)?;
        map.end()
    }
}

impl<K: Resource> Resource for LeanPartialObjectMeta<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn metadata_api() -> bool {
        true
    }

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata.object_meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata.object_meta
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    const OBJECT: &str = r#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"annotations":{"z":"1","a":"2"},"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app":"web"},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"manager":"kubectl","operation":"Update","time":"2026-01-02T03:04:05Z"}],"name":"web-1","namespace":"default","ownerReferences":[{"apiVersion":"apps/v1","controller":true,"kind":"ReplicaSet","name":"web","uid":"u-1"}],"resourceVersion":"42","uid":"u-2"}}"#;

    #[test]
    fn decodes_lean_and_converts_losslessly_to_kube() {
        let lean: LeanPartialObjectMeta<Pod> = serde_json::from_str(OBJECT).unwrap();
        assert!(lean.metadata.object_meta.managed_fields.is_none());
        assert_eq!(lean.metadata.managed_fields.as_deref().map(<[_]>::len), Some(1));
        assert_eq!(serde_json::to_string(&lean).unwrap(), OBJECT);
        let kube: PartialObjectMeta<Pod> = serde_json::from_str(OBJECT).unwrap();
        let converted = lean.to_kube().unwrap();
        assert_eq!(converted.metadata, kube.metadata);
        assert_eq!(converted.types, kube.types);
        // Same JSON value (kube's annotations are a sorted map, so member order differs).
        let back = LeanPartialObjectMeta::from_kube(&kube).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(&lean).unwrap());
        assert_eq!(back.metadata.managed_fields, lean.metadata.managed_fields);
        assert_eq!(<LeanPartialObjectMeta<Pod> as Resource>::plural(&()), "pods");
        assert!(<LeanPartialObjectMeta<Pod> as Resource>::metadata_api());
    }

    #[test]
    fn a_meta_transform_sees_the_lean_fields_and_its_changes_stick() {
        let mut lean: LeanPartialObjectMeta<Pod> = serde_json::from_str(OBJECT).unwrap();
        lean.metadata.apply_object_meta_transform(|m| {
            assert_eq!(m.annotations.as_ref().map(|a| a.len()), Some(2));
            assert_eq!(m.owner_references.as_ref().unwrap()[0].kind, "ReplicaSet");
            assert_eq!(m.managed_fields.as_deref().map(<[_]>::len), Some(0), "the stand-in for the lean entries");
            m.annotations.as_mut().unwrap().insert("b".into(), "3".into());
        });
        let annotations = lean.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(), ["a=2", "b=3", "z=1"]);
        assert_eq!(lean.metadata.managed_fields.as_deref().map(<[_]>::len), Some(1), "left alone: kept");
        assert_eq!(lean.metadata.owner_references.as_ref().unwrap()[0].name.as_deref(), Some("web"));
        assert!(lean.metadata.object_meta.annotations.is_none() && lean.metadata.object_meta.owner_references.is_none());

        lean.metadata.apply_object_meta_transform(&*crate::strip_managed_fields_meta());
        assert!(lean.metadata.managed_fields.is_none());
        assert!(!serde_json::to_string(&lean).unwrap().contains("managedFields"));

        let written = k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
            manager: Some("me".into()),
            ..Default::default()
        };
        lean.metadata.apply_object_meta_transform(|m| m.managed_fields = Some(vec![written.clone()]));
        assert_eq!(lean.metadata.managed_fields.as_ref().unwrap()[0].manager.as_deref(), Some("me"));
    }
}
