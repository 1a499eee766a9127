//! The DeltaFIFO and the in-order FIFO against client-go's semantics.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::cm;
use informer_runtime::{DeltaFifo, DeltaType, InOrderFifo, Indexer, KeySet, ObjectKey, Popped, Queue};
use k8s_openapi::api::core::v1::ConfigMap;

fn arc(ns: &str, name: &str, rv: &str) -> Arc<ConfigMap> {
    let mut o = cm(ns, name, &[]);
    o.metadata.resource_version = Some(rv.into());
    Arc::new(o)
}

fn seen(keys: &[&str]) -> KeySet {
    keys.iter().map(|k| ObjectKey::from(*k)).collect()
}

async fn pop<Q: Queue<ConfigMap>>(q: &Q) -> Popped<ConfigMap> {
    q.pop(|p| p).await.expect("queue open")
}

fn kinds(p: &Popped<ConfigMap>) -> Vec<(String, DeltaType, bool)> {
    p.deltas.iter().map(|d| (d.key.to_string(), d.kind, d.is_tombstone())).collect()
}

#[tokio::test]
async fn delta_fifo_merges_per_key_and_keeps_first_position() {
    let store = Arc::new(Indexer::new());
    let q = DeltaFifo::new(store);
    q.add(arc("ns", "a", "1"));
    q.add(arc("ns", "b", "2"));
    q.update(arc("ns", "a", "3"));
    assert_eq!(q.len(), 2);
    let p = pop(&q).await;
    assert_eq!(kinds(&p), vec![("ns/a".into(), DeltaType::Added, false), ("ns/a".into(), DeltaType::Updated, false)]);
    let p = pop(&q).await;
    assert_eq!(kinds(&p), vec![("ns/b".into(), DeltaType::Added, false)]);
}

#[tokio::test]
async fn delta_fifo_dedups_consecutive_deletes_preferring_observed() {
    let store = Arc::new(Indexer::new());
    store.upsert("ns/a".into(), arc("ns", "a", "1"));
    let q = DeltaFifo::new(store.clone());
    q.replace_finish(&seen(&[])); // tombstone for ns/a from the store
    q.delete(arc("ns", "a", "2")); // the watch's delete
    let p = pop(&q).await;
    assert_eq!(kinds(&p), vec![("ns/a".into(), DeltaType::Deleted, false)]);
    assert_eq!(p.deltas[0].object.object().metadata.resource_version.as_deref(), Some("2"));
}

#[tokio::test]
async fn delta_fifo_tombstones_from_queue_and_store() {
    let store = Arc::new(Indexer::new());
    store.upsert("ns/stored".into(), arc("ns", "stored", "1"));
    store.upsert("ns/kept".into(), arc("ns", "kept", "1"));
    let q = DeltaFifo::new(store.clone());
    q.add(arc("ns", "queued", "2"));
    q.replace_item(arc("ns", "kept", "3"));
    q.replace_finish(&seen(&["ns/kept"]));
    let mut all = Vec::new();
    while !q.is_empty() {
        all.extend(kinds(&pop(&q).await));
    }
    assert_eq!(
        all,
        vec![
            ("ns/queued".into(), DeltaType::Added, false),
            ("ns/queued".into(), DeltaType::Deleted, true),
            ("ns/kept".into(), DeltaType::Replaced, false),
            ("ns/stored".into(), DeltaType::Deleted, true),
        ]
    );
}

async fn check_sync_flip<Q: Queue<ConfigMap>>(q: Q) {
    q.replace_item(arc("ns", "a", "1"));
    q.replace_item(arc("ns", "b", "1"));
    assert!(!q.has_synced(), "not synced before replace_finish");
    q.replace_finish(&seen(&["ns/a", "ns/b"]));
    assert!(!q.has_synced(), "not synced before the pops");
    assert!(pop(&q).await.is_in_initial_list, "first pop is in the initial list");
    assert!(!q.has_synced());
    assert!(pop(&q).await.is_in_initial_list, "second pop is in the initial list");
    assert!(q.has_synced(), "synced after the last initial pop");
    q.add(arc("ns", "c", "2"));
    assert!(!pop(&q).await.is_in_initial_list, "later pops are not initial");
}

