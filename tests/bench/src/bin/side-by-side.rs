//! One command for the side-by-side benchmark: builds the Go programs (replay server,
//! client-go client), starts the replay server per workload, runs each client in its own
//! process several times, and prints one Markdown table with ratios.
//!
//! ```text
//! cargo run --release -p informer-gen-bench --bin side-by-side -- [--n 10000] [--runs 5] [--out bench-run.md]
//!     [--sections sync,listers,memory,generator,check,check-projects,events] [--workloads configmaps,pods-shared,pods-unique,servicemonitors] [--groups kept,dropped,metadata] [--events N] [--paced-events 3000] [--rate 1000]
//!     [--list-delay 20ms]
//! ```
//!
//! `--out` writes the machine line and the tables to that file, replacing it (`BENCHMARKS.md`
//! keeps runs with notes written by hand, so it is not the file to pass).
//! `--list-delay` makes the replay server wait that long (a Go duration) before each list
//! page, as a real API server takes time to serve one. `--groups` selects rows in the sync
//! section (full objects, managedFields dropped, metadata-only informers) and in the memory
//! and events sections (`kept`: full objects, `metadata`: metadata-only informers).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use informer_gen_bench::arg;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn go_build(out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    for prog in ["replay-server", "bench-clientgo"] {
        let status = Command::new("go")
            .args(["build", "-trimpath", "-o"])
            .arg(out.join(prog))
            .arg(format!("./cmd/{prog}"))
            .current_dir(root().join("tests/go"))
            .env("GOFLAGS", "-mod=readonly -buildvcs=false")
            .status()
            .expect("go build (is Go installed?)");
        assert!(status.success(), "go build {prog} failed");
    }
}

struct Replay {
    child: Child,
    url: String,
    bytes: f64,
}

impl Drop for Replay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replay server for `workload` over `n` objects, started and warmed: it answers only once
/// it has encoded the list pages and WatchList streams every client asks for, and the churn
/// events of `warm_events` objects, so no client's figures carry the server's first encoding.
fn replay(bin: &Path, workload: &str, n: usize, warm_events: usize) -> Replay {
    let delay = arg("--list-delay").map(|d| vec!["--list-delay".to_string(), d]).unwrap_or_default();
    let mut child = Command::new(bin.join("replay-server"))
        .args(["--workload", workload, "--n", &n.to_string(), "--warm-events", &warm_events.to_string()])
        .args(delay)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines
        .next()
        .unwrap()
        .unwrap()
        .trim_start_matches("listening ")
        .to_string();
    let sizes = lines.next().unwrap().unwrap();
    let bytes: f64 = sizes.rsplit(' ').next().unwrap().parse().unwrap();
    Replay { child, url, bytes }
}

fn run(cmd: &Path, args: &[&str]) -> Value {
    let out = Command::new(cmd)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "{} {args:?} failed", cmd.display());
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// Whether `--sections` (comma-separated; default: all) asks for `name`.
fn section(name: &str) -> bool {
    arg("--sections").is_none_or(|s| s.split(',').any(|x| x == name))
}

/// A measure's median, min and max over runs.
type Spread = (f64, f64, f64);

/// Median, min and max.
fn stats(mut v: Vec<f64>) -> Spread {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let n: usize = arg("--n").map(|s| s.parse().unwrap()).unwrap_or(10_000);
    let runs: usize = arg("--runs").map(|s| s.parse().unwrap()).unwrap_or(5);
    let here = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    if !here.join("bench-ours").exists() || !here.join("bench-kube-rs").exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "informer-gen-bench", "--bins"])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let go_bin = root().join("target/bench-go");
    go_build(&go_bin);

    let mut table = String::new();
    let ours = here.join("bench-ours");
    let clients: [(&str, PathBuf, &[&str]); 4] = [
        ("informer-gen (lean)", ours.clone(), &["--lean"]),
        ("informer-gen (k8s-openapi)", ours.clone(), &[]),
        ("client-go", go_bin.join("bench-clientgo"), &[]),
        ("kube-rs", here.join("bench-kube-rs"), &[]),
    ];
    if section("sync") {
        // Ours also with a paged list: kube-rs lists in pages by default, ours and client-go
        // stream WatchList, whose per-event framing costs more on small objects.
        // JSON, then protobuf (client-go's default wire format and ours for built-in kinds;
        // the custom resource is JSON only).
        let sync_clients: [(&str, PathBuf, &[&str]); 9] = [
            ("informer-gen (lean)", ours.clone(), &["--lean"]),
            (
                "informer-gen (lean, paged list)",
                ours.clone(),
                &["--lean", "--paged-list"],
            ),
            ("informer-gen (k8s-openapi)", ours.clone(), &[]),
            ("client-go", go_bin.join("bench-clientgo"), &[]),
            ("kube-rs", here.join("bench-kube-rs"), &[]),
            (
                "informer-gen (lean, protobuf)",
                ours.clone(),
                &["--lean", "--protobuf"],
            ),
            (
                "informer-gen (lean, protobuf, paged list)",
                ours.clone(),
                &["--lean", "--protobuf", "--paged-list"],
            ),
            (
                "client-go (protobuf)",
                go_bin.join("bench-clientgo"),
                &["--protobuf"],
            ),
            (
                "client-go (protobuf, paged list)",
                go_bin.join("bench-clientgo"),
                &["--protobuf", "--paged-list"],
            ),
        ];
        sync_table(&mut table, &go_bin, &ours, &sync_clients, n, runs);
    }
    if section("listers") {
        lister_table(&mut table, &go_bin, &clients, n, runs);
    }
    if section("memory") {
        // Also on protobuf, client-go's default: a WatchList's frames and a relist's pages.
        let memory_clients: [(&str, PathBuf, &[&str]); 6] = [
            clients[0].clone(),
            clients[1].clone(),
            clients[2].clone(),
            clients[3].clone(),
            (
                "informer-gen (lean, protobuf)",
                ours.clone(),
                &["--lean", "--protobuf"],
            ),
            (
                "client-go (protobuf)",
                go_bin.join("bench-clientgo"),
                &["--protobuf"],
            ),
        ];
        memory_table(&mut table, &go_bin, &memory_clients, n, runs);
    }
    let generators = (section("generator") || section("check") || section("check-projects"))
        .then(|| Generators::prepare(&mut table, &go_bin))
        .flatten();
    if let Some(generators) = generators {
        if section("generator") {
            generator_table(&mut table, &generators);
        }
        if section("check") {
            check_table(&mut table, &generators);
        }
        if section("check-projects") {
            check_projects_table(&mut table, &generators);
        }
    }
    if section("events") {
        let event_clients: [(&str, PathBuf, &[&str]); 7] = [
            (
                "informer-gen (lean, streams)",
                ours.clone(),
                &["--lean", "--streams"],
            ),
            (
                "informer-gen (lean, handler threads)",
                ours.clone(),
                &["--lean"],
            ),
            (
                "informer-gen (k8s-openapi, streams)",
                ours.clone(),
                &["--streams"],
            ),
            ("client-go", go_bin.join("bench-clientgo"), &[]),
            ("kube-rs", here.join("bench-kube-rs"), &[]),
            // Protobuf, client-go's default (kube-rs has none).
            (
                "informer-gen (lean, streams, protobuf)",
                ours.clone(),
                &["--lean", "--streams", "--protobuf"],
            ),
            (
                "client-go (protobuf)",
                go_bin.join("bench-clientgo"),
                &["--protobuf"],
            ),
        ];
        event_table(&mut table, &go_bin, &event_clients, n, runs);
    }
    println!("{table}");
    if let Some(out) = arg("--out") {
        let machine = format!(
            "Machine: {} cores, {} (`/proc/cpuinfo`), {}.\n",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            std::fs::read_to_string("/proc/cpuinfo")
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .unwrap_or("?")
                .trim(),
            String::from_utf8(Command::new("go").arg("version").output().unwrap().stdout)
                .unwrap()
                .trim()
        );
        std::fs::write(out, format!("{machine}\n{table}")).unwrap();
    }
}

