//! The generated sample used as a user would: factory accessors, typed listers,
//! `for_resource`, and the CRD types — on in-memory API servers (the real-server tests
//! live with the end-to-end suite).

use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_sample::cert_manager_io::v1::{Certificate, CertificateSpecPrivateKeyAlgorithm, ClusterIssuer};
use informer_runtime::reexports::k8s_openapi::api::apps::v1::Deployment;
use informer_runtime::reexports::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use informer_runtime::reexports::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use informer_runtime::reexports::kube_client::{Client, Config};
use informer_runtime::reexports::kube_core::Resource;
use informer_runtime::testing::FakeApiServer;
use informer_runtime::{Error, FactoryOptions, Gvr, InformerOptions, SharedIndexInformer, SharedInformerFactory, parse_label_selector};
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::reexports::{serde, tokio};

/// A client for an address nothing listens on: informers that are not replaced by
/// in-memory ones could never sync, so a test that passes used the fakes.
fn offline_client() -> Client {
    Client::try_from(Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
}

fn meta(ns: Option<&str>, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        namespace: ns.map(str::to_string),
        name: Some(name.to_string()),
        labels: (!labels.is_empty()).then(|| labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

fn fake<K>(factory: &SharedInformerFactory, server: &FakeApiServer<K>, resource: &str) -> SharedIndexInformer<K>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let server = server.clone();
    let resource = resource.to_string();
    factory
        .informer_for_with::<K>(move |_| SharedIndexInformer::new(server, InformerOptions { resource, ..Default::default() }))
        .unwrap()
}

fn certificate(ns: &str, name: &str, algorithm: &str) -> Certificate {
    serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"namespace": ns, "name": name, "labels": {"team": "a"}},
        "spec": {"secretName": format!("{name}-tls"), "issuerRef": {"name": "ca"}, "privateKey": {"algorithm": algorithm}}
    }))
    .unwrap()
}

#[tokio::test(crate = "informer_runtime::reexports::tokio", flavor = "multi_thread", worker_threads = 2)]
async fn factory_accessors_and_typed_listers_read_the_shared_caches() {
    let factory = SharedInformerFactory::new(offline_client());
    let cms = FakeApiServer::<ConfigMap>::new();
    cms.create(ConfigMap { metadata: meta(Some("a"), "one", &[("app", "x")]), ..Default::default() });
    cms.create(ConfigMap { metadata: meta(Some("a"), "two", &[("app", "y")]), ..Default::default() });
    cms.create(ConfigMap { metadata: meta(Some("b"), "one", &[("app", "x")]), ..Default::default() });
    let nss = FakeApiServer::<Namespace>::new();
    nss.create(Namespace { metadata: meta(None, "a", &[]), ..Default::default() });
    let certs = FakeApiServer::<Certificate>::new();
    certs.create(certificate("a", "web", "ECDSA"));
    certs.create(certificate("b", "api", "SomethingNew"));
    let issuers = FakeApiServer::<ClusterIssuer>::new();
    issuers.create(serde_json::from_value(json!({"metadata": {"name": "ca"}, "spec": {"ca": {"secretName": "ca-key"}}})).unwrap());

    let cm_inf = fake(&factory, &cms, "configmaps");
    fake(&factory, &nss, "namespaces");
    fake(&factory, &certs, "certificates");
    fake(&factory, &issuers, "clusterissuers");
    // The generated accessor hands out the one shared informer.
    assert_eq!(factory.core().v1().configmaps().informer().unwrap().lister().list_all().len(), cm_inf.lister().list_all().len());
    assert_eq!(factory.start().unwrap(), 4);
    let synced = tokio::time::timeout(Duration::from_secs(10), factory.wait_for_cache_sync()).await.unwrap();
    assert_eq!(synced.len(), 4, "{synced:?}");
    assert!(synced.values().all(|s| *s), "{synced:?}");

    let cm_lister = factory.core().v1().configmaps().lister().unwrap();
    let app_x = parse_label_selector("app=x").unwrap();
    assert_eq!(cm_lister.list(&app_x).len(), 2);
    assert_eq!(cm_lister.configmaps("a").list(&app_x).len(), 1);
    assert_eq!(cm_lister.configmaps("a").list(&Default::default()).len(), 2);
    assert_eq!(cm_lister.configmaps("b").get("one").unwrap().metadata.namespace.as_deref(), Some("b"));
    let missing = cm_lister.configmaps("b").get("two").unwrap_err();
    assert!(missing.to_string().contains("two"), "{missing}");

    let ns_lister = factory.core().v1().namespaces().lister().unwrap();
    assert!(ns_lister.get("a").is_ok());
    assert!(ns_lister.get("zzz").is_err());

    let cert_lister = factory.cert_manager_io().v1().certificates().lister().unwrap();
    let web = cert_lister.certificates("a").get("web").unwrap();
    let algo = web.spec.as_ref().unwrap().private_key.as_ref().unwrap().algorithm.clone();
    assert_eq!(algo, Some(CertificateSpecPrivateKeyAlgorithm::Ecdsa));
    // A value the schema does not list is kept, not an error.
    let api = cert_lister.certificates("b").get("api").unwrap();
    let algo = api.spec.as_ref().unwrap().private_key.as_ref().unwrap().algorithm.clone();
    assert_eq!(algo, Some(CertificateSpecPrivateKeyAlgorithm::Other("SomethingNew".into())));
    assert_eq!(cert_lister.list(&parse_label_selector("team=a").unwrap()).len(), 2);

    let issuer = factory.cert_manager_io().v1().clusterissuers().lister().unwrap().get("ca").unwrap();
    assert_eq!(issuer.spec.ca.as_ref().unwrap().secret_name, "ca-key");

    // Changes reach the typed listers.
    certs.delete("a/web").expect("it exists");
    let lister = cert_lister.clone();
    wait_until(|| lister.certificates("a").get("web").is_err()).await;
    factory.shutdown().await;
}

