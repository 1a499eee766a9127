//! Listers: read-only views of an informer's store (client-go's generated listers).
//!
//! Invariants:
//! - Listers never copy objects: they return `Arc<K>` from the store.
//! - A namespace lister only reads the namespace index entry of its namespace; it never
//!   scans the whole store.
//! - `get` of a missing object returns [`NotFound`] naming the resource and the name.
//! - Selectors are matched against the labels the lister's [`LabelsFn`] reads (the
//!   informer's: `meta().labels`, or a lean root's own labels).
//! - A [`ListerView`] answers exactly as its lister would at the moment it was taken, with
//!   borrows (`&Arc<K>`) instead of clones; the store cannot change while it lives.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use kube_core::{Resource, Selector, SelectorExt};

use crate::error::NotFound;
use crate::indexer::{Indexer, IndexerView, NAMESPACE_INDEX};
use crate::labels::{LabelMatcher, LabelsFn, meta_labels};

fn empty_labels() -> &'static BTreeMap<String, String> {
    static EMPTY: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    EMPTY.get_or_init(BTreeMap::new)
}

/// True when the labels in `obj.meta().labels` match `selector` (lean roots keep theirs
/// elsewhere: match those with a [`LabelMatcher`] over the informer's [`LabelsFn`]).
pub fn matches_labels<K: Resource>(selector: &Selector, obj: &K) -> bool {
    selector.selects_all() || selector.matches(obj.meta().labels.as_ref().unwrap_or_else(|| empty_labels()))
}

/// A lister over all cached objects of one resource.
pub struct Lister<K> {
    indexer: Arc<Indexer<K>>,
    resource: Arc<str>,
    labels: LabelsFn<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister { indexer: self.indexer.clone(), resource: self.resource.clone(), labels: self.labels }
    }
}

impl<K> std::fmt::Debug for Lister<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister").field("resource", &self.resource).finish()
    }
}

impl<K: Resource> Lister<K> {
    /// A lister over `indexer`, for `resource` (plural, used in errors), reading labels
    /// from `meta().labels`.
    pub fn new(indexer: Arc<Indexer<K>>, resource: &str) -> Self {
        Lister { indexer, resource: resource.into(), labels: meta_labels::<K> }
    }

    /// This lister, reading objects' labels through `labels`.
    pub fn with_labels(mut self, labels: LabelsFn<K>) -> Self {
        self.labels = labels;
        self
    }

    /// Objects whose labels match `selector` (`&Selector::default()` for all).
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let view = self.read();
        let mut out = Vec::new();
        view.for_each_matching(selector, |o| out.push(o.clone()));
        out
    }

    /// Every cached object.
    pub fn list_all(&self) -> Vec<Arc<K>> {
        self.indexer.list()
    }

    /// The cluster-scoped object called `name`.
    pub fn get(&self, name: &str) -> Result<Arc<K>, NotFound> {
        self.indexer.get(name).ok_or_else(|| self.not_found(name))
    }

    /// A lister over one namespace: a view that borrows this lister and `namespace`, so
    /// `lister.namespace(ns)` allocates nothing and touches no reference count.
    pub fn namespace<'a>(&'a self, namespace: &'a str) -> NamespaceLister<'a, K> {
        NamespaceLister { lister: self, namespace }
    }

    /// A read view of the cache, whose lookups borrow objects instead of cloning their
    /// `Arc`s: no reference count is touched, so back-to-back lookups of scattered objects
    /// do not each wait for the object's cache line. It holds the store's read lock: see
    /// [`IndexerView`] for how long to keep it.
    pub fn read(&self) -> ListerView<'_, K> {
        ListerView { lister: self, store: self.indexer.read() }
    }

    /// The store behind this lister.
    pub fn indexer(&self) -> &Arc<Indexer<K>> {
        &self.indexer
    }
}

impl<K> Lister<K> {
    /// The error of a `get` that found no object called `name`.
    fn not_found(&self, name: &str) -> NotFound {
        NotFound { resource: self.resource.to_string(), name: name.to_string() }
    }
}

/// A lister over the cached objects of one namespace, borrowed from a [`Lister`] (keep the
/// `Lister`, a cheap clone, and the namespace to make one again later).
pub struct NamespaceLister<'a, K> {
    lister: &'a Lister<K>,
    namespace: &'a str,
}

impl<K> Clone for NamespaceLister<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for NamespaceLister<'_, K> {}

