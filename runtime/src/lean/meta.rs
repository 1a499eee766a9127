//! [`LeanMeta`]: object metadata for lean root types — k8s-openapi's `ObjectMeta` (so
//! `kube::Resource::meta()` gives name, namespace, uid and resource version, and every
//! `kube` API keeps working) with the maps and lists — `labels`, `annotations`,
//! `managedFields`, `ownerReferences` — held apart in lean form. Two labels in `ObjectMeta`
//! cost a 536-byte B-tree node and four strings; here, four pointers to interned strings
//! held in the map itself (see [`InlineMap`]).
//!
//! Invariants: after decoding, `object_meta.labels`, `.managed_fields`, `.annotations` and
//! `.owner_references` are `None`; the values are in the same-named fields of `LeanMeta`
//! (`fieldsV1` as interned [`RawJson`]). So `meta().labels` of a lean root is `None`: its
//! informer's listers read labels through [`lean_labels`], and code of one's own reads
//! `metadata.labels` (or [`LeanRoot::lean_meta`]). Encoding writes the lean fields back
//! into `metadata` (a value set on `object_meta` is written when the lean field is
//! `None`), in the field order k8s-openapi writes.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, OwnerReference as K8sOwnerReference,
};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{InlineMap, InternTable, Interned, RawJson, Shared, Str};
use crate::labels::Labels;

/// One `managedFields` entry, lean.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    /// `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<Str>,
    /// `fieldsType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields_type: Option<Str>,
    /// `fieldsV1`, as compact JSON text.
    #[serde(default, rename = "fieldsV1", skip_serializing_if = "Option::is_none")]
    pub fields_v1: Option<RawJson>,
    /// `manager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<Str>,
    /// `operation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Str>,
    /// `subresource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<Str>,
    /// `time`, as sent (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Str>,
}

/// One `ownerReferences` entry, lean (and shared: the Pods of one ReplicaSet hold one).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<Str>,
    /// `blockOwnerDeletion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
    /// `controller`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Str>,
    /// `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str>,
    /// `uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<Str>,
}

impl Interned for OwnerReference {
    fn table() -> &'static InternTable<Self> {
        static TABLE: InternTable<OwnerReference> = InternTable::new();
        &TABLE
    }
}

/// `ObjectMeta` with `labels`, `annotations`, `managedFields` and `ownerReferences` kept
/// lean. Dereferences to the `ObjectMeta`, so `pod.metadata.name` reads as it does on
/// k8s-openapi types (and `pod.metadata.labels` is the lean field).
#[derive(Clone, PartialEq, Debug, Default)]
pub struct LeanMeta {
    /// Everything but the fields below (whose fields here are always `None`).
    pub object_meta: ObjectMeta,
    /// `labels`.
    pub labels: Option<InlineMap<Str>>,
    /// `managedFields`.
    pub managed_fields: Option<Box<[ManagedFieldsEntry]>>,
    /// `annotations`.
    pub annotations: Option<InlineMap<Str>>,
    /// `ownerReferences`.
    pub owner_references: Option<Box<[Shared<OwnerReference>]>>,
}

impl LeanMeta {
    /// Drops `managedFields`.
    pub fn strip_managed_fields(&mut self) {
        self.managed_fields = None;
        self.object_meta.managed_fields = None;
    }

