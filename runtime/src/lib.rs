//! informer-runtime: typed, shared informers and listers for Kubernetes, with the
//! semantics of client-go's `tools/cache`, on tokio.
//!
//! The pieces, each in its own module with its invariants at the top:
//! - [`ListerWatcher`]: the transport ([`KubeListerWatcher`] over kube-client, and
//!   [`testing::FakeApiServer`] in memory).
//! - [`informer_client`]: a kube-client `Client` whose HTTP/1 connections keep small read
//!   buffers (every watch holds one open), each watch on a connection its body drives.
//! - [`Reflector`]: list (paged, or streamed through WatchList) then watch, into a [`Queue`].
//! - [`InOrderFifo`] (default) and [`DeltaFifo`]: the queues between reflector and store.
//! - [`Indexer`]: the thread-safe indexed store of `Arc<K>`.
//! - [`SharedIndexInformer`]: one reflector and store shared by many handlers, each with its
//!   own queue and thread, plus `Stream`s of events.
//! - [`SharedInformerFactory`]: one informer per resource, started and stopped together;
//!   `for_resource` over a [`ResourceRegistry`] that generated code fills.
//! - [`Lister`] and [`NamespaceLister`]: reads from the store.
//! - [`proto`]: Kubernetes protobuf decoded into the same types as JSON, for built-in kinds.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informer_runtime::{SharedInformerFactory, HandlerFn, Event, Selector};
//! use k8s_openapi::api::core::v1::Pod;
//!
//! let client = informer_runtime::informer_client(kube_client::Config::infer().await?)?;
//! let factory = SharedInformerFactory::new(client);
//! let pods = factory.informer_for::<Pod>()?;
//! pods.add_event_handler(HandlerFn(|e: &Event<Pod>| println!("{e:?}")))?;
//! factory.start()?;
//! factory.wait_for_cache_sync().await;
//! let in_default = pods.lister().namespace("default").list(&Selector::default());
//! println!("{} pods in default", in_default.len());
//! factory.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

#[cfg(test)]
mod alloc_count;
mod backoff;
mod client;
pub mod codegen;
mod decode_pool;
mod delta;
mod delta_fifo;
mod deltas;
mod error;
mod exact_json;
mod factory;
mod generic;
mod handler;
mod handler_queue;
mod indexer;
mod informer;
mod item_map;
mod json_list;
mod json_list_split;
mod json_page_stream;
mod key;
mod key_hash;
mod kube_lister_watcher;
mod labels;
mod lister;
mod lister_watcher;
mod page_parts;
mod page_prefetch;
mod parallel;
mod proto_page_stream;
pub mod proto;
mod queue;
mod read_ahead;
mod real_fifo;
mod reflector;
mod selector;
mod thin_str;
pub mod lean;
pub mod testing;
mod transform;
mod watch_connection;
mod watch_events;
mod window;

pub use backoff::{Backoff, BackoffConfig};
pub use client::{HTTP1_READ_BUFFER_MAX, informer_client};
pub use delta::{DeletedFinalStateUnknown, DeletedObject, Delta, DeltaObject, DeltaType};
pub use delta_fifo::DeltaFifo;
pub use deltas::{Deltas, DeltasIntoIter};
pub use error::{ApiStatus, Error, NotFound};
pub use factory::{
    FactoryOptions, InformerScope, WireFormat, MetaTransformFn, SharedInformerFactory, TweakFn, strip_managed_fields_meta,
};
pub use generic::{
    AnyObject, ErasedInformer, GenericInformer, GenericLister, Gvr, InformerConstructor,
    ResourceRegistry,
};
pub use handler::{Event, EventHandler, EventStream, HandlerFn, HandlerOptions, HandlerRegistration};
pub use indexer::{IndexError, IndexFunc, Indexer, IndexerView, NAMESPACE_INDEX, Upserted, namespace_index_func};
pub use informer::{InformerOptions, MINIMUM_RESYNC_PERIOD, SharedIndexInformer};
pub use key::{KeySet, ObjectKey};
pub use exact_json::VecSizing;
pub use kube_lister_watcher::{KubeListerWatcher, MetadataListerWatcher};
pub use labels::{LabelMatcher, Labels, LabelsFn, meta_labels};
pub use lister::{Lister, ListerView, NamespaceLister, NamespaceListerView, matches_labels};
pub use lister_watcher::{BoxListerWatcher, ListOptions, ListPage, ListerWatcher, PageInParts, VersionMatch, WatchEvent, WatchOptions, WatchStream};
pub use queue::{Popped, Queue, QueueMode};
pub use real_fifo::InOrderFifo;
pub use reflector::{INITIAL_EVENTS_END_ANNOTATION, Reflector, ReflectorConfig, ReflectorState, WatchErrorHandler, WatchListMode};
pub use selector::{Expression, Selector, SelectorExt, SelectorParseError, parse_label_selector};
pub use transform::{TransformFn, chain, strip_managed_fields};

/// Re-exports used by generated code, so generated packages need no direct dependency on
/// these crates' exact versions.
pub mod reexports {
    pub use k8s_openapi;
    pub use kube_client;
    pub use kube_core;
    pub use serde;
    pub use serde_json;
    pub use tokio;
}
