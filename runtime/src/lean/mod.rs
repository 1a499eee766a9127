//! Building blocks of the memory-lean layout that informer-gen emits for cached types
//! (`--lean`): interned strings, hash-consed sub-objects, raw JSON for free-form fields and
//! compact maps.
//!
//! Invariants:
//! - Every [`Str`], [`RawJson`] and [`Shared`] value is created through its intern table, so
//!   two equal values are the same allocation. Equality and hashing of these handles are
//!   therefore by address, and a struct made of them hashes in time proportional to its own
//!   fields, not to the size of the tree below it (hash-consing).
//! - Tables hold one strong reference to each value; entries nobody else references are
//!   dropped by a sweep whenever a table has doubled since its last sweep, so memory follows
//!   the live objects and the amortized cost per insert stays constant.
//! - Serializing a lean value writes the JSON it was decoded from (same fields, same values;
//!   maps keep the order they arrived in); the generated `to_k8s`/`from_k8s` conversions go
//!   through that JSON, so they are lossless.

mod int_or_string;
mod intern;
mod map;
mod meta;
mod partial_object_meta;
mod raw_json;
mod str;

pub use int_or_string::IntOrString;
pub use intern::{Held, InternTable, Interned, Shared, Table, TableStats};
pub use map::{INLINE_ENTRIES, InlineMap, Map};
pub use meta::{LeanMeta, LeanRoot, ManagedFieldsEntry, OwnerReference, lean_labels};
pub use partial_object_meta::{LeanPartialObjectMeta, PARTIAL_OBJECT_METADATA_API_VERSION, PARTIAL_OBJECT_METADATA_KIND};
pub use raw_json::RawJson;
pub(crate) use raw_json::TOKEN as RAW_JSON_TOKEN;
pub(crate) use intern::TOKEN as SHARED_TOKEN;
pub(crate) use str::TOKEN as STR_TOKEN;
pub use str::Str;

/// Converts between two types with the same JSON form (a lean type and its k8s-openapi
/// counterpart) through a `serde_json::Value`.
pub fn convert<T: serde::Serialize, U: serde::de::DeserializeOwned>(from: &T) -> Result<U, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(from)?)
}
