//! Built-in kinds through `generated-sample` on a real kube-apiserver: handlers see every
//! change in order, listers answer exactly what the server holds, and `wait_for_cache_sync`
//! returns only after the initial list.

use std::collections::BTreeMap;
use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_tests::e2e::{Cluster, EventLog, Seen, assert_sequence, cached, create_config_maps, eventually};
use informer_runtime::reexports::k8s_openapi::api::apps::v1::Deployment;
use informer_runtime::reexports::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use informer_runtime::reexports::kube_client::api::{DeleteParams, ListParams, PostParams};
use informer_runtime::reexports::kube_client::{Api, Client};
use informer_runtime::reexports::kube_core::Resource;
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::{FactoryOptions, Selector, parse_label_selector};

fn rv<K: Resource>(k: &K) -> String {
    k.meta().resource_version.clone().unwrap()
}

fn config_map(ns: &str, name: &str, app: &str, data: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "test": ns}},
        "data": {"v": data}
    }))
    .unwrap()
}

fn pod(ns: &str, name: &str, node: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "test": ns}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.invalid/app:1"}]}
    }))
    .unwrap()
}

fn deployment(ns: &str, name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"test": ns}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]}}
        }
    }))
    .unwrap()
}

/// The keys and resourceVersions the server holds for `selector` (all namespaces).
async fn server_state<K>(client: &Client, selector: &str) -> BTreeMap<String, String>
where
    K: Resource<Scope = informer_runtime::reexports::k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let list = Api::<K>::all(client.clone()).list(&ListParams::default().labels(selector)).await.unwrap();
    list.items.iter().map(|o| (format!("{}/{}", o.meta().namespace.as_deref().unwrap(), o.meta().name.as_deref().unwrap()), rv(o))).collect()
}


