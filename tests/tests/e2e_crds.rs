//! Real CRDs (the project's fixtures: cert-manager, Gateway API with two served versions,
//! prometheus-operator) installed on a real kube-apiserver; the generated CRD informers,
//! listers and types see exactly what the server holds, and a typed round trip loses nothing;
//! the same through the CRDs' memory-lean types.

use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_sample::cert_manager_io::v1::{Certificate, CertificateSpecPrivateKeyAlgorithm, ClusterIssuer};
use informer_gen_tests::e2e::{Cluster, install_crds, EventLog, Seen, assert_sequence, eventually};
use informer_runtime::reexports::kube_client::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use informer_runtime::reexports::kube_client::{Api, Client};
use informer_runtime::reexports::serde_json::{self, Value, json};
use informer_runtime::{FactoryOptions, Selector, parse_label_selector};

fn dynamic_api(client: &Client, group: &str, version: &str, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// The object exactly as the server serves it, as JSON.
async fn server_json(api: &Api<DynamicObject>, name: &str) -> Value {
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

/// Certificates that set nearly every field the v1 schema has.
fn certificate(ns: &str, name: &str, algorithm: &str) -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": ns, "labels": {"tier": if algorithm == "ECDSA" { "edge" } else { "core" }},
                     "annotations": {"note": "e2e"}},
        "spec": {
            "secretName": format!("{name}-tls"),
            "commonName": format!("{name}.example.test"),
            "dnsNames": [format!("{name}.example.test"), "alt.example.test"],
            "ipAddresses": ["127.0.0.1"],
            "uris": ["spiffe://example.test/ns/x"],
            "emailAddresses": ["ops@example.test"],
            "duration": "2160h0m0s",
            "renewBefore": "360h0m0s",
            "isCA": false,
            "usages": ["digital signature", "key encipherment", "server auth"],
            "issuerRef": {"name": "ca-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "privateKey": {"algorithm": algorithm, "size": if algorithm == "ECDSA" { 256 } else { 2048 }, "rotationPolicy": "Always", "encoding": "PKCS8"},
            "subject": {"organizations": ["Example"], "countries": ["DE"], "serialNumber": "42"},
            "secretTemplate": {"labels": {"app": name}, "annotations": {"a": "b"}},
            "additionalOutputFormats": [{"type": "CombinedPEM"}, {"type": "DER"}],
            "keystores": {"pkcs12": {"create": true, "passwordSecretRef": {"name": "pw", "key": "password"}, "profile": "Modern2023"}},
            "revisionHistoryLimit": 3
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_informers_listers_and_types_match_the_server() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    install_crds(
        &client,
        &["cert-manager.io_certificates.yaml", "cert-manager.io_clusterissuers.yaml", "cert-manager.io_issuers.yaml", "gateway.networking.k8s.io_referencegrants.yaml", "monitoring.coreos.com_servicemonitors.yaml"],
    )
    .await;
    let ns_guard = cluster.namespace(&client, "crds").await;
    let ns = ns_guard.name.as_str();
    let certs = dynamic_api(&client, "cert-manager.io", "v1", "Certificate", "certificates", Some(ns));
    let issuers = dynamic_api(&client, "cert-manager.io", "v1", "ClusterIssuer", "clusterissuers", None);
    let pp = PostParams::default();
    let create = |api: &Api<DynamicObject>, v: Value| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &serde_json::from_value::<DynamicObject>(v).unwrap()).await.unwrap() }
    };
    for i in 0..4 {
        create(&certs, certificate(ns, &format!("cert-{i}"), if i % 2 == 0 { "ECDSA" } else { "RSA" })).await;
    }
    let issuer_name = format!("{ns}-ca");
    create(&issuers, json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": {"name": issuer_name},
        "spec": {"ca": {"secretName": "ca-key-pair", "crlDistributionPoints": ["http://crl.example.test"]}}}))
    .await;

    let factory = informer_gen_sample::new_factory(client.clone(), FactoryOptions::default());
    let cert_informer = factory.cert_manager_io().v1().certificates();
    let log = EventLog::<Certificate>::default();
    cert_informer.informer().unwrap().add_event_handler(log.clone()).unwrap();
    let issuer_informer = factory.cert_manager_io().v1().clusterissuers();
    let grants_v1 = factory.gateway().v1().referencegrants();
    let grants_v1beta1 = factory.gateway().v1beta1().referencegrants();
    let monitors = factory.monitoring_coreos_com().v1().servicemonitors();
    for informer in [grants_v1.informer().map(|_| ()), grants_v1beta1.informer().map(|_| ()), monitors.informer().map(|_| ()), issuer_informer.informer().map(|_| ())] {
        informer.unwrap();
    }
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync().await.values().all(|s| *s));

    // Typed objects from the cache carry exactly what the server holds.
    let cert_lister = cert_informer.lister().unwrap();
    assert_eq!(cert_lister.certificates(ns).list(&Selector::default()).len(), 4);
    for i in 0..4 {
        let name = format!("cert-{i}");
        let cached: &Certificate = &cert_lister.certificates(ns).get(&name).unwrap();
        assert_eq!(serde_json::to_value(cached).unwrap(), server_json(&certs, &name).await, "{name} round-trips through the typed Certificate");
    }
    let edge = cert_lister.certificates(ns).list(&parse_label_selector("tier=edge").unwrap());
    assert_eq!(edge.len(), 2);
    assert!(edge.iter().all(|c| c.spec.as_ref().unwrap().private_key.as_ref().unwrap().algorithm == Some(CertificateSpecPrivateKeyAlgorithm::Ecdsa)));
    let issuer: &ClusterIssuer = &issuer_informer.lister().unwrap().get(&issuer_name).unwrap();
    assert_eq!(serde_json::to_value(issuer).unwrap(), server_json(&issuers, &issuer_name).await);

    // Changes: spec update, status through the subresource, delete — seen in order.
    let mut expected = Vec::new();
    let mut c = certs.get("cert-0").await.unwrap();
    c.data["spec"]["dnsNames"] = json!(["changed.example.test"]);
    let c = certs.replace("cert-0", &pp, &c).await.unwrap();
    expected.push(Seen { kind: "UPDATED", key: format!("{ns}/cert-0"), rv: c.metadata.resource_version.clone().unwrap(), initial: false, tombstone: false });
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Issued", "message": "ok",
        "lastTransitionTime": "2026-11-22T00:00:00Z", "observedGeneration": 2}], "notAfter": "2027-02-20T00:00:00Z", "revision": 1}});
    let c = certs.patch_status("cert-1", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    expected.push(Seen { kind: "UPDATED", key: format!("{ns}/cert-1"), rv: c.metadata.resource_version.clone().unwrap(), initial: false, tombstone: false });
    certs.delete("cert-2", &DeleteParams::default()).await.unwrap();
    expected.push(Seen { kind: "DELETED", key: format!("{ns}/cert-2"), rv: String::new(), initial: false, tombstone: false });
    let mine = || log.seen().into_iter().filter(|s| s.key.starts_with(&format!("{ns}/")) && !s.initial).collect::<Vec<_>>();
    eventually(Duration::from_secs(30), "certificate events", || mine().len() >= 3).await;
    assert_sequence(&mine(), &expected);
    for name in ["cert-0", "cert-1"] {
        let cached = cert_lister.certificates(ns).get(name).unwrap();
        assert_eq!(serde_json::to_value(&*cached).unwrap(), server_json(&certs, name).await, "{name} after change");
    }
    let ready = cert_lister.certificates(ns).get("cert-1").unwrap();
    assert_eq!(ready.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].reason.as_deref(), Some("Issued"));
    assert!(cert_lister.certificates(ns).get("cert-2").is_err());

    // A CRD with two served versions: both generated informers see the object, each in its version.
    let grants = dynamic_api(&client, "gateway.networking.k8s.io", "v1", "ReferenceGrant", "referencegrants", Some(ns));
    create(&grants, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ReferenceGrant", "metadata": {"name": "allow", "namespace": ns},
        "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "web"}], "to": [{"group": "", "kind": "Service", "name": "api"}]}}))
    .await;
    let (v1, v1beta1) = (grants_v1.lister().unwrap(), grants_v1beta1.lister().unwrap());
    eventually(Duration::from_secs(30), "reference grant in both versions", || v1.referencegrants(ns).get("allow").is_ok() && v1beta1.referencegrants(ns).get("allow").is_ok()).await;
    let beta_api = dynamic_api(&client, "gateway.networking.k8s.io", "v1beta1", "ReferenceGrant", "referencegrants", Some(ns));
    assert_eq!(serde_json::to_value(&*v1.referencegrants(ns).get("allow").unwrap()).unwrap(), server_json(&grants, "allow").await);
    assert_eq!(serde_json::to_value(&*v1beta1.referencegrants(ns).get("allow").unwrap()).unwrap(), server_json(&beta_api, "allow").await);

    // prometheus-operator: the schema with the bare `=` enum value, through the cache.
    let sms = dynamic_api(&client, "monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", Some(ns));
    create(&sms, json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "api", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "api"}}, "endpoints": [{"port": "http", "interval": "30s",
            "relabelings": [{"action": "replace", "sourceLabels": ["__meta_x"], "targetLabel": "x", "separator": "="}],
            "metricRelabelings": [{"action": "drop", "regex": "go_.*", "sourceLabels": ["__name__"]}]}]}}))
    .await;
    let sm_lister = monitors.lister().unwrap();
    eventually(Duration::from_secs(30), "service monitor", || sm_lister.servicemonitors(ns).get("api").is_ok()).await;
    assert_eq!(serde_json::to_value(&*sm_lister.servicemonitors(ns).get("api").unwrap()).unwrap(), server_json(&sms, "api").await);

    // The same resources through their lean types: objects carry what the server holds, and
    // label selectors match the labels `LeanMeta` keeps apart.
    let lean_factory = informer_gen_tests::lean_crds::new_factory(client.clone(), FactoryOptions::default());
    let lean_certs = informer_gen_tests::lean_crds::InformerFactoryExt::cert_manager_io(&lean_factory).v1().certificates();
    let lean_monitors = informer_gen_tests::lean_crds::InformerFactoryExt::monitoring_coreos_com(&lean_factory).v1().servicemonitors();
    lean_certs.informer().unwrap();
    lean_monitors.informer().unwrap();
    lean_factory.start().unwrap();
    assert!(lean_factory.wait_for_cache_sync().await.values().all(|s| *s));
    let (lean_cert_lister, lean_sm_lister) = (lean_certs.lister().unwrap(), lean_monitors.lister().unwrap());
    let names = |selector: &str| -> (Vec<String>, Vec<String>) {
        let selector = parse_label_selector(selector).unwrap();
        let name = |m: &informer_runtime::reexports::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| m.name.clone().unwrap();
        let mut lean: Vec<String> = lean_cert_lister.certificates(ns).list(&selector).iter().map(|c| name(&c.metadata.object_meta)).collect();
        let mut plain: Vec<String> = cert_lister.certificates(ns).list(&selector).iter().map(|c| name(&c.metadata)).collect();
        lean.sort();
        plain.sort();
        (lean, plain)
    };
    for selector in ["tier=edge", "tier=core", "tier"] {
        let (lean, plain) = names(selector);
        assert!(!lean.is_empty() && lean == plain, "{selector}: lean {lean:?}, plain {plain:?}");
    }
    for name in ["cert-0", "cert-1", "cert-3"] {
        let cached = lean_cert_lister.certificates(ns).get(name).unwrap();
        assert_eq!(serde_json::to_value(&*cached).unwrap(), server_json(&certs, name).await, "{name} through the lean Certificate");
    }
    let cached = lean_sm_lister.servicemonitors(ns).get("api").unwrap();
    assert_eq!(serde_json::to_value(&*cached).unwrap(), server_json(&sms, "api").await, "the lean ServiceMonitor");
    lean_factory.shutdown().await;
    factory.shutdown().await;
}