impl<K> std::fmt::Debug for NamespaceLister<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceLister").field("resource", &self.lister.resource).field("namespace", &self.namespace).finish()
    }
}

impl<'a, K: Resource> NamespaceLister<'a, K> {
    /// Objects of the namespace whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let view = self.lister.read();
        let mut out = Vec::new();
        view.namespace(self.namespace).for_each_matching(selector, |o| out.push(o.clone()));
        out
    }

    /// The object called `name` in this namespace.
    pub fn get(&self, name: &str) -> Result<Arc<K>, NotFound> {
        self.lister.indexer.get_by_name(Some(self.namespace), name).ok_or_else(|| self.lister.not_found(name))
    }

    /// The namespace.
    pub fn namespace(&self) -> &'a str {
        self.namespace
    }
}

/// A read view of a [`Lister`]'s cache (see [`Lister::read`]): the lister's reads, answered
/// with borrows.
pub struct ListerView<'a, K> {
    lister: &'a Lister<K>,
    store: IndexerView<'a, K>,
}

impl<K> std::fmt::Debug for ListerView<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListerView").field("resource", &self.lister.resource).field("len", &self.store.len()).finish()
    }
}

impl<'a, K> ListerView<'a, K> {
    /// Whether an object's labels match `selector`, as this lister reads labels.
    fn selects<'s>(&self, selector: &'s Selector) -> impl Fn(&K) -> bool + 's
    where
        K: 's,
    {
        let matcher = LabelMatcher::new(selector);
        let labels = self.lister.labels;
        move |o| matcher.matches(labels(o))
    }

    /// Calls `f` on each object whose labels match `selector`.
    fn for_each_matching<'v>(&'v self, selector: &Selector, mut f: impl FnMut(&'v Arc<K>)) {
        let selects = self.selects(selector);
        self.store.for_each(|_, o| {
            if selects(o) {
                f(o);
            }
        });
    }

    /// Objects whose labels match `selector` (`&Selector::default()` for all).
    pub fn list(&self, selector: &Selector) -> Vec<&Arc<K>> {
        let mut out = Vec::new();
        self.for_each_matching(selector, |o| out.push(o));
        out
    }

    /// The cluster-scoped object called `name`.
    pub fn get(&self, name: &str) -> Result<&Arc<K>, NotFound> {
        self.store.get(name).ok_or_else(|| self.lister.not_found(name))
    }

    /// The objects of one namespace, read through this view.
    pub fn namespace<'v>(&'v self, namespace: &'v str) -> NamespaceListerView<'v, 'a, K> {
        NamespaceListerView { view: self, namespace }
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// The store's view underneath.
    pub fn store(&self) -> &IndexerView<'a, K> {
        &self.store
    }
}

/// The objects of one namespace, read through a [`ListerView`].
pub struct NamespaceListerView<'v, 'a, K> {
    view: &'v ListerView<'a, K>,
    namespace: &'v str,
}

impl<K> Clone for NamespaceListerView<'_, '_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for NamespaceListerView<'_, '_, K> {}

impl<K> std::fmt::Debug for NamespaceListerView<'_, '_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceListerView").field("resource", &self.view.lister.resource).field("namespace", &self.namespace).finish()
    }
}

impl<'v, K> NamespaceListerView<'v, '_, K> {
    /// Calls `f` on each object of the namespace whose labels match `selector`.
    fn for_each_matching(&self, selector: &Selector, mut f: impl FnMut(&'v Arc<K>)) {
        let selects = self.view.selects(selector);
        // The namespace index exists in every Indexer from construction on, so this cannot
        // fail with NoSuchIndex.
        let _ = self.view.store.for_each_in_index(NAMESPACE_INDEX, self.namespace, |_, o| {
            if selects(o) {
                f(o);
            }
        });
    }

    /// Objects of the namespace whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<&'v Arc<K>> {
        let mut out = Vec::new();
        self.for_each_matching(selector, |o| out.push(o));
        out
    }

    /// The object called `name` in this namespace.
    pub fn get(&self, name: &str) -> Result<&'v Arc<K>, NotFound> {
        self.view.store.get_by_name(Some(self.namespace), name).ok_or_else(|| self.view.lister.not_found(name))
    }

    /// The namespace.
    pub fn namespace(&self) -> &'v str {
        self.namespace
    }
}
