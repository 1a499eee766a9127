//! The `build.rs` output compiles and works like the committed package.

use informer_gen_tests::crds::{InformerFactoryExt, registry};
use informer_runtime::Gvr;

#[test]
fn build_rs_output_registers_every_sample_crd_version() {
    let gvrs: Vec<String> = registry().resources().map(Gvr::to_string).collect();
    assert_eq!(
        gvrs,
        [
            "cert-manager.io/v1/certificates",
            "cert-manager.io/v1/clusterissuers",
            "cert-manager.io/v1/issuers",
            "gateway.networking.k8s.io/v1/gatewayclasses",
            "gateway.networking.k8s.io/v1/referencegrants",
            "gateway.networking.k8s.io/v1beta1/gatewayclasses",
            "gateway.networking.k8s.io/v1beta1/referencegrants",
            "monitoring.coreos.com/v1/servicemonitors",
        ]
    );
}

#[tokio::test]
async fn build_rs_output_has_the_factory_accessors() {
    let client = informer_runtime::reexports::kube_client::Client::try_from(
        informer_runtime::reexports::kube_client::Config::new("http://127.0.0.1:9".parse().unwrap()),
    )
    .unwrap();
    let factory = informer_runtime::SharedInformerFactory::new(client);
    let inf = factory.monitoring_coreos_com().v1().servicemonitors().informer().unwrap();
    assert!(!inf.has_synced());
    assert_eq!(factory.start().unwrap(), 1);
    factory.shutdown().await;
}

#[test]
fn build_rs_prints_rerun_if_changed_for_every_input() {
    let out = std::path::Path::new(env!("OUT_DIR")).join("../output");
    let text = std::fs::read_to_string(&out).expect("cargo keeps the build script's stdout");
    for f in ["cert-manager.io_certificates.yaml", "monitoring.coreos.com_servicemonitors.yaml", "gateway.networking.k8s.io_referencegrants.yaml"] {
        assert!(text.lines().any(|l| l.starts_with("cargo:rerun-if-changed=") && l.ends_with(f)), "no rerun line for {f}");
    }
    assert!(text.contains("cargo:rerun-if-changed=../generated-sample/schemas/crds\n"));
}
