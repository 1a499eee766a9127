//! The interface between a reflector, its queue and the informer that drains it.
//!
//! A reflector writes watch events and relists into a [`Queue`]; the informer pops batches
//! of deltas and applies them to its [`Indexer`](crate::Indexer) while the queue is locked,
//! so a relist's deletion detection never misses an object that is between the queue and
//! the store.
//!
//! A relist is written incrementally: [`Queue::replace_items`] for each part of a page, or
//! each batch of WatchList objects, as they arrive (or [`Queue::replace_item`] one by one),
//! then [`Queue::replace_finish`] with the set of keys seen; a list waits
//! ([`Queue::drained_to`]) for the informer to pop what is queued before it queues more. No
//! second copy of the listed objects is ever buffered; only their keys are (and a batch's
//! references until it is queued). A relist that begins when the queue and the store are
//! empty (an informer's first sync: [`Queue::knows_nothing`]) keeps not even those: it ends
//! with [`Queue::replace_finish_from_empty`] and the few keys it queued and then saw
//! deleted. A relisted object that the store holds at the same resourceVersion is swapped
//! for the held one before it is queued ([`Queue::reuse_unchanged`]), so what waits in the
//! queue during a relist of unchanged objects is the cache's own objects and keys.
//!
//! Invariants of every implementation:
//! - `has_synced` is false until the first `replace_finish` (or a direct add/update/delete)
//!   has happened and every delta queued before it has been popped; once true it stays
//!   true. When it turns true, everything waiting on [`Queue::synced_notify`] is woken
//!   (the last initial batch is applied before a woken waiter can see `has_synced`, since
//!   both happen under the queue's lock).
//! - `is_in_initial_list` of a popped batch is `!has_synced()` just before that pop.
//! - After `replace_finish(seen)`, the state obtained by applying every queued delta to the
//!   store holds exactly the keys in `seen`: each other key the store or the queue knew of
//!   gets a `Deleted` tombstone carrying its last known object.
//! - `replace_finish_from_empty(unlisted)` after a relist that began when `knows_nothing`
//!   was true is `replace_finish` with every key that relist queued except `unlisted`:
//!   each key in `unlisted` whose last known state is present gets that tombstone.
//! - `close` wakes every pending pop; every pop after it returns `None` at once, and
//!   what was still queued is dropped. It also ends every wait of `drained_to`.
//! - A queue that a pop empties keeps room for about [`DRAINED_CAPACITY`] entries (a map
//!   rounds up to its buckets): the backlog of a list or of a burst of events is not kept
//!   allocated after it drained.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::delta::{Delta, DeltaType};
use crate::deltas::Deltas;
use crate::key::{KeySet, ObjectKey};

/// A batch of deltas handed to the informer by one pop.
#[derive(Debug)]
pub struct Popped<K> {
    /// The deltas, oldest first. One key per batch for the DeltaFIFO; one delta for the
    /// in-order FIFO.
    pub deltas: Deltas<K>,
    /// True while the queue had not yet synced when this batch was popped.
    pub is_in_initial_list: bool,
}