type Clients<'a> = [(&'a str, PathBuf, &'a [&'a str]); 4];

/// A client's row name, program and extra arguments.
type ClientRun<'a> = (&'a str, PathBuf, &'a [&'a str]);

fn sync_table(
    table: &mut String,
    go_bin: &Path,
    ours: &Path,
    clients: &[(&str, PathBuf, &[&str])],
    n: usize,
    runs: usize,
) {
    if let Some(delay) = arg("--list-delay") {
        table.push_str(&format!("Each list page served after a wait of {delay} (`--list-delay`).\n\n"));
    }
    table.push_str(&format!("N = {n} objects per workload; median of {runs} runs (min–max); heap = live heap bytes after sync ÷ N (Rust: counting allocator; Go: HeapAlloc after GC); RSS = growth of the resident set over the sync ÷ N; JSON everywhere but the protobuf rows (built-in kinds; the share of the decode ceiling there compares with decoding the JSON form of the same objects). Ratios are against the first row of each group (informer-gen). servicemonitors: a custom resource (prometheus-operator's ServiceMonitor), ours on the lean types informer-gen emits from its CRD (`lean_type`) and on its plain types, kube-rs on the plain types, client-go through a dynamic informer (unstructured). Metadata only: each client's metadata-only informer (ours: `LeanPartialObjectMeta`, managedFields as interned compact JSON; client-go's metadatainformer; kube-rs: a watcher of `PartialObjectMeta`).\n\n"));
    table.push_str("| workload (JSON bytes/object) | managedFields | client | heap/object | first ÷ it | RSS/object | time to synced | objects/s | first's speed ÷ its | share of decode ceiling |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let metadata_clients = metadata_clients(clients, false);
    for workload in ["configmaps", "pods-shared", "pods-unique", "servicemonitors"] {
        if !self::workload(workload) {
            continue;
        }
        let resource = resource_of(workload);
        let server = replay(go_bin, workload, n, 0);
        let per_obj = server.bytes / n as f64;
        let ceiling = |lean: bool| {
            let mut args = vec![
                "--server",
                server.url.as_str(),
                "--resource",
                resource,
                "--decode-ceiling",
            ];
            if lean {
                args.push("--lean");
            }
            run(ours, &args)["sync_seconds"].as_f64().unwrap()
        };
        let ceiling_k8s = ceiling(false);
        let ceiling_lean = ceiling(true);
        for (strip, metadata) in [(false, false), (true, false), (false, true)] {
            if strip && resource == "configmaps" {
                // The ConfigMaps of this workload carry no managedFields.
                continue;
            }
            if metadata && workload == "pods-unique" {
                // Metadata is as unique in pods-shared.
                continue;
            }
            // The name `--groups` selects by, and the table's managedFields column.
            let (group_name, managed_fields) = match (strip, metadata) {
                (true, _) => ("dropped", "dropped"),
                (_, true) => ("metadata", "kept, metadata only"),
                _ => ("kept", "kept"),
            };
            if !group(group_name) {
                continue;
            }
            let group = if metadata { metadata_clients.to_vec() } else { clients_of(workload, clients) };
            let mut rows = Vec::new();
            for (name, cmd, extra) in &group {
                let mut args = vec!["--server", server.url.as_str(), "--resource", resource];
                args.extend_from_slice(extra);
                if strip {
                    args.push(if name.starts_with("client-go") {
                        "--strip-managed-fields=true"
                    } else {
                        "--strip-managed-fields"
                    });
                }
                if extra.contains(&"--protobuf") {
                    // The server encodes protobuf pages on first use: one run it does not time.
                    run(cmd, &args);
                }
                let mut heaps = Vec::new();
                let mut rsss = Vec::new();
                let mut times = Vec::new();
                for _ in 0..runs {
                    let r = run(cmd, &args);
                    assert_eq!(
                        r["n"].as_u64().unwrap() as usize,
                        n,
                        "{name} cached every object"
                    );
                    heaps.push(r["heap_bytes"].as_f64().unwrap() / n as f64);
                    rsss.push(r["rss_bytes"].as_f64().unwrap_or(f64::NAN) / n as f64);
                    times.push(r["sync_seconds"].as_f64().unwrap());
                }
                rows.push((*name, stats(heaps), stats(rsss), stats(times)));
            }
            let (ours_heap, ours_time) = (rows[0].1.0, rows[0].3.0);
            for (i, (name, heap, rss, time)) in rows.iter().enumerate() {
                let ratio_heap = if i == 0 {
                    "—".to_string()
                } else {
                    format!("{:.2}×", ours_heap / heap.0)
                };
                let ratio_speed = if i == 0 {
                    "—".to_string()
                } else {
                    format!("{:.2}×", time.0 / ours_time)
                };
                let share = match *name {
                    _ if strip || metadata => "—".to_string(),
                    lean if lean.starts_with("informer-gen (lean") => {
                        format!(
                            "{:.0}% of {ceiling_lean:.2} s",
                            100.0 * ceiling_lean / time.0
                        )
                    }
                    ours if ours.starts_with("informer-gen") => {
                        format!("{:.0}% of {ceiling_k8s:.2} s", 100.0 * ceiling_k8s / time.0)
                    }
                    _ => "—".to_string(),
                };
                table.push_str(&format!(
                    "| {workload} ({per_obj:.0} B) | {managed_fields} | {name} | {:.1} KB ({:.1}–{:.1}) | {ratio_heap} | {:.1} KB | {:.2} s ({:.2}–{:.2}) | {:.0} | {ratio_speed} | {share} |\n",
                    heap.0 / 1000.0, heap.1 / 1000.0, heap.2 / 1000.0, rss.0 / 1000.0, time.0, time.1, time.2, n as f64 / time.0
                ));
            }
        }
        let types = if resource == "servicemonitors" { "lean CRD types / CRD types" } else { "lean types / k8s-openapi types" };
        table.push_str(&format!(
            "| {workload} ({per_obj:.0} B) | kept | serde_json decode ceiling ({types}) | — | — | — | {ceiling_lean:.2} s / {ceiling_k8s:.2} s | {:.0} / {:.0} | — | — |\n",
            n as f64 / ceiling_lean,
            n as f64 / ceiling_k8s,
        ));
        eprintln!("{workload}: done");
    }
}

fn lister_table(table: &mut String, go_bin: &Path, clients: &Clients, n: usize, runs: usize) {
    // Lister operations over the synced Pods (replicated workload).
    let server = replay(go_bin, "pods-shared", n, 0);
    table.push_str(&format!(
        "\n\nLister operations over {n} Pods (median of {runs} runs, min–max; each run: 1M `get`s by namespace and name in a scattered order, the same 1M through one read view (ours only: `lister.read()`, whose `get` borrows the object instead of cloning its `Arc`; its ratio is against each peer's `get`), 2,000 namespace lists (100 Pods), 200 selector lists `app=app-7` over all Pods (50 match), 2,000 namespace-index lookups). kube-rs's store has no namespace or custom index: its lists are scans of `state()`.\n\n"
    ));
    table.push_str("| client | get | lean ÷ it | get through a read view | lean ÷ its get | list namespace | lean ÷ it | selector list | lean ÷ it | index lookup | lean ÷ it |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    // (field, unit, the field of a peer that ours is divided by)
    let fields = [
        ("get_ns", "ns", "get_ns"),
        ("view_get_ns", "ns", "get_ns"),
        ("ns_list_us", "µs", "ns_list_us"),
        ("selector_list_us", "µs", "selector_list_us"),
        ("index_us", "µs", "index_us"),
    ];
    let mut medians: Vec<(&str, Vec<Option<Spread>>)> = Vec::new();
    for (name, cmd, extra) in clients {
        let mut args = vec![
            "--server",
            server.url.as_str(),
            "--resource",
            "pods",
            "--listers",
        ];
        args.extend_from_slice(extra);
        let results: Vec<Value> = (0..runs).map(|_| run(cmd, &args)).collect();
        let cols = fields.iter().map(|(f, _, _)| {
            let v: Vec<f64> = results.iter().filter_map(|r| r[*f].as_f64()).collect();
            (!v.is_empty()).then(|| stats(v))
        });
        medians.push((name, cols.collect()));
    }
    for (row_index, (name, cols)) in medians.iter().enumerate() {
        let mut row = format!("| {name} |");
        for (i, col) in cols.iter().enumerate() {
            let (_, unit, against) = fields[i];
            let against = fields.iter().position(|f| f.0 == against).expect("a field of the table");
            let ratio = match (&medians[0].1[i], &cols[against]) {
                _ if row_index == 0 => "—".to_string(),
                (Some(ours), Some(theirs)) => format!("{:.2}×", ours.0 / theirs.0),
                _ => "—".to_string(),
            };
            match col {
                Some((m, lo, hi)) => row.push_str(&format!(" {m:.1} {unit} ({lo:.1}–{hi:.1}) | {ratio} |")),
                None => row.push_str(&format!(" n/a | {ratio} |")),
            }
        }
        table.push_str(&row);
        table.push('\n');
    }
    drop(server);
}

/// Whether `--groups` (comma-separated among kept, dropped and metadata; default: all) asks
/// for the rows of `name`.
fn group(name: &str) -> bool {
    arg("--groups").is_none_or(|g| g.split(',').any(|x| x == name))
}

/// Each client's metadata-only informer, with the programs of `clients` (ours: the first
/// `informer-gen` row's program): ours, client-go's metadatainformer and kube-rs's watcher of
/// `PartialObjectMeta`; for the events section ours both as event streams and as handler
/// threads.
fn metadata_clients<'a>(clients: &[ClientRun<'a>], events: bool) -> Vec<ClientRun<'a>> {
    let program = |prefix: &str| clients.iter().find(|c| c.0.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix} among the clients")).1.clone();
    let (ours, client_go, kube_rs) = (program("informer-gen"), program("client-go"), program("kube-rs"));
    let mut rows: Vec<ClientRun<'a>> = if events {
        vec![
            ("informer-gen (metadata, streams)", ours.clone(), &["--metadata", "--streams"]),
            ("informer-gen (metadata, handler threads)", ours, &["--metadata"]),
        ]
    } else {
        vec![("informer-gen (metadata)", ours, &["--metadata"])]
    };
    rows.push(("client-go (metadata)", client_go, &["--metadata"]));
    rows.push(("kube-rs (metadata)", kube_rs, &["--metadata"]));
    rows
}

