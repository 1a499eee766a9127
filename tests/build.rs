//! Generates informers through the `build.rs` API (single files in `OUT_DIR`,
//! `cargo:rerun-if-changed` for each input), as a user's crate would: the sample CRDs, and
//! the built-in Pods and ConfigMaps in the memory-lean layout.

fn main() {
    let crds = informer_gen::Config::new().input("../generated-sample/schemas/crds").generate();
    let lean = informer_gen::Config::new()
        .input("../generated-sample/schemas/swagger.json")
        .lean_type("io.k8s.api.core.v1.Pod")
        .lean_type("io.k8s.api.core.v1.ConfigMap")
        .layout(informer_gen::Layout::SingleFile("lean_builtin.rs".into()))
        .generate();
    for result in [crds.map(drop), lean.map(drop)] {
        if let Err(e) = result {
            // A build script reports errors by failing; the message names file and schema path.
            eprintln!("informer-gen: {e}");
            std::process::exit(1);
        }
    }
}
