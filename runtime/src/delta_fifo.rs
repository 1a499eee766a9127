//! `DeltaFifo`: a queue of per-key delta lists (client-go's `DeltaFIFO`).
//!
//! Invariants:
//! - Each key appears at most once in `order`, exactly when `items` holds a non-empty delta
//!   list for it. A key keeps its place while more deltas are appended to it.
//! - Two consecutive `Deleted` deltas of one key collapse into one; the one seen by the
//!   watch wins over a tombstone.
//! - A `Sync` delta is only queued for a key with no pending deltas.
//! - After `replace_finish(seen)`, each key not in `seen` that is pending in the queue with a
//!   last delta other than `Deleted`, or that is in the store, has a tombstone queued.

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
    items: FastMap<ObjectKey, Deltas<K>>,
    order: VecDeque<ObjectKey>,
    population: Population,
    closed: bool,
}

/// A queue that groups deltas per key; see the module documentation.
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    drains: Drains,
    known: Arc<Indexer<K>>,
}

impl<K: Resource + Send + Sync + 'static> DeltaFifo<K> {
    /// A queue whose deletion detection and resync read `known` (the informer's store).
    pub fn new(known: Arc<Indexer<K>>) -> Self {
        DeltaFifo {
            state: Mutex::new(State {
                items: FastMap::default(),
                order: VecDeque::new(),
                population: Population::default(),
                closed: false,
            }),
            notify: Notify::new(),
            drains: Drains::default(),
            known,
        }
    }

    fn push(&self, st: &mut State<K>, delta: Delta<K>) {
        let key = delta.key.clone();
        let list = st.items.entry(key.clone()).or_default();
        if delta.kind == DeltaType::Sync && !list.is_empty() {
            return;
        }
        let was_empty = list.is_empty();
        list.push(delta);
        dedup_deletions(list);
        if was_empty {
            st.order.push_back(key);
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
            let queued = st.order.len();
            st.population.populate(queued);
        }
        for delta in deltas {
            self.push(&mut st, delta);
        }
        self.notify.notify_one();
    }
}

fn dedup_deletions<K>(list: &mut Deltas<K>) {
    let n = list.len();
    if n < 2 {
        return;
    }
    let (a, b) = (&list[n - 2], &list[n - 1]);
    if a.kind == DeltaType::Deleted && b.kind == DeltaType::Deleted {
        // Keep the observed deletion over a tombstone; otherwise the newer one.
        if b.is_tombstone() {
            list.pop();
        } else {
            list.remove(n - 2);
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Queue<K> for DeltaFifo<K> {
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
        let mut tombstones: Vec<(ObjectKey, Arc<K>)> = Vec::new();
        for (key, deltas) in st.items.iter() {
            if seen.contains(key) {
                continue;
            }
            if let Some(last) = deltas.last() {
                if last.kind != DeltaType::Deleted {
                    tombstones.push((key.clone(), last.object.object().clone()));
                }
            }
        }
        let pending: KeySet = tombstones.iter().map(|(k, _)| k.clone()).collect();
        self.known.for_each(|key, obj| {
            if !seen.contains(key) && !pending.contains(key) {
                let already_deleted = st
                    .items
                    .get(key)
                    .and_then(|d| d.last())
                    .is_some_and(|d| d.kind == DeltaType::Deleted);
                if !already_deleted {
                    tombstones.push((key.clone(), obj.clone()));
                }
            }
        });
        for (key, obj) in tombstones {
            self.push(&mut st, Delta::tombstone(key, obj));
        }
        let queued = st.order.len();
        st.population.populate(queued);
        self.notify.notify_one();
    }

    fn replace_finish_from_empty(&self, unlisted: &KeySet) {
        let mut st = self.state.lock();
        let mut tombstones: Vec<(ObjectKey, Arc<K>)> = Vec::new();
        for key in unlisted {
            let last = st.items.get(key).and_then(|deltas| deltas.last());
            tombstones.extend(unlisted_survivor(key, last, &self.known).map(|obj| (key.clone(), obj)));
        }
        for (key, obj) in tombstones {
            self.push(&mut st, Delta::tombstone(key, obj));
        }
        let queued = st.order.len();
        st.population.populate(queued);
        self.notify.notify_one();
    }

    fn knows_nothing(&self) -> bool {
        let st = self.state.lock();
        st.items.is_empty() && self.known.is_empty()
    }

    fn resync(&self) {
        let mut st = self.state.lock();
        for (key, obj) in self.known.entries() {
            self.push(&mut st, Delta::new(DeltaType::Sync, key, obj));
        }
        self.notify.notify_one();
    }

    async fn pop<'a, R: Send + 'a>(&'a self, apply: impl FnOnce(Popped<K>) -> R + Send + 'a) -> Option<R> {
        let take = |st: &mut State<K>| {
            let key = st.order.pop_front()?;
            let deltas = st.items.remove(&key).unwrap_or_default();
            st.order.release_drained();
            st.items.release_drained();
            Some(Popped { deltas, is_in_initial_list: st.population.on_pop() })
        };
        pop_locked(&self.notify, &self.drains, &self.state, |st| st.closed, take, apply).await
    }

    fn drained_to(&self, n: usize) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.drains.wait(&self.state, move |st| st.closed || st.order.len() <= n)
    }

    fn has_synced(&self) -> bool {
        self.state.lock().population.has_synced()
    }
    fn synced_notify(&self) -> Arc<tokio::sync::Notify> {
        self.state.lock().population.synced_notify()
    }

    fn len(&self) -> usize {
        self.state.lock().order.len()
    }

    fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.items.clear();
        st.order.clear();
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
    use k8s_openapi::api::core::v1::ConfigMap;

    /// A list's backlog (keys in order, delta lists by key) is given back once popped.
    #[tokio::test]
    async fn a_drained_backlog_is_not_kept() {
        let q = DeltaFifo::new(Arc::new(Indexer::new()));
        q.replace_items((0..1000).map(cm).collect());
        let capacities = |q: &DeltaFifo<ConfigMap>| {
            let st = q.state.lock();
            (st.order.capacity(), st.items.capacity())
        };
        let (order, items) = capacities(&q);
        assert!(order >= 1000 && items >= 1000);
        while q.len() > 1 {
            q.pop(|_| ()).await.unwrap();
        }
        // Removals may leave tombstones, which lower a map's reported capacity without a shrink.
        let (order_left, items_left) = capacities(&q);
        assert!(order_left == order && items_left > (items - 1000).max(2 * DRAINED_CAPACITY), "shrunk with deltas still queued");
        q.pop(|_| ()).await.unwrap();
        let (order, items) = capacities(&q);
        assert!(order <= DRAINED_CAPACITY && items < 2 * DRAINED_CAPACITY, "{order} {items}");
        regrows_in_order(&q, 200).await;
    }

    #[test]
    fn a_relisted_object_the_store_holds_unchanged_is_swapped_for_the_held_one() {
        let known = Arc::new(Indexer::new());
        reuses_unchanged(&DeltaFifo::new(known.clone()), &known);
    }

    #[test]
    fn a_pop_hands_over_its_key_s_delta_without_an_allocation() {
        pops_allocate_nothing(&DeltaFifo::new(Arc::new(Indexer::new())));
    }
}