/// Whether `--workloads` (comma-separated; default: all) asks for `workload`.
fn workload(workload: &str) -> bool {
    arg("--workloads").is_none_or(|w| w.split(',').any(|x| x == workload))
}

/// The collection a workload's objects are served as.
fn resource_of(workload: &str) -> &str {
    match workload {
        "pods-shared" | "pods-unique" => "pods",
        other => other,
    }
}

/// The clients measured over `workload`: all of them over built-in kinds; over the custom
/// resource (JSON only, so no protobuf rows), ours on the lean types informer-gen emits from
/// its CRD (`lean_type`) and on its plain types (in place of the k8s-openapi rows), client-go's
/// dynamic informer and kube-rs on the plain generated types.
fn clients_of<'a>(workload: &str, clients: &[ClientRun<'a>]) -> Vec<ClientRun<'a>> {
    if workload != "servicemonitors" {
        return clients.to_vec();
    }
    clients
        .iter()
        .filter(|(_, _, extra)| !extra.contains(&"--protobuf"))
        .map(|(name, cmd, extra)| {
            let renamed = match *name {
                "client-go" => "client-go (dynamic informer)",
                "kube-rs" => "kube-rs (same CRD types)",
                "informer-gen (lean)" => "informer-gen (lean CRD types)",
                "informer-gen (lean, paged list)" => "informer-gen (lean CRD types, paged list)",
                "informer-gen (lean, streams)" => "informer-gen (lean CRD types, streams)",
                "informer-gen (lean, handler threads)" => "informer-gen (lean CRD types, handler threads)",
                "informer-gen (k8s-openapi)" => "informer-gen (CRD types)",
                "informer-gen (k8s-openapi, streams)" => "informer-gen (CRD types, streams)",
                other => panic!("no custom-resource name for {other}"),
            };
            (renamed, cmd.clone(), *extra)
        })
        .collect()
}

