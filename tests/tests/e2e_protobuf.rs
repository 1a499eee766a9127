//! Protobuf on a real kube-apiserver: lists, watches and error statuses of built-in kinds
//! read as protobuf decode to exactly what JSON gives, and they really are protobuf (a
//! table with a renamed field changes what is decoded).

use std::time::Duration;

use futures::StreamExt;
use informer_gen_tests::e2e::Cluster;
use informer_gen_tests::lean_builtin::protobuf as tables;
use informer_runtime::proto::{Field, Kind, Message};
use informer_runtime::reexports::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use informer_runtime::reexports::kube_client::Api;
use informer_runtime::reexports::kube_client::api::{DeleteParams, PostParams};
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::{Error, KubeListerWatcher, ListOptions, ListerWatcher, WatchEvent, WatchOptions};

/// ConfigMap's table with `data` (field 2) read under another name: what a ConfigMap
/// decoded through it lacks shows which wire format was read.
static RENAMED_DATA: Message = Message {
    name: "k8s.io.api.core.v1.ConfigMap",
    fields: &[
        Field::new(1, "metadata", Kind::Message(&tables::K8S_IO_APIMACHINERY_PKG_APIS_META_V1_OBJECTMETA), ""),
        Field::new(2, "renamedData", Kind::Map(&Kind::String), ""),
    ],
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_lists_watches_and_errors_match_json() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let ns_guard = cluster.namespace(&client, "protobuf").await;
    let ns = ns_guard.name.as_str();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    for i in 0..5 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("c-{i}"), "labels": {"i": i.to_string()}}, "data": {"k": format!("v{i}")}, "binaryData": {"b": "AAEC"}}))
                .unwrap();
        cms.create(&pp, &cm).await.unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p-{i}")},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1", "ports": [{"containerPort": 8080, "name": "http"}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}, "livenessProbe": {"httpGet": {"path": "/", "port": "http"}}}],
                "volumes": [{"name": "v", "emptyDir": {}}]}
        }))
        .unwrap();
        pods.create(&pp, &pod).await.unwrap();
    }

    // Paged lists: the same objects, pages and tokens either way.
    let opts = ListOptions { limit: Some(2), ..Default::default() };
    let json_cms = KubeListerWatcher::new(cms.clone());
    let proto_cms = KubeListerWatcher::new(cms.clone()).with_protobuf(&tables::K8S_IO_API_CORE_V1_CONFIGMAP);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut ca, mut cb) = (None, None);
    loop {
        let pa = json_cms.list(&ListOptions { continue_token: ca.clone(), ..opts.clone() }).await.unwrap();
        let pb = proto_cms.list(&ListOptions { continue_token: cb.clone(), ..opts.clone() }).await.unwrap();
        assert_eq!(pa.items.len(), pb.items.len());
        assert_eq!(pa.continue_token.is_some(), pb.continue_token.is_some());
        a.extend(pa.items);
        b.extend(pb.items);
        (ca, cb) = (pa.continue_token, pb.continue_token);
        if ca.is_none() {
            break;
        }
    }
    assert_eq!(a.len(), 5);
    assert_eq!(b, a, "ConfigMaps: protobuf = JSON");
    let json_pods = KubeListerWatcher::new(pods.clone()).list(&ListOptions::default()).await.unwrap();
    let proto_pods =
        KubeListerWatcher::new(pods.clone()).with_protobuf(&tables::K8S_IO_API_CORE_V1_POD).list(&ListOptions::default()).await.unwrap();
    assert_eq!(proto_pods.items.len(), 5);
    assert_eq!(proto_pods.items, json_pods.items, "Pods (defaulted by the server: probes, volumes, quantities): protobuf = JSON");

    // The wire really was protobuf: the renamed field decodes to nothing.
    let renamed = KubeListerWatcher::new(cms.clone()).with_protobuf(&RENAMED_DATA).list(&ListOptions::default()).await.unwrap();
    assert_eq!(renamed.items.len(), 5);
    assert!(renamed.items.iter().all(|c| c.data.is_none() && c.metadata.name.is_some()), "read through the protobuf table");

    // A watch: events decoded from protobuf frames.
    let watch = WatchOptions { resource_version: json_pods.resource_version.clone(), allow_watch_bookmarks: true, timeout_seconds: Some(30), ..Default::default() };
    let mut stream = proto_cms.watch(&watch).await.unwrap();
    let made: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "late"}, "data": {"k": "late"}})).unwrap();
    let created = cms.create(&pp, &made).await.unwrap();
    cms.delete("late", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(20), stream.next()).await.expect("an event within 20 s").expect("stream open");
        match event.unwrap() {
            WatchEvent::Added(cm) => seen.push(("ADDED", cm)),
            WatchEvent::Deleted(cm) => seen.push(("DELETED", cm)),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen[0], ("ADDED", created.clone()), "the created object, as the server returned it in JSON");
    assert_eq!(seen[1].1.metadata.name.as_deref(), Some("late"));
    assert_eq!(seen[1].1.data, created.data);

    // A failed request's Status comes in protobuf too.
    let bad = ListOptions { label_selector: Some("a in (".into()), ..Default::default() };
    match proto_cms.list(&bad).await {
        Err(Error::Api(status)) => assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"), "{status}"),
        other => panic!("expected a 400 status, got {other:?}"),
    }
}
