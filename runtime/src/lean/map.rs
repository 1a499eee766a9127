//! Compact string-keyed maps (labels, annotations, `data`, resource lists), in two forms:
//! [`Map`], one boxed slice of pairs (16 bytes; what nested, interned sub-objects hold), and
//! [`InlineMap`], which holds up to [`INLINE_ENTRIES`] pairs in itself (40 bytes with its `Option`;
//! what an object's own maps and its metadata's labels and annotations are, so the one or
//! two entries they mostly have cost no allocation per decoded object).
//!
//! Invariants: entries keep the order they arrived in (the API server sends keys sorted) and
//! keys are unique; lookups are linear, which beats hashing for the handful of entries
//! these maps hold. A boxed slice holds exactly its entries. Whether an `InlineMap` holds
//! its entries in place follows from their number alone; equality and hashing compare
//! entries, so equal entries are equal maps however they were built.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Str;

/// Entries an [`InlineMap`] holds in itself; from one more on they are in a boxed slice.
pub const INLINE_ENTRIES: usize = 2;

// `Inline::Two` and `Gather`'s `first` and `second` are the places of those entries.
const _: () = assert!(INLINE_ENTRIES == 2, "InlineMap's in-place forms hold two entries");

/// A string-keyed map stored as one boxed slice of pairs.
#[derive(Clone)]
pub struct Map<V>(Box<[(Str, V)]>);

/// A string-keyed map holding up to [`INLINE_ENTRIES`] pairs in itself, more as one boxed slice.
#[derive(Clone)]
pub struct InlineMap<V>(Inline<V>);

/// The entries of an [`InlineMap`]; `Boxed` only for more than [`INLINE_ENTRIES`] of them.
#[derive(Clone)]
enum Inline<V> {
    Empty,
    One((Str, V)),
    Two([(Str, V); 2]),
    Boxed(Box<[(Str, V)]>),
}

impl<V> Map<V> {
    fn entries(&self) -> &[(Str, V)] {
        &self.0
    }

    /// A builder for this form, for `expected` entries.
    fn gather(expected: usize) -> Gather<V> {
        Gather::new(false, expected)
    }

    fn from_gathered(gathered: Gather<V>) -> Self {
        gathered.into_map()
    }
}

impl<V> InlineMap<V> {
    fn entries(&self) -> &[(Str, V)] {
        match &self.0 {
            Inline::Empty => &[],
            Inline::One(e) => std::slice::from_ref(e),
            Inline::Two(es) => es,
            Inline::Boxed(es) => es,
        }
    }

    /// A builder for this form, for `expected` entries.
    fn gather(expected: usize) -> Gather<V> {
        Gather::new(true, expected)
    }

    fn from_gathered(gathered: Gather<V>) -> Self {
        gathered.into_inline_map()
    }
}

/// A map being built: its entries in a `Vec`, or, for an [`InlineMap`] until there are
/// more than [`INLINE_ENTRIES`], on the stack.
struct Gather<V> {
    /// Whether the first [`INLINE_ENTRIES`] entries stay on the stack.
    inline: bool,
    first: Option<(Str, V)>,
    second: Option<(Str, V)>,
    spilled: Vec<(Str, V)>,
    /// The expected number of entries (a hint: any number may come), bounded so a false
    /// one cannot allocate much.
    expected: usize,
}

impl<V> Gather<V> {
    fn new(inline: bool, expected: usize) -> Self {
        let expected = expected.min(1024);
        let spilled = if inline { Vec::new() } else { Vec::with_capacity(expected) };
        Gather { inline, first: None, second: None, spilled, expected }
    }

