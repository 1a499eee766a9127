//! `SharedInformerFactory`: one shared informer per resource, started and stopped together
//! (client-go's `informers.SharedInformerFactory`).
//!
//! Invariants:
//! - For one factory, `informer_for::<K>()` returns the same informer every time (per type
//!   for typed and metadata informers, per resource for dynamic ones).
//! - `start` starts exactly the informers not started yet; it can be called again after
//!   more informers were requested.
//! - Factory-wide options (namespace, list tweaks, resync, metadata transform) are applied
//!   when an informer is created; later changes to them do not reach existing informers.
//! - `shutdown` stops every informer and returns once all their tasks and handler threads
//!   have ended; afterwards the factory creates no informer.

use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::{Api, Client};
use kube_core::discovery::Scope;
use kube_core::{
    ApiResource, ClusterResourceScope, DynamicObject, DynamicResourceScope, NamespaceResourceScope,
    Resource,
};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::exact_json::VecSizing;
use crate::generic::{ErasedInformer, GenericInformer, Gvr, ResourceRegistry};
use crate::informer::{InformerOptions, SharedIndexInformer};
use crate::kube_lister_watcher::{KubeListerWatcher, MetadataListerWatcher};
use crate::lean::{LeanPartialObjectMeta, LeanRoot, lean_labels};
use crate::queue::QueueMode;
use crate::reflector::{ReflectorConfig, WatchListMode};
use crate::transform::TransformFn;

/// How an `Api<K>` is built for the factory's namespace, per resource scope.
pub trait InformerScope {
    /// The `Api` listing `K` in `namespace` (all namespaces for `None` or cluster scope).
    fn api<K>(client: Client, dt: &K::DynamicType, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = Self>;
}

impl InformerScope for NamespaceResourceScope {
    fn api<K: Resource<Scope = Self>>(client: Client, dt: &K::DynamicType, namespace: Option<&str>) -> Api<K> {
        match namespace {
            Some(ns) => Api::all_with(client, dt).constrain(ns),
            None => Api::all_with(client, dt),
        }
    }
}

impl InformerScope for ClusterResourceScope {
    fn api<K: Resource<Scope = Self>>(client: Client, dt: &K::DynamicType, _namespace: Option<&str>) -> Api<K> {
        Api::all_with(client, dt)
    }
}

impl InformerScope for DynamicResourceScope {
    fn api<K: Resource<Scope = Self>>(client: Client, dt: &K::DynamicType, namespace: Option<&str>) -> Api<K> {
        match namespace {
            Some(ns) => Api::all_with(client, dt).constrain(ns),
            None => Api::all_with(client, dt),
        }
    }
}

/// Changes the reflector settings (selectors, page size) of every informer the factory
/// creates (client-go's `TweakListOptionsFunc`).
pub type TweakFn = Arc<dyn Fn(&mut ReflectorConfig) + Send + Sync>;

/// A transform of metadata, applicable to every type (for example
/// [`strip_managed_fields_meta`]).
pub type MetaTransformFn = Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>;

/// Runs a metadata transform on an object's metadata (each kind reaches it its own way).
type ApplyMetaFn<K> = fn(&mut K, &(dyn Fn(&mut ObjectMeta) + Send + Sync));

/// The metadata transform that drops `managedFields`.
pub fn strip_managed_fields_meta() -> MetaTransformFn {
    Arc::new(|m: &mut ObjectMeta| m.managed_fields = None)
}

/// Options of a [`SharedInformerFactory`].
#[derive(Clone, Default)]
pub struct FactoryOptions {
    /// Only this namespace (namespaced resources); `None` for all.
    pub namespace: Option<String>,
    /// Applied to each informer's reflector settings.
    pub tweak: Option<TweakFn>,
    /// Default resync period of handlers; zero for none.
    pub default_resync: Duration,
    /// Resync periods per resource (`group/version/resource`, core as `v1/pods`).
    pub custom_resync: HashMap<String, Duration>,
    /// Transform applied to the metadata of every object of every informer.
    pub transform: Option<MetaTransformFn>,
    /// Queue between reflector and store.
    pub queue_mode: QueueMode,
    /// WatchList use.
    pub watch_list: WatchListMode,
    /// Wire format of built-in kinds whose protobuf tables the registry holds.
    pub wire_format: WireFormat,
}

/// The wire format informers of built-in kinds ask for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WireFormat {
    /// Protobuf where the registry has the kind's table (client-go's default), JSON
    /// otherwise. A server that answers in JSON is read as JSON.
    #[default]
    Protobuf,
    /// JSON always.
    Json,
}

impl std::fmt::Debug for FactoryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactoryOptions")
            .field("namespace", &self.namespace)
            .field("default_resync", &self.default_resync)
            .field("custom_resync", &self.custom_resync)
            .field("queue_mode", &self.queue_mode)
            .field("watch_list", &self.watch_list)
            .field("wire_format", &self.wire_format)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum InformerKey {
    Type(TypeId),
    Dynamic(Gvr),
}

struct State {
    informers: HashMap<InformerKey, Arc<dyn ErasedInformer>>,
    order: Vec<InformerKey>,
    shut_down: bool,
}

