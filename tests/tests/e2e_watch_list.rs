//! WatchList streaming on a real kube-apiserver, and the fallback to list + watch when the
//! server refuses it.

use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_tests::e2e::{Cluster, ClusterOptions, EventLog, cached, create_config_maps, eventually, server_config_maps};
use informer_runtime::reexports::k8s_openapi::api::core::v1::ConfigMap;
use informer_runtime::reexports::kube_client::api::{PostParams, WatchParams};
use informer_runtime::reexports::kube_client::{Api, Client};
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::{FactoryOptions, Selector, WatchListMode};

use futures::StreamExt;

/// Syncs a namespaced ConfigMap informer in `mode`; returns whether it used WatchList, after
/// checking the cache against the server and that a later change arrives.
async fn sync_in_mode(client: &Client, ns: &str, mode: WatchListMode) -> bool {
    let factory = informer_gen_sample::new_factory(client.clone(), FactoryOptions { namespace: Some(ns.to_string()), watch_list: mode, ..Default::default() });
    let cms = factory.core().v1().configmaps();
    let informer = cms.informer().unwrap();
    let log = EventLog::<ConfigMap>::default();
    informer.add_event_handler(log.clone()).unwrap();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));
    let lister = cms.lister().unwrap();
    let server = server_config_maps(client, ns).await;
    assert_eq!(cached(&lister.list(&Selector::default())), server, "{mode:?}: cache equals server at sync");
    eventually(Duration::from_secs(10), "initial adds delivered", || log.len() >= server.len()).await;
    let seen = log.seen();
    assert!(seen.iter().all(|s| s.kind == "ADDED" && s.initial), "{mode:?}: only initial adds before any change");

    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("after-{mode:?}").to_lowercase()}})).unwrap();
    let created = Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    eventually(Duration::from_secs(30), "watch after the initial state", || log.seen().iter().any(|s| s.kind == "ADDED" && !s.initial && s.rv == rv)).await;
    let used = informer.reflector_state().used_watch_list().expect("reflector reached a synced state");
    factory.shutdown().await;
    used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_streams_the_initial_state_when_the_server_supports_it() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "watchlist").await;
    create_config_maps(&client, &ns.name, "cm", 1100).await;

    // The server really streams: initial events, then the bookmark that ends them.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let params = WatchParams::streaming_lists().timeout(10);
    let mut stream = api.watch(&params, "").await.unwrap().boxed();
    let mut added = 0;
    loop {
        match stream.next().await.expect("stream ends with the initial-events-end bookmark").unwrap() {
            informer_runtime::reexports::kube_core::WatchEvent::Added(_) => added += 1,
            informer_runtime::reexports::kube_core::WatchEvent::Bookmark(b) => {
                if b.metadata.annotations.get(informer_runtime::INITIAL_EVENTS_END_ANNOTATION).is_some_and(|v| v == "true") {
                    break;
                }
            }
            other => panic!("unexpected {other:?} during initial events"),
        }
    }
    assert_eq!(added, 1100);

    assert!(sync_in_mode(&client, &ns.name, WatchListMode::Auto).await, "Auto uses WatchList on a server that supports it");
    assert!(sync_in_mode(&client, &ns.name, WatchListMode::Always).await);
    assert!(!sync_in_mode(&client, &ns.name, WatchListMode::Never).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falls_back_to_list_and_watch_when_the_server_refuses_watch_list() {
    let options = ClusterOptions { feature_gates: vec!["WatchList=false".into()], ..Default::default() };
    let Some(cluster) = Cluster::start(options).await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "refuses").await;
    create_config_maps(&client, &ns.name, "cm", 620).await;

    // The server refuses sendInitialEvents.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let refused = match api.watch(&WatchParams::streaming_lists().timeout(5), "").await {
        Err(e) => Some(e.to_string()),
        Ok(s) => s.boxed().next().await.and_then(|first| match first {
            Err(e) => Some(e.to_string()),
            Ok(informer_runtime::reexports::kube_core::WatchEvent::Error(e)) => Some(e.message),
            Ok(_) => None,
        }),
    };
    assert!(refused.is_some(), "a server with WatchList=false must refuse sendInitialEvents");

    assert!(!sync_in_mode(&client, &ns.name, WatchListMode::Auto).await, "Auto falls back to list + watch");
}
