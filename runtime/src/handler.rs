//! Event handlers and the per-handler queues that feed them (client-go's
//! `ResourceEventHandler` and `processorListener`).
//!
//! Invariants:
//! - Every handler has its own unbounded queue and its own thread (a stream: its own queue,
//!   consumed by the stream's task), so a slow or blocked handler never delays another one
//!   or the informer; events reach each handler in the order the informer applied them to
//!   its store.
//! - A handler thread or a stream's task is woken by a [`Listener::flush`], not by each
//!   event (see `handler_queue`); the informer flushes whenever it has nothing more ready to
//!   apply, after at most [`FLUSH_EVERY`] applied changes per handler or stream (counted at
//!   the last flush), and before it waits on a bounded handler. A new handler's thread
//!   starts once the store's replay is queued, so it takes the replay when it first looks;
//!   a new stream finds its replay queued when it is first polled.
//! - A handler that panics is logged; the panicking event is skipped and the handler keeps
//!   receiving later events.
//! - `queue_depth` counts events queued and not yet fully handled (the one being handled
//!   included).
//! - A registration's `has_synced` is true once the informer has synced and this handler
//!   has finished handling every event flagged `is_in_initial_list` it was given.
//!   Its `wait_for_sync` is woken by either becoming true (it does not poll), and ends with
//!   `false` once the handler is removed or the informer shut down before that.
//! - After removal, a handler is called for no further event.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::Notify;

use crate::delta::DeletedObject;
use crate::handler_queue::HandlerQueue;

/// The most changes the informer applies, per handler thread or stream, before it wakes the
/// handlers and streams that wait for events: a burst reaches each of n of them in batches
/// of about n times this many events, so it costs about one wake per this many changes
/// whatever their number, while a change that arrives alone is handed over at once.
pub(crate) const FLUSH_EVERY: usize = 32;

/// A change delivered to handlers and streams.
#[derive(Debug)]
pub enum Event<K> {
    /// An object appeared in the cache.
    Add {
        /// The object.
        obj: Arc<K>,
        /// True when the object came from the informer's initial list (or from the replay of
        /// the store to a handler added late).
        is_in_initial_list: bool,
    },
    /// An object in the cache changed, or was resynced, or was relisted. `old` and `new` are
    /// the same object on a resync, and on a relist that found the resourceVersion the cache
    /// held (the cache keeps the object it held).
    Update {
        /// The previous state.
        old: Arc<K>,
        /// The new state.
        new: Arc<K>,
    },
    /// An object left the cache.
    Delete(DeletedObject<K>),
}

impl<K> Clone for Event<K> {
    fn clone(&self) -> Self {
        match self {
            Event::Add { obj, is_in_initial_list } => Event::Add { obj: obj.clone(), is_in_initial_list: *is_in_initial_list },
            Event::Update { old, new } => Event::Update { old: old.clone(), new: new.clone() },
            Event::Delete(d) => Event::Delete(d.clone()),
        }
    }
}

impl<K> Event<K> {
    /// The object the event leaves behind: the added object, the new state of an update, or
    /// the deleted object (for a tombstone, its last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Event::Add { obj, .. } => obj,
            Event::Update { new, .. } => new,
            Event::Delete(d) => d.object(),
        }
    }

    fn is_initial_add(&self) -> bool {
        matches!(self, Event::Add { is_in_initial_list: true, .. })
    }
}

/// Receives the events of an informer on the handler's own thread.
pub trait EventHandler<K>: Send + 'static {
    /// Called for every event; by default dispatches to `on_add`, `on_update`, `on_delete`.
    fn on_event(&mut self, event: &Event<K>) {
        match event {
            Event::Add { obj, is_in_initial_list } => self.on_add(obj, *is_in_initial_list),
            Event::Update { old, new } => self.on_update(old, new),
            Event::Delete(d) => self.on_delete(d),
        }
    }
    /// An object was added.
    fn on_add(&mut self, _obj: &Arc<K>, _is_in_initial_list: bool) {}
    /// An object was updated.
    fn on_update(&mut self, _old: &Arc<K>, _new: &Arc<K>) {}
    /// An object was deleted.
    fn on_delete(&mut self, _obj: &DeletedObject<K>) {}
}