/// Creates and owns shared informers; cheap to clone (clones share everything).
#[derive(Clone)]
pub struct SharedInformerFactory {
    client: Client,
    options: Arc<FactoryOptions>,
    registry: Arc<ResourceRegistry>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformerFactory").field("options", &self.options).finish_non_exhaustive()
    }
}

fn gvr_string(group: &str, version: &str, plural: &str) -> String {
    Gvr::new(group, version, plural).to_string()
}

impl SharedInformerFactory {
    /// A factory over `client` with default options.
    pub fn new(client: Client) -> Self {
        Self::with_options(client, FactoryOptions::default())
    }

    /// A factory over `client` with `options`.
    pub fn with_options(client: Client, options: FactoryOptions) -> Self {
        SharedInformerFactory {
            client,
            options: Arc::new(options),
            registry: Arc::new(ResourceRegistry::new()),
            state: Arc::new(Mutex::new(State { informers: HashMap::new(), order: Vec::new(), shut_down: false })),
        }
    }

    /// Sets the registry `for_resource` reads (generated code provides one).
    pub fn with_registry(mut self, registry: ResourceRegistry) -> Self {
        self.registry = Arc::new(registry);
        self
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The options.
    pub fn options(&self) -> &FactoryOptions {
        &self.options
    }

    fn informer_options(&self, resource: String) -> InformerOptions {
        let mut reflector = ReflectorConfig { watch_list: self.options.watch_list, ..ReflectorConfig::default() };
        if let Some(t) = &self.options.tweak {
            t(&mut reflector);
        }
        let resync = self.options.custom_resync.get(&resource).copied().unwrap_or(self.options.default_resync);
        InformerOptions { resource, resync_period: resync, queue_mode: self.options.queue_mode, reflector }
    }

    /// Sets the factory's metadata transform, if any, as `informer`'s transform, run on each
    /// object by `apply`.
    fn set_meta_transform<K: Resource + Send + Sync + 'static>(
        &self,
        informer: &SharedIndexInformer<K>,
        apply: ApplyMetaFn<K>,
    ) {
        if let Some(t) = self.options.transform.clone() {
            let f: TransformFn<K> = Arc::new(move |mut o: K| {
                apply(&mut o, &*t);
                o
            });
            // The informer was just created and not started, so this cannot fail.
            let _ = informer.set_transform(f);
        }
    }