    /// Adds an entry, or replaces the value of the entry with the same key.
    fn push_or_replace(&mut self, k: Str, v: V) {
        if !self.inline || !self.spilled.is_empty() {
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
        let mut spilled = Vec::with_capacity(self.expected.max(INLINE_ENTRIES + 1));
        spilled.extend(self.first.take());
        spilled.extend(self.second.take());
        spilled.push((k, v));
        self.spilled = spilled;
    }

    fn into_map(self) -> Map<V> {
        debug_assert!(!self.inline);
        Map(self.spilled.into_boxed_slice())
    }

    fn into_inline_map(self) -> InlineMap<V> {
        InlineMap(match (self.first, self.second) {
            (Some(a), Some(b)) => Inline::Two([a, b]),
            (Some(a), None) => Inline::One(a),
            (None, _) if self.spilled.is_empty() => Inline::Empty,
            (None, _) => Inline::Boxed(self.spilled.into_boxed_slice()),
        })
    }
}

/// What both forms share: reads, comparison, `Debug`, and serde both ways.
macro_rules! map_api {
    ($map:ident) => {
        impl<V> $map<V> {
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
        }

        impl<V: PartialEq> PartialEq for $map<V> {
            fn eq(&self, other: &Self) -> bool {
                self.entries() == other.entries()
            }
        }

        impl<V: Eq> Eq for $map<V> {}

        impl<V: Hash> Hash for $map<V> {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.entries().hash(state);
            }
        }

        impl<V> FromIterator<(Str, V)> for $map<V> {
            /// Later entries replace earlier ones with the same key (as in a JSON object).
            fn from_iter<I: IntoIterator<Item = (Str, V)>>(iter: I) -> Self {
                let iter = iter.into_iter();
                let mut gathered = Self::gather(iter.size_hint().0);
                for (k, v) in iter {
                    gathered.push_or_replace(k, v);
                }
                Self::from_gathered(gathered)
            }
        }

        impl<V: fmt::Debug> fmt::Debug for $map<V> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map().entries(self.iter()).finish()
            }
        }

        impl<V: Serialize> Serialize for $map<V> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let entries = self.entries();
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k.as_str(), v)?;
                }
                m.end()
            }
        }

        impl<'de, V: Deserialize<'de>> Deserialize<'de> for $map<V> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct MapVisitor<V>(PhantomData<V>);
                impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
                    type Value = $map<V>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a map")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<$map<V>, A::Error> {
                        // A deserializer that knows the length (protobuf) sizes a boxed
                        // slice exactly.
                        let mut gathered = $map::gather(access.size_hint().unwrap_or(0));
                        while let Some((k, v)) = access.next_entry::<Str, V>()? {
                            gathered.push_or_replace(k, v);
                        }
                        Ok($map::from_gathered(gathered))
                    }
                }
                d.deserialize_map(MapVisitor(PhantomData))
            }
        }
    };
}

