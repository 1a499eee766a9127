//! `SharedIndexInformer<K>`: one reflector, one queue and one indexed store shared by any
//! number of handlers and streams (client-go's `sharedIndexInformer`).
//!
//! Invariants:
//! - Every change is applied to the store and handed to every handler's queue while the
//!   queue and the handler list are locked, so a handler added at any moment is replayed
//!   exactly the store's content (as adds with `is_in_initial_list = true`) and then gets
//!   exactly the changes applied after that replay: no change is missed or seen twice.
//! - Objects are shared as `Arc<K>` between the store and all handlers; nothing is cloned
//!   per handler.
//! - A relisted object whose resourceVersion (non-empty) equals the one of the object the
//!   store holds under its key is that object: the store keeps the held `Arc`, and the
//!   update handed to handlers has it as both `old` and `new`. So the updates of a relist
//!   that handlers have not yet taken hold no object beside the cache. (Only a change of a
//!   CRD's defaults or schema can change what the server sends for one resourceVersion;
//!   the cache then keeps the older form until the object is next written.)
//! - `Sync` deltas (periodic resync) reach only the handlers whose resync period is due;
//!   every other change reaches every handler. An update from a relist whose
//!   resourceVersion did not change is delivered to every handler, as client-go does for
//!   handlers that did not ask for resync (client-go's `syncingListeners` default).
//! - `has_synced` is the queue's: true once the first list has been fully applied.
//! - Transforms and the error hook are fixed at `start`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::delta::{DeletedObject, DeltaObject, DeltaType};
use crate::delta_fifo::DeltaFifo;
use crate::error::Error;
use crate::handler::{
    EventHandler, EventStream, FLUSH_EVERY, HandlerOptions, HandlerRegistration, Listener, listener, spawn_handler_thread,
};
use crate::handler::Event;
use crate::indexer::{IndexFunc, IndexError, Indexer, Upserted};
use crate::lister::Lister;
use crate::lister_watcher::{BoxListerWatcher, ListerWatcher};
use crate::queue::{Popped, Queue, QueueMode, same_resource_version};
use crate::real_fifo::InOrderFifo;
use crate::reflector::{Reflector, ReflectorConfig, ReflectorState, WatchErrorHandler};
use crate::labels::{LabelsFn, meta_labels};
use crate::transform::TransformFn;

/// The shortest resync period a handler can get (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Settings of a [`SharedIndexInformer`].
#[derive(Debug, Clone)]
pub struct InformerOptions {
    /// The resource (plural) this informer caches, for errors and logs.
    pub resource: String,
    /// Default resync period of handlers; zero for none.
    pub resync_period: Duration,
    /// The queue between the reflector and the store.
    pub queue_mode: QueueMode,
    /// Settings of the reflector.
    pub reflector: ReflectorConfig,
}

impl Default for InformerOptions {
    fn default() -> Self {
        InformerOptions {
            resource: String::new(),
            resync_period: Duration::ZERO,
            queue_mode: QueueMode::default(),
            reflector: ReflectorConfig::default(),
        }
    }
}

/// The queue an informer uses, chosen at construction.
enum AnyQueue<K> {
    InOrder(InOrderFifo<K>),
    Delta(DeltaFifo<K>),
}

macro_rules! delegate {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            AnyQueue::InOrder($q) => $e,
            AnyQueue::Delta($q) => $e,
        }
    };
}

