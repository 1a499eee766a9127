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

/// Entries a map decoded from JSON gathers on the stack before it allocates.
const STACK_ENTRIES: usize = 8;

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
                let mut entries: Vec<(Str, V)> = match access.size_hint() {
                    // A deserializer that knows the length (protobuf) sizes the entries
                    // exactly; the bound keeps a hint from allocating what the input cannot
                    // hold.
                    Some(n) => Vec::with_capacity(n.min(1024)),
                    // JSON gives no length: the first entries gather on the stack, so a
                    // map of a few (most labels, annotations, `data`) is allocated once, at
                    // its size, instead of grown and then shrunk.
                    None => {
                        let mut head: [Option<(Str, V)>; STACK_ENTRIES] = std::array::from_fn(|_| None);
                        let mut len = 0;
                        loop {
                            let Some((k, v)) = access.next_entry::<Str, V>()? else {
                                let mut exact = Vec::with_capacity(len);
                                exact.extend(head.into_iter().flatten());
                                return Ok(Map(exact.into_boxed_slice()));
                            };
                            match head[..len].iter_mut().flatten().find(|(old, _)| *old == k) {
                                Some(slot) => slot.1 = v,
                                None if len < STACK_ENTRIES => {
                                    head[len] = Some((k, v));
                                    len += 1;
                                }
                                None => {
                                    let mut spilled = Vec::with_capacity(2 * STACK_ENTRIES);
                                    spilled.extend(head.into_iter().flatten());
                                    spilled.push((k, v));
                                    break spilled;
                                }
                            }
                        }
                    }
                };
                while let Some((k, v)) = access.next_entry::<Str, V>()? {
                    push_or_replace(&mut entries, k, v);
                }
                Ok(Map(entries.into_boxed_slice()))
            }
        }
        d.deserialize_map(MapVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Vec<(String, String)> {
        let map: Map<Str> = serde_json::from_str(json).unwrap();
        map.iter().map(|(k, v)| (k.to_owned(), v.as_str().to_owned())).collect()
    }

    fn object(pairs: &[(String, String)]) -> String {
        serde_json::to_string(&serde_json::Map::from_iter(pairs.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))))
            .unwrap()
    }

    #[test]
    fn decodes_in_order_below_at_and_above_the_stack_entries() {
        for n in [0, 1, 2, STACK_ENTRIES - 1, STACK_ENTRIES, STACK_ENTRIES + 1, 3 * STACK_ENTRIES] {
            let pairs: Vec<(String, String)> = (0..n).map(|i| (format!("k{i:02}"), format!("v{i}"))).collect();
            assert_eq!(decode(&object(&pairs)), pairs, "{n} entries");
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_place_and_takes_the_last_value() {
        assert_eq!(decode(r#"{"a":"1","b":"2","a":"3"}"#), [("a".into(), "3".into()), ("b".into(), "2".into())]);
        // Repeated after the stack is full, and repeated from the stack once spilled.
        let mut json = String::from("{");
        for i in 0..STACK_ENTRIES {
            json.push_str(&format!(r#""k{i}":"{i}","#));
        }
        json.push_str(r#""k0":"again","extra":"x","k1":"late"}"#);
        let got = decode(&json);
        assert_eq!(got.len(), STACK_ENTRIES + 1);
        assert_eq!(got[0], ("k0".into(), "again".into()));
        assert_eq!(got[1], ("k1".into(), "late".into()));
        assert_eq!(got[STACK_ENTRIES], ("extra".into(), "x".into()));
    }

    #[test]
    fn a_bad_value_is_an_error() {
        assert!(serde_json::from_str::<Map<Str>>(r#"{"a":"1","b":2}"#).is_err());
        let mut json = String::from("{");
        for i in 0..=STACK_ENTRIES {
            json.push_str(&format!(r#""k{i}":"{i}","#));
        }
        json.push_str(r#""bad":[]}"#);
        assert!(serde_json::from_str::<Map<Str>>(&json).is_err());
    }
}