/// A queue of deltas between a reflector and an informer.
pub trait Queue<K>: Send + Sync {
    /// An object was added (watch `ADDED`).
    fn add(&self, obj: Arc<K>);
    /// An object was modified (watch `MODIFIED`).
    fn update(&self, obj: Arc<K>);
    /// An object was deleted (watch `DELETED`).
    fn delete(&self, obj: Arc<K>);
    /// Objects of watch events, in the order they came, each with its kind (`Added`,
    /// `Updated` or `Deleted`; any other counts as `Updated`): the same as `add`, `update`
    /// or `delete` on each, in one call; `events` is left empty, its room kept. The queues
    /// of this crate take them under one lock and with one wake of a waiting pop, so a
    /// reflector hands over at once the events a watch has ready.
    fn watched(&self, events: &mut Vec<(DeltaType, Arc<K>)>) {
        for (kind, obj) in events.drain(..) {
            match watched_kind(kind) {
                DeltaType::Added => self.add(obj),
                DeltaType::Deleted => self.delete(obj),
                _ => self.update(obj),
            }
        }
    }
    /// One object of a relist in progress.
    fn replace_item(&self, obj: Arc<K>);
    /// Objects of a relist in progress, in order, each with its key (`ObjectKey::of` the
    /// object, which the caller has already built): the same as `replace_item` on each,
    /// under one lock and with one wake of a waiting pop. Each wake of an idle informer task
    /// can cost a thread wake-up, more than decoding a small object, so the reflector hands
    /// over a page, or a batch of WatchList objects, at once.
    fn replace_items(&self, objs: Vec<(ObjectKey, Arc<K>)>);
    /// Swaps each object of a relist in progress that the store holds at the same
    /// non-empty resourceVersion (the same state of the same object) for the held object
    /// and the key it is held under; the listed object and key are dropped here. A relist
    /// of unchanged objects then keeps no second copy of them in the queue, nor a second
    /// key in its set of listed keys. The other objects stay as they are. The default swaps
    /// nothing (a queue with no store to look in); both queues of this crate look in the
    /// store they were made with.
    fn reuse_unchanged(&self, objs: &mut [(ObjectKey, Arc<K>)]) {
        let _ = objs;
    }
    /// Ends a relist: every key known to the store or the queue and not in `seen` gets a
    /// tombstone.
    fn replace_finish(&self, seen: &KeySet);
    /// Ends a relist that began when [`Queue::knows_nothing`] was true, so every key known
    /// now was queued by it: each key of `unlisted` (queued, then deleted before the relist
    /// ended, and not queued again) gets a tombstone unless its last queued delta is already
    /// a deletion or it is nowhere. The same as `replace_finish` with every key the relist
    /// queued except `unlisted`, without a set of all of them.
    fn replace_finish_from_empty(&self, unlisted: &KeySet);
    /// True when nothing is queued and nothing is stored: a relist beginning now may end
    /// with [`Queue::replace_finish_from_empty`].
    fn knows_nothing(&self) -> bool;
    /// Queues a `Sync` delta for every stored object with no pending delta.
    fn resync(&self);
    /// Pops the next batch, waiting for one, and runs `apply` on it while the queue is
    /// locked. Returns `None` once the queue is closed.
    fn pop<'a, R: Send + 'a>(
        &'a self,
        apply: impl FnOnce(Popped<K>) -> R + Send + 'a,
    ) -> impl std::future::Future<Output = Option<R>> + Send + 'a;
    /// Whether the initial population has been popped.
    fn has_synced(&self) -> bool;
    /// Notified when `has_synced` turns true. A waiter registers its wake-up
    /// (`Notified::enable`) before it reads `has_synced`, so the turn is not missed.
    fn synced_notify(&self) -> Arc<Notify>;
    /// Number of queued batches (keys for the DeltaFIFO, deltas for the in-order FIFO).
    fn len(&self) -> usize;
    /// Waits until at most `n` batches are queued, or the queue is closed (a reflector waits
    /// so before it queues more of a list). Required, with no default: a queue that wraps
    /// another must pass the wait on, or a list is no longer held back by it.
    fn drained_to(&self, n: usize) -> impl std::future::Future<Output = ()> + Send + '_;
    /// True when nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Closes the queue: pending and future pops return `None`.
    fn close(&self);
}

/// The most entries a queue keeps room for once a pop has emptied it. A queue grows to its
/// backlog (a list's pages arrive faster than the store takes them, a burst of events faster
/// than handlers are fed) and would otherwise keep that capacity for good; a few dozen
/// entries cover steady watch traffic without growing again.
pub(crate) const DRAINED_CAPACITY: usize = 64;

/// A collection a queue keeps its backlog in.
pub(crate) trait Backlog {
    /// Gives back the memory of the backlog once the collection is empty, down to about
    /// [`DRAINED_CAPACITY`] entries. Growing again costs what the backlog's growth cost
    /// once, so this does not change a queue's amortised cost per entry.
    fn release_drained(&mut self);
}

