//! The thread-safe indexed store every informer caches into (client-go's `Indexer` over
//! `ThreadSafeStore`).
//!
//! Invariants:
//! - Each object is held once, as an `Arc<K>`; readers get clones of the `Arc`, never of `K`.
//! - For every index `i`, every object `o` in the store and every value `v` returned by
//!   `i`'s function on `o`, `o`'s key is in `indices[i][v]`, mapped to the same `Arc` the
//!   items map holds under that key; and nothing else is. Every write (add, update, delete,
//!   replace, `add_indexers`) keeps this exact, and an empty value set is removed so
//!   `list_index_values` only names values some object has. So a lookup by index reads its
//!   objects from the set itself, without looking each key up in the items map.
//! - Every object is in exactly one set of the [`NAMESPACE_INDEX`], so walks over every
//!   object go through those sets: 16 bytes per entry, where the items map's slots are 64.
//! - The key in an index set is a clone of the key the items map holds for that object (the
//!   one given when the object was first stored; an update keeps it), so sets compare and hash
//!   keys by the address of that one allocation: a write hashes a pointer instead of the key's
//!   bytes, and a growing set never reads key strings again.
//! - The [`NAMESPACE_INDEX`] is present from construction and cannot be replaced. Its value is
//!   read from `metadata.namespace` without allocating, and a write that keeps an object's
//!   namespace (every update under one key, in practice) only swaps the `Arc` in its set.
//!   Since a key is in one set only, a key found in its new object's set is in no other:
//!   the replaced object's namespace is read only when it is not (an update does not touch
//!   the replaced object, cold in a large store).
//! - All methods take `&self`; writes hold a write lock for the duration of one change.
//! - A read taken on a thread that holds an [`IndexerView`] (of any store) never waits for a
//!   waiting writer: it would wait for a writer that waits for the view, forever. Other reads
//!   queue behind a waiting writer, so writers are not starved by a stream of readers.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use kube_core::Resource;
use parking_lot::{RwLock, RwLockReadGuard};

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
#[repr(transparent)]
struct HeldKey(ObjectKey);

impl HeldKey {
    /// `key` as a `HeldKey`, to look one up without a handle of its own (which would write
    /// the key's reference count, in an allocation an update otherwise does not read).
    fn of(key: &ObjectKey) -> &HeldKey {
        // SAFETY: `HeldKey` is a transparent wrapper of `ObjectKey`: same layout, and the
        // reference keeps `key`'s lifetime.
        unsafe { &*(key as *const ObjectKey).cast::<HeldKey>() }
    }
}

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

/// Index value → the objects indexed under it, by their held key.
type Index<K> = FastMap<String, FastMap<HeldKey, Arc<K>>>;

struct Inner<K> {
    items: ItemMap<K>,
    /// [`namespace_value`] for `K`, kept here so writes need no `Resource` bound.
    namespace_of: fn(&K) -> &str,
    by_namespace: Index<K>,
    /// Indices added by `add_indexers`; never [`NAMESPACE_INDEX`].
    indexers: BTreeMap<String, IndexFunc<K>>,
    indices: HashMap<String, Index<K>>,
}

/// The indices of an [`Inner`], apart from its items map, to update beside it.
struct IndexParts<'a, K> {
    namespace_of: fn(&K) -> &str,
    by_namespace: &'a mut Index<K>,
    indexers: &'a BTreeMap<String, IndexFunc<K>>,
    indices: &'a mut HashMap<String, Index<K>>,
}

impl<K> Inner<K> {
    /// The items map and the indices, borrowed apart.
    fn split(&mut self) -> (&mut ItemMap<K>, IndexParts<'_, K>) {
        let Inner { items, namespace_of, by_namespace, indexers, indices } = self;
        (items, IndexParts { namespace_of: *namespace_of, by_namespace, indexers, indices })
    }

    fn index_named(&self, name: &str) -> Result<&Index<K>, IndexError> {
        if name == NAMESPACE_INDEX {
            return Ok(&self.by_namespace);
        }
        self.indices.get(name).ok_or_else(|| IndexError::NoSuchIndex(name.into()))
    }