    /// Runs a transform written for k8s-openapi's `ObjectMeta` (a factory's
    /// [`MetaTransformFn`](crate::MetaTransformFn)) on this metadata.
    ///
    /// The transform sees `labels`, `annotations` and `ownerReferences` in full, and
    /// `managedFields` as an empty list standing for the lean entries (they are not
    /// converted: that would cost what the lean form saves). Afterwards: a field it set to
    /// `None` is dropped; `managedFields` left an empty list keeps the lean entries; anything
    /// else it wrote replaces the lean value (labels and annotations come back in key
    /// order). Converting the maps and owner references costs a few allocations per object;
    /// to drop only managedFields without it, set `without_managed_fields` as the
    /// informer's transform instead.
    pub fn apply_object_meta_transform(&mut self, transform: impl FnOnce(&mut ObjectMeta)) {
        let m = &mut self.object_meta;
        let to_btree = |lean: InlineMap<Str>| Labels::Lean(&lean).to_btree_map();
        let from_btree = |set: BTreeMap<String, String>| -> InlineMap<Str> { set.iter().map(|(k, v)| (Str::new(k), Str::new(v))).collect() };
        if let Some(lean) = self.labels.take() {
            m.labels = Some(to_btree(lean));
        }
        if let Some(lean) = self.annotations.take() {
            m.annotations = Some(to_btree(lean));
        }
        if let Some(lean) = self.owner_references.take() {
            m.owner_references = Some(lean.iter().map(|r| to_k8s_owner_reference(r)).collect());
        }
        let had_managed_fields = self.managed_fields.is_some();
        if had_managed_fields {
            m.managed_fields = Some(Vec::new());
        }
        transform(m);
        self.labels = m.labels.take().map(from_btree);
        self.annotations = m.annotations.take().map(from_btree);
        self.owner_references = m
            .owner_references
            .take()
            .map(|refs| refs.iter().map(|r| Shared::new(from_k8s_owner_reference(r))).collect());
        match m.managed_fields.take() {
            None => self.managed_fields = None,
            Some(written) if written.is_empty() && had_managed_fields => {}
            Some(written) => {
                // Both forms have the same JSON, so the conversion cannot fail.
                self.managed_fields = Some(written.iter().filter_map(|e| super::convert(e).ok()).collect());
            }
        }
    }
}

fn to_k8s_owner_reference(r: &OwnerReference) -> K8sOwnerReference {
    let text = |s: &Option<Str>| s.as_deref().unwrap_or_default().to_owned();
    K8sOwnerReference {
        api_version: text(&r.api_version),
        block_owner_deletion: r.block_owner_deletion,
        controller: r.controller,
        kind: text(&r.kind),
        name: text(&r.name),
        uid: text(&r.uid),
    }
}

fn from_k8s_owner_reference(r: &K8sOwnerReference) -> OwnerReference {
    OwnerReference {
        api_version: Some(Str::new(&r.api_version)),
        block_owner_deletion: r.block_owner_deletion,
        controller: r.controller,
        kind: Some(Str::new(&r.kind)),
        name: Some(Str::new(&r.name)),
        uid: Some(Str::new(&r.uid)),
    }
}

/// A cached type whose metadata is a [`LeanMeta`] (the generated lean roots,
/// [`LeanPartialObjectMeta`](super::LeanPartialObjectMeta)). The factory runs its metadata
/// transform on these through [`LeanMeta::apply_object_meta_transform`].
pub trait LeanRoot {
    /// The object's metadata.
    fn lean_meta(&self) -> &LeanMeta;
    /// The object's metadata, to change.
    fn lean_meta_mut(&mut self) -> &mut LeanMeta;
}

/// The labels of a lean root: the [`LabelsFn`](crate::LabelsFn) its informers use.
pub fn lean_labels<K: LeanRoot>(obj: &K) -> Labels<'_> {
    obj.lean_meta().labels.as_ref().map_or(Labels::None, Labels::Lean)
}

impl Deref for LeanMeta {
    type Target = ObjectMeta;
    fn deref(&self) -> &ObjectMeta {
        &self.object_meta
    }
}

impl DerefMut for LeanMeta {
    fn deref_mut(&mut self) -> &mut ObjectMeta {
        &mut self.object_meta
    }
}

impl Serialize for LeanMeta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = &self.object_meta;
        let mut map = s.serialize_map(None)?;
        macro_rules! opt {
            ($key:literal, $field:expr) => {
                if let Some(v) = &$field {
                    map.serialize_entry($key, v)?;
                }
            };
        }
        match (&self.annotations, &m.annotations) {
            (Some(lean), _) => map.serialize_entry("annotations", lean)?,
            (None, Some(set)) => map.serialize_entry("annotations", set)?,
            (None, None) => {}
        }
        opt!("creationTimestamp", m.creation_timestamp);
        opt!("deletionGracePeriodSeconds", m.deletion_grace_period_seconds);
        opt!("deletionTimestamp", m.deletion_timestamp);
        opt!("finalizers", m.finalizers);
        opt!("generateName", m.generate_name);
        opt!("generation", m.generation);
        match (&self.labels, &m.labels) {
            (Some(lean), _) => map.serialize_entry("labels", lean)?,
            (None, Some(set)) => map.serialize_entry("labels", set)?,
            (None, None) => {}
        }
        match (&self.managed_fields, &m.managed_fields) {
            (Some(lean), _) => map.serialize_entry("managedFields", lean)?,
            (None, Some(set)) => map.serialize_entry("managedFields", set)?,
            (None, None) => {}
        }
        opt!("name", m.name);
        opt!("namespace", m.namespace);
        match (&self.owner_references, &m.owner_references) {
            (Some(lean), _) => map.serialize_entry("ownerReferences", lean)?,
            (None, Some(set)) => map.serialize_entry("ownerReferences", set)?,
            (None, None) => {}
        }
        opt!("resourceVersion", m.resource_version);
        opt!("selfLink", m.self_link);
        opt!("uid", m.uid);
        map.end()
    }
}

