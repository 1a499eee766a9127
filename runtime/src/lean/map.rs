//! [`Map`]: a compact string-keyed map (labels, annotations, `data`, resource lists).
//!
//! Invariants: entries keep the order they arrived in (the API server sends keys sorted) and
//! keys are unique; lookups are linear, which beats hashing for the handful of entries
//! these maps hold. A map of up to [`INLINE`] entries holds them in itself and allocates
//! nothing (labels, annotations and a ConfigMap's `data` mostly have one or two); a larger
//! one holds them in one boxed slice of exactly their number. Which of the two a map uses
//! follows from its length alone, so equal entries are equal maps however they were built.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Str;

/// Entries a map holds in itself; from one more on they are in a boxed slice.
pub const INLINE: usize = 2;

/// A string-keyed map: up to [`INLINE`] pairs in place, more as one boxed slice.
#[derive(Clone)]
pub struct Map<V>(Entries<V>);

/// The entries; `Boxed` only for more than [`INLINE`] of them.
#[derive(Clone)]
enum Entries<V> {
    Empty,
    One((Str, V)),
    Two([(Str, V); 2]),
    Boxed(Box<[(Str, V)]>),
}

impl<V> Map<V> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries().iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }

    /// The entries, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &V)> {
        self.entries().iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    fn entries(&self) -> &[(Str, V)] {
        match &self.0 {
            Entries::Empty => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Two(es) => es,
            Entries::Boxed(es) => es,
        }
    }
}

impl<V: PartialEq> PartialEq for Map<V> {
    fn eq(&self, other: &Self) -> bool {
        self.entries() == other.entries()
    }
}

impl<V: Eq> Eq for Map<V> {}

impl<V: Hash> Hash for Map<V> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.entries().hash(state);
    }
}

impl<V> FromIterator<(Str, V)> for Map<V> {
    /// Later entries replace earlier ones with the same key (as in a JSON object).
    fn from_iter<I: IntoIterator<Item = (Str, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut gathered = Gather::new(iter.size_hint().0);
        for (k, v) in iter {
            gathered.push_or_replace(k, v);
        }
        gathered.finish()
    }
}

/// A map being built: its first [`INLINE`] entries on the stack, all of them in a `Vec`
/// (sized by the expected length) once there are more.
struct Gather<V> {
    first: Option<(Str, V)>,
    second: Option<(Str, V)>,
    spilled: Vec<(Str, V)>,
    expected: usize,
}

impl<V> Gather<V> {
    /// Builds a map expected to hold `expected` entries (a hint: any number may come).
    fn new(expected: usize) -> Self {
        Gather { first: None, second: None, spilled: Vec::new(), expected }
    }

    /// Adds an entry, or replaces the value of the entry with the same key.
    fn push_or_replace(&mut self, k: Str, v: V) {
        if !self.spilled.is_empty() {
            match self.spilled.iter_mut().find(|(held, _)| *held == k) {
                Some(slot) => slot.1 = v,
                None => self.spilled.push((k, v)),
            }
            return;
        }
        for slot in [&mut self.first, &mut self.second] {
            match slot {
                Some((held, value)) if *held == k => {
                    *value = v;
                    return;
                }
                Some(_) => {}
                None => {
                    *slot = Some((k, v));
                    return;
                }
            }
        }
        let mut spilled = Vec::with_capacity(self.expected.clamp(INLINE + 1, 1024));
        spilled.extend(self.first.take());
        spilled.extend(self.second.take());
        spilled.push((k, v));
        self.spilled = spilled;
    }

    fn finish(self) -> Map<V> {
        Map(match (self.first, self.second) {
            (Some(a), Some(b)) => Entries::Two([a, b]),
            (Some(a), None) => Entries::One(a),
            (None, _) if self.spilled.is_empty() => Entries::Empty,
            (None, _) => Entries::Boxed(self.spilled.into_boxed_slice()),
        })
    }
}

