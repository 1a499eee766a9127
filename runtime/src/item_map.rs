//! The store's map from object key to object, looked up by key or by namespace and name
//! without joining them.
//!
//! Invariants:
//! - An entry's hash is [`KeyHasher`]'s of its key; a lookup by namespace and name hashes
//!   and compares the two strings it was given as the joined key, so it finds exactly what a
//!   lookup by `namespace/name` (or `name` without a namespace) finds, and writes no joined
//!   key to memory on the way (see [`crate::key_hash`] for why that matters).
//! - Each key is one shared allocation; [`ItemMap::upsert`] keeps the key already stored
//!   under the same string, so index sets may hold clones of it and compare them by
//!   allocation.
//! - An entry's slot also holds a copy of its key's text when that is at most [`INLINE`]
//!   bytes, and lookups compare that copy: a lookup that finds its entry reads the table's
//!   control bytes and one cache line of slot, and no memory outside the table. A longer key
//!   is compared through its own allocation. (That allocation lies among its object's, so in
//!   a store larger than the cache, comparing through it costs a cache and TLB miss per
//!   lookup; the copy costs 48 bytes per slot.)

use std::sync::Arc;

use hashbrown::hash_table::{Entry, HashTable};

use crate::key::ObjectKey;
use crate::key_hash::KeyHasher;

/// Whether `key` is `namespace/name`.
#[inline]
fn is_joined(key: &[u8], namespace: &str, name: &str) -> bool {
    let ns = namespace.len();
    key.len() == ns + 1 + name.len() && key[ns] == b'/' && key.starts_with(namespace.as_bytes()) && key.ends_with(name.as_bytes())
}

/// The longest key whose text a slot holds.
const INLINE: usize = 47;
/// [`Slot::short_len`] of a key longer than [`INLINE`].
const LONG: u8 = u8::MAX;

/// One entry; see the module's invariants. 64 bytes, aligned to a cache line, so the text a
/// lookup compares and the object it returns lie in one line.
#[repr(C, align(64))]
struct Slot<K> {
    /// The key's length when it is at most [`INLINE`] bytes, [`LONG`] otherwise.
    short_len: u8,
    /// The key's text, in its first `short_len` bytes, when the key is short.
    text: [u8; INLINE],
    key: ObjectKey,
    obj: Arc<K>,
}

const _: () = assert!(std::mem::size_of::<Slot<()>>() == 64);

impl<K> Slot<K> {
    fn new(key: ObjectKey, obj: Arc<K>) -> Self {
        let mut text = [0u8; INLINE];
        let k = key.as_str().as_bytes();
        let short_len = if k.len() <= INLINE {
            text[..k.len()].copy_from_slice(k);
            k.len() as u8
        } else {
            LONG
        };
        Slot { short_len, text, key, obj }
    }

    /// The key's text held in the slot, `None` for a long key.
    #[inline]
    fn short_text(&self) -> Option<&[u8]> {
        self.text.get(..usize::from(self.short_len))
    }

    /// Whether this entry's key is `key`. A short query is never compared with a long key's
    /// allocation.
    #[inline]
    fn is(&self, key: &str) -> bool {
        match self.short_text() {
            Some(text) => text == key.as_bytes(),
            None => key.len() > INLINE && self.key.as_str() == key,
        }
    }

    /// Whether this entry's key is `namespace/name`, compared as [`Slot::is`] compares.
    #[inline]
    fn is_joined(&self, namespace: &str, name: &str) -> bool {
        match self.short_text() {
            Some(text) => is_joined(text, namespace, name),
            None => namespace.len() + 1 + name.len() > INLINE && is_joined(self.key.as_str().as_bytes(), namespace, name),
        }
    }
}

/// Objects by key, with their keys; see the module's invariants.
pub(crate) struct ItemMap<K> {
    table: HashTable<Slot<K>>,
    hasher: KeyHasher,
}

impl<K> Default for ItemMap<K> {
    fn default() -> Self {
        ItemMap { table: HashTable::new(), hasher: KeyHasher::default() }
    }
}