impl<K: Resource + Send + Sync + 'static> Queue<K> for AnyQueue<K> {
    fn add(&self, obj: Arc<K>) {
        delegate!(self, q => q.add(obj))
    }
    fn update(&self, obj: Arc<K>) {
        delegate!(self, q => q.update(obj))
    }
    fn delete(&self, obj: Arc<K>) {
        delegate!(self, q => q.delete(obj))
    }
    fn watched(&self, events: &mut Vec<(crate::DeltaType, Arc<K>)>) {
        delegate!(self, q => q.watched(events))
    }
    fn replace_item(&self, obj: Arc<K>) {
        delegate!(self, q => q.replace_item(obj))
    }
    fn replace_items(&self, objs: Vec<(crate::ObjectKey, Arc<K>)>) {
        delegate!(self, q => q.replace_items(objs))
    }
    fn reuse_unchanged(&self, objs: &mut [(crate::ObjectKey, Arc<K>)]) {
        delegate!(self, q => q.reuse_unchanged(objs))
    }
    fn replace_finish(&self, seen: &crate::KeySet) {
        delegate!(self, q => q.replace_finish(seen))
    }
    fn replace_finish_from_empty(&self, unlisted: &crate::KeySet) {
        delegate!(self, q => q.replace_finish_from_empty(unlisted))
    }
    fn knows_nothing(&self) -> bool {
        delegate!(self, q => q.knows_nothing())
    }
    fn resync(&self) {
        delegate!(self, q => q.resync())
    }
    async fn pop<'a, R: Send + 'a>(&'a self, apply: impl FnOnce(Popped<K>) -> R + Send + 'a) -> Option<R> {
        match self {
            AnyQueue::InOrder(q) => q.pop(apply).await,
            AnyQueue::Delta(q) => q.pop(apply).await,
        }
    }
    fn has_synced(&self) -> bool {
        delegate!(self, q => q.has_synced())
    }
    fn synced_notify(&self) -> Arc<tokio::sync::Notify> {
        delegate!(self, q => q.synced_notify())
    }
    fn len(&self) -> usize {
        delegate!(self, q => q.len())
    }
    async fn drained_to(&self, n: usize) {
        match self {
            AnyQueue::InOrder(q) => q.drained_to(n).await,
            AnyQueue::Delta(q) => q.drained_to(n).await,
        }
    }
    fn close(&self) {
        delegate!(self, q => q.close())
    }
}

struct Inner<K> {
    options: InformerOptions,
    lw: BoxListerWatcher<K>,
    indexer: Arc<Indexer<K>>,
    queue: Arc<AnyQueue<K>>,
    listeners: Mutex<Vec<Arc<Listener<K>>>>,
    syncing: Mutex<HashSet<u64>>,
    transform: Mutex<Option<TransformFn<K>>>,
    labels: Mutex<LabelsFn<K>>,
    error_handler: Mutex<Option<WatchErrorHandler>>,
    started: AtomicBool,
    cancel: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    reflector_state: Arc<ReflectorState>,
    resync_changed: Notify,
}

/// A shared informer over objects of type `K`; cheap to clone (all clones are one informer).
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        SharedIndexInformer { inner: self.inner.clone() }
    }
}