#[tokio::test]
async fn has_synced_flips_after_the_initial_population_is_popped() {
    check_sync_flip(InOrderFifo::new(Arc::new(Indexer::new()))).await;
    check_sync_flip(DeltaFifo::new(Arc::new(Indexer::new()))).await;
}

#[tokio::test]
async fn empty_initial_list_is_synced_at_once() {
    let q = InOrderFifo::new(Arc::new(Indexer::<ConfigMap>::new()));
    assert!(!q.has_synced());
    q.replace_finish(&KeySet::default());
    assert!(q.has_synced());
}

#[tokio::test]
async fn in_order_fifo_keeps_every_event_in_order() {
    let store = Arc::new(Indexer::new());
    let q = InOrderFifo::new(store.clone());
    q.add(arc("ns", "a", "1"));
    q.add(arc("ns", "b", "2"));
    q.update(arc("ns", "a", "3"));
    q.delete(arc("ns", "a", "4"));
    assert_eq!(q.len(), 4);
    let mut all = Vec::new();
    while !q.is_empty() {
        all.extend(kinds(&pop(&q).await));
    }
    assert_eq!(
        all,
        vec![
            ("ns/a".into(), DeltaType::Added, false),
            ("ns/b".into(), DeltaType::Added, false),
            ("ns/a".into(), DeltaType::Updated, false),
            ("ns/a".into(), DeltaType::Deleted, false),
        ]
    );
}

#[tokio::test]
async fn in_order_fifo_relist_tombstones_only_keys_that_would_survive() {
    let store = Arc::new(Indexer::new());
    store.upsert("ns/stored".into(), arc("ns", "stored", "1"));
    store.upsert("ns/gone-in-queue".into(), arc("ns", "gone-in-queue", "1"));
    let q = InOrderFifo::new(store.clone());
    q.delete(arc("ns", "gone-in-queue", "2")); // already deleted by a queued event
    q.add(arc("ns", "pending", "3"));
    q.replace_finish(&seen(&[]));
    let mut all = Vec::new();
    while !q.is_empty() {
        all.extend(kinds(&pop(&q).await));
    }
    let tombstones: HashSet<String> = all.iter().filter(|(_, _, t)| *t).map(|(k, _, _)| k.clone()).collect();
    assert_eq!(tombstones, HashSet::from(["ns/stored".to_string(), "ns/pending".to_string()]));
}

#[tokio::test]
async fn resync_skips_keys_with_pending_deltas() {
    let store = Arc::new(Indexer::new());
    store.upsert("ns/a".into(), arc("ns", "a", "1"));
    store.upsert("ns/b".into(), arc("ns", "b", "1"));
    let q = DeltaFifo::new(store.clone());
    q.update(arc("ns", "a", "2"));
    q.resync();
    let mut all = Vec::new();
    while !q.is_empty() {
        all.extend(kinds(&pop(&q).await));
    }
    assert_eq!(all, vec![("ns/a".into(), DeltaType::Updated, false), ("ns/b".into(), DeltaType::Sync, false)]);
}

