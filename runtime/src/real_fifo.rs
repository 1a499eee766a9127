//! `InOrderFifo`: a queue that keeps every delta in arrival order (client-go's `RealFIFO`).
//!
//! Invariants:
//! - Deltas pop in exactly the order they were queued, one per pop; nothing is merged.
//! - After `replace_finish(seen)`, a tombstone is queued for each key not in `seen` whose
//!   state after all queued deltas would be "present": its last queued delta is not
//!   `Deleted`, or it has no queued delta and is in the store.
//! - A `Sync` delta is only queued for a stored key with no pending delta.
//! - A relist's objects are queued as their pages arrive and its tombstones after the last
//!   page, so handlers see the relisted objects first and the tombstones last (client-go's
//!   RealFIFO, which holds the whole list, queues the tombstones first).

use std::collections::VecDeque;
use std::sync::Arc;

use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::delta::{Delta, DeltaType};
use crate::deltas::Deltas;
use crate::indexer::Indexer;
use crate::key::{FastMap, KeySet, ObjectKey};
use crate::queue::{Backlog, Drains, Popped, Population, Queue, key_or_warn, pop_locked, reuse_unchanged, unlisted_survivor, watched_deltas};

struct State<K> {
    items: VecDeque<Delta<K>>,
    population: Population,
    closed: bool,
}

/// A queue applying events in arrival order; see the module documentation.
pub struct InOrderFifo<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    drains: Drains,
    known: Arc<Indexer<K>>,
}

impl<K: Resource + Send + Sync + 'static> InOrderFifo<K> {
    /// A queue whose deletion detection and resync read `known` (the informer's store).
    pub fn new(known: Arc<Indexer<K>>) -> Self {
        InOrderFifo {
            state: Mutex::new(State { items: VecDeque::new(), population: Population::default(), closed: false }),
            notify: Notify::new(),
            drains: Drains::default(),
            known,
        }
    }

    fn queue_object(&self, kind: DeltaType, obj: Arc<K>, populate: bool) {
        let Some(key) = key_or_warn(&*obj) else { return };
        self.queue_deltas(std::iter::once(Delta::new(kind, key, obj)), populate);
    }

    /// Queues `deltas` in order under one lock, with one wake of a waiting pop. With
    /// `populate` (a watch event's), first marks the queue populated: what was queued before
    /// is the initial population.
    fn queue_deltas(&self, deltas: impl IntoIterator<Item = Delta<K>>, populate: bool) {
        let mut st = self.state.lock();
        if populate {
            let queued = st.items.len();
            st.population.populate(queued);
        }
        st.items.extend(deltas);
        self.notify.notify_one();
    }
}

