//! The thread-safe indexed store every informer caches into (client-go's `Indexer` over
//! `ThreadSafeStore`).
//!
//! Invariants:
//! - Each object is held once, as an `Arc<K>`; readers get clones of the `Arc`, never of `K`.
//! - For every index `i`, every object `o` in the store and every value `v` returned by
//!   `i`'s function on `o`, `o`'s key is in `indices[i][v]`; and nothing else is. Every
//!   write (add, update, delete, replace, `add_indexers`) keeps this exact, and an empty
//!   value set is removed so `list_index_values` only names values some object has.
//! - The [`NAMESPACE_INDEX`] is present from construction.
//! - All methods take `&self`; writes hold a write lock for the duration of one change.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use kube_core::Resource;
use parking_lot::RwLock;

use crate::key::{FastMap, FastSet, ObjectKey};

/// Name of the index by namespace that every store carries (client-go's
/// `cache.NamespaceIndex`). Cluster-scoped objects are indexed under `""`.
pub const NAMESPACE_INDEX: &str = "namespace";

/// A named index function: the values under which one object is indexed (several allowed).
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Errors of index operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// `by_index` and friends were asked for an index that does not exist.
    #[error("index {0:?} does not exist")]
    NoSuchIndex(String),
    /// `add_indexers` was given a name that is already taken.
    #[error("indexer {0:?} already exists")]
    Conflict(String),
}

/// The namespace index function: `[namespace]`, or `[""]` for cluster-scoped objects.
pub fn namespace_index_func<K: Resource>(obj: &K) -> Vec<String> {
    vec![obj.meta().namespace.clone().unwrap_or_default()]
}

type Index = FastMap<String, FastSet<ObjectKey>>;

struct Inner<K> {
    items: FastMap<ObjectKey, Arc<K>>,
    indexers: BTreeMap<String, IndexFunc<K>>,
    indices: HashMap<String, Index>,
}

/// A thread-safe, indexed map from [`ObjectKey`] to `Arc<K>`.
pub struct Indexer<K> {
    inner: RwLock<Inner<K>>,
}

impl<K> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("Indexer")
            .field("len", &inner.items.len())
            .field("indexers", &inner.indexers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> Default for Indexer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Send + Sync + 'static> Indexer<K> {
    /// An empty store with the namespace index.
    pub fn new() -> Self {
        let mut indexers: BTreeMap<String, IndexFunc<K>> = BTreeMap::new();
        indexers.insert(NAMESPACE_INDEX.to_string(), Arc::new(namespace_index_func::<K>));
        let mut indices = HashMap::new();
        indices.insert(NAMESPACE_INDEX.to_string(), Index::default());
        Indexer { inner: RwLock::new(Inner { items: FastMap::default(), indexers, indices }) }
    }
}

impl<K> Indexer<K> {
    /// Inserts or replaces the object under `key`; returns the object it replaced.
    pub fn upsert(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let Inner { items, indexers, indices } = &mut *inner;
        let old = items.insert(key.clone(), obj.clone());
        update_indices(indexers, indices, &key, old.as_deref(), Some(&*obj));
        old
    }