    /// Calls `f` on every (key, object) pair, through the namespace index's sets (see the
    /// module's invariants).
    #[inline]
    fn for_each_entry<'v>(&'v self, mut f: impl FnMut(&'v ObjectKey, &'v Arc<K>)) {
        for set in self.by_namespace.values() {
            for (k, o) in set {
                f(&k.0, o);
            }
        }
    }

    /// Rebuilds every index from the items.
    fn rebuild_indices(&mut self) {
        let Inner { items, namespace_of, by_namespace, indexers, indices } = self;
        by_namespace.clear();
        for (key, obj) in items.iter() {
            add_key(by_namespace, namespace_of(obj), key, obj);
        }
        for (name, index) in indices.iter_mut() {
            *index = build_index(items, &indexers[name]);
        }
    }
}

fn build_index<K>(items: &ItemMap<K>, f: &IndexFunc<K>) -> Index<K> {
    let mut index = Index::default();
    for (key, obj) in items.iter() {
        for v in f(obj) {
            add_key(&mut index, &v, key, obj);
        }
    }
    index
}

/// What [`Indexer::upsert_unless`] did.
#[derive(Debug)]
pub enum Upserted<K> {
    /// Nothing was held under the key; the object is stored.
    Added,
    /// The object is stored in place of this one.
    Replaced(Arc<K>),
    /// The object held under the key stays (this one); the given object was not stored.
    Kept(Arc<K>),
}

/// A thread-safe, indexed map from [`ObjectKey`] to `Arc<K>`.
pub struct Indexer<K> {
    inner: RwLock<Inner<K>>,
}

thread_local! {
    /// How many [`IndexerView`]s this thread holds.
    static VIEWS_HELD: Cell<usize> = const { Cell::new(0) };
}

/// Counts one view in [`VIEWS_HELD`] while it lives. Not `Send`, so the view that holds it
/// is dropped on the thread that counted it.
struct ViewCounted(PhantomData<*const ()>);

impl ViewCounted {
    fn new() -> Self {
        VIEWS_HELD.with(|n| n.set(n.get() + 1));
        ViewCounted(PhantomData)
    }
}

impl Drop for ViewCounted {
    fn drop(&mut self) {
        VIEWS_HELD.with(|n| n.set(n.get() - 1));
    }
}

/// A read view of an [`Indexer`]: its lookups return objects borrowed from the store
/// (`&Arc<K>`), touching no reference count, for as long as the view lives.
///
/// The view holds the store's read lock: the informer's writes wait until it is dropped,
/// so hold one for a batch of reads, not across an `.await` (it is not `Send`, so a future
/// that must be `Send` cannot hold it). Reads on the same thread while it lives do not
/// wait (see the module's invariants); a write on the same thread would wait for ever.
pub struct IndexerView<'a, K> {
    inner: RwLockReadGuard<'a, Inner<K>>,
    _counted: ViewCounted,
}

impl<K> fmt::Debug for IndexerView<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexerView").field("len", &self.inner.items.len()).finish()
    }
}

impl<'a, K> IndexerView<'a, K> {
    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.inner.items.get(key)
    }

    /// The object called `name` in `namespace` (`None` for cluster-scoped).
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<&Arc<K>> {
        self.inner.items.get_by_name(namespace, name)
    }

    /// The key held under `key` (the store's own allocation of it) and its object.
    pub(crate) fn get_entry(&self, key: &str) -> Option<(&ObjectKey, &Arc<K>)> {
        self.inner.items.get_entry(key)
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.inner.items.len()
    }

    /// True when no object is stored.
    pub fn is_empty(&self) -> bool {
        self.inner.items.is_empty()
    }

    /// Every (key, object) pair, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<K>)> {
        self.inner.items.iter()
    }

    /// Calls `f` on every (key, object) pair, in no particular order: the same pairs as
    /// [`IndexerView::iter`], read from less memory.
    pub fn for_each<'v>(&'v self, f: impl FnMut(&'v ObjectKey, &'v Arc<K>)) {
        self.inner.for_each_entry(f);
    }

    /// Calls `f` on each object indexed under `value` in `index_name`, with its key.
    pub fn for_each_in_index<'v>(&'v self, index_name: &str, value: &str, mut f: impl FnMut(&'v ObjectKey, &'v Arc<K>)) -> Result<(), IndexError> {
        let inner = &*self.inner;
        if let Some(set) = inner.index_named(index_name)?.get(value) {
            for (k, o) in set {
                f(&k.0, o);
            }
        }
        Ok(())
    }
}

