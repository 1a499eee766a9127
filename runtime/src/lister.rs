//! Listers: read-only views of an informer's store (client-go's generated listers).
//!
//! Invariants:
//! - Listers never copy objects: they return `Arc<K>` from the store.
//! - A namespace lister only reads the namespace index entry of its namespace; it never
//!   scans the whole store.
//! - `get` of a missing object returns [`NotFound`] naming the resource and the name.
//! - Selectors are matched against the labels the lister's [`LabelsFn`] reads (the
//!   informer's: `meta().labels`, or a lean root's own labels).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use kube_core::{Resource, Selector, SelectorExt};

use crate::error::NotFound;
use crate::indexer::{Indexer, NAMESPACE_INDEX};
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
        let matcher = LabelMatcher::new(selector);
        let mut out = Vec::new();
        self.indexer.for_each(|_, o| {
            if matcher.matches((self.labels)(&**o)) {
                out.push(o.clone());
            }
        });
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

    /// The error of a `get` that found no object called `name`.
    fn not_found(&self, name: &str) -> NotFound {
        NotFound { resource: self.resource.to_string(), name: name.to_string() }
    }

    /// A lister over one namespace: a view that borrows this lister and `namespace`, so
    /// `lister.namespace(ns).get(name)` allocates nothing and touches no reference count.
    pub fn namespace<'a>(&'a self, namespace: &'a str) -> NamespaceLister<'a, K> {
        NamespaceLister { lister: self, namespace }
    }

    /// The store behind this lister.
    pub fn indexer(&self) -> &Arc<Indexer<K>> {
        &self.indexer
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
        let matcher = LabelMatcher::new(selector);
        let mut out = Vec::new();
        // The namespace index exists in every Indexer from construction on, so this
        // cannot fail with NoSuchIndex.
        let _ = self.lister.indexer.for_each_in_index(NAMESPACE_INDEX, self.namespace, |_, o| {
            if matcher.matches((self.lister.labels)(&**o)) {
                out.push(o.clone());
            }
        });
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