/// An [`EventHandler`] made of one closure over [`Event`].
pub struct HandlerFn<F>(pub F);

impl<K, F> EventHandler<K> for HandlerFn<F>
where
    F: FnMut(&Event<K>) + Send + 'static,
{
    fn on_event(&mut self, event: &Event<K>) {
        (self.0)(event)
    }
}

/// Options of one handler.
#[derive(Debug, Clone, Default)]
pub struct HandlerOptions {
    /// Resync period of this handler; `None` uses the informer's default.
    /// `Some(Duration::ZERO)` disables resync for this handler.
    pub resync_period: Option<Duration>,
    /// Upper bound of the handler's queue. When it is reached, the informer waits for the
    /// handler before applying the next change (trading isolation for memory). `None`:
    /// unbounded, the default.
    pub queue_bound: Option<usize>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Counters shared between a listener, its consumer and its registration.
#[derive(Debug, Default)]
pub(crate) struct ListenerShared {
    pub(crate) depth: AtomicUsize,
    pub(crate) initial_pending: AtomicUsize,
    pub(crate) stopped: AtomicBool,
    /// The listener has a queue bound: the informer waits on `drained` for it.
    pub(crate) bounded: bool,
    /// Notified each time an event is handled, if `bounded` (nobody waits on it otherwise),
    /// and when the consumer stops.
    pub(crate) drained: Notify,
    /// Notified when `initial_pending` drops to 0 and when the consumer stops.
    pub(crate) sync_changed: Notify,
}

impl ListenerShared {
    /// Marks the consumer stopped and wakes whoever waits on its queue or its sync.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.drained.notify_waiters();
        self.sync_changed.notify_waiters();
    }

    /// One initial event fewer pending.
    fn initial_handled(&self) {
        if self.initial_pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.sync_changed.notify_waiters();
        }
    }
}

/// The informer's side of one handler or stream: where its events are queued.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    /// The handler thread's or the stream's queue; its consumer is woken by [`Listener::flush`].
    queue: Arc<HandlerQueue<Event<K>>>,
    pub(crate) shared: Arc<ListenerShared>,
    pub(crate) bound: Option<usize>,
    pub(crate) resync_period: Duration,
    pub(crate) next_resync: parking_lot::Mutex<tokio::time::Instant>,
}

impl<K> Listener<K> {
    /// Queues `event`; false when the consumer is gone.
    pub(crate) fn send(&self, event: Event<K>) -> bool {
        if self.shared.stopped.load(Ordering::Acquire) {
            return false;
        }
        let initial = event.is_initial_add();
        self.shared.depth.fetch_add(1, Ordering::AcqRel);
        if initial {
            self.shared.initial_pending.fetch_add(1, Ordering::AcqRel);
        }
        if self.queue.push(event).is_err() {
            self.shared.depth.fetch_sub(1, Ordering::AcqRel);
            if initial {
                self.shared.initial_handled();
            }
            return false;
        }
        true
    }

    /// Wakes the handler thread or stream waiting for the events queued since the last flush.
    pub(crate) fn flush(&self) {
        self.queue.flush();
    }

    /// Waits until the queue is within its bound (immediately when unbounded).
    pub(crate) async fn wait_within_bound(&self) {
        let Some(bound) = self.bound else { return };
        crate::queue::wait_until(&self.shared.drained, || {
            self.shared.depth.load(Ordering::Acquire) <= bound || self.shared.stopped.load(Ordering::Acquire)
        })
        .await;
    }
}

