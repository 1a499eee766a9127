//! Generates informers through the `build.rs` API (single files in `OUT_DIR`,
//! `cargo:rerun-if-changed` for each input), as a user's crate would: the sample CRDs, and
//! in the memory-lean layout the built-in Pods and ConfigMaps and the sample CRDs.

fn main() {
    let crds = informer_gen::Config::new().input("../generated-sample/schemas/crds").generate();
    let lean = informer_gen::Config::new()
        .input("../generated-sample/schemas/swagger.json")
        .lean_type("io.k8s.api.core.v1.Pod")
        .lean_type("io.k8s.api.core.v1.ConfigMap")
        .layout(informer_gen::Layout::SingleFile("lean_builtin.rs".into()))
        .generate();
    // Every sample custom resource in the memory-lean layout, named as the API server names
    // their definitions.
    let lean_crds = informer_gen::Config::new()
        .input("../generated-sample/schemas/crds")
        .lean_type("io.cert-manager.v1.Certificate")
        .lean_type("io.cert-manager.v1.ClusterIssuer")
        .lean_type("io.cert-manager.v1.Issuer")
        .lean_type("io.k8s.networking.gateway.v1.GatewayClass")
        .lean_type("io.k8s.networking.gateway.v1beta1.GatewayClass")
        .lean_type("io.k8s.networking.gateway.v1.ReferenceGrant")
        .lean_type("io.k8s.networking.gateway.v1beta1.ReferenceGrant")
        .lean_type("com.coreos.monitoring.v1.ServiceMonitor")
        .layout(informer_gen::Layout::SingleFile("lean_crds.rs".into()))
        .generate();
    for result in [crds.map(drop), lean.map(drop), lean_crds.map(drop)] {
        if let Err(e) = result {
            // A build script reports errors by failing; the message names file and schema path.
            eprintln!("informer-gen: {e}");
            std::process::exit(1);
        }
    }
}
