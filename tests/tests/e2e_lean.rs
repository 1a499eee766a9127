//! The memory-lean layout on a real kube-apiserver: lean Pods and ConfigMaps in the cache
//! carry exactly the JSON the server holds (managedFields included), convert to the same
//! k8s-openapi objects the server returns, and follow changes through listers with
//! selectors.

use std::time::Duration;

use informer_gen_tests::e2e::{Cluster, EventLog, eventually};
use informer_gen_tests::lean_builtin::InformerFactoryExt;
use informer_gen_tests::lean_builtin::lean::api::core::v1 as lean;
use informer_gen_tests::without_nulls;
use informer_runtime::reexports::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use informer_runtime::reexports::kube_client::Api;
use informer_runtime::reexports::kube_client::api::{Patch, PatchParams, PostParams};
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::{FactoryOptions, Selector, parse_label_selector, strip_managed_fields_meta};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lean_pods_and_config_maps_match_the_server() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let ns_guard = cluster.namespace(&client, "lean").await;
    let ns = ns_guard.name.as_str();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    for i in 0..6 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p-{i}"), "namespace": ns, "labels": {"app": if i % 2 == 0 { "web" } else { "db" }}},
            "spec": {"nodeName": "node-lean", "containers": [
                {"name": "app", "image": "registry.invalid/app:1", "ports": [{"containerPort": 8080, "name": "http"}],
                 "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
                 "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}}}
            ]}
        }))
        .unwrap();
        pods.create(&pp, &pod).await.unwrap();
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("c-{i}"), "namespace": ns}, "data": {"k": format!("v{i}")}})).unwrap();
        cms.create(&pp, &cm).await.unwrap();
    }

    let options = FactoryOptions { namespace: Some(ns.to_string()), ..Default::default() };
    let factory = informer_gen_tests::lean_builtin::new_factory(client.clone(), options.clone());
    // The factory's metadata transform reaches the managedFields lean roots keep apart.
    let stripped_factory = informer_gen_tests::lean_builtin::new_factory(
        client.clone(),
        FactoryOptions { transform: Some(strip_managed_fields_meta()), ..options },
    );
    let stripped_pods = stripped_factory.core().v1().pods().lister().unwrap();
    stripped_factory.start().unwrap();
    let pod_informer = factory.core().v1().pods();
    let log = EventLog::<lean::Pod>::default();
    pod_informer.informer().unwrap().add_event_handler(log.clone()).unwrap();
    let cm_informer = factory.core().v1().configmaps();
    cm_informer.informer().unwrap();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));
    assert!(stripped_factory.wait_for_cache_sync().await.values().all(|s| *s));

    let pod_lister = pod_informer.lister().unwrap();
    for i in 0..6 {
        let name = format!("p-{i}");
        let cached = pod_lister.pods(ns).get(&name).unwrap();
        let server = pods.get(&name).await.unwrap();
        assert!(cached.metadata.managed_fields.is_some(), "the server wrote managedFields");
        assert_eq!(serde_json::to_value(&*cached).unwrap(), without_nulls(&serde_json::to_value(&server).unwrap()), "{name}: lean JSON = server JSON");
        assert_eq!(cached.to_k8s().unwrap(), server, "{name}: lean → k8s-openapi = the server's object");
        let stripped = stripped_pods.pods(ns).get(&name).unwrap();
        assert!(stripped.metadata.managed_fields.is_none(), "{name}: strip_managed_fields_meta reached the lean managedFields");
        let mut expected = server.clone();
        expected.metadata.managed_fields = None;
        assert_eq!(stripped.to_k8s().unwrap(), expected, "{name}: all else kept");
    }
    let cm_lister = cm_informer.lister().unwrap();
    for i in 0..6 {
        let name = format!("c-{i}");
        let cached = cm_lister.configmaps(ns).get(&name).unwrap();
        assert_eq!(cached.to_k8s().unwrap(), cms.get(&name).await.unwrap());
        assert_eq!(cached.data.as_ref().unwrap().get("k").map(|v| v.as_str()), Some(format!("v{i}").as_str()));
    }
    let web = parse_label_selector("app=web").unwrap();
    assert_eq!(pod_lister.pods(ns).list(&web).len(), 3);

    // A change on the server reaches the lean cache, handlers and selectors.
    let patched = pods.patch("p-1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}}))).await.unwrap();
    let rv = patched.metadata.resource_version.clone().unwrap();
    eventually(Duration::from_secs(10), "the relabelled Pod in the lean cache", || {
        pod_lister.pods(ns).get("p-1").is_ok_and(|p| p.metadata.resource_version.as_deref() == Some(rv.as_str()))
    })
    .await;
    assert_eq!(pod_lister.pods(ns).list(&web).len(), 4);
    assert_eq!(pod_lister.list(&Selector::default()).len(), 6);
    assert_eq!(serde_json::to_value(&*pod_lister.pods(ns).get("p-1").unwrap()).unwrap(), without_nulls(&serde_json::to_value(&patched).unwrap()));
    // Handlers run on their own queues, after the store: the update reaches them shortly.
    eventually(Duration::from_secs(10), "the handler seeing the update", || {
        log.seen().iter().any(|s| s.key.ends_with("/p-1") && s.rv == rv)
    })
    .await;
    factory.shutdown().await;
    stripped_factory.shutdown().await;
}