impl<K> std::fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("resource", &self.inner.options.resource)
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> SharedIndexInformer<K> {
    /// An informer over `lw`; nothing runs until [`start`](Self::start).
    pub fn new(lw: impl ListerWatcher<K>, options: InformerOptions) -> Self {
        let indexer = Arc::new(Indexer::new());
        let queue = Arc::new(match options.queue_mode {
            QueueMode::InOrder => AnyQueue::InOrder(InOrderFifo::new(indexer.clone())),
            QueueMode::DeltaFifo => AnyQueue::Delta(DeltaFifo::new(indexer.clone())),
        });
        SharedIndexInformer {
            inner: Arc::new(Inner {
                options,
                lw: BoxListerWatcher::new(lw),
                indexer,
                queue,
                listeners: Mutex::new(Vec::new()),
                syncing: Mutex::new(HashSet::new()),
                transform: Mutex::new(None),
                labels: Mutex::new(meta_labels::<K>),
                error_handler: Mutex::new(None),
                started: AtomicBool::new(false),
                cancel: CancellationToken::new(),
                tasks: Mutex::new(Vec::new()),
                threads: Mutex::new(Vec::new()),
                reflector_state: Arc::new(ReflectorState::default()),
                resync_changed: Notify::new(),
            }),
        }
    }

    /// The informer's settings.
    pub fn options(&self) -> &InformerOptions {
        &self.inner.options
    }

    /// Sets the transform run once on each object before it is stored. Fails after start.
    pub fn set_transform(&self, transform: TransformFn<K>) -> Result<(), Error> {
        if self.inner.started.load(Ordering::Acquire) {
            return Err(Error::AlreadyStarted);
        }
        *self.inner.transform.lock() = Some(transform);
        Ok(())
    }

    /// Sets how listers read an object's labels (by default from `meta().labels`; lean
    /// roots keep theirs in their own metadata). Listers made before keep the way they were
    /// made with. Fails after start.
    pub fn set_labels(&self, labels: LabelsFn<K>) -> Result<(), Error> {
        if self.inner.started.load(Ordering::Acquire) {
            return Err(Error::AlreadyStarted);
        }
        *self.inner.labels.lock() = labels;
        Ok(())
    }

    /// The way this informer's listers read an object's labels.
    pub fn labels_fn(&self) -> LabelsFn<K> {
        *self.inner.labels.lock()
    }

    /// Sets the hook called with every list or watch error. Fails after start.
    pub fn set_watch_error_handler(&self, handler: impl Fn(&Error) + Send + Sync + 'static) -> Result<(), Error> {
        if self.inner.started.load(Ordering::Acquire) {
            return Err(Error::AlreadyStarted);
        }
        *self.inner.error_handler.lock() = Some(Arc::new(handler));
        Ok(())
    }

    /// Adds index functions, also over objects already cached.
    pub fn add_indexers(&self, indexers: impl IntoIterator<Item = (String, IndexFunc<K>)>) -> Result<(), IndexError> {
        self.inner.indexer.add_indexers(indexers)
    }

    /// The informer's store.
    pub fn indexer(&self) -> &Arc<Indexer<K>> {
        &self.inner.indexer
    }

    /// A lister over the informer's store.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.clone(), &self.inner.options.resource).with_labels(self.labels_fn())
    }

    /// True once the first list has been applied to the store.
    pub fn has_synced(&self) -> bool {
        self.inner.queue.has_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced); `false` if the informer was shut down first.
    /// Woken when the last batch of the first list has been applied (no polling).
    pub async fn wait_for_sync(&self) -> bool {
        let synced = self.inner.queue.synced_notify();
        tokio::select! {
            biased;
            _ = crate::queue::wait_until(&synced, || self.has_synced()) => true,
            _ = self.inner.cancel.cancelled() => self.has_synced(),
        }
    }

    /// The resourceVersion the cache is at.
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.reflector_state.last_sync_resource_version()
    }

    /// The reflector's observable state.
    pub fn reflector_state(&self) -> &Arc<ReflectorState> {
        &self.inner.reflector_state
    }

    /// Whether `start` was called.
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// Whether `shutdown` was called.
    pub fn is_stopped(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Number of deltas waiting between the reflector and the store.
    pub fn queue_len(&self) -> usize {
        self.inner.queue.len()
    }

    /// Adds a handler with the informer's default options. It is first replayed the
    /// current store; see [`HandlerRegistration`].
    pub fn add_event_handler(&self, handler: impl EventHandler<K>) -> Result<HandlerRegistration, Error> {
        self.add_event_handler_with(handler, HandlerOptions::default())
    }

    /// Adds a handler with its own resync period and queue bound.
    pub fn add_event_handler_with(
        &self,
        handler: impl EventHandler<K>,
        opts: HandlerOptions,
    ) -> Result<HandlerRegistration, Error>
    where
        K: Send + Sync,
    {
        let (l, queue) = listener(&opts, self.resync_period_of(&opts)?);
        let (id, shared) = (l.id, l.shared.clone());
        // Registered first, so the thread finds the store's replay queued when it first looks
        // and needs no wake for it.
        let registration = self.register(l);
        match spawn_handler_thread(id, Box::new(handler), queue, shared) {
            Ok(thread) => {
                self.inner.threads.lock().push(thread);
                Ok(registration)
            }
            Err(e) => {
                self.remove_event_handler(&registration);
                Err(Error::Transport(format!("cannot spawn handler thread: {e}")))
            }
        }
    }

    /// A stream of events, replayed the current store first; dropping it unregisters it.
    pub fn stream(&self) -> Result<EventStream<K>, Error> {
        self.stream_with(HandlerOptions::default())
    }

    /// A stream with its own resync period and queue bound.
    pub fn stream_with(&self, opts: HandlerOptions) -> Result<EventStream<K>, Error> {
        let (l, queue) = listener(&opts, self.resync_period_of(&opts)?);
        let registration = self.register(l);
        Ok(EventStream { queue, batch: Default::default(), registration })
    }

    /// Removes a handler or stream; it gets no further event.
    pub fn remove_event_handler(&self, registration: &HandlerRegistration) {
        let mut listeners = self.inner.listeners.lock();
        listeners.retain(|l| l.id != registration.id);
        registration.shared.stop();
    }

    /// Number of registered handlers and streams.
    pub fn handler_count(&self) -> usize {
        let mut listeners = self.inner.listeners.lock();
        listeners.retain(|l| !l.shared.stopped.load(Ordering::Acquire));
        listeners.len()
    }

    /// The resync period of a new handler with `opts`; an error once the informer is shut down.
    fn resync_period_of(&self, opts: &HandlerOptions) -> Result<std::time::Duration, Error> {
        if self.inner.cancel.is_cancelled() {
            return Err(Error::ShutDown);
        }
        let mut resync = opts.resync_period.unwrap_or(self.inner.options.resync_period);
        if !resync.is_zero() && resync < MINIMUM_RESYNC_PERIOD {
            resync = MINIMUM_RESYNC_PERIOD;
        }
        Ok(resync)
    }

    fn register(&self, l: Listener<K>) -> HandlerRegistration {
        let queue = self.inner.queue.clone();
        let registration = HandlerRegistration {
            id: l.id,
            shared: l.shared.clone(),
            informer_synced_notify: queue.synced_notify(),
            informer_synced: Arc::new(move || queue.has_synced()),
        };
        {
            let mut listeners = self.inner.listeners.lock();
            if self.inner.cancel.is_cancelled() {
                // Shut down since `resync_period_of` looked (`shutdown` cancels, then takes this
                // lock): stopped and dropped here as `shutdown` does to the listeners it takes.
                l.shared.stop();
            } else {
                self.inner.indexer.for_each(|_, obj| {
                    l.send(Event::Add { obj: obj.clone(), is_in_initial_list: true });
                });
                listeners.push(Arc::new(l));
            }
        }
        self.inner.resync_changed.notify_one();
        registration
    }

    /// Starts the reflector, the processing loop and the resync timer on the current tokio
    /// runtime. Returns `Ok(false)` if it was already started.
    pub fn start(&self) -> Result<bool, Error> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        if self.inner.cancel.is_cancelled() {
            return Err(Error::ShutDown);
        }
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        let inner = &self.inner;
        let reflector = Reflector::new(Arc::new(inner.lw.clone()), inner.queue.clone(), inner.options.reflector.clone())
            .with_transform(inner.transform.lock().clone())
            .with_error_handler(inner.error_handler.lock().clone())
            .with_state(inner.reflector_state.clone());
        let mut tasks = inner.tasks.lock();
        tasks.push(handle.spawn(reflector.run(inner.cancel.clone())));
        tasks.push(handle.spawn(process_loop(inner.clone())));
        tasks.push(handle.spawn(resync_loop(inner.clone())));
        Ok(true)
    }

    /// Stops the informer and waits for its tasks and handler threads to end.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.queue.close();
        let listeners: Vec<_> = std::mem::take(&mut *self.inner.listeners.lock());
        for l in &listeners {
            l.shared.stop();
        }
        drop(listeners);
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.tasks.lock());
        for t in tasks {
            let _ = t.await;
        }
        let threads: Vec<_> = std::mem::take(&mut *self.inner.threads.lock());
        if !threads.is_empty() {
            let _ = tokio::task::spawn_blocking(move || {
                for t in threads {
                    let _ = t.join();
                }
            })
            .await;
        }
    }
}

