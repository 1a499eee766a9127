//! Type-erased informers and listers, for `for_resource(gvr)` and for code that handles
//! resources it only knows at run time (client-go's `GenericInformer` / `GenericLister`).
//!
//! Invariants: erasure never copies objects; a generic lister returns the same `Arc`s as
//! the typed lister, coerced to `Arc<dyn AnyObject>`, and [`GenericInformer::downcast`]
//! gives back the typed informer.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::{Resource, Selector};
use serde::Serialize;

use crate::error::{Error, NotFound};
use crate::informer::SharedIndexInformer;
use crate::lister::Lister;

/// A cached object whose type is erased.
pub trait AnyObject: Any + Send + Sync {
    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The object as JSON.
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error>;
    /// For downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
}

impl<K: Resource + Serialize + Send + Sync + 'static> AnyObject for K {
    fn meta(&self) -> &ObjectMeta {
        Resource::meta(self)
    }
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An informer whose object type is erased.
pub trait ErasedInformer: Send + Sync {
    /// See [`SharedIndexInformer::start`].
    fn start(&self) -> Result<bool, Error>;
    /// See [`SharedIndexInformer::has_synced`].
    fn has_synced(&self) -> bool;
    /// See [`SharedIndexInformer::is_started`].
    fn is_started(&self) -> bool;
    /// See [`SharedIndexInformer::wait_for_sync`].
    fn wait_for_sync(&self) -> BoxFuture<'_, bool>;
    /// See [`SharedIndexInformer::shutdown`].
    fn shutdown(&self) -> BoxFuture<'_, ()>;
    /// The resource (plural) it caches.
    fn resource(&self) -> &str;
    /// A lister over its store.
    fn generic_lister(&self) -> GenericLister;
    /// For downcasting to `SharedIndexInformer<K>`.
    fn as_any(&self) -> &dyn Any;
}

impl<K: Resource + Serialize + Send + Sync + 'static> ErasedInformer for SharedIndexInformer<K> {
    fn start(&self) -> Result<bool, Error> {
        SharedIndexInformer::start(self)
    }
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
    fn is_started(&self) -> bool {
        SharedIndexInformer::is_started(self)
    }
    fn wait_for_sync(&self) -> BoxFuture<'_, bool> {
        Box::pin(SharedIndexInformer::wait_for_sync(self))
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(SharedIndexInformer::shutdown(self))
    }
    fn resource(&self) -> &str {
        &self.options().resource
    }
    fn generic_lister(&self) -> GenericLister {
        GenericLister { inner: Arc::new(self.lister()) }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

trait ErasedLister: Send + Sync {
    fn list(&self, selector: &Selector) -> Vec<Arc<dyn AnyObject>>;
    fn get(&self, namespace: Option<&str>, name: &str) -> Result<Arc<dyn AnyObject>, NotFound>;
}

impl<K: Resource + Serialize + Send + Sync + 'static> ErasedLister for Lister<K> {
    fn list(&self, selector: &Selector) -> Vec<Arc<dyn AnyObject>> {
        Lister::list(self, selector).into_iter().map(|o| o as Arc<dyn AnyObject>).collect()
    }
    fn get(&self, namespace: Option<&str>, name: &str) -> Result<Arc<dyn AnyObject>, NotFound> {
        match namespace {
            Some(ns) => self.namespace(ns).get(name).map(|o| o as Arc<dyn AnyObject>),
            None => Lister::get(self, name).map(|o| o as Arc<dyn AnyObject>),
        }
    }
}

/// A lister whose object type is erased.
#[derive(Clone)]
pub struct GenericLister {
    inner: Arc<dyn ErasedLister>,
}

impl fmt::Debug for GenericLister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GenericLister")
    }
}

impl GenericLister {
    /// Objects whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<dyn AnyObject>> {
        self.inner.list(selector)
    }
    /// The object `name` in `namespace` (`None` for cluster-scoped).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Result<Arc<dyn AnyObject>, NotFound> {
        self.inner.get(namespace, name)
    }
}

/// An informer and lister for a resource chosen at run time.
#[derive(Clone)]
pub struct GenericInformer {
    informer: Arc<dyn ErasedInformer>,
}

impl fmt::Debug for GenericInformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenericInformer").field("resource", &self.informer.resource()).finish()
    }
}

impl GenericInformer {
    /// Erases a typed informer.
    pub fn new<K: Resource + Serialize + Send + Sync + 'static>(informer: SharedIndexInformer<K>) -> Self {
        GenericInformer { informer: Arc::new(informer) }
    }
    /// The erased informer.
    pub fn informer(&self) -> &Arc<dyn ErasedInformer> {
        &self.informer
    }
    /// A lister over its store.
    pub fn lister(&self) -> GenericLister {
        self.informer.generic_lister()
    }
    /// The typed informer, if `K` is its object type.
    pub fn downcast<K: 'static>(&self) -> Option<SharedIndexInformer<K>> {
        self.informer.as_any().downcast_ref::<SharedIndexInformer<K>>().cloned()
    }
}

/// A group/version/resource triple, as `for_resource` takes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvr {
    /// API group, `""` for core.
    pub group: String,
    /// Version.
    pub version: String,
    /// Resource (plural).
    pub resource: String,
}

impl Gvr {
    /// Builds a GVR.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Gvr { group: group.into(), version: version.into(), resource: resource.into() }
    }
}

impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

/// Constructor of the informer of one resource, given a factory; it fails only when the
/// factory was shut down.
pub type InformerConstructor =
    Arc<dyn Fn(&crate::factory::SharedInformerFactory) -> Result<GenericInformer, Error> + Send + Sync>;

/// The resources a factory can build from a [`Gvr`]; generated code fills it.
#[derive(Clone, Default)]
pub struct ResourceRegistry {
    entries: BTreeMap<Gvr, InformerConstructor>,
    protobuf: BTreeMap<Gvr, &'static crate::proto::Message>,
}

impl fmt::Debug for ResourceRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}

impl ResourceRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers the constructor of `gvr`'s informer (replacing any earlier one).
    pub fn register(&mut self, gvr: Gvr, ctor: InformerConstructor) -> &mut Self {
        self.entries.insert(gvr, ctor);
        self
    }
    /// Merges `other` into this registry.
    pub fn extend(&mut self, other: ResourceRegistry) -> &mut Self {
        self.entries.extend(other.entries);
        self.protobuf.extend(other.protobuf);
        self
    }
    /// Records that `gvr`'s objects can be read as protobuf messages of type `message`
    /// (built-in kinds; the generator emits the tables).
    pub fn register_protobuf(&mut self, gvr: Gvr, message: &'static crate::proto::Message) -> &mut Self {
        self.protobuf.insert(gvr, message);
        self
    }
    /// The protobuf table of `gvr`'s objects, if it has one.
    pub fn protobuf(&self, gvr: &Gvr) -> Option<&'static crate::proto::Message> {
        self.protobuf.get(gvr).copied()
    }
    /// The constructor for `gvr`.
    pub fn get(&self, gvr: &Gvr) -> Option<&InformerConstructor> {
        self.entries.get(gvr)
    }
    /// Every registered resource, sorted.
    pub fn resources(&self) -> impl Iterator<Item = &Gvr> {
        self.entries.keys()
    }
}