/// The rows `--groups` asks for among `clients` (the full objects, group `kept`) and their
/// metadata-only informers (group `metadata`), for the memory or the events section.
fn rows_of_groups<'a>(clients: Vec<ClientRun<'a>>, events: bool) -> Vec<ClientRun<'a>> {
    let metadata = if group("metadata") { metadata_clients(&clients, events) } else { Vec::new() };
    let mut rows = if group("kept") { clients } else { Vec::new() };
    rows.extend(metadata);
    rows
}

/// A replay server warmed for `workload` (see [`replay`]), the collection it serves and the
/// clients measured over it.
fn serve<'a, 'w>(
    go_bin: &Path,
    workload: &'w str,
    n: usize,
    warm_events: usize,
    clients: &[ClientRun<'a>],
) -> (Replay, &'w str, Vec<ClientRun<'a>>) {
    (replay(go_bin, workload, n, warm_events), resource_of(workload), clients_of(workload, clients))
}

/// Peak ÷ steady memory of the initial sync and of a relist forced by a 410 from the watch,
/// with WatchList and with a paged list, for each workload of `--workloads` among Pods no
/// two of which share a spec, ConfigMaps and the custom resource.
fn memory_table(
    table: &mut String,
    go_bin: &Path,
    clients: &[(&str, PathBuf, &[&str])],
    n: usize,
    runs: usize,
) {
    table.push_str(&format!(
        "\n\nPeak ÷ steady memory over {n} objects (pods-unique: Pods with nothing to share; configmaps; servicemonitors: the custom resource, ours on its lean and plain generated types, client-go through a dynamic informer, kube-rs on our plain generated types), median of {runs} runs (min–max). Steady: once synced. Peaks: during the initial sync, and during a relist forced by a 410 Expired on the watch (the server then serves the same objects again). Heap: Rust exact peak of the live heap (counting allocator); Go: heap in use sampled every millisecond (live and not yet collected objects; Go has no exact live peak) against the live heap after a GC. RSS: peak resident set (`VmHWM`, reset through `/proc/self/clear_refs`) against the resident set once synced. All growth over the process before the informer started. JSON but the protobuf rows (the server writes a protobuf WatchList event by event, as the API server does). Metadata only: each client's metadata-only informer, as in the sync section.\n\n"
    ));
    table.push_str("| workload | list | client | steady heap | initial sync: peak ÷ steady heap | RSS | relist: peak ÷ steady heap | RSS | relist time |\n|---|---|---|---|---|---|---|---|---|\n");
    for workload in ["pods-unique", "configmaps", "servicemonitors"].into_iter().filter(|w| self::workload(w)) {
        let (server, resource, clients) = serve(go_bin, workload, n, 0, clients);
        let clients = rows_of_groups(clients, false);
        for mode in ["WatchList", "paged list"] {
            for (name, cmd, extra) in &clients {
                let mut args = vec!["--server", server.url.as_str(), "--resource", resource, "--relist"];
                args.extend_from_slice(extra);
                match (mode, name.starts_with("kube-rs")) {
                    ("WatchList", true) => args.push("--watch-list"),
                    ("paged list", false) => args.push("--paged-list"),
                    _ => {}
                }
                let results: Vec<Value> = (0..runs).map(|_| run(cmd, &args)).collect();
                let col = |f: &dyn Fn(&Value) -> f64| stats(results.iter().map(f).collect());
                let num = |r: &Value, f: &str| r[f].as_f64().expect(f);
                let steady = col(&|r| num(r, "steady_heap") / n as f64);
                let init_heap = col(&|r| num(r, "initial_peak_heap") / num(r, "steady_heap"));
                let init_rss = col(&|r| num(r, "initial_peak_rss") / num(r, "steady_rss"));
                let re_heap = col(&|r| num(r, "relist_peak_heap") / num(r, "steady_heap"));
                let re_rss = col(&|r| num(r, "relist_peak_rss") / num(r, "steady_rss"));
                let re_time = col(&|r| num(r, "relist_seconds"));
                let f = |(m, lo, hi): Spread| format!("{m:.2} ({lo:.2}–{hi:.2})");
                table.push_str(&format!(
                    "| {workload} | {mode} | {name} | {:.1} KB/object | {} | {} | {} | {} | {:.2} s ({:.2}–{:.2}) |\n",
                    steady.0 / 1000.0,
                    f(init_heap),
                    f(init_rss),
                    f(re_heap),
                    f(re_rss),
                    re_time.0,
                    re_time.1,
                    re_time.2
                ));
            }
            eprintln!("memory, {workload}, {mode}: done");
        }
    }
}

/// Watch events to 1, 4 and 16 handlers, for each workload of `--workloads` among Pods from
/// templates, ConfigMaps and the custom resource: `--events` (default N) MODIFIED objects as
/// fast as the server writes them (throughput, CPU), then `--paced-events` (default 3,000)
/// at `--rate` (default 1,000/s) for latency from the server's write to each handler.
fn event_table(
    table: &mut String,
    go_bin: &Path,
    clients: &[(&str, PathBuf, &[&str])],
    n: usize,
    runs: usize,
) {
    let events = arg("--events").unwrap_or_else(|| n.to_string());
    let paced = arg("--paced-events").unwrap_or_else(|| "3000".into());
    let rate = arg("--rate").unwrap_or_else(|| "1000".into());
    table.push_str(&format!(
        "\n\nWatch events over {n} synced objects (pods-shared: Pods from templates; configmaps; servicemonitors: the custom resource, ours on its lean and plain generated types, client-go through a dynamic informer, kube-rs on our plain generated types), median of {runs} runs (min–max): {events} MODIFIED events written as fast as the replay server can (events/s until every handler had every event; CPU seconds of the client process per million events), then {paced} events at {rate}/s (latency from the server's write to the handler, over every handler call). Each handler reads the event's stamp annotation and counts it. Handlers: ours either as event streams (`SharedIndexInformer::stream`, one tokio task each) or as `EventHandler`s (a queue and an OS thread each); client-go's are event handlers (a queue and a goroutine each); kube-rs's are subscribers of a shared reflector (`reflector::store_shared`, `unstable-runtime-subscribe`), one task each. JSON but the protobuf rows (client-go's default; kube-rs has none). Metadata only: each client's metadata-only informer, as in the sync section; the server writes the events' metadata (`PartialObjectMetadata`). Ratios are against the first row of the same workload, wire format and group (full objects or metadata only).\n\n"
    ));
    table.push_str("| workload | handlers | client | events/s | first ÷ it | CPU s per 1M events | first ÷ it | latency p50 | latency p99 |\n|---|---|---|---|---|---|---|---|---|\n");
    let warm = [&events, &paced].iter().map(|e| e.parse::<usize>().expect("--events and --paced-events are counts")).max().unwrap();
    for workload in ["pods-shared", "configmaps", "servicemonitors"].into_iter().filter(|w| self::workload(w)) {
        let (server, resource, clients) = serve(go_bin, workload, n, warm, clients);
        let clients = rows_of_groups(clients, true);
        for handlers in ["1", "4", "16"] {
            let mut rows = Vec::new();
            for (name, cmd, extra) in &clients {
                let mut args = vec!["--server", server.url.as_str(), "--resource", resource];
                args.extend(["--handlers", handlers, "--events", &events]);
                args.extend(["--paced-events", &paced, "--rate", &rate]);
                args.extend_from_slice(extra);
                let results: Vec<Value> = (0..runs).map(|_| run(cmd, &args)).collect();
                let col = |f: &str| stats(results.iter().map(|r| r[f].as_f64().expect(f)).collect());
                rows.push((
                    *name,
                    col("events_per_s"),
                    col("cpu_s_per_million"),
                    col("p50_us"),
                    col("p99_us"),
                ));
            }
            // Each row against the first of its wire format and of its group (full objects or
            // metadata only).
            let kind = |name: &str| (name.contains("protobuf"), name.contains("metadata"));
            let first_of = |name: &str| {
                rows.iter()
                    .position(|r| kind(r.0) == kind(name))
                    .expect("a row of its format")
            };
            for (i, (name, eps, cpu, p50, p99)) in rows.iter().enumerate() {
                let first = first_of(name);
                let (lean_rate, lean_cpu) = (rows[first].1.0, rows[first].2.0);
                let (r_eps, r_cpu) = if i == first {
                    ("—".to_string(), "—".to_string())
                } else {
                    (
                        format!("{:.2}×", lean_rate / eps.0),
                        format!("{:.2}×", lean_cpu / cpu.0),
                    )
                };
                table.push_str(&format!(
                    "| {workload} | {handlers} | {name} | {:.0} ({:.0}–{:.0}) | {r_eps} | {:.0} ({:.0}–{:.0}) | {r_cpu} | {:.0} µs ({:.0}–{:.0}) | {:.0} µs ({:.0}–{:.0}) |\n",
                    eps.0, eps.1, eps.2, cpu.0, cpu.1, cpu.2, p50.0, p50.1, p50.2, p99.0, p99.1, p99.2
                ));
            }
            eprintln!("events, {workload}, to {handlers} handlers: done");
        }
    }
}

/// Wall time and peak RSS of one child process.
#[expect(clippy::zombie_processes, reason = "the child is reaped by `wait4`, which also gives its peak RSS")]
fn timed(cmd: &mut Command) -> (f64, f64, bool) {
    let start = std::time::Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut status = 0;
    // SAFETY: wait4 fills `usage` for the child we spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    (
        start.elapsed().as_secs_f64(),
        usage.ru_maxrss as f64 * 1024.0,
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    )
}