async fn process_loop<K: Resource + Send + Sync + 'static>(inner: Arc<Inner<K>>) {
    let mut unflushed = 0;
    // Changes applied between flushes: [`FLUSH_EVERY`] per handler or stream at the last flush.
    let mut flush_every = FLUSH_EVERY;
    loop {
        let inner_ref = &inner;
        let bounded = inner
            .queue
            .pop(move |popped| {
                let mut listeners = inner_ref.listeners.lock();
                apply(inner_ref, &listeners, popped);
                listeners.retain(|l| !l.shared.stopped.load(Ordering::Acquire));
                listeners.iter().filter(|l| l.bound.is_some()).cloned().collect::<Vec<_>>()
            })
            .await;
        let Some(bounded) = bounded else { return };
        // Handler threads and streams are woken here, not per event (see `handler`'s invariants).
        unflushed += 1;
        if unflushed >= flush_every || !bounded.is_empty() || inner.queue.is_empty() {
            unflushed = 0;
            let listeners = inner.listeners.lock();
            listeners.iter().for_each(|l| l.flush());
            flush_every = FLUSH_EVERY * listeners.len().max(1);
        }
        for l in bounded {
            tokio::select! {
                _ = inner.cancel.cancelled() => return,
                _ = l.wait_within_bound() => {}
            }
        }
    }
}