use informer_runtime::reexports::serde;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_kinds_informers_and_listers_follow_the_server() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "builtin").await;
    let ns = ns.name.as_str();
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);

    // State before the informers start: it must all be in the caches once synced.
    for i in 0..30 {
        cms.create(&pp, &config_map(ns, &format!("cm-{i}"), if i % 3 == 0 { "x" } else { "y" }, "0")).await.unwrap();
    }
    for i in 0..12 {
        pods.create(&pp, &pod(ns, &format!("pod-{i}"), &format!("node-{}", i % 3), if i % 2 == 0 { "web" } else { "db" })).await.unwrap();
    }
    deploys.create(&pp, &deployment(ns, "web", 2)).await.unwrap();

    // Cluster-wide factory (other tests' namespaces are in the caches too; assertions select ours).
    let factory = informer_gen_sample::new_factory(client.clone(), FactoryOptions::default());
    let cm_informer = factory.core().v1().configmaps().informer().unwrap();
    let pod_informer = factory.core().v1().pods().informer().unwrap();
    let deploy_informer = factory.apps().v1().deployments().informer().unwrap();
    let cm_log = EventLog::<ConfigMap>::default();
    let pod_log = EventLog::<Pod>::default();
    let deploy_log = EventLog::<Deployment>::default();
    let cm_reg = cm_informer.add_event_handler(cm_log.clone()).unwrap();
    pod_informer.add_event_handler(pod_log.clone()).unwrap();
    deploy_informer.add_event_handler(deploy_log.clone()).unwrap();
    factory.start().unwrap();
    let synced = factory.wait_for_cache_sync().await;
    assert!(synced.values().all(|s| *s), "all informers sync: {synced:?}");

    // Synced means the initial list is in the store: no waiting needed.
    let ours = parse_label_selector(&format!("test={ns}")).unwrap();
    let cm_lister = factory.core().v1().configmaps().lister().unwrap();
    let pod_lister = factory.core().v1().pods().lister().unwrap();
    let deploy_lister = factory.apps().v1().deployments().lister().unwrap();
    assert_eq!(cm_lister.list(&ours).len(), 30);
    assert_eq!(pod_lister.list(&ours).len(), 12);
    assert_eq!(deploy_lister.deployments(ns).get("web").unwrap().spec.as_ref().unwrap().replicas, Some(2));
    assert!(cm_reg.wait_for_sync().await);
    let initial: Vec<Seen> = cm_log.seen().into_iter().filter(|s| s.key.starts_with(&format!("{ns}/"))).collect();
    assert_eq!(initial.len(), 30);
    assert!(initial.iter().all(|s| s.kind == "ADDED" && s.initial));

    // Changes through the API: the handler must see exactly these, in this order.
    let mut expected = Vec::new();
    let mut expect = |kind: &'static str, key: String, rv: String| expected.push(Seen { kind, key, rv, initial: false, tombstone: false });
    for i in 30..40 {
        let c = cms.create(&pp, &config_map(ns, &format!("cm-{i}"), "x", "0")).await.unwrap();
        expect("ADDED", format!("{ns}/cm-{i}"), rv(&c));
    }
    for round in 1..=3 {
        for i in (0..40).step_by(7) {
            let mut c = cms.get(&format!("cm-{i}")).await.unwrap();
            c.data.as_mut().unwrap().insert("v".into(), round.to_string());
            let c = cms.replace(&format!("cm-{i}"), &pp, &c).await.unwrap();
            expect("UPDATED", format!("{ns}/cm-{i}"), rv(&c));
        }
    }
    for i in (1..40).step_by(5) {
        cms.delete(&format!("cm-{i}"), &DeleteParams::default()).await.unwrap();
        expect("DELETED", format!("{ns}/cm-{i}"), String::new());
    }
    let expected_len = expected.len();
    let mine = |log: &EventLog<ConfigMap>| -> Vec<Seen> { log.seen().into_iter().filter(|s| s.key.starts_with(&format!("{ns}/")) && !s.initial).collect() };
    eventually(Duration::from_secs(30), "config map events", || mine(&cm_log).len() >= expected_len).await;
    assert_sequence(&mine(&cm_log), &expected);

    // Pods and Deployments: a relabel, a delete, a scale.
    let mut p = pods.get("pod-0").await.unwrap();
    p.metadata.labels.as_mut().unwrap().insert("app".into(), "db".into());
    let p = pods.replace("pod-0", &pp, &p).await.unwrap();
    pods.delete("pod-1", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    let mut d = deploys.get("web").await.unwrap();
    d.spec.as_mut().unwrap().replicas = Some(5);
    let d = deploys.replace("web", &pp, &d).await.unwrap();
    eventually(Duration::from_secs(30), "pod and deployment updates", || {
        deploy_lister.deployments(ns).get("web").is_ok_and(|w| rv(w.as_ref()) == rv(&d))
            && pod_lister.pods(ns).get("pod-0").is_ok_and(|w| rv(w.as_ref()) == rv(&p))
            && pod_lister.pods(ns).get("pod-1").is_err()
    })
    .await;
    // Handlers run on their own threads, a moment behind the store.
    eventually(Duration::from_secs(10), "handlers see the scale and the delete", || {
        deploy_log.seen().iter().any(|s| s.kind == "UPDATED" && s.key == format!("{ns}/web") && s.rv == rv(&d))
            && pod_log.seen().iter().any(|s| s.kind == "DELETED" && s.key == format!("{ns}/pod-1") && !s.tombstone)
    })
    .await;

    // Listers answer exactly what the server holds: cluster-wide and per namespace, with selectors.
    for selector in [format!("test={ns}"), format!("test={ns},app=x"), format!("test={ns},app in (y)"), format!("test={ns},app!=x")] {
        let sel: Selector = parse_label_selector(&selector).unwrap();
        assert_eq!(cached(&cm_lister.list(&sel)), server_state::<ConfigMap>(&client, &selector).await, "config maps {selector}");
        assert_eq!(cached(&cm_lister.configmaps(ns).list(&sel)), server_state::<ConfigMap>(&client, &selector).await);
    }
    for selector in [format!("test={ns}"), format!("test={ns},app=db"), format!("test={ns},app notin (db)")] {
        let sel = parse_label_selector(&selector).unwrap();
        assert_eq!(cached(&pod_lister.list(&sel)), server_state::<Pod>(&client, &selector).await, "pods {selector}");
        assert_eq!(cached(&pod_lister.pods(ns).list(&sel)), server_state::<Pod>(&client, &selector).await);
    }
    assert!(cm_lister.configmaps(ns).get("cm-1").is_err(), "deleted: NotFound");
    assert!(cm_lister.configmaps("no-such-namespace").list(&Selector::default()).is_empty());
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_factory_sees_only_its_namespace_and_syncs_after_the_initial_list() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let a = cluster.namespace(&client, "scoped-a").await;
    let b = cluster.namespace(&client, "scoped-b").await;
    // More than one list page (500), so sync must wait for every page.
    create_config_maps(&client, &a.name, "cm", 1203).await;
    create_config_maps(&client, &b.name, "cm", 5).await;
    let factory = informer_gen_sample::new_factory(client.clone(), FactoryOptions { namespace: Some(a.name.clone()), ..Default::default() });
    let informers = factory.core().v1().configmaps();
    informers.informer().unwrap();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));
    let lister = informers.lister().unwrap();
    let all = lister.list(&Selector::default());
    assert_eq!(all.len(), 1203, "exactly namespace a's objects, all of them, at sync");
    assert!(all.iter().all(|o| o.metadata.namespace.as_deref() == Some(a.name.as_str())));
    assert_eq!(cached(&all), server_state::<ConfigMap>(&client, &format!("test={}", a.name)).await);
    factory.shutdown().await;
}