impl<K> ItemMap<K> {
    /// The object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.table.find(self.hasher.hash(key), |slot| slot.is(key)).map(|slot| &slot.obj)
    }

    /// The key stored under `key` (one allocation shared with the store) and its object.
    pub(crate) fn get_entry(&self, key: &str) -> Option<(&ObjectKey, &Arc<K>)> {
        self.table.find(self.hasher.hash(key), |slot| slot.is(key)).map(|slot| (&slot.key, &slot.obj))
    }

    /// The object called `name` in `namespace` (`None` or `""` for cluster-scoped).
    pub(crate) fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<&Arc<K>> {
        let Some(ns) = namespace.filter(|ns| !ns.is_empty()) else { return self.get(name) };
        let hash = self.hasher.hash_joined(ns, name);
        self.table.find(hash, |slot| slot.is_joined(ns, name)).map(|slot| &slot.obj)
    }

    /// Inserts or replaces the object under `key`. Returns the key now stored (the one
    /// already there, if any; not touched, so that a cold key's allocation is not read) and
    /// the object replaced.
    pub(crate) fn upsert(&mut self, key: ObjectKey, obj: Arc<K>) -> (&ObjectKey, Option<Arc<K>>) {
        match self.upsert_unless(key, obj, |_, _| false) {
            Ok(stored) => stored,
            Err(_) => unreachable!("upsert keeps nothing"),
        }
    }

    /// Like [`ItemMap::upsert`], in one lookup, but leaves the entry as it is when
    /// `keep(held, &obj)` is true: then returns the held object as `Err`.
    pub(crate) fn upsert_unless(
        &mut self,
        key: ObjectKey,
        obj: Arc<K>,
        keep: impl FnOnce(&K, &K) -> bool,
    ) -> Result<(&ObjectKey, Option<Arc<K>>), Arc<K>> {
        let hasher = self.hasher;
        let rehash = |slot: &Slot<K>| hasher.hash(slot.key.as_str());
        Ok(match self.table.entry(hasher.hash(key.as_str()), |slot| slot.is(key.as_str()), rehash) {
            Entry::Occupied(e) => {
                let slot = e.into_mut();
                if keep(&slot.obj, &obj) {
                    return Err(slot.obj.clone());
                }
                let old = std::mem::replace(&mut slot.obj, obj);
                (&slot.key, Some(old))
            }
            Entry::Vacant(e) => (&e.insert(Slot::new(key, obj)).into_mut().key, None),
        })
    }

    /// Removes the entry under `key`; returns its stored key and object.
    pub(crate) fn remove(&mut self, key: &str) -> Option<(ObjectKey, Arc<K>)> {
        let entry = self.table.find_entry(self.hasher.hash(key), |slot| slot.is(key)).ok()?;
        let slot = entry.remove().0;
        Some((slot.key, slot.obj))
    }

    /// Removes every entry, keeping the table's capacity.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }

    /// Inserts every entry, a later one replacing an earlier one under the same key.
    pub(crate) fn extend(&mut self, entries: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let entries = entries.into_iter();
        let hasher = self.hasher;
        self.table.reserve(entries.size_hint().0, |slot| hasher.hash(slot.key.as_str()));
        for (key, obj) in entries {
            self.upsert(key, obj);
        }
    }

    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every (key, object) pair, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<K>)> {
        self.table.iter().map(|slot| (&slot.key, &slot.obj))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(keys: &[&str]) -> ItemMap<String> {
        let mut m = ItemMap::default();
        for k in keys {
            m.upsert(ObjectKey::from_string(*k), Arc::new(k.to_string()));
        }
        m
    }

    #[test]
    fn lookups_by_name_find_what_lookups_by_joined_key_find() {
        let keys = ["default/web", "node-1", "kube-system/dns", "a/b/c", "default/we", "defaul/tweb", "x/", "/y", ""];
        let m = map(&keys);
        assert_eq!(m.len(), keys.len());
        let queries: [(Option<&str>, &str); 14] = [
            (Some("default"), "web"),
            (None, "node-1"),
            (Some(""), "node-1"),
            (Some("kube-system"), "dns"),
            (Some("a"), "b/c"),
            (None, "a/b/c"),
            (Some("a/b"), "c"),
            (Some("default"), "we"),
            (Some("defaul"), "tweb"),
            (Some("default"), "nothing"),
            (Some("x"), ""),
            (None, "/y"),
            (None, ""),
            (Some("nothing"), "web"),
        ];
        for (ns, name) in queries {
            let joined = ObjectKey::new(ns, name);
            let by_key = m.get(joined.as_str()).map(|o| o.as_str());
            let by_name = m.get_by_name(ns, name).map(|o| o.as_str());
            assert_eq!(by_name, by_key, "{ns:?} {name:?}");
            assert_eq!(by_key.is_some(), keys.contains(&joined.as_str()), "{joined:?}");
            if let Some(found) = by_key {
                assert_eq!(found, joined.as_str());
            }
        }
    }

    #[test]
    fn keys_at_and_past_the_slot_length_are_told_apart() {
        // Keys of INLINE - 1, INLINE and INLINE + 1 bytes, and long keys that agree on their
        // first INLINE bytes and differ after them.
        let at = |len: usize| format!("ns/{}", "n".repeat(len - 3));
        let shared = format!("ns/{}", "p".repeat(INLINE));
        let keys = [at(INLINE - 1), at(INLINE), at(INLINE + 1), format!("{shared}-a"), format!("{shared}-b"), "x".repeat(300)];
        let m = map(&keys.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(m.len(), keys.len());
        for k in &keys {
            let key = ObjectKey::from_string(k.as_str());
            assert_eq!(m.get(k).map(|o| o.as_str()), Some(k.as_str()));
            assert_eq!(m.get_by_name(key.namespace(), key.name()).map(|o| o.as_str()), Some(k.as_str()));
        }
        for absent in [at(INLINE + 2), format!("{shared}-c"), shared.clone(), format!("ns/{}", "n".repeat(INLINE - 3)) + "m", "x".repeat(299)] {
            let key = ObjectKey::from_string(absent.as_str());
            assert!(m.get(&absent).is_none(), "{absent}");
            assert!(m.get_by_name(key.namespace(), key.name()).is_none(), "{absent}");
        }
        let mut m = m;
        for k in &keys {
            assert_eq!(m.remove(k).map(|(key, _)| key.as_str().to_string()).as_deref(), Some(k.as_str()));
        }
        assert!(m.is_empty());
    }

    #[test]
    fn a_slot_matches_its_own_key_only() {
        // Lookups compare only on a hash tag match, so the comparison is checked here on
        // every pair, short and long, joined and not.
        let shared = format!("ns/{}", "p".repeat(INLINE));
        let keys = [
            "default/web".to_string(),
            "default/we".to_string(),
            "defaul/tweb".to_string(),
            "defaultweb".to_string(),
            "default-web".to_string(),
            "web".to_string(),
            String::new(),
            format!("ns/{}", "n".repeat(INLINE - 3)),
            format!("ns/{}", "n".repeat(INLINE - 4)) + "m",
            format!("ns/{}", "n".repeat(INLINE - 2)),
            format!("{shared}-a"),
            format!("{shared}-b"),
            format!("{shared}/b"),
            shared.clone(),
        ];
        for stored in &keys {
            let slot = Slot::new(ObjectKey::from_string(stored.as_str()), Arc::new(()));
            for query in &keys {
                assert_eq!(slot.is(query), stored == query, "{stored:?} against {query:?}");
                if let Some((ns, name)) = query.split_once('/') {
                    assert_eq!(slot.is_joined(ns, name), stored == query, "{stored:?} against {ns:?} {name:?}");
                }
            }
        }
    }

    #[test]
    fn upsert_keeps_the_stored_key_and_remove_returns_it() {
        let mut m = map(&["default/web"]);
        let first = m.iter().next().unwrap().0.clone();
        let (held, old) = m.upsert(ObjectKey::new(Some("default"), "web"), Arc::new("new".into()));
        assert_eq!(held.allocation(), first.allocation());
        assert_eq!(old.as_deref().map(String::as_str), Some("default/web"));
        assert_eq!(m.len(), 1);
        let (key, obj) = m.remove("default/web").unwrap();
        assert_eq!(key.allocation(), first.allocation());
        assert_eq!(obj.as_str(), "new");
        assert!(m.is_empty() && m.remove("default/web").is_none());
    }

    #[test]
    fn grows_and_finds_every_key() {
        let keys: Vec<String> = (0..5000)
            .map(|i| match i % 7 {
                0 => format!("node-{i}"),
                1 => format!("ns-{}/pod-with-a-name-longer-than-a-slot-holds-{i}", i % 13),
                _ => format!("ns-{}/pod-{i}", i % 13),
            })
            .collect();
        let mut m = ItemMap::default();
        m.extend(keys.iter().map(|k| (ObjectKey::from_string(k.as_str()), Arc::new(k.clone()))));
        assert_eq!(m.len(), keys.len());
        for k in &keys {
            assert_eq!(m.get(k).map(|o| o.as_str()), Some(k.as_str()));
            let joined = ObjectKey::from_string(k.as_str());
            assert_eq!(m.get_by_name(joined.namespace(), joined.name()).map(|o| o.as_str()), Some(k.as_str()));
        }
        for k in keys.iter().step_by(2) {
            assert!(m.remove(k).is_some());
        }
        assert_eq!(m.len(), keys.len() / 2);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.contains_key(k), i % 2 == 1, "{k}");
        }
    }
}