async fn wait_until(mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 5 s");
}

#[tokio::test(crate = "informer_runtime::reexports::tokio")]
async fn for_resource_knows_every_generated_resource_and_names_unknown_ones() {
    let factory = informer_gen_sample::new_factory(offline_client(), FactoryOptions::default());
    let generic = factory.for_resource(&Gvr::new("apps", "v1", "deployments")).unwrap();
    let typed: SharedIndexInformer<Deployment> = generic.downcast().expect("a Deployment informer");
    assert_eq!(typed.handler_count(), 0);
    // Shared with the typed accessor: a handler added through one is seen by the other.
    let via_accessor = factory.apps().v1().deployments().informer().unwrap();
    let _reg = via_accessor.add_event_handler(informer_runtime::HandlerFn(|_: &informer_runtime::Event<Deployment>| {})).unwrap();
    assert_eq!(typed.handler_count(), 1);
    assert!(factory.for_resource(&Gvr::new("cert-manager.io", "v1", "certificates")).unwrap().downcast::<Certificate>().is_some());
    assert!(factory.for_resource(&Gvr::new("gateway.networking.k8s.io", "v1beta1", "referencegrants")).is_ok());
    let err = factory.for_resource(&Gvr::new("example.com", "v1", "widgets")).err().expect("unknown GVR fails");
    assert!(matches!(&err, Error::NoInformerForResource(g) if g.resource == "widgets"), "{err}");
    assert!(err.to_string().contains("example.com/v1/widgets"), "{err}");
    let registered = informer_gen_sample::registry().resources().count();
    assert_eq!(registered, 91, "83 list/watch kinds of the v1.35 spec + 8 CRD versions");
    factory.shutdown().await;
    assert!(matches!(factory.for_resource(&Gvr::new("apps", "v1", "deployments")), Err(Error::ShutDown)));
}

#[test]
fn crd_types_round_trip_and_serialize_their_type_meta() {
    let input = json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "a"},
        "spec": {
            "secretName": "web-tls",
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "dnsNames": ["a.example.com"],
            "duration": "2160h",
            "privateKey": {"algorithm": "RSA", "size": 2048, "rotationPolicy": "Always"},
            "usages": ["digital signature", "key encipherment", "a usage from the future"]
        },
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}], "revision": 3}
    });
    let cert: Certificate = serde_json::from_value(input.clone()).unwrap();
    assert_eq!(serde_json::to_value(&cert).unwrap(), input);
    // Built in Rust, it still carries apiVersion and kind (so kube's Api can send it).
    let built = Certificate { metadata: meta(Some("a"), "x", &[]), spec: None, status: None };
    let v = serde_json::to_value(&built).unwrap();
    assert_eq!(v["apiVersion"], "cert-manager.io/v1");
    assert_eq!(v["kind"], "Certificate");
    assert_eq!(Certificate::plural(&()), "certificates");
    assert_eq!(ClusterIssuer::api_version(&()), "cert-manager.io/v1");
    assert_eq!(Certificate::url_path(&(), Some("a")), "/apis/cert-manager.io/v1/namespaces/a/certificates");
    assert_eq!(ClusterIssuer::url_path(&(), None), "/apis/cert-manager.io/v1/clusterissuers");
}

#[test]
fn crd_types_box_optional_sub_objects_and_decode_vectors_to_their_length() {
    use informer_gen_sample::monitoring_coreos_com::v1::{ServiceMonitor, ServiceMonitorSpecEndpoints, ServiceMonitorSpecEndpointsTlsConfig};
    let endpoint = json!({"port": "web", "tlsConfig": {"serverName": "a.svc", "insecureSkipVerify": false},
        "relabelings": [{"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "pod"}]});
    let input = json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "web", "namespace": "a"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "endpoints": [endpoint, endpoint, endpoint, endpoint, endpoint]}
    });
    // From text, as informers decode (a serde_json::Value would tell serde the lengths).
    let sm: ServiceMonitor = serde_json::from_str(&input.to_string()).unwrap();
    assert_eq!(serde_json::to_value(&sm).unwrap(), input);
    let endpoints = &sm.spec.endpoints;
    assert_eq!((endpoints.len(), endpoints.capacity()), (5, 5));
    let relabelings = endpoints[0].relabelings.as_ref().unwrap();
    assert_eq!((relabelings.len(), relabelings.capacity()), (1, 1));
    // An optional sub-object is one pointer when absent.
    let tls: Option<&Box<ServiceMonitorSpecEndpointsTlsConfig>> = endpoints[0].tls_config.as_ref();
    assert_eq!(tls.unwrap().server_name.as_deref(), Some("a.svc"));
    assert!(endpoints[0].oauth2.is_none());
    assert!(std::mem::size_of::<ServiceMonitorSpecEndpoints>() < 512, "{}", std::mem::size_of::<ServiceMonitorSpecEndpoints>());
}