/// `timed` over child processes run one after the other: total wall time, the largest peak
/// RSS, and whether all succeeded.
fn timed_in_turn(cmds: impl IntoIterator<Item = Command>) -> (f64, f64, bool) {
    let (mut t, mut m, mut ok) = (0.0, 0.0f64, true);
    for mut cmd in cmds {
        let (ti, mi, oki) = timed(&mut cmd);
        t += ti;
        m = m.max(mi);
        ok &= oki;
    }
    (t, m, ok)
}

/// The three generators and their inputs, installed and listed once for the generator and
/// check sections.
struct Generators {
    swagger: PathBuf,
    crds: PathBuf,
    crd_files: Vec<PathBuf>,
    /// Every served version of the first CRD of each file, as kopium would be run to emit
    /// what ours emits (it takes one version of one CRD per run).
    crd_versions: Vec<(PathBuf, String)>,
    /// The `k8s.io/api` group-version packages code-generator reads.
    packages: Vec<String>,
    ours: PathBuf,
    /// Where code-generator's lister-gen and informer-gen are installed.
    gobin: PathBuf,
    kopium: PathBuf,
    header: PathBuf,
    go_dir: PathBuf,
    out: PathBuf,
}

impl Generators {
    /// Builds ours, installs code-generator v0.35.4 and kopium 0.24.1 as their users do; None
    /// (and a line in the table) without `../shared/schemas` (or `INFORMER_GEN_SCHEMAS`).
    fn prepare(table: &mut String, go_bin: &Path) -> Option<Generators> {
        let schemas = std::env::var("INFORMER_GEN_SCHEMAS")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root().join("../shared/schemas"));
        if !schemas.join("openapi/v2/swagger.json").exists() {
            table.push_str(&format!(
                "\n\nGenerator: skipped, no schemas at {}.\n",
                schemas.display()
            ));
            return None;
        }
        let out = root().join("target/bench-generator");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "informer-gen"])
            .status()
            .unwrap();
        assert!(status.success());
        let gobin = go_bin.join("code-generator");
        for tool in ["lister-gen", "informer-gen"] {
            let status = Command::new("go")
                .args([
                    "install",
                    &format!("k8s.io/code-generator/cmd/{tool}@v0.35.4"),
                ])
                .env("GOBIN", &gobin)
                .current_dir(std::env::temp_dir())
                .status()
                .expect("go install");
            assert!(status.success(), "go install {tool}");
        }
        let kopium = root().join("target/kopium/bin/kopium");
        if !kopium.exists() {
            let status = Command::new(env!("CARGO"))
                .args([
                    "install",
                    "kopium",
                    "--locked",
                    "--version",
                    "0.24.1",
                    "--root",
                ])
                .arg(root().join("target/kopium"))
                .status()
                .unwrap();
            assert!(status.success(), "cargo install kopium");
        }
        let go_dir = root().join("tests/go");
        let packages: Vec<String> = String::from_utf8(
            Command::new("go")
                .args(["list", "k8s.io/api/..."])
                .current_dir(&go_dir)
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .lines()
        .filter(|p| {
            p.rsplit('/').next().is_some_and(|v| {
                v.starts_with('v') && v[1..].starts_with(|c: char| c.is_ascii_digit())
            })
        })
        .map(String::from)
        .collect();
        let header = out.join("header.txt");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(&header, "").unwrap();
        let crds = schemas.join("crds");
        let mut crd_files = files_under(&crds, &["yaml", "yml", "json"]);
        crd_files.sort();
        let ours = root().join("target/release/informer-gen");
        let crd_versions = first_crd_versions(&ours, &crds);
        Some(Generators {
            swagger: schemas.join("openapi/v2/swagger.json"),
            crds,
            crd_files,
            crd_versions,
            packages,
            ours,
            gobin,
            kopium,
            header,
            go_dir,
            out,
        })
    }

    /// Ours over `inputs`, into `dir` (fresh): a module tree, or a package named `package`.
    fn ours(&self, inputs: &[&Path], dir: &Path, package: Option<&str>) -> (f64, f64, bool) {
        let _ = std::fs::remove_dir_all(dir);
        let mut c = Command::new(&self.ours);
        c.arg("generate").args(inputs).arg("--out").arg(dir);
        if let Some(name) = package {
            c.args(["--package", name]);
        }
        timed(&mut c)
    }

    /// code-generator's lister-gen, then informer-gen, into `dir/listers` and `dir/informers`
    /// (Go packages `example.com/gen/...`).
    fn code_generator(&self, dir: &Path) -> (f64, f64, bool) {
        let _ = std::fs::remove_dir_all(dir);
        let (t1, m1, ok1) = timed(
            Command::new(self.gobin.join("lister-gen"))
                .args(["--output-dir"])
                .arg(dir.join("listers"))
                .args([
                    "--output-pkg",
                    "example.com/gen/listers",
                    // As Kubernetes' own codegen runs them: Endpoints is its own plural.
                    "--plural-exceptions",
                    "Endpoints:Endpoints",
                    "--go-header-file",
                ])
                .arg(&self.header)
                .args(&self.packages)
                .current_dir(&self.go_dir),
        );
        let (t2, m2, ok2) = timed(
            Command::new(self.gobin.join("informer-gen"))
                .args(["--output-dir"])
                .arg(dir.join("informers"))
                .args([
                    "--output-pkg",
                    "example.com/gen/informers",
                    "--versioned-clientset-package",
                    "k8s.io/client-go/kubernetes",
                ])
                .args([
                    "--listers-package",
                    "example.com/gen/listers",
                    "--plural-exceptions",
                    "Endpoints:Endpoints",
                    "--go-header-file",
                ])
                .arg(&self.header)
                .args(&self.packages)
                .current_dir(&self.go_dir),
        );
        (t1 + t2, m1.max(m2), ok1 && ok2)
    }

    /// kopium over one CRD file (it takes one per run; a file with several CRDs yields only
    /// its first).
    fn kopium(&self, file: &Path) -> Command {
        let mut c = Command::new(&self.kopium);
        c.arg("-f").arg(file);
        c
    }

    /// kopium as it must run to emit what ours emits for one served version of a file's
    /// first CRD: that version, with docs.
    fn kopium_docs(&self, file: &Path, version: &str) -> Command {
        let mut c = self.kopium(file);
        c.args(["--docs", "--api-version", version]);
        c
    }
}