impl<T> Backlog for std::collections::VecDeque<T> {
    fn release_drained(&mut self) {
        if self.is_empty() && self.capacity() > DRAINED_CAPACITY {
            self.shrink_to(DRAINED_CAPACITY);
        }
    }
}

impl<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher> Backlog for std::collections::HashMap<K, V, S> {
    fn release_drained(&mut self) {
        // A map's capacity is 7/8 of its power-of-two buckets: 112 once shrunk to 64.
        if self.is_empty() && self.capacity() > 2 * DRAINED_CAPACITY {
            self.shrink_to(DRAINED_CAPACITY);
        }
    }
}

/// What the unit tests of both queues share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// ConfigMap `ns/cm-{i}` with its key.
    pub(crate) fn cm(i: usize) -> (ObjectKey, Arc<ConfigMap>) {
        let obj = ConfigMap { metadata: ObjectMeta { namespace: Some("ns".into()), name: Some(format!("cm-{i}")), ..Default::default() }, ..Default::default() };
        (ObjectKey::of(&obj).unwrap(), Arc::new(obj))
    }

    /// ConfigMap `ns/cm-{i}` at resourceVersion `rv`, with its key.
    pub(crate) fn cm_at(i: usize, rv: &str) -> (ObjectKey, Arc<ConfigMap>) {
        let (_, obj) = cm(i);
        let mut obj = Arc::unwrap_or_clone(obj);
        obj.metadata.resource_version = Some(rv.into());
        (ObjectKey::of(&obj).unwrap(), Arc::new(obj))
    }

    /// Checks `reuse_unchanged` of a queue made with `known`: a relisted object at the
    /// held resourceVersion comes back as the held object under the held key; one at
    /// another resourceVersion, one without any, and one not held stay as listed.
    pub(crate) fn reuses_unchanged(q: &impl Queue<ConfigMap>, known: &crate::indexer::Indexer<ConfigMap>) {
        let held: Vec<_> = vec![cm_at(0, "5"), cm_at(1, "5"), cm(2)];
        for (key, obj) in &held {
            known.upsert(key.clone(), obj.clone());
        }
        let mut listed = vec![cm_at(0, "5"), cm_at(1, "6"), cm(2), cm_at(3, "5")];
        let before: Vec<_> = listed.clone();
        q.reuse_unchanged(&mut listed);
        assert!(Arc::ptr_eq(&listed[0].1, &held[0].1));
        assert_eq!(listed[0].0.as_str().as_ptr(), held[0].0.as_str().as_ptr(), "the held key's allocation");
        for i in 1..4 {
            assert!(Arc::ptr_eq(&listed[i].1, &before[i].1), "object {i} stays as listed");
            assert_eq!(listed[i].0.as_str().as_ptr(), before[i].0.as_str().as_ptr());
        }
    }

    /// Queues three relisted ConfigMaps, one delta each, and pops them: each pop hands over
    /// its one delta and allocates nothing on the popping thread.
    pub(crate) fn pops_allocate_nothing(q: &impl Queue<ConfigMap>) {
        q.replace_items((0..3).map(cm).collect());
        // The executor's first use on a thread allocates its wake-up handle.
        futures::executor::block_on(async {});
        for i in 0..3 {
            let pop = || futures::executor::block_on(q.pop(|p| p.deltas.len()));
            let (popped, allocations) = crate::alloc_count::allocations_of(pop);
            assert_eq!(popped, Some(1), "pop {i}");
            assert_eq!(allocations, 0, "pop {i}");
        }
    }

    /// Queues `n` relisted ConfigMaps in a drained queue, pops them all and checks that each
    /// came out once, in order: a queue grows again after giving back its backlog.
    pub(crate) async fn regrows_in_order(q: &impl Queue<ConfigMap>, n: usize) {
        q.replace_items((0..n).map(cm).collect());
        let mut keys = Vec::new();
        while !q.is_empty() {
            keys.push(q.pop(|p| p.deltas[0].key.to_string()).await.unwrap());
        }
        assert_eq!(keys, (0..n).map(|i| format!("ns/cm-{i}")).collect::<Vec<_>>());
    }
}