impl<K> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.read_lock();
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
    /// A read view of the store; see [`IndexerView`].
    pub fn read(&self) -> IndexerView<'_, K> {
        let inner = self.read_lock();
        IndexerView { inner, _counted: ViewCounted::new() }
    }

    /// The read lock, taken without waiting for a waiting writer when this thread holds a
    /// view (see the module's invariants).
    fn read_lock(&self) -> RwLockReadGuard<'_, Inner<K>> {
        if VIEWS_HELD.with(Cell::get) == 0 { self.inner.read() } else { self.inner.read_recursive() }
    }

    /// Inserts or replaces the object under `key`; returns the object it replaced.
    pub fn upsert(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let (items, indices) = inner.split();
        let (held, old) = items.upsert(key, obj.clone());
        update_indices(indices, held, old.as_deref(), Some(&obj));
        old
    }

    /// Like [`Indexer::upsert`], but keeps the object held under `key` when `keep(held, &obj)`
    /// is true: then the store is left as it was and `obj` is not stored.
    pub fn upsert_unless(&self, key: ObjectKey, obj: Arc<K>, keep: impl FnOnce(&K, &K) -> bool) -> Upserted<K> {
        let mut inner = self.inner.write();
        let (items, indices) = inner.split();
        let (held, old) = match items.upsert_unless(key, obj.clone(), keep) {
            Ok(stored) => stored,
            Err(held) => return Upserted::Kept(held),
        };
        update_indices(indices, held, old.as_deref(), Some(&obj));
        match old {
            Some(old) => Upserted::Replaced(old),
            None => Upserted::Added,
        }
    }

    /// Removes the object under `key`; returns it if it was there.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let (held, old) = inner.items.remove(key)?;
        update_indices(inner.split().1, &held, Some(&*old), None);
        Some(old)
    }

    /// Replaces the whole content with `objects` and rebuilds every index from scratch.
    pub fn replace(&self, objects: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let mut inner = self.inner.write();
        // The index sets hold the old objects too: emptied first, so that the old objects
        // are freed with the items map's entries.
        inner.by_namespace.clear();
        inner.indices.values_mut().for_each(|index| index.clear());
        inner.items.clear();
        inner.items.extend(objects);
        inner.rebuild_indices();
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read_lock().items.get(key).cloned()
    }

    /// The object called `name` in `namespace` (`None` for cluster-scoped), without
    /// allocating its key.
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.read_lock().items.get_by_name(namespace, name).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.read_lock().items.contains_key(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let inner = self.read_lock();
        let mut out = Vec::with_capacity(inner.items.len());
        inner.for_each_entry(|_, o| out.push(o.clone()));
        out
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let inner = self.read_lock();
        let mut out = Vec::with_capacity(inner.items.len());
        inner.for_each_entry(|k, _| out.push(k.clone()));
        out
    }

    /// Every (key, object) pair, in no particular order.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        let inner = self.read_lock();
        let mut out = Vec::with_capacity(inner.items.len());
        inner.for_each_entry(|k, o| out.push((k.clone(), o.clone())));
        out
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.read_lock().items.len()
    }

    /// True when no object is stored.
    pub fn is_empty(&self) -> bool {
        self.read_lock().items.is_empty()
    }

    /// Calls `f` on every object under the read lock, without collecting them.
    pub fn for_each(&self, f: impl FnMut(&ObjectKey, &Arc<K>)) {
        // Through a view, so that reads `f` makes on this thread never wait for a writer.
        self.read().for_each(f);
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
        index_names(&self.read_lock())
    }

    /// Objects that share at least one value of index `index_name` with `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.read_lock();
        let index = inner.index_named(index_name)?;
        let values = match inner.indexers.get(index_name) {
            Some(f) => f(obj),
            None => vec![(inner.namespace_of)(obj).to_owned()],
        };
        let mut seen: FastSet<&HeldKey> = FastSet::default();
        let mut out = Vec::new();
        for v in values {
            for (k, o) in index.get(&v).into_iter().flatten() {
                if seen.insert(k) {
                    out.push(o.clone());
                }
            }
        }
        Ok(out)
    }

    /// Objects indexed under `value` in index `index_name`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let mut out = Vec::new();
        self.read().for_each_in_index(index_name, value, |_, o| out.push(o.clone()))?;
        Ok(out)
    }

    /// Calls `f` on each object indexed under `value` in `index_name`, under the read lock
    /// (through a view, as [`Indexer::for_each`]).
    pub fn for_each_in_index(&self, index_name: &str, value: &str, f: impl FnMut(&ObjectKey, &Arc<K>)) -> Result<(), IndexError> {
        self.read().for_each_in_index(index_name, value, f)
    }

    /// Keys indexed under `value` in index `index_name`.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        let inner = self.read_lock();
        let index = inner.index_named(index_name)?;
        Ok(index.get(value).map(|set| set.keys().map(|k| k.0.clone()).collect()).unwrap_or_default())
    }

    /// Every value that at least one object has in index `index_name`.
    pub fn list_index_values(&self, index_name: &str) -> Vec<String> {
        let inner = self.read_lock();
        inner.index_named(index_name).map(|i| i.keys().cloned().collect()).unwrap_or_default()
    }
}

