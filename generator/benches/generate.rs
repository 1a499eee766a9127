//! Generator benchmark: the Kubernetes v1.35 spec (v2 and v3) plus the whole CRD corpus in
//! one run, rendered in memory, in the package layout and in the single-file layout. Prints
//! a table of wall time (median of 5) and peak memory.
//! Reads `../shared/schemas` or `$INFORMER_GEN_SCHEMAS`; says so and exits when absent.
//! Run with `cargo bench -p informer-gen`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let schemas = std::env::var_os("INFORMER_GEN_SCHEMAS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/schemas"));
    if !schemas.join("crds").is_dir() {
        println!("skipped: no schema corpus at {} (set INFORMER_GEN_SCHEMAS)", schemas.display());
        return;
    }
    println!("| input | layout | resources | files | bytes out | wall (median of 5) | min..max | peak RSS so far |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, layout) in [
        ("package (the CLI's)", informer_gen::Layout::Package("bench".into())),
        ("one file (build.rs's)", informer_gen::Layout::SingleFile("informers.rs".into())),
    ] {
        let mut cfg = informer_gen::Config::new();
        cfg.input(schemas.join("openapi/v2"))
            .input(schemas.join("openapi/v3"))
            .input(schemas.join("crds"))
            .out_dir(std::env::temp_dir().join("informer-gen-bench"))
            .layout(layout)
            .rerun_if_changed(false);
        let mut times: Vec<Duration> = Vec::new();
        let mut files = 0;
        let mut bytes = 0;
        let mut resources = 0;
        for _ in 0..5 {
            let start = Instant::now();
            let r = cfg.render().expect("the corpus generates");
            times.push(start.elapsed());
            files = r.files.len();
            bytes = r.files.values().map(String::len).sum::<usize>();
            resources = r.resources.len();
        }
        times.sort();
        println!(
            "| v1.35 v2 + v3 + CRD corpus | {name} | {resources} | {files} | {bytes} | {:.2?} | {:.2?}..{:.2?} | {} MiB |",
            times[2],
            times[0],
            times[4],
            peak_rss_kib().map(|k| k / 1024).unwrap_or(0)
        );
    }
}