impl<K> Drop for Listener<K> {
    /// Ends the queue: a handler thread handles what is queued, then exits; a stream yields
    /// what is queued, then ends.
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// One event handled: counted out of the depth first, so whoever is woken by the sync it
/// completes sees a depth without it.
fn done_one<K>(shared: &ListenerShared, event: &Event<K>) {
    shared.depth.fetch_sub(1, Ordering::AcqRel);
    if event.is_initial_add() {
        shared.initial_handled();
    }
    if shared.bounded {
        shared.drained.notify_waiters();
    }
}

/// Creates a handler thread's or a stream's listener and the queue its consumer takes its
/// events from.
pub(crate) fn listener<K>(opts: &HandlerOptions, resync_period: Duration) -> (Listener<K>, Arc<HandlerQueue<Event<K>>>) {
    let queue = Arc::new(HandlerQueue::default());
    let listener = Listener {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        queue: queue.clone(),
        shared: Arc::new(ListenerShared { bounded: opts.queue_bound.is_some(), ..ListenerShared::default() }),
        bound: opts.queue_bound,
        resync_period,
        next_resync: parking_lot::Mutex::new(tokio::time::Instant::now() + resync_period),
    };
    (listener, queue)
}

/// Runs `handler` over `queue` on a dedicated thread until the informer drops the listener.
pub(crate) fn spawn_handler_thread<K: Send + Sync + 'static>(
    id: u64,
    mut handler: Box<dyn EventHandler<K>>,
    queue: Arc<HandlerQueue<Event<K>>>,
    shared: Arc<ListenerShared>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(format!("informer-handler-{id}")).spawn(move || {
        let mut batch = std::collections::VecDeque::new();
        while queue.take_all(&mut batch) {
            for event in batch.drain(..) {
                if !shared.stopped.load(Ordering::Acquire) {
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| handler.on_event(&event))) {
                        tracing::error!(handler = id, panic = %panic_message(&panic), "event handler panicked; event skipped");
                    }
                }
                done_one(&shared, &event);
            }
        }
    })
}

fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".to_string()
    }
}

/// A handle on one added handler or stream.
#[derive(Clone)]
pub struct HandlerRegistration {
    pub(crate) id: u64,
    pub(crate) shared: Arc<ListenerShared>,
    pub(crate) informer_synced: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Notified when `informer_synced` turns true.
    pub(crate) informer_synced_notify: Arc<Notify>,
}

impl std::fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration").field("id", &self.id).field("depth", &self.queue_depth()).finish()
    }
}

impl HandlerRegistration {
    /// True once the informer has synced and this handler has handled all of its initial
    /// events.
    pub fn has_synced(&self) -> bool {
        (self.informer_synced)() && self.shared.initial_pending.load(Ordering::Acquire) == 0
    }

    /// Events queued for this handler and not yet handled.
    pub fn queue_depth(&self) -> usize {
        self.shared.depth.load(Ordering::Acquire)
    }

    /// Waits until [`has_synced`](Self::has_synced) and returns `true`; returns `false` if
    /// the handler is removed or the informer shut down first (client-go's
    /// `WaitForCacheSync` with the informer's stop channel).
    pub async fn wait_for_sync(&self) -> bool {
        loop {
            let informer_synced = self.informer_synced_notify.notified();
            let sync_changed = self.shared.sync_changed.notified();
            tokio::pin!(informer_synced, sync_changed);
            informer_synced.as_mut().enable();
            sync_changed.as_mut().enable();
            if self.has_synced() {
                return true;
            }
            // The informer's shutdown stops every listener, as removal does.
            if self.is_removed() {
                return false;
            }
            tokio::select! {
                _ = informer_synced => {}
                _ = sync_changed => {}
            }
        }
    }

    /// True after the handler was removed.
    pub fn is_removed(&self) -> bool {
        self.shared.stopped.load(Ordering::Acquire)
    }
}

/// A `Stream` of an informer's events, for users of kube-runtime's style. Dropping it
/// unregisters it.
pub struct EventStream<K> {
    pub(crate) queue: Arc<HandlerQueue<Event<K>>>,
    /// Events taken from the queue at its last flush and not yet yielded.
    pub(crate) batch: std::collections::VecDeque<Event<K>>,
    pub(crate) registration: HandlerRegistration,
}

impl<K> EventStream<K> {
    /// The registration of this stream (sync state and queue depth).
    pub fn registration(&self) -> &HandlerRegistration {
        &self.registration
    }
}

impl<K> Stream for EventStream<K> {
    type Item = Event<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event<K>>> {
        let this = &mut *self;
        if this.batch.is_empty() {
            match this.queue.poll_take_all(cx, &mut this.batch) {
                Poll::Ready(true) => {}
                Poll::Ready(false) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
        let event = this.batch.pop_front().expect("a batch taken from the queue is not empty");
        done_one(&this.registration.shared, &event);
        Poll::Ready(Some(event))
    }
}

impl<K> Drop for EventStream<K> {
    fn drop(&mut self) {
        self.registration.shared.stop();
    }
}