fn index_names<K>(inner: &Inner<K>) -> Vec<String> {
    let mut names: Vec<String> = inner.indexers.keys().cloned().collect();
    names.push(NAMESPACE_INDEX.to_string());
    names.sort();
    names
}

/// Moves `key` (the items map's own) from the values of `old` to those of `new` in every
/// index, where it maps to `new`.
fn update_indices<K>(parts: IndexParts<'_, K>, key: &ObjectKey, old: Option<&K>, new: Option<&Arc<K>>) {
    let IndexParts { namespace_of, by_namespace, indexers, indices } = parts;
    let new_ns = new.map(|o| namespace_of(o));
    let was_in_new_set = match (new_ns, new) {
        (Some(v), Some(obj)) => add_key(by_namespace, v, key, obj),
        _ => false,
    };
    // Found in the new object's namespace set, the key is in no other one.
    if !was_in_new_set {
        if let Some(v) = old.map(namespace_of).filter(|&v| Some(v) != new_ns) {
            remove_key(by_namespace, v, key);
        }
    }
    for (name, f) in indexers.iter() {
        let old_vals = old.map(|o| f(o)).unwrap_or_default();
        let new_vals = new.map(|o| f(o)).unwrap_or_default();
        let index = indices.get_mut(name).expect("every indexer has an index");
        for v in &old_vals {
            if !new_vals.contains(v) {
                remove_key(index, v, key);
            }
        }
        if let Some(obj) = new {
            for v in &new_vals {
                add_key(index, v, key, obj);
            }
        }
    }
}

/// Maps `key` to `obj` in `value`'s set, adding the key (and the set) when absent; true
/// when the key was there.
fn add_key<K>(index: &mut Index<K>, value: &str, key: &ObjectKey, obj: &Arc<K>) -> bool {
    match index.get_mut(value) {
        Some(set) => match set.get_mut(HeldKey::of(key)) {
            Some(held) => {
                *held = obj.clone();
                true
            }
            None => {
                set.insert(HeldKey(key.clone()), obj.clone());
                false
            }
        },
        None => {
            let mut set = FastMap::default();
            set.insert(HeldKey(key.clone()), obj.clone());
            index.insert(value.to_owned(), set);
            false
        }
    }
}

