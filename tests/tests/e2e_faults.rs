//! Faults on a real kube-apiserver: a forced 410 across deletions, the server killed and
//! restarted during churn, a watch that stays silent, and a slow handler under churn.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_tests::e2e::{Cluster, ClusterOptions, EventLog, Seen, cached, create_config_maps, eventually, server_config_maps};
use informer_runtime::reexports::k8s_openapi::api::core::v1::ConfigMap;
use informer_runtime::reexports::kube_client::api::{DeleteParams, Patch, PatchParams};
use informer_runtime::reexports::kube_client::{Api, Client};
use informer_runtime::reexports::serde_json::json;
use informer_runtime::{Event, EventHandler, FactoryOptions, HandlerOptions, ReflectorConfig, Selector, SharedInformerFactory};

fn factory(client: &Client, ns: &str, tweak: Option<fn(&mut ReflectorConfig)>) -> SharedInformerFactory {
    let tweak = tweak.map(|t| Arc::new(t) as informer_runtime::TweakFn);
    informer_gen_sample::new_factory(client.clone(), FactoryOptions { namespace: Some(ns.to_string()), tweak, ..Default::default() })
}

async fn set_value(api: &Api<ConfigMap>, name: &str, value: &str) -> String {
    let patch = json!({"data": {"v": value}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap().metadata.resource_version.unwrap()
}

/// The last event per key: what a handler believes the server holds.
fn handler_view(seen: &[Seen]) -> BTreeMap<String, String> {
    let mut view = BTreeMap::new();
    for s in seen {
        if s.kind == "DELETED" {
            view.remove(&s.key);
        } else {
            view.insert(s.key.clone(), s.rv.clone());
        }
    }
    view
}

/// Per key, resourceVersions never go backwards (a relist may repeat one).
fn assert_monotonic(seen: &[Seen]) {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for s in seen {
        let rv: u64 = s.rv.parse().unwrap();
        if let Some(prev) = last.insert(&s.key, rv) {
            assert!(rv >= prev, "{}: resourceVersion went back from {prev} to {rv}", s.key);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_410_delivers_tombstones_for_objects_deleted_while_disconnected() {
    let Some(mut cluster) = Cluster::start(ClusterOptions { no_watch_cache: true, ..Default::default() }).await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "gone").await.name.clone();
    create_config_maps(&client, &ns, "cm", 20).await;

    let factory = factory(&client, &ns, None);
    let cms = factory.core().v1().configmaps();
    let informer = cms.informer().unwrap();
    let errors = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let errs = errors.clone();
    informer.set_watch_error_handler(move |e| errs.lock().push((e.is_expired(), e.to_string()))).unwrap();
    let log = EventLog::<ConfigMap>::default();
    informer.add_event_handler(log.clone()).unwrap();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));
    let before = informer.last_sync_resource_version();

    // The informer's server goes away; through a second server on the same etcd, objects are
    // deleted, changed and created; etcd is compacted past everything the informer knows.
    let peer = cluster.start_peer().await;
    cluster.kill_apiserver();
    let peer_client = peer.client().await;
    let api: Api<ConfigMap> = Api::namespaced(peer_client.clone(), &ns);
    for i in 0..5 {
        api.delete(&format!("cm-{i}"), &DeleteParams::default()).await.unwrap();
    }
    let mut changed = BTreeMap::new();
    for i in 5..8 {
        changed.insert(format!("{ns}/cm-{i}"), set_value(&api, &format!("cm-{i}"), "changed").await);
    }
    create_config_maps(&peer_client, &ns, "new", 3).await;
    let compacted = cluster.compact_etcd().await;
    assert!(compacted > before.parse::<i64>().unwrap());
    cluster.restart_apiserver().await;

    let server = server_config_maps(&peer_client, &ns).await;
    let lister = cms.lister().unwrap();
    eventually(Duration::from_secs(60), "cache converges after the relist", || cached(&lister.list(&Selector::default())) == server).await;
    eventually(Duration::from_secs(10), "handler converges", || handler_view(&log.seen()) == server).await;
    assert!(errors.lock().iter().any(|(expired, _)| *expired), "the watch failed with 410 Gone: {:?}", errors.lock());

    let after_sync: Vec<Seen> = log.seen().into_iter().filter(|s| !s.initial).collect();
    let mut tombstones: Vec<String> = after_sync.iter().filter(|s| s.kind == "DELETED").map(|s| {
        assert!(s.tombstone, "{} was deleted while disconnected: a DeletedFinalStateUnknown", s.key);
        s.key.clone()
    }).collect();
    tombstones.sort();
    assert_eq!(tombstones, (0..5).map(|i| format!("{ns}/cm-{i}")).collect::<Vec<_>>());
    for (key, rv) in &changed {
        assert!(after_sync.iter().any(|s| s.kind == "UPDATED" && &s.key == key && &s.rv == rv), "update of {key} to {rv}");
    }
    let added: Vec<&Seen> = after_sync.iter().filter(|s| s.kind == "ADDED").collect();
    assert_eq!(added.len(), 3, "the three objects created while disconnected: {added:?}");
    assert_monotonic(&log.seen());
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_killed_and_restarted_during_churn_loses_no_change() {
    let Some(mut cluster) = Cluster::start(ClusterOptions::default()).await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "restart").await.name.clone();
    create_config_maps(&client, &ns, "cm", 40).await;
    let factory = factory(&client, &ns, None);
    let cms = factory.core().v1().configmaps();
    let logs: Vec<EventLog<ConfigMap>> = (0..3).map(|_| EventLog::default()).collect();
    for log in &logs {
        cms.informer().unwrap().add_event_handler(log.clone()).unwrap();
    }
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));

    // Churn through a second server while the informer's server is killed and restarted.
    let peer = cluster.start_peer().await;
    let peer_client = peer.client().await;
    let churn = {
        let api: Api<ConfigMap> = Api::namespaced(peer_client.clone(), &ns);
        let client = peer_client.clone();
        let ns = ns.clone();
        tokio::spawn(async move {
            let mut deleted = std::collections::HashSet::new();
            for round in 1..=12 {
                for i in (round % 4..40).step_by(4) {
                    if !deleted.contains(&i) {
                        set_value(&api, &format!("cm-{i}"), &round.to_string()).await;
                    }
                }
                if round % 3 == 0 {
                    deleted.insert(round);
                    api.delete(&format!("cm-{}", round), &DeleteParams::default()).await.unwrap();
                    create_config_maps(&client, &ns, &format!("r{round}"), 2).await;
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.kill_apiserver();
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.restart_apiserver().await;
    churn.await.unwrap();

    let server = server_config_maps(&peer_client, &ns).await;
    let lister = cms.lister().unwrap();
    eventually(Duration::from_secs(60), "cache converges", || cached(&lister.list(&Selector::default())) == server).await;
    for log in &logs {
        eventually(Duration::from_secs(10), "every handler converges", || handler_view(&log.seen()) == server).await;
        assert_monotonic(&log.seen());
    }
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_is_renewed_without_relisting() {
    let Some(cluster) = Cluster::start(ClusterOptions::default()).await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "silent").await.name.clone();
    create_config_maps(&client, &ns, "cm", 3).await;
    // The server ends each watch after 1–2 s: several silent watches come and go.
    let factory = factory(&client, &ns, Some(|c: &mut ReflectorConfig| c.min_watch_timeout = Duration::from_secs(1)));
    let cms = factory.core().v1().configmaps();
    let log = EventLog::<ConfigMap>::default();
    cms.informer().unwrap().add_event_handler(log.clone()).unwrap();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));
    tokio::time::sleep(Duration::from_secs(6)).await;
    let seen = log.seen();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|s| s.kind == "ADDED" && s.initial), "no relist after silent watches: {seen:?}");

    let rv = set_value(&Api::namespaced(client.clone(), &ns), "cm-1", "late").await;
    eventually(Duration::from_secs(10), "change after the silence", || log.seen().iter().any(|s| s.kind == "UPDATED" && s.rv == rv)).await;
    assert_eq!(log.len(), 4);
    factory.shutdown().await;
}

/// Blocks on every event.
struct Slow {
    log: EventLog<ConfigMap>,
    delay: Duration,
}

impl EventHandler<ConfigMap> for Slow {
    fn on_event(&mut self, event: &Event<ConfigMap>) {
        std::thread::sleep(self.delay);
        self.log.on_event(event);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_does_not_delay_a_fast_one_under_churn() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "slow").await.name.clone();
    create_config_maps(&client, &ns, "cm", 50).await;
    let factory = factory(&client, &ns, None);
    let cms = factory.core().v1().configmaps();
    let informer = cms.informer().unwrap();
    let fast = EventLog::<ConfigMap>::default();
    let slow = EventLog::<ConfigMap>::default();
    informer.add_event_handler(fast.clone()).unwrap();
    let slow_reg = informer.add_event_handler_with(Slow { log: slow.clone(), delay: Duration::from_millis(60) }, HandlerOptions::default()).unwrap();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut last = String::new();
    for round in 1..=6 {
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..50 {
            let api = api.clone();
            writes.spawn(async move { set_value(&api, &format!("cm-{i}"), &round.to_string()).await });
        }
        while let Some(rv) = writes.join_next().await {
            let rv = rv.unwrap();
            if rv.parse::<u64>().unwrap() > last.parse::<u64>().unwrap_or(0) {
                last = rv;
            }
        }
    }
    // 350 events: the slow handler needs ≥21 s; the fast one has them all long before.
    let total = 50 + 300;
    eventually(Duration::from_secs(20), "fast handler has every event", || fast.len() == total).await;
    let slow_then = slow.len();
    assert!(slow_then + 50 <= total, "fast finished while slow was ≥3 s behind ({slow_then} of {total})");
    assert!(slow_reg.queue_depth() > 0, "slow handler's own queue holds the backlog");
    eventually(Duration::from_secs(90), "slow handler catches up", || slow.len() == total).await;
    assert_eq!(fast.seen(), slow.seen(), "both saw the same events in the same order");
    assert!(fast.seen().iter().any(|s| s.rv == last));
    factory.shutdown().await;
}
