//! [`Map`]: a compact string-keyed map (labels, annotations, `data`, resource lists).
//!
//! Invariant: entries keep the order they arrived in (the API server sends keys sorted) and
//! keys are unique; lookups are linear, which beats hashing for the handful of entries
//! these maps hold.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Str;

/// A string-keyed map stored as one boxed slice of pairs.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Map<V>(Box<[(Str, V)]>);

impl<V> Map<V> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }

    /// The entries, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V> FromIterator<(Str, V)> for Map<V> {
    /// Later entries replace earlier ones with the same key (as in a JSON object).
    fn from_iter<I: IntoIterator<Item = (Str, V)>>(iter: I) -> Self {
        let mut out: Vec<(Str, V)> = Vec::new();
        for (k, v) in iter {
            push_or_replace(&mut out, k, v);
        }
        Map(out.into_boxed_slice())
    }
}

/// Adds an entry, or replaces the value of the entry with the same key.
fn push_or_replace<V>(entries: &mut Vec<(Str, V)>, k: Str, v: V) {
    match entries.iter_mut().find(|(ok, _)| *ok == k) {
        Some(slot) => slot.1 = v,
        None => entries.push((k, v)),
    }
}

impl<V: fmt::Debug> fmt::Debug for Map<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for Map<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter() {
            m.serialize_entry(k.as_str(), v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Map<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = Map<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Map<V>, A::Error> {
                // A deserializer that knows the length (protobuf) sizes the entries exactly;
                // the bound keeps a hint from allocating what the input cannot hold.
                let mut entries: Vec<(Str, V)> = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
                while let Some((k, v)) = access.next_entry::<Str, V>()? {
                    push_or_replace(&mut entries, k, v);
                }
                Ok(Map(entries.into_boxed_slice()))
            }
        }
        d.deserialize_map(MapVisitor(PhantomData))
    }
}