/// `(file, version)` for every served version of the first CRD of each file under `crds`,
/// from ours' `resources --json` (resources are listed in file order, then in document and
/// version order); a group/version/resource already seen in an earlier file is left out, as
/// ours does.
fn first_crd_versions(ours: &Path, crds: &Path) -> Vec<(PathBuf, String)> {
    let out = Command::new(ours).arg("resources").arg(crds).arg("--json").output().unwrap();
    assert!(out.status.success(), "informer-gen resources: {}", String::from_utf8_lossy(&out.stderr));
    let resources: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut first: std::collections::HashMap<String, (String, String)> = Default::default();
    let mut seen = std::collections::HashSet::new();
    let mut pairs = Vec::new();
    for r in &resources {
        let field = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        let crd = (field("group"), field("kind"));
        let new_gvr = seen.insert((field("group"), field("version"), field("plural")));
        if *first.entry(field("source")).or_insert_with(|| crd.clone()) == crd && new_gvr {
            pairs.push((PathBuf::from(field("source")), field("version")));
        }
    }
    pairs
}

/// Median, min and max wall time of 3 runs of `f` (wall time, peak RSS, success), the median
/// peak RSS, and whether every run succeeded.
fn median3(f: &dyn Fn() -> (f64, f64, bool)) -> (Spread, f64, bool) {
    let runs: Vec<(f64, f64, bool)> = (0..3).map(|_| f()).collect();
    (
        stats(runs.iter().map(|r| r.0).collect()),
        stats(runs.iter().map(|r| r.1).collect()).0,
        runs.iter().all(|r| r.2),
    )
}

/// The generator against code-generator's lister-gen + informer-gen (over the `k8s.io/api`
/// packages, the equivalent of the v1.35 spec) and kopium (over the CRD corpus): median wall
/// time of 3 runs and peak RSS.
fn generator_table(table: &mut String, g: &Generators) {
    let ours_dir = g.out.join("ours");
    let kopium_all = || timed_in_turn(g.crd_files.iter().map(|f| g.kopium(f)));
    let kopium_equivalent = || {
        timed_in_turn(g.crd_versions.iter().map(|(f, version)| g.kopium_docs(f, version)))
    };
    let rows: Vec<(&str, &str, (Spread, f64, bool))> = vec![
        (
            "Kubernetes v1.35 built-in APIs",
            "informer-gen (ours), swagger.json",
            median3(&|| g.ours(&[&g.swagger], &ours_dir, None)),
        ),
        (
            "Kubernetes v1.35 built-in APIs",
            "code-generator lister-gen + informer-gen, k8s.io/api",
            median3(&|| g.code_generator(&g.out.join("go"))),
        ),
        (
            "CRD corpus",
            "informer-gen (ours), one run",
            median3(&|| g.ours(&[&g.crds], &ours_dir, None)),
        ),
        (
            "CRD corpus",
            "kopium, one run per file",
            median3(&kopium_all),
        ),
        (
            "CRD corpus",
            "kopium `--docs`, one run per served version",
            median3(&kopium_equivalent),
        ),
        (
            "both",
            "informer-gen (ours), one run",
            median3(&|| g.ours(&[&g.swagger, &g.crds], &ours_dir, None)),
        ),
    ];
    table.push_str(&format!(
        "\n\nGenerator, median of 3 runs (min–max), wall time and peak RSS of the process (the largest, for several): the built-in APIs ({} `k8s.io/api` group-version packages for code-generator v0.35.4), and the CRD corpus ({} files under `crds/`; kopium 0.24.1 gets one file per run and emits the types of one version of its first CRD, without documentation, or, for the same types as ours, one run per served version ({} runs) with `--docs`). Ours emits informers, listers, the factory and, for CRDs, the types of every served version with their documentation, reading files and printing output on every core (two here).\n\n| input | tool | wall time | peak RSS | code-generator or kopium ÷ ours |\n|---|---|---|---|---|\n",
        g.packages.len(),
        g.crd_files.len(),
        g.crd_versions.len()
    ));
    for (i, (input, tool, ((m, lo, hi), rss, ok))) in rows.iter().enumerate() {
        let ratio = match i {
            1 | 3 => format!("{:.1}×", m / (rows[i - 1].2).0.0),
            4 => format!("{:.1}×", m / (rows[2].2).0.0),
            _ => "—".to_string(),
        };
        let failed = if *ok { "" } else { " (some runs failed)" };
        table.push_str(&format!(
            "| {input} | {tool}{failed} | {m:.2} s ({lo:.2}–{hi:.2}) | {:.0} MB | {ratio} |\n",
            rss / 1e6
        ));
    }
    eprintln!("generator: done");
}

