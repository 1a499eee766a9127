//! Metadata-only informers on a real kube-apiserver: the lean cache holds exactly the
//! metadata the server returns for `as=PartialObjectMetadata` (managedFields included),
//! converts to kube's `PartialObjectMeta`, follows updates and deletes, and the factory's
//! `strip_managed_fields_meta` transform reaches the lean `managedFields`.

use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_tests::e2e::{Cluster, EventLog, eventually};
use informer_gen_tests::without_nulls;
use informer_runtime::lean::LeanPartialObjectMeta;
use informer_runtime::reexports::k8s_openapi::api::core::v1::ConfigMap;
use informer_runtime::reexports::kube_client::Api;
use informer_runtime::reexports::kube_client::api::{DeleteParams, Patch, PatchParams, PostParams};
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::{FactoryOptions, parse_label_selector, strip_managed_fields_meta};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_informers_hold_the_servers_metadata_and_follow_it() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let ns_guard = cluster.namespace(&client, "metadata").await;
    let ns = ns_guard.name.as_str();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..6 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("c-{i}"), "namespace": ns,
                         "labels": {"app": if i % 2 == 0 { "web" } else { "db" }},
                         "annotations": {"note": format!("n{i}"), "a.example/z": "1"}},
            "data": {"k": "x".repeat(1000)}
        }))
        .unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }

    let options = FactoryOptions { namespace: Some(ns.to_string()), ..Default::default() };
    let factory = informer_gen_sample::new_factory(client.clone(), options.clone());
    let informer = factory.core().v1().configmaps().metadata_informer().unwrap();
    let log = EventLog::<LeanPartialObjectMeta<ConfigMap>>::default();
    informer.add_event_handler(log.clone()).unwrap();
    let stripped_factory = informer_gen_sample::new_factory(
        client.clone(),
        FactoryOptions { transform: Some(strip_managed_fields_meta()), ..options },
    );
    let stripped = stripped_factory.core().v1().configmaps().metadata_informer().unwrap();
    factory.start().unwrap();
    stripped_factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));
    assert!(stripped_factory.wait_for_cache_sync().await.values().all(|s| *s));

    let lister = informer.lister();
    let stripped_lister = stripped.lister();
    for i in 0..6 {
        let name = format!("c-{i}");
        let cached = lister.namespace(ns).get(&name).unwrap();
        let server = cms.get_metadata(&name).await.unwrap();
        assert!(cached.metadata.managed_fields.is_some(), "the server wrote managedFields");
        assert_eq!(cached.metadata.annotations.as_ref().unwrap().get("note").map(|v| v.as_str()), Some(format!("n{i}").as_str()));
        assert_eq!(
            serde_json::to_value(&*cached).unwrap(),
            without_nulls(&serde_json::to_value(&server).unwrap()),
            "{name}: cached JSON = the server's metadata"
        );
        assert_eq!(cached.to_kube().unwrap().metadata, server.metadata, "{name}: lean → kube = the server's metadata");

        let lean_stripped = stripped_lister.namespace(ns).get(&name).unwrap();
        assert!(lean_stripped.metadata.managed_fields.is_none(), "the factory transform dropped the lean managedFields");
        assert_eq!(lean_stripped.metadata.annotations, cached.metadata.annotations, "and kept the annotations");
        assert_eq!(lean_stripped.metadata.labels, cached.metadata.labels);
    }
    let web = parse_label_selector("app=web").unwrap();
    assert_eq!(lister.namespace(ns).list(&web).len(), 3);

    // Updates and deletes reach the metadata cache and its handlers.
    let patch = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"note": "changed"}}});
    let patched = cms.patch("c-1", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    let rv = patched.metadata.resource_version.clone().unwrap();
    eventually(Duration::from_secs(10), "the patched ConfigMap's metadata in the cache", || {
        lister.namespace(ns).get("c-1").is_ok_and(|c| c.metadata.resource_version.as_deref() == Some(rv.as_str()))
    })
    .await;
    let cached = lister.namespace(ns).get("c-1").unwrap();
    assert_eq!(cached.metadata.annotations.as_ref().unwrap().get("note").map(|v| v.as_str()), Some("changed"));
    assert_eq!(cached.to_kube().unwrap().metadata, cms.get_metadata("c-1").await.unwrap().metadata);
    assert_eq!(lister.namespace(ns).list(&web).len(), 4);

    cms.delete("c-2", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(10), "the deleted ConfigMap gone from the cache", || lister.namespace(ns).get("c-2").is_err()).await;
    // Handlers run on their own queues, after the store: the delete reaches them shortly.
    let deleted = format!("{ns}/c-2");
    eventually(Duration::from_secs(10), "the handler seeing the delete", || {
        log.seen().iter().any(|s| s.kind == "DELETED" && s.key == deleted)
    })
    .await;
    let seen = log.seen();
    assert_eq!(seen.iter().filter(|s| s.kind == "ADDED" && s.initial).count(), 6);
    assert!(seen.iter().any(|s| s.kind == "UPDATED" && s.key == format!("{ns}/c-1") && s.rv == rv));
    assert_eq!(lister.list_all().len(), 5);
    factory.shutdown().await;
    stripped_factory.shutdown().await;
}
