//! The thread-safe indexed store every informer caches into (client-go's `Indexer` over
//! `ThreadSafeStore`).
//!
//! Invariants:
//! - Each object is held once, as an `Arc<K>`; readers get clones of the `Arc`, never of `K`.
//! - For every index `i`, every object `o` in the store and every value `v` returned by
//!   `i`'s function on `o`, `o`'s key is in `indices[i][v]`; and nothing else is. Every
//!   write (add, update, delete, replace, `add_indexers`) keeps this exact, and an empty
//!   value set is removed so `list_index_values` only names values some object has.
//! - The key in an index set is a clone of the key the items map holds for that object (the
//!   one given when the object was first stored; an update keeps it), so sets compare and hash
//!   keys by the address of that one allocation: a write hashes a pointer instead of the key's
//!   bytes, and a growing set never reads key strings again.
//! - The [`NAMESPACE_INDEX`] is present from construction and cannot be replaced. Its value is
//!   read from `metadata.namespace` without allocating, and a write that keeps an object's
//!   namespace (every update under one key, in practice) leaves it untouched.
//! - All methods take `&self`; writes hold a write lock for the duration of one change.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube_core::Resource;
use parking_lot::RwLock;

use crate::item_map::ItemMap;
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
    vec![namespace_value(obj).to_owned()]
}

/// The value of `obj` in the [`NAMESPACE_INDEX`]: its namespace, `""` when it has none.
fn namespace_value<K: Resource>(obj: &K) -> &str {
    obj.meta().namespace.as_deref().unwrap_or("")
}

/// A key in an index set: the items map's own key for the object, compared by allocation.
#[derive(Clone)]
struct HeldKey(ObjectKey);

impl PartialEq for HeldKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.allocation() == other.0.allocation()
    }
}

impl Eq for HeldKey {}

impl Hash for HeldKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.0.allocation() as usize);
    }
}

type Index = FastMap<String, FastSet<HeldKey>>;

struct Inner<K> {
    items: ItemMap<K>,
    /// [`namespace_value`] for `K`, kept here so writes need no `Resource` bound.
    namespace_of: fn(&K) -> &str,
    by_namespace: Index,
    /// Indices added by `add_indexers`; never [`NAMESPACE_INDEX`].
    indexers: BTreeMap<String, IndexFunc<K>>,
    indices: HashMap<String, Index>,
}

impl<K> Inner<K> {
    fn index_named(&self, name: &str) -> Result<&Index, IndexError> {
        if name == NAMESPACE_INDEX {
            return Ok(&self.by_namespace);
        }
        self.indices.get(name).ok_or_else(|| IndexError::NoSuchIndex(name.into()))
    }

    /// Rebuilds every index from the items.
    fn rebuild_indices(&mut self) {
        let Inner { items, namespace_of, by_namespace, indexers, indices } = self;
        by_namespace.clear();
        for (key, obj) in items.iter() {
            add_key(by_namespace, namespace_of(obj), key);
        }
        for (name, index) in indices.iter_mut() {
            *index = build_index(items, &indexers[name]);
        }
    }
}

fn build_index<K>(items: &ItemMap<K>, f: &IndexFunc<K>) -> Index {
    let mut index = Index::default();
    for (key, obj) in items.iter() {
        for v in f(obj) {
            add_key(&mut index, &v, key);
        }
    }
    index
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
            .field("indexers", &index_names(&inner))
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
        Indexer {
            inner: RwLock::new(Inner {
                items: ItemMap::default(),
                namespace_of: namespace_value::<K>,
                by_namespace: Index::default(),
                indexers: BTreeMap::new(),
                indices: HashMap::new(),
            }),
        }
    }
}

impl<K> Indexer<K> {
    /// Inserts or replaces the object under `key`; returns the object it replaced.
    pub fn upsert(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let (held, old) = inner.items.upsert(key, obj.clone());
        update_indices(&mut inner, &held, old.as_deref(), Some(&*obj));
        old
    }