/// The name of a field of object metadata, read without an owned copy of it (serde reads a
/// `Cow<str>` key as a `String`: an allocation per field of every decoded object); `Other`
/// for a name `LeanMeta` does not keep.
enum MetaField {
    Annotations,
    CreationTimestamp,
    DeletionGracePeriodSeconds,
    DeletionTimestamp,
    Finalizers,
    GenerateName,
    Generation,
    Labels,
    ManagedFields,
    Name,
    Namespace,
    OwnerReferences,
    ResourceVersion,
    SelfLink,
    Uid,
    Other,
}

impl MetaField {
    fn of(name: &str) -> MetaField {
        match name {
            "annotations" => MetaField::Annotations,
            "creationTimestamp" => MetaField::CreationTimestamp,
            "deletionGracePeriodSeconds" => MetaField::DeletionGracePeriodSeconds,
            "deletionTimestamp" => MetaField::DeletionTimestamp,
            "finalizers" => MetaField::Finalizers,
            "generateName" => MetaField::GenerateName,
            "generation" => MetaField::Generation,
            "labels" => MetaField::Labels,
            "managedFields" => MetaField::ManagedFields,
            "name" => MetaField::Name,
            "namespace" => MetaField::Namespace,
            "ownerReferences" => MetaField::OwnerReferences,
            "resourceVersion" => MetaField::ResourceVersion,
            "selfLink" => MetaField::SelfLink,
            "uid" => MetaField::Uid,
            _ => MetaField::Other,
        }
    }
}

impl<'de> Deserialize<'de> for MetaField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = MetaField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name of object metadata")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<MetaField, E> {
                Ok(MetaField::of(name))
            }
            fn visit_bytes<E: serde::de::Error>(self, name: &[u8]) -> Result<MetaField, E> {
                Ok(std::str::from_utf8(name).map_or(MetaField::Other, MetaField::of))
            }
        }
        d.deserialize_identifier(V)
    }
}

impl<'de> Deserialize<'de> for LeanMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LeanMeta;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("object metadata")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<LeanMeta, A::Error> {
                let mut out = LeanMeta::default();
                let m = &mut out.object_meta;
                while let Some(field) = access.next_key::<MetaField>()? {
                    match field {
                        MetaField::Annotations => out.annotations = access.next_value()?,
                        MetaField::CreationTimestamp => m.creation_timestamp = access.next_value()?,
                        MetaField::DeletionGracePeriodSeconds => m.deletion_grace_period_seconds = access.next_value()?,
                        MetaField::DeletionTimestamp => m.deletion_timestamp = access.next_value()?,
                        MetaField::Finalizers => m.finalizers = access.next_value()?,
                        MetaField::GenerateName => m.generate_name = access.next_value()?,
                        MetaField::Generation => m.generation = access.next_value()?,
                        MetaField::Labels => out.labels = access.next_value()?,
                        MetaField::ManagedFields => {
                            out.managed_fields = access.next_value::<Option<Vec<ManagedFieldsEntry>>>()?.map(Vec::into_boxed_slice);
                        }
                        MetaField::Name => m.name = access.next_value()?,
                        MetaField::Namespace => m.namespace = access.next_value()?,
                        MetaField::OwnerReferences => {
                            out.owner_references = access.next_value::<Option<Vec<Shared<OwnerReference>>>>()?.map(Vec::into_boxed_slice);
                        }
                        MetaField::ResourceVersion => m.resource_version = access.next_value()?,
                        MetaField::SelfLink => m.self_link = access.next_value()?,
                        MetaField::Uid => m.uid = access.next_value()?,
                        MetaField::Other => {
                            access.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"annotations":{"a":"1"},"creationTimestamp":"2026-01-02T03:04:05Z","generateName":"web-","labels":{"app":"web"},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"manager":"kubectl","operation":"Update","time":"2026-01-02T03:04:05Z"}],"name":"web-1","namespace":"default","ownerReferences":[{"apiVersion":"apps/v1","blockOwnerDeletion":true,"controller":true,"kind":"ReplicaSet","name":"web","uid":"u-1"}],"resourceVersion":"42","uid":"u-2"}"#;