map_api!(Map);
map_api!(InlineMap);

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;

    use serde::de::DeserializeOwned;

    use super::*;
    use crate::alloc_count::allocations_of;

    /// The two forms, read alike.
    trait AnyMap: FromIterator<(Str, Str)> + DeserializeOwned + Serialize + PartialEq + Hash + fmt::Debug {
        fn text(&self) -> Vec<(String, String)>;
        fn value(&self, key: &str) -> Option<String>;
        fn count(&self) -> usize;
        fn empty(&self) -> bool;
    }

    macro_rules! any_map {
        ($map:ident) => {
            impl AnyMap for $map<Str> {
                fn text(&self) -> Vec<(String, String)> {
                    self.iter().map(|(k, v)| (k.to_owned(), v.as_str().to_owned())).collect()
                }
                fn value(&self, key: &str) -> Option<String> {
                    self.get(key).map(|v| v.as_str().to_owned())
                }
                fn count(&self) -> usize {
                    self.len()
                }
                fn empty(&self) -> bool {
                    self.is_empty()
                }
            }
        };
    }
    any_map!(Map);
    any_map!(InlineMap);

    fn pairs(keys: &[&str]) -> Vec<(Str, Str)> {
        keys.iter().enumerate().map(|(i, k)| (Str::new(k), Str::new(&format!("v{i}")))).collect()
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn hash_of(m: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        m.hash(&mut h);
        h.finish()
    }

    fn keep_their_order<M: AnyMap>() {
        let keys = ["e", "a", "d", "b", "c"];
        for n in 0..=keys.len() {
            let m: M = pairs(&keys[..n]).into_iter().collect();
            assert_eq!(m.count(), n);
            assert_eq!(m.empty(), n == 0);
            let want: Vec<(String, String)> = keys[..n].iter().enumerate().map(|(i, k)| (k.to_string(), format!("v{i}"))).collect();
            assert_eq!(m.text(), want, "{n} entries");
            for (i, k) in keys[..n].iter().enumerate() {
                assert_eq!(m.value(k), Some(format!("v{i}")));
            }
            assert_eq!(m.value("absent"), None);
        }
    }

    #[test]
    fn entries_keep_their_order_at_every_length() {
        keep_their_order::<Map<Str>>();
        keep_their_order::<InlineMap<Str>>();
    }

    fn take_the_last_value<M: AnyMap>() {
        let build = |entries: &[(&str, &str)]| -> M { entries.iter().map(|(k, v)| (Str::new(k), Str::new(v))).collect() };
        // Collapsing to two entries after three arrived, and repeats past the second entry.
        assert_eq!(build(&[("a", "1"), ("b", "2"), ("a", "3")]).text(), owned(&[("a", "3"), ("b", "2")]));
        assert_eq!(build(&[("a", "1"), ("b", "2"), ("c", "3"), ("b", "4"), ("a", "5")]).text(), owned(&[("a", "5"), ("b", "4"), ("c", "3")]));
        let json: M = serde_json::from_str(r#"{"x":"1","x":"2"}"#).unwrap();
        assert_eq!(json.text(), owned(&[("x", "2")]));
    }

    #[test]
    fn a_repeated_key_keeps_its_place_and_takes_the_last_value() {
        take_the_last_value::<Map<Str>>();
        take_the_last_value::<InlineMap<Str>>();
    }

    fn equal_however_built<M: AnyMap>() {
        for json in [r#"{}"#, r#"{"a":"v0"}"#, r#"{"a":"v0","b":"v1"}"#, r#"{"a":"v0","b":"v1","c":"v2"}"#] {
            let decoded: M = serde_json::from_str(json).unwrap();
            let text = decoded.text();
            let keys: Vec<&str> = text.iter().map(|(k, _)| k.as_str()).collect();
            let collected: M = pairs(&keys).into_iter().collect();
            // Built with a repeated key that brings it back to the same entries.
            let mut repeated = pairs(&keys);
            if let Some(first) = repeated.first().cloned() {
                repeated.insert(1, (first.0.clone(), Str::new("other")));
                repeated.push(first);
            }
            let repeated: M = repeated.into_iter().collect();
            assert_eq!(decoded, collected, "{json}");
            assert_eq!(decoded, repeated, "{json}");
            assert_eq!(hash_of(&decoded), hash_of(&collected), "{json}");
            assert_eq!(hash_of(&decoded), hash_of(&repeated), "{json}");
            assert_eq!(serde_json::to_string(&decoded).unwrap(), json);
        }
        let two: M = pairs(&["a", "b"]).into_iter().collect();
        assert_ne!(two, pairs(&["a", "c"]).into_iter().collect::<M>());
        assert_ne!(two, pairs(&["a"]).into_iter().collect::<M>());
    }

    #[test]
    fn maps_with_equal_entries_are_equal_however_built() {
        equal_however_built::<Map<Str>>();
        equal_however_built::<InlineMap<Str>>();
    }

    fn allocations<M: AnyMap>(n: usize) -> u64 {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        // The strings are made (and interned) before counting: only the map is counted.
        let entries = pairs(&keys);
        let (m, allocations) = allocations_of(|| entries.into_iter().collect::<M>());
        assert_eq!(m.count(), n);
        allocations
    }

    #[test]
    fn an_inline_map_allocates_only_past_its_inline_entries_and_a_boxed_one_once() {
        for n in 0..=INLINE_ENTRIES + 3 {
            assert_eq!(allocations::<InlineMap<Str>>(n), u64::from(n > INLINE_ENTRIES), "inline, {n} entries");
            assert_eq!(allocations::<Map<Str>>(n), u64::from(n > 0), "boxed, {n} entries");
        }
    }

    #[test]
    fn sizes_of_the_two_forms() {
        assert_eq!(std::mem::size_of::<Option<Map<Str>>>(), 16);
        assert_eq!(std::mem::size_of::<Option<InlineMap<Str>>>(), INLINE_ENTRIES * 16 + 8);
    }
}