    /// Removes the object under `key`; returns it if it was there.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let (held, old) = inner.items.remove(key)?;
        update_indices(&mut inner, &held, Some(&*old), None);
        Some(old)
    }

    /// Replaces the whole content with `objects` and rebuilds every index from scratch.
    pub fn replace(&self, objects: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let mut inner = self.inner.write();
        inner.items.clear();
        inner.items.extend(objects);
        inner.rebuild_indices();
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// The object called `name` in `namespace` (`None` for cluster-scoped), without
    /// allocating its key.
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.inner.read().items.get_by_name(namespace, name).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.iter().map(|(_, v)| v.clone()).collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.read().items.iter().map(|(k, _)| k.clone()).collect()
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
            if name == NAMESPACE_INDEX || inner.indexers.contains_key(name) || !seen.insert(name.clone()) {
                return Err(IndexError::Conflict(name.clone()));
            }
        }
        let Inner { items, indexers, indices, .. } = &mut *inner;
        for (name, f) in new {
            indices.insert(name.clone(), build_index(items, &f));
            indexers.insert(name, f);
        }
        Ok(())
    }

    /// Names of the indices, sorted.
    pub fn index_names(&self) -> Vec<String> {
        index_names(&self.inner.read())
    }

    /// Objects that share at least one value of index `index_name` with `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        let index = inner.index_named(index_name)?;
        let values = match inner.indexers.get(index_name) {
            Some(f) => f(obj),
            None => vec![(inner.namespace_of)(obj).to_owned()],
        };
        let mut keys: HashSet<&HeldKey> = HashSet::new();
        for v in values {
            if let Some(set) = index.get(&v) {
                keys.extend(set.iter());
            }
        }
        Ok(keys.into_iter().filter_map(|k| inner.items.get(k.0.as_str()).cloned()).collect())
    }

    /// Objects indexed under `value` in index `index_name`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        let index = inner.index_named(index_name)?;
        Ok(index
            .get(value)
            .map(|set| set.iter().filter_map(|k| inner.items.get(k.0.as_str()).cloned()).collect())
            .unwrap_or_default())
    }

    /// Calls `f` on each object indexed under `value` in `index_name`, under the read lock.
    pub fn for_each_in_index(&self, index_name: &str, value: &str, mut f: impl FnMut(&ObjectKey, &Arc<K>)) -> Result<(), IndexError> {
        let inner = self.inner.read();
        let index = inner.index_named(index_name)?;
        if let Some(set) = index.get(value) {
            for k in set {
                if let Some(o) = inner.items.get(k.0.as_str()) {
                    f(&k.0, o);
                }
            }
        }
        Ok(())
    }

    /// Keys indexed under `value` in index `index_name`.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        let inner = self.inner.read();
        let index = inner.index_named(index_name)?;
        Ok(index.get(value).map(|set| set.iter().map(|k| k.0.clone()).collect()).unwrap_or_default())
    }

    /// Every value that at least one object has in index `index_name`.
    pub fn list_index_values(&self, index_name: &str) -> Vec<String> {
        let inner = self.inner.read();
        inner.index_named(index_name).map(|i| i.keys().cloned().collect()).unwrap_or_default()
    }
}

fn index_names<K>(inner: &Inner<K>) -> Vec<String> {
    let mut names: Vec<String> = inner.indexers.keys().cloned().collect();
    names.push(NAMESPACE_INDEX.to_string());
    names.sort();
    names
}

/// Moves `key` (the items map's own) from the values of `old` to those of `new` in every index.
fn update_indices<K>(inner: &mut Inner<K>, key: &ObjectKey, old: Option<&K>, new: Option<&K>) {
    let Inner { namespace_of, by_namespace, indexers, indices, .. } = inner;
    let old_ns = old.map(*namespace_of);
    let new_ns = new.map(*namespace_of);
    if old_ns != new_ns {
        if let Some(v) = old_ns {
            remove_key(by_namespace, v, key);
        }
        if let Some(v) = new_ns {
            add_key(by_namespace, v, key);
        }
    }
    for (name, f) in indexers.iter() {
        let old_vals = old.map(|o| f(o)).unwrap_or_default();
        let new_vals = new.map(|o| f(o)).unwrap_or_default();
        if old_vals == new_vals {
            continue;
        }
        let index = indices.get_mut(name).expect("every indexer has an index");
        for v in &old_vals {
            if !new_vals.contains(v) {
                remove_key(index, v, key);
            }
        }
        for v in &new_vals {
            if !old_vals.contains(v) {
                add_key(index, v, key);
            }
        }
    }
}

fn add_key(index: &mut Index, value: &str, key: &ObjectKey) {
    match index.get_mut(value) {
        Some(set) => {
            set.insert(HeldKey(key.clone()));
        }
        None => {
            let mut set = FastSet::default();
            set.insert(HeldKey(key.clone()));
            index.insert(value.to_owned(), set);
        }
    }
}

/// Removes `key` from `value`'s set, and the set once it is empty.
fn remove_key(index: &mut Index, value: &str, key: &ObjectKey) {
    if let Some(set) = index.get_mut(value) {
        set.remove(&HeldKey(key.clone()));
        if set.is_empty() {
            index.remove(value);
        }
    }
}