    #[test]
    fn round_trips_and_matches_k8s_openapi() {
        let lean: LeanMeta = serde_json::from_str(META).unwrap();
        assert!(lean.object_meta.managed_fields.is_none() && lean.object_meta.annotations.is_none());
        assert!(lean.object_meta.labels.is_none());
        assert_eq!(lean.labels.as_ref().unwrap().get("app").map(|v| v.as_str()), Some("web"));
        assert_eq!(lean.annotations.as_ref().unwrap().get("a").map(|v| v.as_str()), Some("1"));
        assert_eq!(lean.owner_references.as_ref().unwrap()[0].kind.as_deref(), Some("ReplicaSet"));
        let entries = lean.managed_fields.as_deref().unwrap();
        assert_eq!(entries[0].manager.as_deref(), Some("kubectl"));
        assert_eq!(lean.name.as_deref(), Some("web-1"));
        assert_eq!(serde_json::to_string(&lean).unwrap(), META);
        let k8s: ObjectMeta = serde_json::from_str(META).unwrap();
        assert_eq!(serde_json::to_string(&k8s).unwrap(), META);
        let back: ObjectMeta = super::super::convert(&lean).unwrap();
        assert_eq!(back, k8s);
    }

    #[test]
    fn field_names_are_read_from_borrowed_owned_and_byte_keys_alike_and_unknown_ones_skipped() {
        let with_unknown = META.replacen('{', r#"{"zUnknown":{"a":[1]},"#, 1);
        let borrowed: LeanMeta = serde_json::from_str(&with_unknown).unwrap();
        // An escaped key is handed over owned, not borrowed from the text.
        let escaped_text = META.replace(r#""name""#, r#""n\u0061me""#);
        assert!(escaped_text.contains(r#""n\u0061me":"web-1""#));
        let escaped: LeanMeta = serde_json::from_str(&escaped_text).unwrap();
        // A `Value` hands over every key as an owned `String`.
        let owned: LeanMeta = serde_json::from_value(serde_json::from_str(&with_unknown).unwrap()).unwrap();
        for m in [&borrowed, &escaped, &owned] {
            assert_eq!(m.object_meta.name.as_deref(), Some("web-1"));
            assert_eq!(m.object_meta.uid.as_deref(), Some("u-2"));
            assert_eq!(serde_json::to_string(m).unwrap(), META);
        }
        let bytes = serde::de::value::BytesDeserializer::<serde::de::value::Error>::new(b"resourceVersion");
        assert!(matches!(MetaField::deserialize(bytes), Ok(MetaField::ResourceVersion)));
        let not_utf8 = serde::de::value::BytesDeserializer::<serde::de::value::Error>::new(b"\xffname");
        assert!(matches!(MetaField::deserialize(not_utf8), Ok(MetaField::Other)));
    }

    #[test]
    fn meta_transforms_see_and_change_the_lean_labels() {
        let mut lean: LeanMeta = serde_json::from_str(META).unwrap();
        lean.apply_object_meta_transform(|m| {
            let labels = m.labels.as_mut().expect("the transform sees the labels");
            assert_eq!(labels.get("app").map(String::as_str), Some("web"));
            labels.insert("tier".into(), "front".into());
        });
        assert!(lean.object_meta.labels.is_none(), "labels go back to the lean field");
        let labels = Labels::Lean(lean.labels.as_ref().unwrap());
        assert_eq!((labels.get("app"), labels.get("tier"), labels.len()), (Some("web"), Some("front"), 2));
        lean.apply_object_meta_transform(|m| m.labels = None);
        assert!(lean.labels.is_none() && !serde_json::to_string(&lean).unwrap().contains("\"labels\":"));
    }

    #[test]
    fn strip_drops_the_entries() {
        let mut lean: LeanMeta = serde_json::from_str(META).unwrap();
        lean.strip_managed_fields();
        assert!(!serde_json::to_string(&lean).unwrap().contains("managedFields"));
    }
}