#[tokio::test]
async fn close_wakes_a_waiting_pop() {
    let q = Arc::new(InOrderFifo::new(Arc::new(Indexer::<ConfigMap>::new())));
    let q2 = q.clone();
    let waiter = tokio::spawn(async move { q2.pop(|p| p.deltas.len()).await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    q.close();
    assert_eq!(waiter.await.unwrap(), None);
}


/// Everything popped after a relist of `objs` (through `relist`) and its `replace_finish`.
async fn relisted<Q: Queue<ConfigMap>>(q: Q, relist: impl Fn(&Q, Vec<Arc<ConfigMap>>)) -> Vec<(String, DeltaType, bool, String)> {
    let objs = vec![arc("ns", "a", "1"), arc("ns", "b", "1"), arc("ns", "a", "2"), arc("other", "c", "1")];
    q.add(arc("ns", "gone", "1"));
    relist(&q, objs);
    q.replace_finish(&seen(&["ns/a", "ns/b", "other/c"]));
    let mut all = Vec::new();
    while !q.is_empty() {
        let p = pop(&q).await;
        all.extend(p.deltas.iter().map(|d| {
            let rv = d.object.object().metadata.resource_version.clone().unwrap();
            (d.key.to_string(), d.kind, d.is_tombstone(), rv)
        }));
    }
    all
}

#[tokio::test]
async fn replace_items_queues_what_replace_item_on_each_does() {
    let one_by_one = |q: &dyn Fn(Arc<ConfigMap>), objs: Vec<Arc<ConfigMap>>| objs.into_iter().for_each(q);
    let keyed = |objs: Vec<Arc<ConfigMap>>| -> Vec<(ObjectKey, Arc<ConfigMap>)> {
        objs.into_iter().map(|o| (ObjectKey::of(&*o).unwrap(), o)).collect()
    };
    let new_in_order = || InOrderFifo::new(Arc::new(Indexer::new()));
    let expected = relisted(new_in_order(), |q, objs| one_by_one(&|o| q.replace_item(o), objs)).await;
    assert_eq!(expected.len(), 6, "four replaced, one added, one tombstone: {expected:?}");
    assert_eq!(relisted(new_in_order(), |q, objs| q.replace_items(keyed(objs))).await, expected);
    let new_delta = || DeltaFifo::new(Arc::new(Indexer::new()));
    let expected = relisted(new_delta(), |q, objs| one_by_one(&|o| q.replace_item(o), objs)).await;
    assert_eq!(expected.len(), 6, "per key: [gone added, tombstone], [a 1, a 2], [b], [c]: {expected:?}");
    assert_eq!(relisted(new_delta(), |q, objs| q.replace_items(keyed(objs))).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_items_wakes_a_waiting_pop() {
    async fn check<Q: Queue<ConfigMap> + 'static>(q: Arc<Q>) {
        let popper = tokio::spawn({
            let q = q.clone();
            async move { q.pop(|p| kinds(&p)).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let obj = arc("ns", "a", "1");
        q.replace_items(vec![(ObjectKey::of(&*obj).unwrap(), obj)]);
        let popped = tokio::time::timeout(std::time::Duration::from_secs(10), popper).await;
        assert_eq!(popped.expect("woken").unwrap(), Some(vec![("ns/a".into(), DeltaType::Replaced, false)]));
    }
    check(Arc::new(InOrderFifo::new(Arc::new(Indexer::new())))).await;
    check(Arc::new(DeltaFifo::new(Arc::new(Indexer::new())))).await;
}

/// A first relist on a fresh queue, partly popped into the store and ended one way or the
/// other; returns everything popped after it ended, sorted, with its objects' versions.
async fn first_relist<Q: Queue<ConfigMap>>(q: Q, store: Arc<Indexer<ConfigMap>>, from_empty: bool) -> Vec<(String, DeltaType, bool, String)> {
    assert!(q.knows_nothing(), "a fresh queue over an empty store knows nothing");
    q.replace_items(["a", "b", "c", "d"].iter().map(|n| (ObjectKey::new(Some("ns"), n), arc("ns", n, "1"))).collect());
    // The informer applies the first two while the relist goes on.
    for _ in 0..2 {
        q.pop(|p| {
            for d in p.deltas {
                store.upsert(d.key.clone(), d.object.object().clone());
            }
        })
        .await
        .unwrap();
    }
    assert!(!q.knows_nothing(), "queued and stored keys are known");
    q.delete(arc("ns", "d", "2"));
    // a (stored), c (queued), d (queued, deleted last) and z (never seen) went away
    // before the relist ended; b was listed.
    if from_empty {
        q.replace_finish_from_empty(&seen(&["ns/a", "ns/c", "ns/d", "ns/z"]));
    } else {
        q.replace_finish(&seen(&["ns/b"]));
    }
    let mut all = Vec::new();
    while !q.is_empty() {
        for d in pop(&q).await.deltas {
            let rv = d.object.object().metadata.resource_version.clone().unwrap_or_default();
            all.push((d.key.to_string(), d.kind, d.is_tombstone(), rv));
        }
    }
    assert!(q.has_synced());
    all.sort_by_key(|d| format!("{d:?}"));
    all
}

#[tokio::test]
async fn a_relist_from_empty_ends_as_one_with_every_key_it_saw() {
    let in_order = |from_empty| {
        let store = Arc::new(Indexer::new());
        first_relist(InOrderFifo::new(store.clone()), store, from_empty)
    };
    let (full, from_empty) = (in_order(false).await, in_order(true).await);
    assert_eq!(from_empty, full);
    let tombstones: Vec<_> = full.iter().filter(|d| d.2).map(|d| (d.0.as_str(), d.3.as_str())).collect();
    assert_eq!(tombstones, [("ns/a", "1"), ("ns/c", "1")], "a from the store, c from the queue; d is deleted already");
    let delta = |from_empty| {
        let store = Arc::new(Indexer::new());
        first_relist(DeltaFifo::new(store.clone()), store, from_empty)
    };
    let (full, from_empty) = (delta(false).await, delta(true).await);
    assert_eq!(from_empty, full);
    assert_eq!(full.iter().filter(|d| d.2).map(|d| d.0.as_str()).collect::<Vec<_>>(), ["ns/a", "ns/c"]);
}

#[tokio::test]
async fn an_empty_first_relist_from_empty_is_synced_at_once() {
    let q = InOrderFifo::new(Arc::new(Indexer::<ConfigMap>::new()));
    q.replace_finish_from_empty(&KeySet::default());
    assert!(q.has_synced());
    let q = DeltaFifo::new(Arc::new(Indexer::<ConfigMap>::new()));
    q.replace_finish_from_empty(&KeySet::default());
    assert!(q.has_synced());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drained_to_waits_for_pops_down_to_its_bound_or_for_close() {
    for delta_fifo in [false, true] {
        let store = Arc::new(Indexer::new());
        let q: Arc<dyn QueueOf> = if delta_fifo { Arc::new(DeltaFifo::new(store)) } else { Arc::new(InOrderFifo::new(store)) };
        for i in 0..10 {
            q.push(arc("ns", &format!("cm{i}"), "1"));
        }
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.drained_to_boxed(7).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "10 queued, waiting for 7 ({delta_fifo})");
        q.pop_one().await;
        q.pop_one().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "8 queued ({delta_fifo})");
        q.pop_one().await;
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.expect("woken at 7").unwrap();
        // Already at or below the bound: no wait; a closed queue ends the wait.
        tokio::time::timeout(std::time::Duration::from_secs(5), q.drained_to_boxed(7)).await.unwrap();
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.drained_to_boxed(0).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        q.shut();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.expect("woken by close").unwrap();
    }
}

/// Either queue behind one object-safe face, for the test above.
trait QueueOf: Send + Sync {
    fn push(&self, obj: Arc<ConfigMap>);
    fn shut(&self);
    fn pop_one(&self) -> futures::future::BoxFuture<'_, ()>;
    fn drained_to_boxed(&self, n: usize) -> futures::future::BoxFuture<'_, ()>;
}

impl<Q: Queue<ConfigMap>> QueueOf for Q {
    fn push(&self, obj: Arc<ConfigMap>) {
        Queue::add(self, obj);
    }
    fn shut(&self) {
        Queue::close(self);
    }
    fn pop_one(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async move {
            self.pop(|_| ()).await.expect("queue open");
        })
    }
    fn drained_to_boxed(&self, n: usize) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.drained_to(n))
    }
}

/// Watch events queued either one call each or all through `watched`, then everything
/// popped: keys, kinds and versions, with each pop's `is_in_initial_list`, and whether the
/// queue counted as synced after each pop.
async fn watched_events<Q: Queue<ConfigMap>>(q: Q, at_once: bool) -> Vec<(String, DeltaType, String, bool, bool)> {
    let mut nameless = cm("ns", "x", &[]);
    nameless.metadata.name = None;
    let events = vec![
        (DeltaType::Added, arc("ns", "a", "1")),
        (DeltaType::Added, arc("ns", "b", "2")),
        (DeltaType::Updated, Arc::new(nameless)),
        (DeltaType::Updated, arc("ns", "a", "3")),
        // Not a watch event's kind: queued as an update.
        (DeltaType::Sync, arc("ns", "b", "4")),
        (DeltaType::Deleted, arc("ns", "a", "5")),
    ];
    if at_once {
        let mut events = events;
        q.watched(&mut events);
        assert!(events.is_empty(), "handed over");
    } else {
        for (kind, obj) in events {
            match kind {
                DeltaType::Added => q.add(obj),
                DeltaType::Deleted => q.delete(obj),
                _ => q.update(obj),
            }
        }
    }
    let mut all = Vec::new();
    while !q.is_empty() {
        let p = pop(&q).await;
        let synced = q.has_synced();
        all.extend(p.deltas.iter().map(|d| {
            let rv = d.object.object().metadata.resource_version.clone().unwrap();
            (d.key.to_string(), d.kind, rv, p.is_in_initial_list, synced)
        }));
    }
    all
}

#[tokio::test]
async fn watched_queues_what_add_update_and_delete_on_each_do() {
    let new_in_order = || InOrderFifo::new(Arc::new(Indexer::new()));
    let expected = watched_events(new_in_order(), false).await;
    let in_order: Vec<_> = expected.iter().map(|(k, kind, rv, _, _)| (k.as_str(), *kind, rv.as_str())).collect();
    assert_eq!(
        in_order,
        vec![
            ("ns/a", DeltaType::Added, "1"),
            ("ns/b", DeltaType::Added, "2"),
            ("ns/a", DeltaType::Updated, "3"),
            ("ns/b", DeltaType::Updated, "4"),
            ("ns/a", DeltaType::Deleted, "5"),
        ],
        "the nameless object dropped"
    );
    // The first event populates the queue with what was queued before it (nothing): synced
    // at once, no pop is of the initial list.
    assert!(expected.iter().all(|e| !e.3 && e.4), "{expected:?}");
    assert_eq!(watched_events(new_in_order(), true).await, expected);
    let new_delta = || DeltaFifo::new(Arc::new(Indexer::new()));
    let expected = watched_events(new_delta(), false).await;
    assert_eq!(expected.len(), 5, "per key: [a 1, a 3, a 5], [b 2, b 4]: {expected:?}");
    assert_eq!(watched_events(new_delta(), true).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_wakes_a_waiting_pop_once_for_all() {
    async fn check<Q: Queue<ConfigMap> + 'static>(q: Arc<Q>) {
        let popper = tokio::spawn({
            let q = q.clone();
            async move { q.pop(|p| kinds(&p)).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        q.watched(&mut vec![(DeltaType::Added, arc("ns", "a", "1")), (DeltaType::Updated, arc("ns", "b", "2"))]);
        let popped = tokio::time::timeout(std::time::Duration::from_secs(10), popper).await;
        assert_eq!(popped.expect("woken").unwrap(), Some(vec![("ns/a".into(), DeltaType::Added, false)]));
        assert_eq!(pop(&*q).await.deltas[0].key.as_str(), "ns/b", "the rest stays queued");
    }
    check(Arc::new(InOrderFifo::new(Arc::new(Indexer::new())))).await;
    check(Arc::new(DeltaFifo::new(Arc::new(Indexer::new())))).await;
}