impl<K: Resource + Send + Sync + 'static> Queue<K> for InOrderFifo<K> {
    fn add(&self, obj: Arc<K>) {
        self.queue_object(DeltaType::Added, obj, true);
    }

    fn update(&self, obj: Arc<K>) {
        self.queue_object(DeltaType::Updated, obj, true);
    }

    fn delete(&self, obj: Arc<K>) {
        self.queue_object(DeltaType::Deleted, obj, true);
    }

    fn watched(&self, events: &mut Vec<(DeltaType, Arc<K>)>) {
        let deltas = watched_deltas(events);
        if !deltas.is_empty() {
            self.queue_deltas(deltas, true);
        }
    }

    fn replace_item(&self, obj: Arc<K>) {
        self.queue_object(DeltaType::Replaced, obj, false);
    }

    fn replace_items(&self, objs: Vec<(ObjectKey, Arc<K>)>) {
        self.queue_deltas(objs.into_iter().map(|(key, obj)| Delta::new(DeltaType::Replaced, key, obj)), false);
    }

    fn reuse_unchanged(&self, objs: &mut [(ObjectKey, Arc<K>)]) {
        reuse_unchanged(&self.known, objs);
    }

    fn replace_finish(&self, seen: &KeySet) {
        let mut st = self.state.lock();
        // The last queued delta of each pending key decides its state after the queue drains.
        let mut last: FastMap<&ObjectKey, &Delta<K>> = FastMap::default();
        for d in st.items.iter() {
            last.insert(&d.key, d);
        }
        let mut tombstones: Vec<Delta<K>> = Vec::new();
        for (key, d) in &last {
            if !seen.contains(*key) && d.kind != DeltaType::Deleted {
                tombstones.push(Delta::tombstone((*key).clone(), d.object.object().clone()));
            }
        }
        self.known.for_each(|key, obj| {
            if !seen.contains(key) && !last.contains_key(key) {
                tombstones.push(Delta::tombstone(key.clone(), obj.clone()));
            }
        });
        drop(last);
        st.items.extend(tombstones);
        let queued = st.items.len();
        st.population.populate(queued);
        self.notify.notify_one();
    }

    fn replace_finish_from_empty(&self, unlisted: &KeySet) {
        let mut st = self.state.lock();
        if !unlisted.is_empty() {
            let mut last: FastMap<&ObjectKey, &Delta<K>> = FastMap::default();
            for d in st.items.iter().filter(|d| unlisted.contains(&d.key)) {
                last.insert(&d.key, d);
            }
            let mut tombstones: Vec<Delta<K>> = Vec::new();
            for key in unlisted {
                let survivor = unlisted_survivor(key, last.get(key).copied(), &self.known);
                tombstones.extend(survivor.map(|obj| Delta::tombstone(key.clone(), obj)));
            }
            drop(last);
            st.items.extend(tombstones);
        }
        let queued = st.items.len();
        st.population.populate(queued);
        self.notify.notify_one();
    }

    fn knows_nothing(&self) -> bool {
        let st = self.state.lock();
        st.items.is_empty() && self.known.is_empty()
    }

    fn resync(&self) {
        let mut st = self.state.lock();
        let pending: KeySet = st.items.iter().map(|d| d.key.clone()).collect();
        let mut added = false;
        self.known.for_each(|key, obj| {
            if !pending.contains(key) {
                st.items.push_back(Delta::new(DeltaType::Sync, key.clone(), obj.clone()));
                added = true;
            }
        });
        if added {
            self.notify.notify_one();
        }
    }

    async fn pop<'a, R: Send + 'a>(&'a self, apply: impl FnOnce(Popped<K>) -> R + Send + 'a) -> Option<R> {
        let take = |st: &mut State<K>| {
            let delta = st.items.pop_front()?;
            st.items.release_drained();
            Some(Popped { deltas: Deltas::one(delta), is_in_initial_list: st.population.on_pop() })
        };
        pop_locked(&self.notify, &self.drains, &self.state, |st| st.closed, take, apply).await
    }

    fn drained_to(&self, n: usize) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.drains.wait(&self.state, move |st| st.closed || st.items.len() <= n)
    }

    fn has_synced(&self) -> bool {
        self.state.lock().population.has_synced()
    }
    fn synced_notify(&self) -> Arc<tokio::sync::Notify> {
        self.state.lock().population.synced_notify()
    }

    fn len(&self) -> usize {
        self.state.lock().items.len()
    }

    fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.items.clear();
        drop(st);
        self.notify.notify_waiters();
        self.notify.notify_one();
        self.drains.popped();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::DRAINED_CAPACITY;
    use crate::queue::test_support::{cm, pops_allocate_nothing, regrows_in_order, reuses_unchanged};

    /// A list's backlog is given back once popped, and only once the queue is empty.
    #[tokio::test]
    async fn a_drained_backlog_is_not_kept() {
        let q = InOrderFifo::new(Arc::new(Indexer::new()));
        q.replace_items((0..1000).map(cm).collect());
        let backlog = q.state.lock().items.capacity();
        assert!(backlog >= 1000);
        for _ in 0..999 {
            q.pop(|_| ()).await.unwrap();
            assert_eq!(q.state.lock().items.capacity(), backlog, "shrunk with deltas still queued");
        }
        q.pop(|_| ()).await.unwrap();
        assert!(q.is_empty());
        assert!(q.state.lock().items.capacity() <= DRAINED_CAPACITY);
        regrows_in_order(&q, 200).await;
    }

    #[test]
    fn a_relisted_object_the_store_holds_unchanged_is_swapped_for_the_held_one() {
        let known = Arc::new(Indexer::new());
        reuses_unchanged(&InOrderFifo::new(known.clone()), &known);
    }

    #[test]
    fn a_pop_hands_over_its_delta_without_an_allocation() {
        pops_allocate_nothing(&InOrderFifo::new(Arc::new(Indexer::new())));
    }
}