fn apply<K: Resource + Send + Sync + 'static>(inner: &Inner<K>, listeners: &[Arc<Listener<K>>], popped: Popped<K>) {
    for delta in popped.deltas {
        match delta.kind {
            DeltaType::Deleted => {
                inner.indexer.remove(delta.key.as_str());
                let obj = match delta.object {
                    DeltaObject::Object(o) => DeletedObject::Object(o),
                    DeltaObject::Tombstone(t) => DeletedObject::Tombstone(t),
                };
                distribute(listeners, Event::Delete(obj), None);
            }
            kind => {
                // A relisted object at the resourceVersion the store holds is the object it
                // holds: the held one stays, and the one just decoded is dropped here rather
                // than held by handlers' queued events beside the cache.
                let relisted_unchanged = |held: &K, new: &K| kind == DeltaType::Replaced && same_resource_version(held, new);
                let obj = delta.object.into_object();
                match inner.indexer.upsert_unless(delta.key, obj.clone(), relisted_unchanged) {
                    Upserted::Added => {
                        distribute(listeners, Event::Add { obj, is_in_initial_list: popped.is_in_initial_list }, None);
                    }
                    Upserted::Kept(held) => distribute(listeners, Event::Update { old: held.clone(), new: held }, None),
                    Upserted::Replaced(old) => {
                        let event = Event::Update { old, new: obj };
                        if kind == DeltaType::Sync {
                            let syncing = inner.syncing.lock();
                            distribute(listeners, event, Some(&syncing));
                        } else {
                            distribute(listeners, event, None);
                        }
                    }
                }
            }
        }
    }
}

/// Sends `event` to each listener (of `only`, when given): a clone to each but the last,
/// which takes the event itself (a clone of an update is two reference counts raised, the
/// replaced object's a cold read, and two lowered again when the event is dropped).
fn distribute<K>(listeners: &[Arc<Listener<K>>], event: Event<K>, only: Option<&HashSet<u64>>) {
    let mut to = listeners.iter().filter(|l| only.is_none_or(|ids| ids.contains(&l.id)));
    let Some(mut current) = to.next() else { return };
    for next in to {
        current.send(event.clone());
        current = next;
    }
    current.send(event);
}

async fn resync_loop<K: Resource + Send + Sync + 'static>(inner: Arc<Inner<K>>) {
    loop {
        let period = inner
            .listeners
            .lock()
            .iter()
            .map(|l| l.resync_period)
            .filter(|p| !p.is_zero())
            .min();
        let wait = async {
            match period {
                Some(p) => tokio::time::sleep(p.max(MINIMUM_RESYNC_PERIOD)).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = inner.cancel.cancelled() => return,
            _ = inner.resync_changed.notified() => continue,
            _ = wait => {}
        }
        let now = tokio::time::Instant::now();
        let mut due = HashSet::new();
        for l in inner.listeners.lock().iter() {
            if l.resync_period.is_zero() {
                continue;
            }
            let mut next = l.next_resync.lock();
            if now >= *next {
                due.insert(l.id);
                *next = now + l.resync_period;
            }
        }
        if !due.is_empty() {
            *inner.syncing.lock() = due;
            inner.queue.resync();
        }
    }
}