    fn apply_meta_transform<K: Resource + Send + Sync + 'static>(&self, informer: &SharedIndexInformer<K>) {
        self.set_meta_transform(informer, |o, t| t(o.meta_mut()));
    }

    /// For objects with [`LeanMeta`](crate::lean::LeanMeta) metadata: listers read the
    /// labels `LeanMeta` keeps apart, and the transform also reaches the fields it keeps
    /// apart.
    fn set_up_lean_root<K: LeanRoot + Resource + Send + Sync + 'static>(&self, informer: &SharedIndexInformer<K>) {
        // The informer was just created and not started, so this cannot fail.
        let _ = informer.set_labels(lean_labels::<K>);
        self.set_meta_transform(informer, |o, t| o.lean_meta_mut().apply_object_meta_transform(t));
    }

    /// The shared informer for `K`, created by `new` on first request (client-go's
    /// `InformerFor`). Generated code uses this for its own constructors.
    pub fn informer_for_with<K>(&self, new: impl FnOnce(&Self) -> SharedIndexInformer<K>) -> Result<SharedIndexInformer<K>, Error>
    where
        K: Resource + Serialize + Send + Sync + 'static,
    {
        self.get_or_insert(InformerKey::Type(TypeId::of::<K>()), || new(self))
    }

    fn get_or_insert<K>(&self, key: InformerKey, new: impl FnOnce() -> SharedIndexInformer<K>) -> Result<SharedIndexInformer<K>, Error>
    where
        K: Resource + Serialize + Send + Sync + 'static,
    {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(Error::ShutDown);
        }
        if let Some(existing) = st.informers.get(&key) {
            return Ok(existing
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
                .cloned()
                .expect("an informer key maps to one object type"));
        }
        let informer = new();
        st.informers.insert(key.clone(), Arc::new(informer.clone()));
        st.order.push(key);
        Ok(informer)
    }

    /// The shared informer for the statically typed resource `K`.
    pub fn informer_for<K>(&self) -> Result<SharedIndexInformer<K>, Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
        K::Scope: InformerScope,
    {
        self.informer_for_with(|f| {
            let informer = f.new_typed_informer::<K>(VecSizing::Exact);
            f.apply_meta_transform(&informer);
            informer
        })
    }

    /// The shared informer for a lean root type `K` (generated with `--lean`): as
    /// [`informer_for`](Self::informer_for), and its listers match selectors against the
    /// labels `LeanMeta` keeps apart; the factory's metadata transform also reaches them
    /// and the rest it keeps apart (`managedFields`, annotations, owner references).
    pub fn lean_informer_for<K>(&self) -> Result<SharedIndexInformer<K>, Error>
    where
        K: LeanRoot + Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
        K::Scope: InformerScope,
    {
        // Lean types box their slices at their lengths themselves.
        self.informer_for_with(|f| {
            let informer = f.new_typed_informer::<K>(VecSizing::Grown);
            f.set_up_lean_root(&informer);
            informer
        })
    }

    fn new_typed_informer<K>(&self, sizing: VecSizing) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
        K::Scope: InformerScope,
    {
        let (api, options) = self.typed_api_and_options::<K>();
        let mut lister_watcher = KubeListerWatcher::new(api).with_sizing(sizing);
        if self.options.wire_format == WireFormat::Protobuf {
            let gvr = Gvr::new(&K::group(&()), &K::version(&()), &K::plural(&()));
            if let Some(message) = self.registry.protobuf(&gvr) {
                lister_watcher = lister_watcher.with_protobuf(message);
            }
        }
        SharedIndexInformer::new(lister_watcher, options)
    }

    /// The `Api` of `K` in the factory's namespace (or all) and the informer options for its
    /// resource: what every informer of a compiled-in type starts from.
    fn typed_api_and_options<K>(&self) -> (Api<K>, InformerOptions)
    where
        K: Resource<DynamicType = ()>,
        K::Scope: InformerScope,
    {
        let api = <K::Scope as InformerScope>::api::<K>(self.client.clone(), &(), self.options.namespace.as_deref());
        (api, self.informer_options(gvr_string(&K::group(&()), &K::version(&()), &K::plural(&()))))
    }

    /// A shared informer caching only the metadata of `K` (client-go's metadata informer),
    /// as [`LeanPartialObjectMeta<K>`]. The factory's metadata transform reaches all of it,
    /// `managedFields` included (see [`LeanMeta::apply_object_meta_transform`]).
    ///
    /// [`LeanMeta::apply_object_meta_transform`]: crate::lean::LeanMeta::apply_object_meta_transform
    pub fn metadata_informer_for<K>(&self) -> Result<SharedIndexInformer<LeanPartialObjectMeta<K>>, Error>
    where
        K: Resource<DynamicType = ()> + Send + Sync + 'static,
        K::Scope: InformerScope,
    {
        self.get_or_insert(InformerKey::Type(TypeId::of::<LeanPartialObjectMeta<K>>()), || {
            let (api, options) = self.typed_api_and_options::<K>();
            let informer = SharedIndexInformer::new(MetadataListerWatcher::new(api), options);
            self.set_up_lean_root(&informer);
            informer
        })
    }

    /// A shared informer over `DynamicObject` for any resource.
    pub fn dynamic_informer(&self, resource: &ApiResource, scope: Scope) -> Result<SharedIndexInformer<DynamicObject>, Error> {
        let gvr = Gvr::new(&resource.group, &resource.version, &resource.plural);
        self.get_or_insert(InformerKey::Dynamic(gvr.clone()), || {
            let api: Api<DynamicObject> = match (&scope, self.options.namespace.as_deref()) {
                (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, resource),
                _ => Api::all_with(self.client.clone(), resource),
            };
            // `serde_json::Value` ignores size hints: the scan would buy only metadata's `Vec`s.
            let lister_watcher = KubeListerWatcher::new(api).with_sizing(VecSizing::Grown);
            let informer = SharedIndexInformer::new(lister_watcher, self.informer_options(gvr.to_string()));
            self.apply_meta_transform(&informer);
            informer
        })
    }

    /// The informer for `gvr` from the registry: [`Error::NoInformerForResource`] when
    /// none is registered, [`Error::ShutDown`] after `shutdown`.
    pub fn for_resource(&self, gvr: &Gvr) -> Result<GenericInformer, Error> {
        let ctor = self.registry.get(gvr).ok_or_else(|| Error::NoInformerForResource(gvr.clone()))?;
        ctor(self)
    }

    /// Starts every informer not started yet; returns how many were started.
    pub fn start(&self) -> Result<usize, Error> {
        let informers: Vec<_> = {
            let st = self.state.lock();
            if st.shut_down {
                return Err(Error::ShutDown);
            }
            st.order.iter().map(|k| st.informers[k].clone()).collect()
        };
        let mut n = 0;
        for i in informers {
            if i.start()? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Waits until every started informer has synced (or was shut down); reports each by
    /// resource.
    pub async fn wait_for_cache_sync(&self) -> BTreeMap<String, bool> {
        let informers: Vec<_> = {
            let st = self.state.lock();
            st.order.iter().map(|k| st.informers[k].clone()).filter(|i| i.is_started()).collect()
        };
        let mut out = BTreeMap::new();
        for i in informers {
            let synced = i.wait_for_sync().await;
            out.insert(i.resource().to_string(), synced);
        }
        out
    }

    /// Stops every informer and waits for all of them to end.
    pub async fn shutdown(&self) {
        let informers: Vec<_> = {
            let mut st = self.state.lock();
            st.shut_down = true;
            st.order.iter().map(|k| st.informers[k].clone()).collect()
        };
        for i in informers {
            i.shutdown().await;
        }
    }
}