/// Marks every file of `dir` (recursively) with `ext` as changed in content, so that a build
/// recompiles them but nothing else (Go's cache is keyed by content, cargo's by mtime too).
fn touch_sources(dir: &Path, ext: &str, run: usize) {
    for p in files_under(dir, &[ext]) {
        let mut text = std::fs::read_to_string(&p).unwrap();
        if let Some(at) = text.find("\n// bench run ") {
            text.truncate(at + 1);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("// bench run {run}\n"));
        std::fs::write(&p, text).unwrap();
    }
}

/// Median (min–max) of 3 timed builds of `build` after `touch` marks the emitted sources
/// changed, once the dependencies are built by a first, untimed run.
fn rebuild_time(touch: &dyn Fn(usize), build: &dyn Fn() -> Command) -> (Spread, f64, bool) {
    let warm = build().status().unwrap().success();
    let run = std::cell::Cell::new(0);
    let (time, rss, ok) = median3(&|| {
        run.set(run.get() + 1);
        touch(run.get());
        timed(&mut build())
    });
    (time, rss, ok && warm)
}

/// `cargo check` (Rust) and `go build` (Go) time of what each generator emits, dependencies
/// already built: ours over the built-ins against code-generator's output, ours over the CRD
/// corpus against kopium's types for the same files.
fn check_table(table: &mut String, g: &Generators) {
    let dir = g.out.join("check");
    let _ = std::fs::create_dir_all(&dir);
    // Ours: the packages as emitted, each its own workspace.
    let mut rows = Vec::new();
    for (label, inputs, name) in [
        ("Kubernetes v1.35 built-in APIs", vec![g.swagger.as_path()], "ours-builtin"),
        ("CRD corpus", vec![g.crds.as_path()], "ours-crds"),
    ] {
        let krate = dir.join(name);
        let bytes = ours_crate(g, &inputs, &krate, name);
        rows.push((label, format!("informer-gen (ours): informers, listers, factory{} ({:.1} MB of Rust), `cargo check`", if name == "ours-crds" { ", types" } else { "" }, bytes as f64 / 1e6),
            rebuild_time(&|run| touch_sources(&krate.join("src"), "rs", run), &cargo_check(krate.clone()))));
    }
    // code-generator's listers and informers as one Go module beside tests/go's requirements.
    let go = dir.join("go");
    assert!(g.code_generator(&go).2, "code-generator");
    let go_mod = std::fs::read_to_string(g.go_dir.join("go.mod")).unwrap();
    let go_mod = go_mod.replacen("module informer-gen.test/e2e", "module example.com/gen", 1);
    std::fs::write(go.join("go.mod"), go_mod).unwrap();
    std::fs::copy(g.go_dir.join("go.sum"), go.join("go.sum")).unwrap();
    let go_bytes = dir_bytes(&go, "go");
    let go_build = || {
        let mut c = Command::new("go");
        c.args(["build", "./..."]).current_dir(&go).env("GOFLAGS", "-mod=mod -buildvcs=false");
        c
    };
    rows.insert(1, ("Kubernetes v1.35 built-in APIs", format!("code-generator lister-gen + informer-gen ({:.1} MB of Go), `go build ./...`", go_bytes as f64 / 1e6),
        rebuild_time(&|run| touch_sources(&go, "go", run), &go_build)));
    // kopium's types for each CRD file, one module each, in one crate with what they use:
    // as it runs by default (one version of the file's first CRD, no docs), and as it must
    // run to emit the types ours emits (every served version, with docs).
    let default_runs: Vec<(String, Command)> = g.crd_files.iter().enumerate().map(|(i, f)| (format!("crd{i:03}"), g.kopium(f))).collect();
    let docs_runs: Vec<(String, Command)> =
        g.crd_versions.iter().enumerate().map(|(i, (f, version))| (format!("crd{i:03}"), g.kopium_docs(f, version))).collect();
    for (name, runs, what, total, unit) in [
        ("kopium", default_runs, "kopium: types only, one version per file, no docs", g.crd_files.len(), "files"),
        ("kopium-docs", docs_runs, "kopium `--docs`: types only, every served version", g.crd_versions.len(), "runs"),
    ] {
        let krate = dir.join(name);
        let check = cargo_check(krate.clone());
        let (modules, bytes) = kopium_crate(&krate, runs, &*check);
        rows.push(("CRD corpus", format!("{what} ({modules} of {total} {unit}, {:.1} MB of Rust), `cargo check`", bytes as f64 / 1e6),
            rebuild_time(&|run| touch_sources(&krate.join("src"), "rs", run), &check)));
    }
    table.push_str("\n\nChecking what each generator emits: wall time of `cargo check` (Rust) or `go build ./...` (Go, which has no check-only build) after the emitted sources change, dependencies built beforehand, no incremental state (`CARGO_INCREMENTAL=0`); median of 3 (min–max); peak RSS: the largest process of the build (wait4).\n\n| input | emitted by, checked with | time | peak RSS |\n|---|---|---|---|\n");
    for (input, what, ((m, lo, hi), rss, ok)) in rows {
        let failed = if ok { "" } else { " (failed)" };
        table.push_str(&format!("| {input} | {what}{failed} | {m:.1} s ({lo:.1}–{hi:.1}) | {:.0} MB |\n", rss / 1e6));
    }
    eprintln!("check: done");
}

