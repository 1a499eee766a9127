//! The shared informer end to end over the in-memory API server: lists, watches,
//! relists, tombstones, WatchList, handlers, streams and listers.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Recorder, cm, describe, eventually, key, rv};
use futures::StreamExt;
use informer_runtime::testing::{FakeApiServer, expired_error};
use informer_runtime::{
    Error, Event, HandlerFn, HandlerOptions, InformerOptions, QueueMode, ReflectorConfig, SharedIndexInformer,
    WatchListMode, parse_label_selector, strip_managed_fields,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

fn options(watch_list: WatchListMode, queue_mode: QueueMode) -> InformerOptions {
    InformerOptions {
        resource: "configmaps".into(),
        queue_mode,
        reflector: ReflectorConfig {
            watch_list,
            initial_events_timeout: Duration::from_millis(300),
            ..ReflectorConfig::default()
        },
        ..InformerOptions::default()
    }
}

fn informer(server: &FakeApiServer<ConfigMap>, watch_list: WatchListMode) -> SharedIndexInformer<ConfigMap> {
    SharedIndexInformer::new(server.clone(), options(watch_list, QueueMode::InOrder))
}

fn cache_versions(i: &SharedIndexInformer<ConfigMap>) -> BTreeMap<String, String> {
    i.indexer().entries().into_iter().map(|(k, o)| (k.to_string(), rv(&o))).collect()
}

async fn converged(server: &FakeApiServer<ConfigMap>, i: &SharedIndexInformer<ConfigMap>) {
    eventually(10, "cache equals server", || cache_versions(i) == server.key_versions()).await;
}

/// A server holding `n` ConfigMaps `ns/cm{i}`.
fn server_with(n: usize) -> FakeApiServer<ConfigMap> {
    let server = FakeApiServer::new();
    for i in 0..n {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    server
}

/// A server holding `n` ConfigMaps `ns/cm{i}`, and an informer started and synced over it.
async fn synced_over(n: usize) -> (FakeApiServer<ConfigMap>, SharedIndexInformer<ConfigMap>) {
    let server = server_with(n);
    let inf = informer(&server, WatchListMode::Auto);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    (server, inf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_list_then_watch_converges_with_client_go_resource_versions() {
    let server = FakeApiServer::new();
    for i in 0..1203 {
        server.create(cm(&format!("ns{}", i % 3), &format!("cm{i}"), &[]));
    }
    let inf = informer(&server, WatchListMode::Never);
    let rec = Recorder::default();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    assert!(!inf.has_synced());
    inf.start().unwrap();
    assert!(inf.wait_for_sync().await);
    converged(&server, &inf).await;
    reg.wait_for_sync().await;
    assert_eq!(rec.count("ADD "), 1203);
    assert!(rec.lines().iter().all(|l| l.ends_with(" true")), "initial adds are flagged");

    let lists = server.list_calls();
    assert_eq!(lists.len(), 3, "1203 objects in pages of 500");
    assert_eq!(lists[0].resource_version.as_deref(), Some("0"), "first list at RV 0");
    assert_eq!(lists[0].limit, Some(500));
    assert!(lists[1].continue_token.is_some());
    let watch = &server.watch_calls()[0];
    assert_eq!(watch.resource_version, server.resource_version());
    assert!(watch.allow_watch_bookmarks);
    let t = watch.timeout_seconds.unwrap();
    assert!((300..=600).contains(&t), "watch timeout {t} within 5-10 min");

    let a = server.update(cm("ns0", "cm0", &[("x", "y")]));
    server.delete("ns1/cm1");
    let c = server.create(cm("ns9", "new", &[]));
    converged(&server, &inf).await;
    eventually(5, "handler saw the watch events", || rec.lines().len() == 1206).await;
    let tail = rec.lines()[1203..].to_vec();
    assert_eq!(
        tail,
        vec![
            format!("UPDATE ns0/cm0 2->{}", rv(&a)),
            format!("DELETE ns1/cm1 {}", rv(&a).parse::<u64>().unwrap() + 1),
            format!("ADD ns9/new {} false", rv(&c)),
        ]
    );
    assert_eq!(inf.last_sync_resource_version(), server.resource_version());
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_while_disconnected_arrive_as_tombstones_after_410() {
    for mode in [QueueMode::InOrder, QueueMode::DeltaFifo] {
        for watch_list in [WatchListMode::Never, WatchListMode::Auto] {
            let server = FakeApiServer::new();
            let created: Vec<ConfigMap> = (0..10).map(|i| server.create(cm("ns", &format!("cm{i}"), &[]))).collect();
            let inf = SharedIndexInformer::new(server.clone(), options(watch_list, mode));
            let rec = Recorder::default();
            inf.add_event_handler(rec.clone()).unwrap();
            let errors = Arc::new(AtomicUsize::new(0));
            let e2 = errors.clone();
            inf.set_watch_error_handler(move |_e: &Error| {
                e2.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            inf.start().unwrap();
            inf.wait_for_sync().await;
            converged(&server, &inf).await;

            server.set_reachable(false);
            server.delete("ns/cm3").unwrap();
            server.delete("ns/cm7").unwrap();
            let gone = [&created[3], &created[7]];
            let changed = server.update(cm("ns", "cm5", &[("v", "2")]));
            server.compact();
            server.set_reachable(true);

            converged(&server, &inf).await;
            eventually(10, "tombstones delivered", || rec.count("DELETE ") == 2).await;
            let lines = rec.lines();
            for g in &gone {
                // The tombstone carries the last state the cache knew.
                let expect = format!("DELETE {} {} tombstone", key(g), rv(g));
                assert!(lines.contains(&expect), "{expect} in {lines:?} ({mode:?}, {watch_list:?})");
            }
            assert!(lines.iter().any(|l| l == &format!("UPDATE ns/cm5 {}->{}", rv(&created[5]), rv(&changed))), "{lines:?}");
            assert!(errors.load(Ordering::SeqCst) > 0, "the error hook saw the outage");
            inf.shutdown().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_resource_versions_follow_client_go() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    let inf = informer(&server, WatchListMode::Never);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    let synced_rv = inf.last_sync_resource_version();

    // A watch that fails with 410 relists at the last synced RV (not a consistent read).
    server.fail_next_watch(expired_error());
    server.disconnect_watchers();
    eventually(10, "relisted after watch 410", || server.list_calls().len() == 2).await;
    assert_eq!(server.list_calls()[1].resource_version.as_deref(), Some(synced_rv.as_str()));

    // A list that fails with 410 is retried as a consistent read ("").
    server.fail_next_watch(expired_error());
    server.fail_next_list(expired_error());
    server.disconnect_watchers();
    eventually(10, "consistent relist after list 410", || server.list_calls().len() == 4).await;
    let calls = server.list_calls();
    assert_eq!(calls[2].resource_version.as_deref(), Some(synced_rv.as_str()));
    assert_eq!(calls[3].resource_version.as_deref(), Some(""));
    converged(&server, &inf).await;
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_continue_token_falls_back_to_one_unpaged_list() {
    let server = FakeApiServer::new();
    for i in 0..700 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    server.compact_after_next_page();
    let inf = informer(&server, WatchListMode::Never);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    converged(&server, &inf).await;
    let calls = server.list_calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls[1].continue_token.is_some(), "second page asked with the token");
    assert_eq!(calls[2].continue_token, None, "fallback list has no token");
    assert_eq!(calls[2].limit, None, "fallback list is unpaged");
    assert_eq!(calls[2].resource_version.as_deref(), Some("0"), "at the same resourceVersion");
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_streams_the_initial_state_without_listing() {
    let server = FakeApiServer::new();
    // More than two of the reflector's batches of initial objects (256), and a remainder
    // handed over at the end bookmark.
    for i in 0..600 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    let inf = informer(&server, WatchListMode::Auto);
    let rec = Recorder::default();
    inf.add_event_handler(rec.clone()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    converged(&server, &inf).await;
    assert!(server.list_calls().is_empty(), "no list with WatchList");
    let w = &server.watch_calls()[0];
    assert!(w.send_initial_events && w.allow_watch_bookmarks);
    assert_eq!(inf.reflector_state().used_watch_list(), Some(true));
    // The same stream carries the changes after the end bookmark.
    server.create(cm("ns", "late", &[]));
    converged(&server, &inf).await;
    assert_eq!(server.watch_calls().len(), 1);
    eventually(5, "601 adds", || rec.count("ADD ") == 601).await;
    let initial = rec.lines().iter().filter(|l| l.starts_with("ADD ") && l.ends_with("true")).count();
    assert_eq!(initial, 600, "every object of the initial stream arrives as initial");
    assert_eq!(rec.count("ADD ns/late"), 1);
    assert!(rec.lines().iter().any(|l| l.starts_with("ADD ns/late") && l.ends_with("false")));
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_falls_back_when_refused_and_never_asks_again() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    server.set_watch_list_supported(false);
    let inf = informer(&server, WatchListMode::Auto);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    converged(&server, &inf).await;
    assert_eq!(server.list_calls().len(), 1);
    assert_eq!(inf.reflector_state().used_watch_list(), Some(false));
    // A later relist does not try WatchList again.
    server.expire_watchers();
    server.compact();
    server.create(cm("ns", "b", &[]));
    converged(&server, &inf).await;
    let initial_event_watches = server.watch_calls().iter().filter(|w| w.send_initial_events).count();
    assert_eq!(initial_event_watches, 1);
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_without_end_bookmark_does_not_hang() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    server.set_initial_events_end(false);
    let inf = informer(&server, WatchListMode::Auto);
    inf.start().unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), inf.wait_for_sync()).await.expect("synced through the fallback");
    assert!(started.elapsed() >= Duration::from_millis(250), "waited for the initial-events timeout first");
    assert_eq!(server.list_calls().len(), 1, "fell back to list");
    converged(&server, &inf).await;
    inf.shutdown().await;
}

/// Objects deleted during WatchList's initial events, before the end bookmark, leave the
/// first sync as tombstones, in either queue (the first sync keeps only the keys it saw
/// deleted, not every key it listed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_deleted_during_the_initial_events_of_a_first_sync_are_tombstoned() {
    use kube_core::watch::{Bookmark, BookmarkMeta};
    use kube_core::{TypeMeta, WatchEvent};
    for queue_mode in [QueueMode::InOrder, QueueMode::DeltaFifo] {
        let server = FakeApiServer::new();
        for name in ["a", "b", "c"] {
            server.create(cm("ns", name, &[]));
        }
        server.set_initial_events_end(false);
        let mut opts = options(WatchListMode::Auto, queue_mode);
        opts.reflector.initial_events_timeout = Duration::from_secs(30);
        let inf = SharedIndexInformer::new(server.clone(), opts);
        let rec = Recorder::default();
        inf.add_event_handler(rec.clone()).unwrap();
        inf.start().unwrap();
        eventually(10, "the WatchList stream is open", || server.open_watches() == 1).await;
        let gone = |name: &str, rv: &str| {
            let mut o = cm("ns", name, &[]);
            o.metadata.resource_version = Some(rv.into());
            o
        };
        // a goes; c goes and comes back; x was never listed.
        server.inject(WatchEvent::Deleted(gone("a", "100")));
        server.inject(WatchEvent::Deleted(gone("c", "101")));
        server.inject(WatchEvent::Added(gone("c", "102")));
        server.inject(WatchEvent::Deleted(gone("x", "103")));
        let mut annotations = BTreeMap::new();
        annotations.insert(informer_runtime::INITIAL_EVENTS_END_ANNOTATION.to_string(), "true".to_string());
        server.inject(WatchEvent::Bookmark(Bookmark {
            types: TypeMeta::default(),
            metadata: BookmarkMeta { resource_version: "103".into(), annotations },
        }));
        tokio::time::timeout(Duration::from_secs(10), inf.wait_for_sync()).await.expect("synced at the end bookmark");
        let keys: Vec<String> = inf.indexer().list_keys().iter().map(|k| k.to_string()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        assert_eq!(keys, ["ns/b", "ns/c"], "{queue_mode:?}");
        assert_eq!(cache_versions(&inf)["ns/c"], "102", "{queue_mode:?}");
        assert!(server.list_calls().is_empty(), "{queue_mode:?}: synced by WatchList, not the list fallback");
        eventually(5, "a's tombstone handled", || rec.count("DELETE ns/a") == 1).await;
        assert_eq!(rec.count("DELETE ns/c"), 0, "{queue_mode:?}: c is back");
        assert_eq!(rec.count("DELETE ns/x"), 0, "{queue_mode:?}: x was never known");
        inf.shutdown().await;
    }
}

/// The silence limit of an open watch (2 × min_watch_timeout + 30 s = 32 s here): a watch
/// that keeps talking is kept, one silent for longer is given up and opened again.
#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_given_up_and_a_talking_one_kept() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    let mut opts = options(WatchListMode::Never, QueueMode::InOrder);
    opts.reflector.min_watch_timeout = Duration::from_secs(1);
    let inf = SharedIndexInformer::new(server.clone(), opts);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    eventually(5, "watching", || server.watch_calls().len() == 1).await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(20)).await;
        server.bookmark();
    }
    assert_eq!(server.watch_calls().len(), 1, "200 s of bookmarks every 20 s keep the watch");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(server.watch_calls().len(), 1, "31 s of silence are not enough");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(server.watch_calls().len(), 2, "35 s of silence (and a backoff) are");
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_out_of_order_events_then_relist_converge() {
    let server = FakeApiServer::new();
    let a1 = server.create(cm("ns", "a", &[]));
    let inf = informer(&server, WatchListMode::Never);
    let rec = Recorder::default();
    inf.add_event_handler(rec.clone()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    let a2 = server.update(cm("ns", "a", &[("v", "2")]));
    converged(&server, &inf).await;
    // A duplicate of the newest event and a stale event from before it.
    server.inject(informer_runtime::WatchEvent::Modified(a2.clone()));
    server.inject(informer_runtime::WatchEvent::Modified(a1.clone()));
    server.inject(informer_runtime::WatchEvent::Added(cm("ns", "phantom", &[])));
    eventually(5, "stale events applied", || inf.indexer().contains_key("ns/phantom")).await;
    // A relist (410) brings the cache back to the server's state.
    server.expire_watchers();
    converged(&server, &inf).await;
    assert!(rec.lines().iter().any(|l| l.starts_with("DELETE ns/phantom") && l.ends_with("tombstone")));
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_keeps_the_held_object_at_an_unchanged_resource_version() {
    for mode in [WatchListMode::Never, WatchListMode::Auto] {
        let server = FakeApiServer::new();
        server.create(cm("ns", "same", &[]));
        let stale = server.create(cm("ns", "changed", &[]));
        let inf = informer(&server, mode);
        let mut stream = inf.stream().unwrap();
        inf.start().unwrap();
        inf.wait_for_sync().await;
        let changed = server.update(cm("ns", "changed", &[("v", "2")]));
        converged(&server, &inf).await;
        // A stale event puts an older state of "changed" in the cache; the relist brings
        // the newer one back.
        server.inject(informer_runtime::WatchEvent::Modified(stale.clone()));
        eventually(5, "stale event applied", || inf.indexer().get("ns/changed").is_some_and(|o| rv(&o) == rv(&stale))).await;
        let held_same = inf.indexer().get("ns/same").unwrap();
        let held_stale = inf.indexer().get("ns/changed").unwrap();
        let mut seen = Vec::new();
        while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(100), stream.next()).await {
            seen.push(describe(&event));
        }
        assert_eq!(seen.len(), 4, "{mode:?}: 2 adds, the update and the stale event's update: {seen:?}");

        server.expire_watchers();
        let mut relisted = BTreeMap::new();
        while relisted.len() < 2 {
            let event = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("relist events").unwrap();
            let Event::Update { old, new } = event else { panic!("{mode:?}: a relist of cached objects updates them") };
            relisted.insert(key(&new), (old, new));
        }
        let (old, new) = &relisted["ns/same"];
        assert!(Arc::ptr_eq(old, &held_same) && Arc::ptr_eq(new, &held_same), "{mode:?}: unchanged: the held object, as old and new");
        assert!(Arc::ptr_eq(&inf.indexer().get("ns/same").unwrap(), &held_same), "{mode:?}: the cache keeps the held object");
        let (old, new) = &relisted["ns/changed"];
        assert!(Arc::ptr_eq(old, &held_stale), "{mode:?}");
        assert_eq!((rv(old), rv(new)), (rv(&stale), rv(&changed)), "{mode:?}: a newer resourceVersion replaces");
        assert_eq!(new.metadata.labels, changed.metadata.labels, "{mode:?}");
        assert!(Arc::ptr_eq(&inf.indexer().get("ns/changed").unwrap(), new), "{mode:?}");
        inf.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paged_list_waits_for_the_informer_to_take_what_it_queued() {
    // The reflector stops queueing a list at 256 queued deltas plus one page, whatever the
    // queue mode: here the informer is held up by a stream bounded to one event that is not
    // read yet, so nothing is popped after its first two events.
    for queue_mode in [QueueMode::InOrder, QueueMode::DeltaFifo] {
        let server = FakeApiServer::new();
        for i in 0..2000 {
            server.create(cm("ns", &format!("cm{i:04}"), &[]));
        }
        let mut opts = options(WatchListMode::Never, queue_mode);
        opts.reflector.page_size = 100;
        let inf = SharedIndexInformer::new(server.clone(), opts);
        let mut stream = inf.stream_with(HandlerOptions { queue_bound: Some(1), ..Default::default() }).unwrap();
        inf.start().unwrap();
        eventually(10, "the list queued up to the bound", || inf.queue_len() >= 256).await;
        // Time for a reflector that does not wait to page through the rest.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let queued = inf.queue_len();
        assert!(queued <= 256 + 100, "{queue_mode:?}: {queued} deltas queued");
        assert!(server.list_calls().len() < 20, "{queue_mode:?}: {} pages asked for", server.list_calls().len());
        assert!(!inf.has_synced());

        // Once the stream is read, the list goes on to the end.
        let mut added = 0;
        while added < 2000 {
            let event = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("initial events").unwrap();
            assert!(matches!(event, Event::Add { is_in_initial_list: true, .. }), "{queue_mode:?}");
            added += 1;
        }
        assert!(inf.wait_for_sync().await);
        assert_eq!(inf.indexer().len(), 2000, "{queue_mode:?}");
        assert_eq!(server.list_calls().len(), 20, "{queue_mode:?}: one call per page");
        inf.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_handler_sees_exactly_the_current_objects_once() {
    let (server, inf) = synced_over(20).await;
    for i in 0..5 {
        server.delete(&format!("ns/cm{i}"));
    }
    converged(&server, &inf).await;

    // Add the handler while changes keep coming.
    let writer = {
        let server = server.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                server.create(cm("ns", &format!("new{i}"), &[]));
                tokio::task::yield_now().await;
            }
        })
    };
    let rec = Recorder::default();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    writer.await.unwrap();
    converged(&server, &inf).await;
    eventually(5, "handler caught up", || reg.queue_depth() == 0 && rec.count("ADD ") == 215).await;
    let lines = rec.lines();
    let keys: Vec<String> = lines.iter().map(|l| l.split(' ').nth(1).unwrap().to_string()).collect();
    let unique: std::collections::HashSet<_> = keys.iter().cloned().collect();
    assert_eq!(unique.len(), keys.len(), "no object seen twice");
    assert_eq!(unique, server.key_versions().keys().cloned().collect());
    assert!(reg.has_synced());
    inf.shutdown().await;
}

/// A handler thread waits for the informer's flush, not for each event: a handler added
/// to a synced informer with no change coming is still handed the store's replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_added_to_a_quiet_informer_is_handed_the_replay() {
    let (server, inf) = synced_over(10).await;
    converged(&server, &inf).await;
    let rec = Recorder::default();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    let synced = tokio::time::timeout(Duration::from_secs(5), reg.wait_for_sync()).await;
    assert_eq!(synced, Ok(true), "the handler synced on the replay alone");
    assert_eq!(rec.count("ADD "), 10);
    assert_eq!(reg.queue_depth(), 0);
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handler_does_not_delay_another() {
    let server = FakeApiServer::new();
    let inf = informer(&server, WatchListMode::Auto);
    let slow = Recorder { delay: Some(Duration::from_secs(2)), ..Recorder::default() };
    let fast = Recorder::default();
    let slow_reg = inf.add_event_handler(slow.clone()).unwrap();
    inf.add_event_handler(fast.clone()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    let t0 = Instant::now();
    for i in 0..5 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    eventually(3, "fast handler got all 5", || fast.count("ADD ") == 5).await;
    assert!(t0.elapsed() < Duration::from_secs(1), "fast handler took {:?}", t0.elapsed());
    assert!(slow.count("ADD ") < 5);
    assert!(slow_reg.queue_depth() >= 3, "slow handler's queue holds the rest: {}", slow_reg.queue_depth());
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_handler_is_skipped_and_the_informer_lives_on() {
    let server = FakeApiServer::new();
    let inf = informer(&server, WatchListMode::Auto);
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    inf.add_event_handler(HandlerFn(move |e: &Event<ConfigMap>| {
        if let Event::Add { obj, .. } = e {
            if obj.metadata.name.as_deref() == Some("boom") {
                panic!("handler bug");
            }
        }
        s2.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    server.create(cm("ns", "boom", &[]));
    server.create(cm("ns", "after", &[]));
    eventually(5, "event after the panic handled", || seen.load(Ordering::SeqCst) == 1).await;
    converged(&server, &inf).await;
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn has_synced_per_registration_waits_for_the_handler() {
    let server = FakeApiServer::new();
    for i in 0..3 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    let inf = informer(&server, WatchListMode::Auto);
    let slow = Recorder { delay: Some(Duration::from_millis(300)), ..Recorder::default() };
    let reg = inf.add_event_handler(slow.clone()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    assert!(inf.has_synced());
    assert!(!reg.has_synced(), "handler still working through its initial adds");
    reg.wait_for_sync().await;
    assert_eq!(slow.count("ADD "), 3);
    inf.shutdown().await;
}

/// With the clock paused, a wait that polled would let it run on (by its poll interval);
/// a wait that is woken when the last initial object is applied or handled ends with the
/// clock where it started.
#[tokio::test(start_paused = true)]
async fn waits_for_sync_are_woken_not_polled() {
    for (watch_list, queue_mode) in [
        (WatchListMode::Auto, QueueMode::InOrder),
        (WatchListMode::Never, QueueMode::InOrder),
        (WatchListMode::Auto, QueueMode::DeltaFifo),
    ] {
        let case = format!("{watch_list:?}, {queue_mode:?}");
        let server = FakeApiServer::new();
        for i in 0..5 {
            server.create(cm("ns", &format!("cm{i}"), &[]));
        }
        let inf = SharedIndexInformer::new(server.clone(), options(watch_list, queue_mode));
        let mut stream = inf.stream().unwrap();
        let registration = stream.registration().clone();
        // The stream's initial events are taken only once the informer is seen synced.
        let go = Arc::new(tokio::sync::Notify::new());
        let handled = tokio::spawn({
            let go = go.clone();
            async move {
                go.notified().await;
                for _ in 0..5 {
                    stream.next().await.expect("initial event");
                }
                stream
            }
        });
        let t0 = tokio::time::Instant::now();
        inf.start().unwrap();
        assert!(inf.wait_for_sync().await);
        assert_eq!(inf.indexer().len(), 5, "{case}");
        assert_eq!(t0.elapsed(), Duration::ZERO, "{case}: the informer's wait was not woken at once");
        assert!(!registration.has_synced(), "{case}: initial events not yet taken");
        go.notify_one();
        registration.wait_for_sync().await;
        assert!(registration.has_synced());
        assert_eq!(t0.elapsed(), Duration::ZERO, "{case}: the registration's wait was not woken at once");
        drop(handled.await.unwrap());
        inf.shutdown().await;
    }
}

/// `inf.wait_for_sync()` on a task of its own.
fn waiting_for_sync(inf: &SharedIndexInformer<ConfigMap>) -> tokio::task::JoinHandle<bool> {
    let inf = inf.clone();
    tokio::spawn(async move { inf.wait_for_sync().await })
}

/// An informer with nothing to list is synced by its first (empty) list, and a wait that
/// began before it is woken by it.
#[tokio::test(start_paused = true)]
async fn an_empty_first_list_wakes_a_waiting_sync() {
    let server = FakeApiServer::<ConfigMap>::new();
    let inf = informer(&server, WatchListMode::Never);
    let waiter = waiting_for_sync(&inf);
    tokio::task::yield_now().await;
    let t0 = tokio::time::Instant::now();
    inf.start().unwrap();
    assert!(waiter.await.unwrap());
    assert_eq!(t0.elapsed(), Duration::ZERO);
    inf.shutdown().await;
}

/// A registration's wait for sync ends, reporting it not synced, when its handler is removed
/// or its informer shut down before it synced (client-go's `WaitForCacheSync` with the
/// informer's stop channel), instead of waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_wait_ends_when_its_handler_is_removed_or_the_informer_shut_down() {
    let server = FakeApiServer::<ConfigMap>::new();
    let inf = informer(&server, WatchListMode::Never);
    let removed = inf.add_event_handler(Recorder::default()).unwrap();
    let kept = inf.add_event_handler(Recorder::default()).unwrap();
    let wait = |r: &informer_runtime::HandlerRegistration| {
        let r = r.clone();
        tokio::spawn(async move { r.wait_for_sync().await })
    };
    let (on_removed, on_kept) = (wait(&removed), wait(&kept));
    tokio::task::yield_now().await;
    inf.remove_event_handler(&removed);
    let ended = tokio::time::timeout(Duration::from_secs(10), on_removed).await.expect("ended on removal").unwrap();
    assert!(!ended);
    assert!(!on_kept.is_finished(), "the other registration still waits");
    inf.shutdown().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), on_kept).await.expect("ended on shutdown").unwrap();
    assert!(!ended);
}

/// A wait for sync on an informer shut down before syncing ends, reporting it not synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_sync_ends_when_the_informer_is_shut_down() {
    let server = FakeApiServer::<ConfigMap>::new();
    let inf = informer(&server, WatchListMode::Never);
    let waiter = waiting_for_sync(&inf);
    inf.shutdown().await;
    let synced = tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("the wait ended").unwrap();
    assert!(!synced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_handler_gets_nothing_more() {
    let server = FakeApiServer::new();
    let inf = informer(&server, WatchListMode::Auto);
    let rec = Recorder::default();
    let reg = inf.add_event_handler(rec.clone()).unwrap();
    let other = Recorder::default();
    inf.add_event_handler(other.clone()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    server.create(cm("ns", "a", &[]));
    eventually(5, "first event", || rec.count("ADD ") == 1).await;
    inf.remove_event_handler(&reg);
    assert!(reg.is_removed());
    server.create(cm("ns", "b", &[]));
    eventually(5, "other handler got b", || other.count("ADD ") == 2).await;
    assert_eq!(rec.count("ADD "), 1);
    assert_eq!(inf.handler_count(), 1);
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_reaches_only_handlers_that_asked() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    let inf = informer(&server, WatchListMode::Auto);
    let resyncing = Recorder::default();
    let quiet = Recorder::default();
    inf.add_event_handler_with(resyncing.clone(), HandlerOptions { resync_period: Some(Duration::from_secs(1)), ..Default::default() })
        .unwrap();
    inf.add_event_handler(quiet.clone()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    eventually(5, "a resync update", || resyncing.count("UPDATE ns/a") >= 1).await;
    let line = resyncing.lines().into_iter().find(|l| l.starts_with("UPDATE")).unwrap();
    assert_eq!(line, "UPDATE ns/a 2->2");
    assert_eq!(quiet.count("UPDATE"), 0);
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_and_bounded_queue() {
    let server = FakeApiServer::new();
    for i in 0..3 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    let inf = informer(&server, WatchListMode::Auto);
    let mut stream = inf.stream_with(HandlerOptions { queue_bound: Some(2), ..Default::default() }).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    // Nothing consumed yet: the informer stops applying once the stream's queue exceeds its bound.
    for i in 3..10 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let depth = stream.registration().queue_depth();
    assert!(depth <= 3, "bounded queue depth {depth}");
    let mut got = Vec::new();
    while got.len() < 10 {
        let e = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap().unwrap();
        got.push(describe(&e));
    }
    assert!(got[..3].iter().all(|l| l.ends_with(" true")));
    assert!(got[3..].iter().all(|l| l.starts_with("ADD") && l.ends_with(" false")));
    converged(&server, &inf).await;
    drop(stream);
    eventually(5, "dropped stream unregistered", || inf.handler_count() == 0).await;
    inf.shutdown().await;
}

/// A bounded handler thread under a list of many objects: the informer wakes the thread
/// before it waits for it to drain (else both would wait for good), and the queue stays
/// within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_thread_with_a_bound_is_fed_a_whole_list() {
    let server = server_with(200);
    let inf = informer(&server, WatchListMode::Auto);
    let rec = Recorder { delay: Some(Duration::from_micros(200)), ..Recorder::default() };
    let reg = inf.add_event_handler_with(rec.clone(), HandlerOptions { queue_bound: Some(2), ..Default::default() }).unwrap();
    let deepest = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (reg, deepest) = (reg.clone(), deepest.clone());
        tokio::spawn(async move {
            loop {
                deepest.fetch_max(reg.queue_depth(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_micros(100)).await;
            }
        })
    };
    inf.start().unwrap();
    let synced = tokio::time::timeout(Duration::from_secs(10), reg.wait_for_sync()).await;
    watcher.abort();
    assert_eq!(synced, Ok(true), "the bounded handler was fed the whole list");
    assert_eq!(rec.count("ADD "), 200);
    let deepest = deepest.load(Ordering::Relaxed);
    assert!(deepest <= 3, "queue depth {deepest} beyond its bound of 2 (and the event applied before the wait)");
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transform_strips_managed_fields_before_storing() {
    let server = FakeApiServer::new();
    let mut o = cm("ns", "a", &[]);
    o.metadata.managed_fields = Some(vec![ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() }]);
    server.create(o);
    let inf = informer(&server, WatchListMode::Auto);
    inf.set_transform(strip_managed_fields()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    assert!(inf.indexer().get("ns/a").unwrap().metadata.managed_fields.is_none());
    assert!(matches!(inf.set_transform(strip_managed_fields()), Err(Error::AlreadyStarted)));
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_metadata_lists_hold_no_spare_capacity() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    let inf = informer(&server, WatchListMode::Auto);
    // As a decoder leaves them: room for more entries than arrived.
    inf.set_transform(Arc::new(|mut o: ConfigMap| {
        let mut fields = Vec::with_capacity(8);
        fields.push(ManagedFieldsEntry { manager: Some("kubectl".into()), ..Default::default() });
        o.metadata.managed_fields = Some(fields);
        let mut finalizers = Vec::with_capacity(4);
        finalizers.push("example.com/keep".to_string());
        o.metadata.finalizers = Some(finalizers);
        o
    }))
    .unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    let stored = inf.indexer().get("ns/a").unwrap();
    let fields = stored.metadata.managed_fields.as_ref().unwrap();
    assert_eq!((fields.len(), fields.capacity()), (1, 1));
    assert_eq!(fields[0].manager.as_deref(), Some("kubectl"));
    let finalizers = stored.metadata.finalizers.as_ref().unwrap();
    assert_eq!((finalizers.len(), finalizers.capacity()), (1, 1));
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listers_answer_from_the_cache() {
    let server = FakeApiServer::new();
    server.create(cm("a", "web-1", &[("app", "web"), ("tier", "front")]));
    server.create(cm("a", "web-2", &[("app", "web"), ("tier", "back")]));
    server.create(cm("b", "db-1", &[("app", "db")]));
    server.create(cm("b", "plain", &[]));
    let inf = informer(&server, WatchListMode::Auto);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    let lister = inf.lister();
    let names = |v: Vec<Arc<ConfigMap>>| {
        let mut n: Vec<String> = v.iter().map(|o| o.metadata.name.clone().unwrap()).collect();
        n.sort();
        n
    };
    let sel = |s: &str| parse_label_selector(s).unwrap();
    assert_eq!(names(lister.list(&sel(""))), vec!["db-1", "plain", "web-1", "web-2"]);
    assert_eq!(names(lister.list(&sel("app=web,tier!=back"))), vec!["web-1"]);
    assert_eq!(names(lister.list(&sel("app in (web,db)"))), vec!["db-1", "web-1", "web-2"]);
    assert_eq!(names(lister.list(&sel("!app"))), vec!["plain"]);
    assert_eq!(names(lister.namespace("b").list(&sel(""))), vec!["db-1", "plain"]);
    assert_eq!(names(lister.namespace("a").list(&sel("tier=back"))), vec!["web-2"]);
    assert!(lister.namespace("zzz").list(&sel("")).is_empty());
    assert_eq!(lister.namespace("a").get("web-1").unwrap().metadata.name.as_deref(), Some("web-1"));
    let err = lister.namespace("a").get("db-1").unwrap_err();
    assert_eq!(err.to_string(), "configmaps \"db-1\" not found");
    // A read view answers the same, with borrows of the same objects.
    let view = lister.read();
    let borrowed = |v: Vec<&Arc<ConfigMap>>| names(v.into_iter().cloned().collect());
    for s in ["", "app=web,tier!=back", "app in (web,db)", "!app", "tier=back"] {
        assert_eq!(borrowed(view.list(&sel(s))), names(lister.list(&sel(s))), "{s}");
        for ns in ["a", "b", "zzz"] {
            assert_eq!(borrowed(view.namespace(ns).list(&sel(s))), names(lister.namespace(ns).list(&sel(s))), "{ns} {s}");
        }
    }
    assert_eq!(view.len(), 4);
    let web_1 = view.namespace("a").get("web-1").unwrap();
    assert!(Arc::ptr_eq(web_1, &lister.namespace("a").get("web-1").unwrap()));
    assert_eq!(view.namespace("a").get("db-1").unwrap_err().to_string(), "configmaps \"db-1\" not found");
    assert_eq!(view.get("db-1").unwrap_err().to_string(), "configmaps \"db-1\" not found");
    drop(view);
    inf.shutdown().await;
}

/// Lean roots keep labels out of `meta().labels`: the fake server's selection and the
/// listers' both read them through `lean_labels`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_roots_are_selected_by_their_own_labels() {
    use informer_runtime::lean::{LeanPartialObjectMeta, lean_labels};
    type Meta = LeanPartialObjectMeta<ConfigMap>;
    let lean = |c: ConfigMap| -> Meta { Meta::new(informer_runtime::lean::convert(&c.metadata).unwrap()) };
    let server = FakeApiServer::<Meta>::new().with_labels(lean_labels::<Meta>);
    server.create(lean(cm("a", "web-1", &[("app", "web"), ("tier", "front")])));
    server.create(lean(cm("a", "web-2", &[("app", "web"), ("tier", "back")])));
    server.create(lean(cm("b", "db-1", &[("app", "db")])));
    server.create(lean(cm("b", "other", &[("app", "web"), ("team", "y")])));
    let stored = |i: &SharedIndexInformer<Meta>| {
        let mut keys: Vec<String> = i.indexer().list_keys().iter().map(|k| k.to_string()).collect();
        keys.sort();
        keys
    };
    let mut opts = options(WatchListMode::Never, QueueMode::InOrder);
    opts.reflector.label_selector = Some("team!=y".into());
    let inf = SharedIndexInformer::new(server.clone(), opts);
    inf.set_labels(lean_labels::<Meta>).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    assert_eq!(stored(&inf), vec!["a/web-1", "a/web-2", "b/db-1"], "the server selected by the lean labels");
    assert!(inf.set_labels(lean_labels::<Meta>).is_err(), "fixed once started");
    let lister = inf.lister();
    let names = |v: Vec<Arc<Meta>>| {
        let mut n: Vec<String> = v.iter().map(|o| o.metadata.name.clone().unwrap()).collect();
        n.sort();
        n
    };
    let sel = |s: &str| parse_label_selector(s).unwrap();
    assert!(lister.list_all().iter().all(|o| o.metadata.object_meta.labels.is_none()), "no labels in ObjectMeta");
    assert_eq!(names(lister.list(&sel("app=web"))), vec!["web-1", "web-2"]);
    assert_eq!(names(lister.namespace("a").list(&sel("tier in (back)"))), vec!["web-2"]);
    assert_eq!(names(lister.list(&sel("!tier"))), vec!["db-1"]);
    server.create(lean(cm("b", "web-3", &[("app", "web")])));
    eventually(5, "web-3 listed by its label", || lister.list(&sel("app=web")).len() == 3).await;
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selector_restricts_what_is_cached() {
    let server = FakeApiServer::new();
    server.create(cm("ns", "in", &[("team", "x")]));
    server.create(cm("ns", "out", &[("team", "y")]));
    let mut opts = options(WatchListMode::Never, QueueMode::InOrder);
    opts.reflector.label_selector = Some("team=x".into());
    let inf = SharedIndexInformer::new(server.clone(), opts);
    inf.start().unwrap();
    inf.wait_for_sync().await;
    assert_eq!(inf.indexer().list_keys().iter().map(|k| k.to_string()).collect::<Vec<_>>(), vec!["ns/in"]);
    assert_eq!(server.list_calls()[0].label_selector.as_deref(), Some("team=x"));
    server.create(cm("ns", "in2", &[("team", "x")]));
    server.create(cm("ns", "out2", &[("team", "y")]));
    eventually(5, "in2 cached", || inf.indexer().contains_key("ns/in2")).await;
    assert!(!inf.indexer().contains_key("ns/out2"));
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_everything_and_refuses_new_work() {
    let server = FakeApiServer::new();
    let inf = informer(&server, WatchListMode::Auto);
    inf.add_event_handler(Recorder::default()).unwrap();
    inf.start().unwrap();
    inf.wait_for_sync().await;
    assert!(!inf.start().unwrap(), "second start is a no-op");
    tokio::time::timeout(Duration::from_secs(5), inf.shutdown()).await.expect("shutdown returns");
    assert!(inf.is_stopped());
    assert!(matches!(inf.add_event_handler(Recorder::default()), Err(Error::ShutDown)));
    eventually(5, "watch closed", || server.open_watches() == 0).await;
}

/// A lister-watcher that notes, when each list is asked for, how many objects the informer
/// already holds in its queue and store.
#[derive(Clone)]
struct NotingHandedOver {
    server: FakeApiServer<ConfigMap>,
    informer: Arc<std::sync::OnceLock<SharedIndexInformer<ConfigMap>>>,
    noted: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl informer_runtime::ListerWatcher<ConfigMap> for NotingHandedOver {
    async fn list(&self, opts: &informer_runtime::ListOptions) -> Result<informer_runtime::ListPage<ConfigMap>, Error> {
        let held = self.informer.get().map_or(0, |i| i.queue_len() + i.indexer().len());
        self.noted.lock().unwrap().push(held);
        self.server.list(opts).await
    }

    async fn watch(&self, opts: &informer_runtime::WatchOptions) -> Result<informer_runtime::WatchStream<ConfigMap>, Error> {
        self.server.watch(opts).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_page_is_asked_for_once_this_page_is_queued() {
    let server = FakeApiServer::new();
    for i in 0..1203 {
        server.create(cm("ns", &format!("cm{i}"), &[]));
    }
    let lw = NotingHandedOver { server: server.clone(), informer: Default::default(), noted: Default::default() };
    let inf = SharedIndexInformer::new(lw.clone(), options(WatchListMode::Never, QueueMode::InOrder));
    lw.informer.set(inf.clone()).ok().unwrap();
    inf.start().unwrap();
    assert!(inf.wait_for_sync().await);
    converged(&server, &inf).await;
    let noted = lw.noted.lock().unwrap().clone();
    assert_eq!(noted.len(), 3, "1203 objects in pages of 500: {noted:?}");
    // One page decodes at a time (a lister-watcher may fetch the next one ahead itself).
    assert!(noted[1] >= 500, "page 2 asked for once page 1's objects were queued: {noted:?}");
    assert!(noted[2] >= 1000, "page 3 asked for once page 2's objects were queued: {noted:?}");
    assert_eq!(inf.indexer().len(), 1203);
}

/// A lister-watcher that hands each page over in two parts: the first half at once, the
/// second when the test lets it (or, on the lists told to, an error instead).
#[derive(Clone)]
struct HalvedPages {
    server: FakeApiServer<ConfigMap>,
    /// One permit lets one page's second half through.
    gate: Arc<tokio::sync::Semaphore>,
    /// Lists whose second half is an error instead.
    failing: Arc<AtomicUsize>,
}

impl informer_runtime::ListerWatcher<ConfigMap> for HalvedPages {
    async fn list(&self, opts: &informer_runtime::ListOptions) -> Result<informer_runtime::ListPage<ConfigMap>, Error> {
        self.server.list(opts).await
    }

    async fn list_in_parts(&self, opts: &informer_runtime::ListOptions) -> Result<informer_runtime::PageInParts<ConfigMap>, Error> {
        let mut page = self.server.list(opts).await?;
        let second = page.items.split_off(page.items.len() / 2);
        let fail = self.failing.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let gate = self.gate.clone();
        let later = async move {
            gate.acquire().await.unwrap().forget();
            if fail { Err(Error::Transport("connection reset mid-page".into())) } else { Ok(second) }
        };
        let parts = futures::stream::iter([Ok(page.items)]).chain(futures::stream::once(later));
        Ok(informer_runtime::PageInParts::streamed(page.resource_version, page.continue_token, parts.boxed()))
    }

    async fn watch(&self, opts: &informer_runtime::WatchOptions) -> Result<informer_runtime::WatchStream<ConfigMap>, Error> {
        self.server.watch(opts).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_is_queued_part_by_part_as_its_parts_arrive() {
    let server = FakeApiServer::new();
    for i in 0..40 {
        server.create(cm("ns", &format!("cm{i:02}"), &[]));
    }
    let lw = HalvedPages { server: server.clone(), gate: Arc::new(tokio::sync::Semaphore::new(0)), failing: Default::default() };
    let mut opts = options(WatchListMode::Never, QueueMode::DeltaFifo);
    opts.reflector.page_size = 20;
    let inf = SharedIndexInformer::new(lw.clone(), opts);
    inf.start().unwrap();
    // Each page's first half is cached while its second has not arrived.
    eventually(5, "page 1's first half cached", || inf.indexer().len() == 10).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(inf.indexer().len(), 10, "nothing more before the gate opens");
    assert!(!inf.has_synced());
    lw.gate.add_permits(1);
    eventually(5, "page 2's first half cached", || inf.indexer().len() == 30).await;
    assert!(!inf.has_synced());
    lw.gate.add_permits(1);
    assert!(inf.wait_for_sync().await);
    converged(&server, &inf).await;
    assert_eq!(server.list_calls().len(), 2, "40 objects in pages of 20");
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_that_fails_fails_the_list_and_the_relist_converges() {
    let server = FakeApiServer::new();
    for i in 0..40 {
        server.create(cm("ns", &format!("cm{i:02}"), &[]));
    }
    let lw = HalvedPages { server: server.clone(), gate: Arc::new(tokio::sync::Semaphore::new(1000)), failing: Arc::new(AtomicUsize::new(1)) };
    let mut opts = options(WatchListMode::Never, QueueMode::DeltaFifo);
    opts.reflector.page_size = 20;
    let inf = SharedIndexInformer::new(lw.clone(), opts);
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = errors.clone();
    inf.set_watch_error_handler(move |e: &Error| seen.lock().unwrap().push(e.to_string())).unwrap();
    let rec = Recorder::default();
    inf.add_event_handler(rec.clone()).unwrap();
    inf.start().unwrap();
    assert!(inf.wait_for_sync().await);
    converged(&server, &inf).await;
    let errors = errors.lock().unwrap().clone();
    assert!(errors.iter().any(|e| e.contains("connection reset mid-page")), "{errors:?}");
    // The first list failed after page 1's first half; the second listed everything.
    let lists = server.list_calls();
    let tokens: Vec<bool> = lists.iter().map(|l| l.continue_token.is_some()).collect();
    assert_eq!(tokens, [false, false, true], "{lists:?}");
    eventually(5, "every object added once", || rec.count("ADD ") == 40).await;
    assert_eq!(rec.count("DELETE "), 0);
    inf.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_waits_for_its_queue_to_drain_before_it_queues_more() {
    use informer_runtime::{InOrderFifo, Indexer, Queue, Reflector};
    let server = FakeApiServer::new();
    for i in 0..2000 {
        server.create(cm("ns", &format!("cm{i:04}"), &[]));
    }
    let queue = Arc::new(InOrderFifo::new(Arc::new(Indexer::new())));
    let config = ReflectorConfig { watch_list: WatchListMode::Never, page_size: 100, ..ReflectorConfig::default() };
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(Reflector::new(Arc::new(server.clone()), queue.clone(), config).run(cancel.clone()));
    // Nothing pops: the list stops with its bound (256 batches) queued and one part more.
    eventually(5, "the list queued up to its bound", || queue.len() >= 256).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = queue.len();
    assert!(held <= 256 + 100, "{held} queued");
    assert!(server.watch_calls().is_empty());
    // Popped, it goes on to the end of the list, then watches.
    let mut names = Vec::new();
    while names.len() < 2000 {
        let popped = queue.pop(|p| p.deltas.iter().map(|d| d.key.to_string()).collect::<Vec<_>>()).await.unwrap();
        names.extend(popped);
    }
    assert_eq!(names, (0..2000).map(|i| format!("ns/cm{i:04}")).collect::<Vec<_>>());
    eventually(5, "the watch began", || server.watch_calls().len() == 1).await;
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn watch_events_ready_at_once_are_queued_in_order_and_none_waits_for_a_later_one() {
    use informer_runtime::{InOrderFifo, Indexer, Queue, Reflector, ReflectorState};
    use informer_runtime::{DeltaType, WatchEvent};
    let server = FakeApiServer::new();
    server.create(cm("ns", "a", &[]));
    let queue = Arc::new(InOrderFifo::new(Arc::new(Indexer::new())));
    let state = Arc::new(ReflectorState::default());
    let config = ReflectorConfig { watch_list: WatchListMode::Never, ..ReflectorConfig::default() };
    let cancel = tokio_util::sync::CancellationToken::new();
    let reflector = Reflector::new(Arc::new(server.clone()), queue.clone(), config).with_state(state.clone());
    let task = tokio::spawn(reflector.run(cancel.clone()));
    eventually(5, "watching", || server.watch_calls().len() == 1).await;
    let popped = |q: &InOrderFifo<ConfigMap>| {
        let mut all = Vec::new();
        while let Some(Some(p)) = futures::FutureExt::now_or_never(q.pop(|p| p)) {
            all.extend(p.deltas.iter().map(|d| (d.key.to_string(), d.kind, rv(d.object.object()))));
        }
        all
    };
    assert_eq!(popped(&queue).len(), 1, "the list");
    // On this single-threaded runtime the reflector runs only when the test waits, so the
    // writes below are all ready in its watch at once: more than one hand-over's worth.
    let mut written = Vec::new();
    for i in 0..100 {
        let name = format!("b{}", i % 7);
        let obj = if i % 5 == 4 { server.delete(&format!("ns/{name}")) } else { None };
        let (kind, obj) = match obj {
            Some(gone) => (DeltaType::Deleted, gone),
            None if i < 7 => (DeltaType::Added, server.create(cm("ns", &name, &[]))),
            None => (DeltaType::Updated, server.update(cm("ns", &name, &[]))),
        };
        written.push((format!("ns/{name}"), kind, rv(&obj)));
    }
    eventually(5, "every event queued", || queue.len() == written.len()).await;
    assert_eq!(state.last_sync_resource_version(), server.resource_version(), "the last one's");
    assert_eq!(popped(&queue), written, "in order, each once");
    // One event alone is handed over at once, without waiting for more.
    let alone = server.update(cm("ns", "a", &[]));
    eventually(5, "the lone event queued", || queue.len() == 1).await;
    assert_eq!(popped(&queue), vec![("ns/a".to_string(), DeltaType::Updated, rv(&alone))]);
    // An object without a name is dropped by the queue; its resourceVersion still counts.
    let mut nameless = cm("ns", "x", &[]);
    nameless.metadata.name = None;
    nameless.metadata.resource_version = Some("100000".into());
    let after = server.update(cm("ns", "a", &[]));
    server.inject(WatchEvent::Modified(nameless));
    eventually(5, "the nameless object's version recorded", || state.last_sync_resource_version() == "100000").await;
    assert_eq!(popped(&queue), vec![("ns/a".to_string(), DeltaType::Updated, rv(&after))]);
    cancel.cancel();
    task.await.unwrap();
}