    /// Removes the object under `key`; returns it if it was there.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let Inner { items, indexers, indices } = &mut *inner;
        let (key, old) = items.remove_entry(key)?;
        update_indices(indexers, indices, &key, Some(&*old), None);
        Some(old)
    }

    /// Replaces the whole content with `objects` and rebuilds every index from scratch.
    pub fn replace(&self, objects: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let mut inner = self.inner.write();
        let Inner { items, indexers, indices } = &mut *inner;
        items.clear();
        items.extend(objects);
        for (name, index) in indices.iter_mut() {
            index.clear();
            let f = &indexers[name];
            for (key, obj) in items.iter() {
                for v in f(obj) {
                    index.entry(v).or_default().insert(key.clone());
                }
            }
        }
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// The object called `name` in `namespace` (`None` for cluster-scoped), without
    /// allocating its key.
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        crate::key::with_key_str(namespace, name, |key| self.get(key))
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.read().items.keys().cloned().collect()
    }

    /// Every (key, object) pair, in no particular order.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        self.inner.read().items.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// True when no object is stored.
    pub fn is_empty(&self) -> bool {
        self.inner.read().items.is_empty()
    }

    /// Calls `f` on every object under the read lock, without collecting them.
    pub fn for_each(&self, mut f: impl FnMut(&ObjectKey, &Arc<K>)) {
        for (k, v) in self.inner.read().items.iter() {
            f(k, v);
        }
    }

    /// Adds index functions; the new indices are built over the objects already stored.
    /// Fails, changing nothing, if any name is taken.
    pub fn add_indexers(&self, new: impl IntoIterator<Item = (String, IndexFunc<K>)>) -> Result<(), IndexError> {
        let new: Vec<(String, IndexFunc<K>)> = new.into_iter().collect();
        let mut inner = self.inner.write();
        let mut seen = HashSet::new();
        for (name, _) in &new {
            if inner.indexers.contains_key(name) || !seen.insert(name.clone()) {
                return Err(IndexError::Conflict(name.clone()));
            }
        }
        let Inner { items, indexers, indices } = &mut *inner;
        for (name, f) in new {
            let mut index = Index::default();
            for (key, obj) in items.iter() {
                for v in f(obj) {
                    index.entry(v).or_default().insert(key.clone());
                }
            }
            indices.insert(name.clone(), index);
            indexers.insert(name, f);
        }
        Ok(())
    }

    /// Names of the indices.
    pub fn index_names(&self) -> Vec<String> {
        self.inner.read().indexers.keys().cloned().collect()
    }

    /// Objects that share at least one value of index `index_name` with `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        let f = inner.indexers.get(index_name).ok_or_else(|| IndexError::NoSuchIndex(index_name.into()))?;
        let index = &inner.indices[index_name];
        let mut keys: HashSet<&ObjectKey> = HashSet::new();
        for v in f(obj) {
            if let Some(set) = index.get(&v) {
                keys.extend(set.iter());
            }
        }
        Ok(keys.into_iter().filter_map(|k| inner.items.get(k).cloned()).collect())
    }

    /// Objects indexed under `value` in index `index_name`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        let index = inner.indices.get(index_name).ok_or_else(|| IndexError::NoSuchIndex(index_name.into()))?;
        Ok(index
            .get(value)
            .map(|set| set.iter().filter_map(|k| inner.items.get(k).cloned()).collect())
            .unwrap_or_default())
    }

    /// Calls `f` on each object indexed under `value` in `index_name`, under the read lock.
    pub fn for_each_in_index(&self, index_name: &str, value: &str, mut f: impl FnMut(&ObjectKey, &Arc<K>)) -> Result<(), IndexError> {
        let inner = self.inner.read();
        let index = inner.indices.get(index_name).ok_or_else(|| IndexError::NoSuchIndex(index_name.into()))?;
        if let Some(set) = index.get(value) {
            for k in set {
                if let Some(o) = inner.items.get(k) {
                    f(k, o);
                }
            }
        }
        Ok(())
    }

    /// Keys indexed under `value` in index `index_name`.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        let inner = self.inner.read();
        let index = inner.indices.get(index_name).ok_or_else(|| IndexError::NoSuchIndex(index_name.into()))?;
        Ok(index.get(value).map(|set| set.iter().cloned().collect()).unwrap_or_default())
    }

    /// Every value that at least one object has in index `index_name`.
    pub fn list_index_values(&self, index_name: &str) -> Vec<String> {
        let inner = self.inner.read();
        inner.indices.get(index_name).map(|i| i.keys().cloned().collect()).unwrap_or_default()
    }
}

fn update_indices<K>(
    indexers: &BTreeMap<String, IndexFunc<K>>,
    indices: &mut HashMap<String, Index>,
    key: &ObjectKey,
    old: Option<&K>,
    new: Option<&K>,
) {
    for (name, f) in indexers {
        let old_vals = old.map(|o| f(o)).unwrap_or_default();
        let new_vals = new.map(|o| f(o)).unwrap_or_default();
        if old_vals == new_vals {
            continue;
        }
        let index = indices.get_mut(name).expect("every indexer has an index");
        for v in &old_vals {
            if new_vals.contains(v) {
                continue;
            }
            if let Some(set) = index.get_mut(v) {
                set.remove(key);
                if set.is_empty() {
                    index.remove(v);
                }
            }
        }
        for v in new_vals {
            if !old_vals.contains(&v) {
                index.entry(v).or_default().insert(key.clone());
            }
        }
    }
}