/// A queue's `pop`: waits until `take` finds a batch in the locked state, then runs `apply`
/// on it before the lock is released; `None` once `closed` says the queue is closed. The
/// wake-up is registered before the state is looked at, so a push between the look and the
/// wait is not missed.
pub(crate) async fn pop_locked<S, K, R>(
    notify: &tokio::sync::Notify,
    drains: &Drains,
    state: &parking_lot::Mutex<S>,
    closed: impl Fn(&S) -> bool,
    mut take: impl FnMut(&mut S) -> Option<Popped<K>>,
    apply: impl FnOnce(Popped<K>) -> R,
) -> Option<R> {
    loop {
        let notified = notify.notified();
        {
            let mut st = state.lock();
            if closed(&st) {
                return None;
            }
            if let Some(popped) = take(&mut st) {
                let applied = apply(popped);
                drop(st);
                drains.popped();
                return Some(applied);
            }
        }
        notified.await;
    }
}

/// Waits until `done()` is true, looking again each time `notify` wakes its waiters. The
/// wake-up is registered before `done` is looked at, so a change between the look and the
/// wait is not missed.
pub(crate) async fn wait_until(notify: &Notify, done: impl Fn() -> bool) {
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if done() {
            return;
        }
        notified.await;
    }
}

/// The waits of [`Queue::drained_to`] on one queue: woken after a pop, or at close, only
/// while one is waiting (a pop then costs one atomic load).
#[derive(Debug, Default)]
pub(crate) struct Drains {
    waiting: std::sync::atomic::AtomicUsize,
    popped: Notify,
}

impl Drains {
    /// Waits until `done(state)` (read under the queue's lock) is true, looking again after
    /// each pop. The waiter is counted before it first looks, so a pop after that look wakes
    /// it.
    pub(crate) async fn wait<S>(&self, state: &parking_lot::Mutex<S>, done: impl Fn(&S) -> bool) {
        struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _counted = Counted(&self.waiting);
        wait_until(&self.popped, || done(&state.lock())).await;
    }

    /// After a pop (its lock released) or a close: wakes the waiters, if any.
    pub(crate) fn popped(&self) {
        if self.waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            self.popped.notify_waiters();
        }
    }
}

/// The object a tombstone for `key` carries at the end of a relist from empty, given the
/// key's last queued delta: none when that delta is a deletion (or the key is nowhere), its
/// object when it is another, the store's object when nothing is queued for it.
pub(crate) fn unlisted_survivor<K>(key: &ObjectKey, last: Option<&crate::delta::Delta<K>>, known: &crate::indexer::Indexer<K>) -> Option<Arc<K>> {
    match last {
        Some(d) if d.kind == crate::delta::DeltaType::Deleted => None,
        Some(d) => Some(d.object.object().clone()),
        None => known.get(key.as_str()),
    }
}

/// [`Queue::reuse_unchanged`] against `known`, the queue's store. The store is read under
/// one view, taken and dropped here: never while the queue's lock is held, since a pop
/// writes the store under that lock.
pub(crate) fn reuse_unchanged<K: kube_core::Resource>(known: &crate::indexer::Indexer<K>, objs: &mut [(ObjectKey, Arc<K>)]) {
    let view = known.read();
    if view.is_empty() {
        return;
    }
    for (key, obj) in objs.iter_mut() {
        if let Some((held_key, held)) = view.get_entry(key.as_str()) {
            if !Arc::ptr_eq(held, obj) && same_resource_version(&**held, &**obj) {
                *key = held_key.clone();
                *obj = held.clone();
            }
        }
    }
}

/// Whether `held` and `listed` carry the same, non-empty resourceVersion: the server changes
/// an object's resourceVersion on every write, so they are the same state of one object.
pub(crate) fn same_resource_version<K: kube_core::Resource>(held: &K, listed: &K) -> bool {
    let held = held.meta().resource_version.as_deref().unwrap_or("");
    !held.is_empty() && Some(held) == listed.meta().resource_version.as_deref()
}

