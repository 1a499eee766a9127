//! Template: the informer and listers of one namespaced resource.
use crate::placeholder::namespaced::Kind;

/// The object type cached for PLURAL (GROUP/VERSION).
pub type Object = Kind;

/// The group, version and resource of KIND objects.
pub fn gvr() -> ::informer_runtime::Gvr {
    ::informer_runtime::Gvr::new("GROUP", "VERSION", "PLURAL")
}

/// Access to a factory's shared informer of KIND objects (GROUP/VERSION PLURAL, namespaced).
#[derive(Clone, Copy)]
pub struct KindInformer<'f> {
    factory: &'f ::informer_runtime::SharedInformerFactory,
}

impl<'f> KindInformer<'f> {
    /// Access through `factory`.
    pub fn new(factory: &'f ::informer_runtime::SharedInformerFactory) -> Self {
        KindInformer { factory }
    }

    /// The factory's one shared informer of KIND objects, created on first use. Fails only
    /// after the factory was shut down.
    pub fn informer(&self) -> ::std::result::Result<::informer_runtime::SharedIndexInformer<Object>, ::informer_runtime::Error> {
        self.factory.informer_for::<Object>()
    }

    /// A lister over the shared informer's cache.
    pub fn lister(&self) -> ::std::result::Result<KindLister, ::informer_runtime::Error> {
        ::std::result::Result::Ok(KindLister::new(self.informer()?.lister()))
    }

    /// The factory's shared informer caching only the metadata of KIND objects (`to_kube()`
    /// on each gives kube's `PartialObjectMeta`).
    pub fn metadata_informer(
        &self,
    ) -> ::std::result::Result<
        ::informer_runtime::SharedIndexInformer<::informer_runtime::lean::LeanPartialObjectMeta<Object>>,
        ::informer_runtime::Error,
    > {
        self.factory.metadata_informer_for::<Object>()
    }
}

/// Reads KIND objects from an informer's cache, in all namespaces or in one.
#[derive(Clone, Debug)]
pub struct KindLister {
    inner: ::informer_runtime::Lister<Object>,
}

impl KindLister {
    /// A typed lister over `inner`.
    pub fn new(inner: ::informer_runtime::Lister<Object>) -> Self {
        KindLister { inner }
    }

    /// The cached KIND objects of every namespace whose labels match `selector`.
    pub fn list(&self, selector: &::informer_runtime::Selector) -> ::std::vec::Vec<::std::sync::Arc<Object>> {
        self.inner.list(selector)
    }

    /// A lister over the KIND objects of `namespace`, borrowing this lister (it allocates
    /// nothing).
    pub fn kinds<'a>(&'a self, namespace: &'a str) -> KindNamespaceLister<'a> {
        KindNamespaceLister { inner: self.inner.namespace(namespace) }
    }

    /// A read view of the cache, whose lookups and lists borrow the cached
    /// KIND objects instead of cloning their `Arc`s. It holds the store's read lock: keep
    /// it for a batch of reads, not across an `.await`.
    pub fn read(&self) -> ::informer_runtime::ListerView<'_, Object> {
        self.inner.read()
    }

    /// The untyped-name lister underneath.
    pub fn inner(&self) -> &::informer_runtime::Lister<Object> {
        &self.inner
    }
}

/// Reads the KIND objects of one namespace from an informer's cache.
#[derive(Clone, Copy, Debug)]
pub struct KindNamespaceLister<'a> {
    inner: ::informer_runtime::NamespaceLister<'a, Object>,
}

impl KindNamespaceLister<'_> {
    /// The cached KIND objects of this namespace whose labels match `selector`.
    pub fn list(&self, selector: &::informer_runtime::Selector) -> ::std::vec::Vec<::std::sync::Arc<Object>> {
        self.inner.list(selector)
    }

    /// The cached KIND called `name` in this namespace, or `NotFound`.
    pub fn get(&self, name: &str) -> ::std::result::Result<::std::sync::Arc<Object>, ::informer_runtime::NotFound> {
        self.inner.get(name)
    }
}

/// Registers KIND objects under their GVR, for `SharedInformerFactory::for_resource`.
pub fn register(registry: &mut ::informer_runtime::ResourceRegistry) {
    registry.register(
        gvr(),
        ::std::sync::Arc::new(|factory: &::informer_runtime::SharedInformerFactory| {
            ::std::result::Result::Ok(::informer_runtime::GenericInformer::new(factory.informer_for::<Object>()?))
        }),
    );
}
