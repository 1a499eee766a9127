//! Generates informers for the sample CRDs through the `build.rs` API (single file in
//! `OUT_DIR`, `cargo:rerun-if-changed` for each input), as a user's crate would.

fn main() {
    if let Err(e) = informer_gen::Config::new().input("../generated-sample/schemas/crds").generate() {
        // A build script reports errors by failing; the message names file and schema path.
        eprintln!("informer-gen: {e}");
        std::process::exit(1);
    }
}
