//! The store's map from object key to object, looked up by key or by namespace and name
//! without joining them.
//!
//! Invariants:
//! - An entry's hash is [`KeyHasher`]'s of its key; a lookup by namespace and name hashes
//!   and compares the two strings it was given as the joined key, so it finds exactly what a
//!   lookup by `namespace/name` (or `name` without a namespace) finds, and writes no joined
//!   key to memory on the way (see [`crate::key_hash`] for why that matters).
//! - Each key is stored once; [`ItemMap::upsert`] keeps the key already stored under the same
//!   string, so index sets may hold clones of it and compare them by allocation.

use std::sync::Arc;

use hashbrown::hash_table::{Entry, HashTable};

use crate::key::ObjectKey;
use crate::key_hash::KeyHasher;

/// Whether `key` is `namespace/name`.
#[inline]
fn is_joined(key: &str, namespace: &str, name: &str) -> bool {
    let ns = namespace.len();
    key.len() == ns + 1 + name.len() && key.as_bytes()[ns] == b'/' && key.starts_with(namespace) && key.ends_with(name)
}

/// Objects by key, with their keys; see the module's invariants.
pub(crate) struct ItemMap<K> {
    table: HashTable<(ObjectKey, Arc<K>)>,
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
        self.table.find(self.hasher.hash(key), |(k, _)| k.as_str() == key).map(|(_, obj)| obj)
    }

    /// The object called `name` in `namespace` (`None` or `""` for cluster-scoped).
    pub(crate) fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<&Arc<K>> {
        let Some(ns) = namespace.filter(|ns| !ns.is_empty()) else { return self.get(name) };
        let hash = self.hasher.hash_joined(ns, name);
        self.table.find(hash, |(k, _)| is_joined(k.as_str(), ns, name)).map(|(_, obj)| obj)
    }

    /// Inserts or replaces the object under `key`. Returns the key now stored (the one
    /// already there, if any) and the object replaced.
    pub(crate) fn upsert(&mut self, key: ObjectKey, obj: Arc<K>) -> (ObjectKey, Option<Arc<K>>) {
        let hasher = self.hasher;
        let rehash = |(k, _): &(ObjectKey, Arc<K>)| hasher.hash(k.as_str());
        match self.table.entry(hasher.hash(key.as_str()), |(k, _)| k.as_str() == key.as_str(), rehash) {
            Entry::Occupied(mut e) => {
                let (held, old) = e.get_mut();
                let old = std::mem::replace(old, obj);
                (held.clone(), Some(old))
            }
            Entry::Vacant(e) => {
                e.insert((key.clone(), obj));
                (key, None)
            }
        }
    }

    /// Removes the entry under `key`; returns its stored key and object.
    pub(crate) fn remove(&mut self, key: &str) -> Option<(ObjectKey, Arc<K>)> {
        let entry = self.table.find_entry(self.hasher.hash(key), |(k, _)| k.as_str() == key).ok()?;
        Some(entry.remove().0)
    }

    /// Removes every entry, keeping the table's capacity.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }

    /// Inserts every entry, a later one replacing an earlier one under the same key.
    pub(crate) fn extend(&mut self, entries: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let entries = entries.into_iter();
        let hasher = self.hasher;
        self.table.reserve(entries.size_hint().0, |(k, _)| hasher.hash(k.as_str()));
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
        self.table.iter().map(|(k, v)| (k, v))
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
        let keys: Vec<String> = (0..5000).map(|i| if i % 7 == 0 { format!("node-{i}") } else { format!("ns-{}/pod-{i}", i % 13) }).collect();
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