/// `cargo check` of the crate at `krate` in the check sections' target directory, with no
/// incremental state (the whole emitted crate, as Go recompiles each changed package).
fn cargo_check(krate: PathBuf) -> Box<dyn Fn() -> Command> {
    let target = root().join("target/bench-check");
    Box::new(move || {
        let mut c = Command::new(env!("CARGO"));
        c.args(["check", "--quiet", "--manifest-path"])
            .arg(krate.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .env("CARGO_INCREMENTAL", "0");
        c
    })
}

/// Ours over `inputs` as the package `name` at `krate`, its own workspace; returns the bytes
/// of Rust it emitted.
fn ours_crate(g: &Generators, inputs: &[&Path], krate: &Path, name: &str) -> u64 {
    assert!(g.ours(inputs, krate, Some(name)).2, "informer-gen generate {inputs:?}");
    let manifest = krate.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}\n[workspace]\n")).unwrap();
    dir_bytes(&krate.join("src"), "rs")
}

/// `cargo check` of what ours and kopium emit for one project's CRDs at a time (each
/// directory under the corpus), as a user who generates only the CRDs they use checks it;
/// dependencies built beforehand, as in the check section.
fn check_projects_table(table: &mut String, g: &Generators) {
    let dir = g.out.join("check-projects");
    let _ = std::fs::create_dir_all(&dir);
    let mut projects: Vec<PathBuf> =
        std::fs::read_dir(&g.crds).unwrap().filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    projects.sort();
    table.push_str("\n\nChecking one project's CRDs at a time: wall time of `cargo check` after the emitted sources change, dependencies built beforehand, no incremental state; median of 3 (min–max). Ours: types, informers, listers and factory of every CRD and served version in the project's files; kopium by default: one version of each file's first CRD, no docs; kopium `--docs`: every served version of each file's first CRD (the same types as ours for those CRDs).\n\n| project (CRD files) | ours | kopium (default) | kopium `--docs`, every version | kopium's default ÷ ours | kopium `--docs` ÷ ours |\n|---|---|---|---|---|---|\n");
    let mut sums = [0.0f64; 3];
    for project in projects {
        let name = project.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let files: Vec<&PathBuf> = g.crd_files.iter().filter(|f| f.starts_with(&project)).collect();
        let ours = dir.join(format!("ours-{name}"));
        let ours_bytes = ours_crate(g, &[project.as_path()], &ours, &format!("ours-{name}"));
        let mut cells = vec![(rebuild_time(&|run| touch_sources(&ours.join("src"), "rs", run), &*cargo_check(ours.clone())), ours_bytes)];
        let default_runs: Vec<(String, Command)> = files.iter().enumerate().map(|(i, f)| (format!("crd{i:03}"), g.kopium(f))).collect();
        let docs_runs: Vec<(String, Command)> = g
            .crd_versions
            .iter()
            .filter(|(f, _)| f.starts_with(&project))
            .enumerate()
            .map(|(i, (f, version))| (format!("crd{i:03}"), g.kopium_docs(f, version)))
            .collect();
        for (kind, runs) in [("kopium", default_runs), ("kopium-docs", docs_runs)] {
            let krate = dir.join(format!("{kind}-{name}"));
            let check = cargo_check(krate.clone());
            let (_, bytes) = kopium_crate(&krate, runs, &*check);
            cells.push((rebuild_time(&|run| touch_sources(&krate.join("src"), "rs", run), &*check), bytes));
        }
        for (sum, ((time, _, _), _)) in sums.iter_mut().zip(&cells) {
            *sum += time.0;
        }
        let cell = |((m, lo, hi), _, ok): &(Spread, f64, bool), bytes: u64| {
            format!("{m:.1} s ({lo:.1}–{hi:.1}), {:.2} MB{}", bytes as f64 / 1e6, if *ok { "" } else { " (failed)" })
        };
        let ours_time = cells[0].0.0.0;
        table.push_str(&format!(
            "| {name} ({}) | {} | {} | {} | {:.2}× | {:.2}× |\n",
            files.len(),
            cell(&cells[0].0, cells[0].1),
            cell(&cells[1].0, cells[1].1),
            cell(&cells[2].0, cells[2].1),
            cells[1].0.0.0 / ours_time,
            cells[2].0.0.0 / ours_time,
        ));
    }
    table.push_str(&format!(
        "| all projects, one crate each (sum of medians) | {:.1} s | {:.1} s | {:.1} s | {:.2}× | {:.2}× |\n",
        sums[0], sums[1], sums[2], sums[1] / sums[0], sums[2] / sums[0]
    ));
    eprintln!("check-projects: done");
}

/// A crate at `krate` of kopium's output, one module per run of `runs` (named as given),
/// with what they use; modules that do not compile are left out. Returns how many modules
/// it has and their bytes.
fn kopium_crate(krate: &Path, runs: Vec<(String, Command)>, check: &dyn Fn() -> Command) -> (usize, u64) {
    let _ = std::fs::remove_dir_all(krate);
    std::fs::create_dir_all(krate.join("src")).unwrap();
    let mut modules = Vec::new();
    for (module, mut run) in runs {
        let out = run.stderr(Stdio::null()).output().unwrap();
        if out.status.success() {
            std::fs::write(krate.join(format!("src/{module}.rs")), out.stdout).unwrap();
            modules.push(module);
        }
    }
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"kopium-corpus\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nkube = { version = \"5.0.0\", default-features = false, features = [\"derive\"] }\nk8s-openapi = { version = \"0.29.0\", features = [\"v1_35\"] }\nschemars = \"1\"\nserde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\n\n[workspace]\n",
    )
    .unwrap();
    let write_lib = |modules: &[String]| {
        let lib: String = modules.iter().map(|m| format!("#[allow(warnings)]\npub mod {m};\n")).collect();
        std::fs::write(krate.join("src/lib.rs"), lib).unwrap();
    };
    write_lib(&modules);
    for _ in 0..5 {
        let out = check().output().unwrap();
        if out.status.success() {
            break;
        }
        let errors = String::from_utf8_lossy(&out.stderr).into_owned();
        let before = modules.len();
        modules.retain(|m| !errors.contains(&format!("src/{m}.rs")));
        if modules.len() == before {
            break;
        }
        write_lib(&modules);
    }
    // Modules left out are not counted in the bytes.
    for f in files_under(&krate.join("src"), &["rs"]) {
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if stem != "lib" && !modules.contains(&stem) {
            let _ = std::fs::remove_file(f);
        }
    }
    (modules.len(), dir_bytes(&krate.join("src"), "rs"))
}

/// Bytes of the files with `ext` under `dir`.
fn dir_bytes(dir: &Path, ext: &str) -> u64 {
    files_under(dir, &[ext])
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// The files under `dir` (recursively) whose extension is one of `exts`, in no set order.
fn files_under(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| exts.iter().any(|e| x == *e)) {
                files.push(p);
            }
        }
    }
    files
}