/// The key of an object about to be queued; `None`, logged, for one without `metadata.name`
/// (which the queues drop).
pub(crate) fn key_or_warn<K: kube_core::Resource>(obj: &K) -> Option<ObjectKey> {
    let key = ObjectKey::of(obj);
    if key.is_none() {
        tracing::warn!("dropping an object without metadata.name");
    }
    key
}

/// The kind of delta a watch event given to [`Queue::watched`] as `kind` queues: `Added`
/// and `Deleted` as they are, any other as `Updated`.
pub(crate) fn watched_kind(kind: DeltaType) -> DeltaType {
    match kind {
        DeltaType::Added | DeltaType::Deleted => kind,
        _ => DeltaType::Updated,
    }
}

/// The deltas of watch events given to [`Queue::watched`], keyed (those without
/// `metadata.name` dropped, logged) before the queue's lock is taken.
pub(crate) fn watched_deltas<K: kube_core::Resource>(events: &mut Vec<(DeltaType, Arc<K>)>) -> Vec<Delta<K>> {
    events.drain(..).filter_map(|(kind, obj)| Some(Delta::new(watched_kind(kind), key_or_warn(&*obj)?, obj))).collect()
}

/// Which queue an informer uses between its reflector and its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// Events are applied in arrival order, one by one, with no per-key merging
    /// (client-go's `RealFIFO`, its default since the `InOrderInformers` gate went on).
    ///
    /// This is the default: handlers see every change in the order the server made it,
    /// across keys, which is what controllers reason about; and it keeps no per-key
    /// delta lists.
    #[default]
    InOrder,
    /// Deltas are grouped per key and a key is popped once with all its pending deltas
    /// (client-go's `DeltaFIFO`). Order across keys is that of each key's first pending
    /// delta.
    DeltaFifo,
}

/// Tracks when a queue's initial population has been popped (shared by both queues), and
/// wakes the waiters of [`Population::synced_notify`] when it has.
#[derive(Debug, Default)]
pub(crate) struct Population {
    populated: bool,
    initial_remaining: usize,
    synced: Arc<Notify>,
}

impl Population {
    /// Marks the queue populated, counting `queued` batches as the initial population.
    pub(crate) fn populate(&mut self, queued: usize) {
        if !self.populated {
            self.populated = true;
            self.initial_remaining = queued;
            self.wake_if_synced();
        }
    }

    /// Notified once `has_synced` turns true.
    pub(crate) fn synced_notify(&self) -> Arc<Notify> {
        self.synced.clone()
    }

    fn wake_if_synced(&self) {
        if self.has_synced() {
            self.synced.notify_waiters();
        }
    }

    /// True once populated and every initial batch has been popped.
    pub(crate) fn has_synced(&self) -> bool {
        self.populated && self.initial_remaining == 0
    }

    /// Accounts for one pop; returns its `is_in_initial_list`.
    pub(crate) fn on_pop(&mut self) -> bool {
        let initial = !self.has_synced();
        if self.initial_remaining > 0 {
            self.initial_remaining -= 1;
            self.wake_if_synced();
        }
        initial
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::same_resource_version;

    fn at(rv: Option<&str>) -> ConfigMap {
        ConfigMap { metadata: ObjectMeta { resource_version: rv.map(Into::into), ..Default::default() }, ..Default::default() }
    }

    #[test]
    fn only_an_equal_non_empty_resource_version_is_the_same_state() {
        assert!(same_resource_version(&at(Some("7")), &at(Some("7"))));
        assert!(!same_resource_version(&at(Some("7")), &at(Some("8"))));
        assert!(!same_resource_version(&at(Some("7")), &at(None)));
        assert!(!same_resource_version(&at(None), &at(None)));
        assert!(!same_resource_version(&at(Some("")), &at(Some(""))));
    }
}