impl<V: fmt::Debug> fmt::Debug for Map<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for Map<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let entries = self.entries();
        let mut m = s.serialize_map(Some(entries.len()))?;
        for (k, v) in entries {
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
                // A deserializer that knows the length (protobuf) sizes a spilled map
                // exactly; `Gather` bounds the hint, so a false one cannot allocate much.
                let mut gathered = Gather::new(access.size_hint().unwrap_or(0));
                while let Some((k, v)) = access.next_entry::<Str, V>()? {
                    gathered.push_or_replace(k, v);
                }
                Ok(gathered.finish())
            }
        }
        d.deserialize_map(MapVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc_count::allocations_of;

    fn pairs(keys: &[&str]) -> Vec<(Str, Str)> {
        keys.iter().enumerate().map(|(i, k)| (Str::new(k), Str::new(&format!("v{i}")))).collect()
    }

    fn text(m: &Map<Str>) -> Vec<(String, String)> {
        m.iter().map(|(k, v)| (k.to_owned(), v.as_str().to_owned())).collect()
    }

    #[test]
    fn entries_keep_their_order_at_every_length() {
        let keys = ["e", "a", "d", "b", "c"];
        for n in 0..=keys.len() {
            let m: Map<Str> = pairs(&keys[..n]).into_iter().collect();
            assert_eq!(m.len(), n);
            assert_eq!(m.is_empty(), n == 0);
            let want: Vec<(String, String)> = keys[..n].iter().enumerate().map(|(i, k)| (k.to_string(), format!("v{i}"))).collect();
            assert_eq!(text(&m), want, "{n} entries");
            for (i, k) in keys[..n].iter().enumerate() {
                assert_eq!(m.get(k).map(Str::as_str), Some(format!("v{i}").as_str()));
            }
            assert_eq!(m.get("absent"), None);
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_place_and_takes_the_last_value() {
        // Collapsing to two entries after three arrived, and repeats inside a spilled map.
        let m: Map<Str> = [("a", "1"), ("b", "2"), ("a", "3")].iter().map(|(k, v)| (Str::new(k), Str::new(v))).collect();
        assert_eq!(text(&m), [("a".into(), "3".into()), ("b".into(), "2".into())]);
        let m: Map<Str> = [("a", "1"), ("b", "2"), ("c", "3"), ("b", "4"), ("a", "5")].iter().map(|(k, v)| (Str::new(k), Str::new(v))).collect();
        assert_eq!(text(&m), [("a".into(), "5".into()), ("b".into(), "4".into()), ("c".into(), "3".into())]);
        let json: Map<Str> = serde_json::from_str(r#"{"x":"1","x":"2"}"#).unwrap();
        assert_eq!(text(&json), [("x".into(), "2".into())]);
    }

    #[test]
    fn maps_with_equal_entries_are_equal_however_built() {
        use std::collections::hash_map::DefaultHasher;
        let hash = |m: &Map<Str>| {
            let mut h = DefaultHasher::new();
            m.hash(&mut h);
            h.finish()
        };
        for json in [r#"{}"#, r#"{"a":"v0"}"#, r#"{"a":"v0","b":"v1"}"#, r#"{"a":"v0","b":"v1","c":"v2"}"#] {
            let decoded: Map<Str> = serde_json::from_str(json).unwrap();
            let keys: Vec<&str> = decoded.iter().map(|(k, _)| k).collect();
            let collected: Map<Str> = pairs(&keys).into_iter().collect();
            // Built with a repeated key that brings it back to the same entries.
            let mut repeated = pairs(&keys);
            if let Some(first) = repeated.first().cloned() {
                repeated.insert(1, (first.0.clone(), Str::new("other")));
                repeated.push(first);
            }
            let repeated: Map<Str> = repeated.into_iter().collect();
            assert_eq!(decoded, collected, "{json}");
            assert_eq!(decoded, repeated, "{json}");
            assert_eq!(hash(&decoded), hash(&collected), "{json}");
            assert_eq!(hash(&decoded), hash(&repeated), "{json}");
            assert_eq!(serde_json::to_string(&decoded).unwrap(), json);
        }
        let two: Map<Str> = pairs(&["a", "b"]).into_iter().collect();
        let other: Map<Str> = pairs(&["a", "c"]).into_iter().collect();
        assert_ne!(two, other);
        assert_ne!(two, pairs(&["a"]).into_iter().collect());
    }

    #[test]
    fn up_to_inline_entries_allocate_nothing_and_more_allocate_once() {
        for n in 0..=INLINE + 3 {
            let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            // The strings are made (and interned) before counting: only the map is counted.
            let entries = pairs(&keys);
            let (m, allocations) = allocations_of(|| entries.into_iter().collect::<Map<Str>>());
            assert_eq!(m.len(), n);
            assert_eq!(allocations, u64::from(n > INLINE), "{n} entries");
        }
    }

    #[test]
    fn a_map_is_as_large_as_its_inline_entries_and_a_tag() {
        assert_eq!(std::mem::size_of::<Option<Map<Str>>>(), INLINE * 16 + 8);
    }
}