/// Removes `key` from `value`'s set, and the set once it is empty.
fn remove_key<K>(index: &mut Index<K>, value: &str, key: &ObjectKey) {
    if let Some(set) = index.get_mut(value) {
        set.remove(HeldKey::of(key));
        if set.is_empty() {
            index.remove(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(namespace: &str, name: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() },
            ..Default::default()
        })
    }

    fn store(objects: &[(&str, &str)]) -> Arc<Indexer<ConfigMap>> {
        let store = Arc::new(Indexer::new());
        for (ns, name) in objects {
            store.upsert(ObjectKey::new(Some(ns), name), cm(ns, name));
        }
        store
    }

    #[test]
    fn a_view_borrows_what_the_store_returns() {
        let store = store(&[("a", "x"), ("a", "y"), ("b", "x")]);
        let view = store.read();
        assert_eq!(view.len(), 3);
        for key in ["a/x", "a/y", "b/x"] {
            let cloned = store.get(key).unwrap();
            assert!(Arc::ptr_eq(view.get(key).unwrap(), &cloned), "{key}");
            let k = ObjectKey::from_string(key);
            assert!(Arc::ptr_eq(view.get_by_name(k.namespace(), k.name()).unwrap(), &cloned), "{key}");
        }
        assert!(view.get("a/z").is_none() && view.get_by_name(Some("c"), "x").is_none());
        let mut in_a: Vec<&str> = Vec::new();
        view.for_each_in_index(NAMESPACE_INDEX, "a", |k, _| in_a.push(k.as_str())).unwrap();
        in_a.sort();
        assert_eq!(in_a, ["a/x", "a/y"]);
        let mut in_c = 0;
        view.for_each_in_index(NAMESPACE_INDEX, "c", |_, _| in_c += 1).unwrap();
        assert_eq!(in_c, 0);
        assert!(matches!(view.for_each_in_index("nope", "a", |_, _| ()), Err(IndexError::NoSuchIndex(_))));
    }

    /// Waits until a writer has claimed `store`'s lock and waits for its readers to leave.
    fn until_a_writer_waits(store: &Indexer<ConfigMap>) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !store.inner.is_locked_exclusive() {
            assert!(std::time::Instant::now() < deadline, "no writer came");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A writer that waits for a view blocks later readers, except on the view's own thread:
    /// there a read would wait for the writer, which waits for the view, for ever.
    #[test]
    fn reads_beside_a_view_pass_a_waiting_writer_and_other_reads_queue_behind_it() {
        let store = store(&[("a", "x")]);
        let (viewing, view_taken) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let (read, beside_view) = mpsc::channel();
        let holder = {
            let store = store.clone();
            std::thread::spawn(move || {
                let view = store.read();
                viewing.send(()).unwrap();
                until_a_writer_waits(&store);
                // Plain reads and a second view, on the thread that holds the first view.
                let nested = store.read();
                read.send((store.get("a/x").is_some(), store.len(), nested.len())).unwrap();
                drop(nested);
                released.recv().unwrap();
                drop(view);
            })
        };
        view_taken.recv().unwrap();
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || store.upsert(ObjectKey::new(Some("a"), "y"), cm("a", "y")))
        };
        let found = beside_view.recv_timeout(Duration::from_secs(10)).expect("reads beside the view did not wait for the writer");
        assert_eq!(found, (true, 1, 1), "the writer has not written yet");
        // Another thread's read queues behind the waiting writer.
        let (other_read, other_found) = mpsc::channel();
        let (reading, other_reads) = mpsc::channel();
        let other = {
            let store = store.clone();
            std::thread::spawn(move || {
                reading.send(()).unwrap();
                other_read.send(store.len()).unwrap()
            })
        };
        other_reads.recv().unwrap();
        assert!(other_found.recv_timeout(Duration::from_millis(100)).is_err(), "a read on another thread passed the waiting writer");
        release.send(()).unwrap();
        holder.join().unwrap();
        assert!(writer.join().unwrap().is_none());
        assert_eq!(other_found.recv_timeout(Duration::from_secs(10)).unwrap(), 2, "the write landed before the queued read");
        other.join().unwrap();
    }
}
