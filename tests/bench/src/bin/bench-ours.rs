//! Our side of the benchmark: the generated informer from `generated-sample` syncs one
//! resource from the replay server; `--lean` uses the memory-lean layout instead (the
//! informers `informer-gen-tests` generates with `Config::lean_type`). `--decode-ceiling`
//! instead times plain serde_json decoding of the same LIST bytes into the same types (the
//! ceiling our sync throughput is measured against). `--resource servicemonitors` syncs the
//! custom resource of `generated-sample` (types emitted from its CRD), or with `--lean` its
//! lean types (`informer-gen-tests`' `lean_crds`); `--metadata` syncs a metadata-only
//! informer (`LeanPartialObjectMeta`) of the resource instead, measured as the others are.
//! Informers get the client users are pointed to (`informer_runtime::informer_client`);
//! `--kube-default-client` gives them kube-client's default one instead.

use std::time::Instant;

use informer_gen_bench::{
    CountingAlloc, EventArgs, HandlerCounter, SENT_ANNOTATION, arg, client, event_ops, flag, informer_client,
    live_heap, relist_memory, report, reset_peak_heap, reset_peak_rss, rss,
};
use informer_gen_tests::lean_builtin::lean::api::core::v1 as lean;
use informer_gen_tests::lean_crds::monitoring_coreos_com::v1::ServiceMonitor as LeanServiceMonitor;
use informer_runtime::lean::LeanPartialObjectMeta;
use informer_runtime::{
    Event, FactoryOptions, WireFormat, HandlerFn, HandlerRegistration, Selector, SharedIndexInformer,
    WatchListMode, strip_managed_fields_meta,
};
use informer_gen_sample::monitoring_coreos_com::v1::ServiceMonitor;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde::de::DeserializeOwned;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The items of a LIST response.
#[derive(serde::Deserialize)]
struct Items<T> {
    items: Vec<T>,
}

/// The collection's path on the replay server.
fn collection(resource: &str) -> String {
    match resource {
        "servicemonitors" => "/apis/monitoring.coreos.com/v1/servicemonitors".into(),
        core => format!("/api/v1/{core}"),
    }
}

async fn decode_ceiling(server: &str, resource: &str, lean: bool) {
    if flag("--protobuf") {
        use informer_gen_tests::lean_builtin::protobuf as tables;
        let (pods, cms) = (&tables::K8S_IO_API_CORE_V1_POD, &tables::K8S_IO_API_CORE_V1_CONFIGMAP);
        return match (resource, lean) {
            ("pods", false) => protobuf_ceiling_of::<Pod>(server, resource, pods).await,
            ("pods", true) => protobuf_ceiling_of::<lean::Pod>(server, resource, pods).await,
            (_, false) => protobuf_ceiling_of::<ConfigMap>(server, resource, cms).await,
            (_, true) => protobuf_ceiling_of::<lean::ConfigMap>(server, resource, cms).await,
        };
    }
    match (resource, lean) {
        ("servicemonitors", false) => decode_ceiling_of::<ServiceMonitor>(server, resource).await,
        ("servicemonitors", true) => decode_ceiling_of::<LeanServiceMonitor>(server, resource).await,
        ("pods", false) => decode_ceiling_of::<Pod>(server, resource).await,
        ("pods", true) => decode_ceiling_of::<lean::Pod>(server, resource).await,
        (_, false) => decode_ceiling_of::<ConfigMap>(server, resource).await,
        (_, true) => decode_ceiling_of::<lean::ConfigMap>(server, resource).await,
    }
}

async fn decode_ceiling_of<T: DeserializeOwned + Send + Sync + 'static>(
    server: &str,
    resource: &str,
) {
    let client = client(server);
    let mut pages = Vec::new();
    let mut cont = String::new();
    loop {
        let req = http::Request::get(format!("{}?limit=500&continue={cont}", collection(resource)))
            .body(Vec::new())
            .unwrap();
        let text = client.request_text(req).await.unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let next = v["metadata"]["continue"].as_str().unwrap_or("").to_string();
        pages.push(text.into_bytes());
        if next.is_empty() {
            break;
        }
        cont = next;
    }
    let bytes: usize = pages.iter().map(Vec::len).sum();
    let mut best = f64::MAX;
    let mut first = None;
    let mut n = 0;
    for _ in 0..3 {
        let start = Instant::now();
        n = 0;
        for page in &pages {
            n += serde_json::from_slice::<Items<T>>(page)
                .unwrap()
                .items
                .len();
        }
        best = best.min(start.elapsed().as_secs_f64());
        first.get_or_insert(best);
    }
    // The live heap of the decoded objects alone, each in an Arc: what any cache of these
    // types must hold at least. Timed too: the same decode, into a heap that grows instead
    // of one that is given back page by page.
    let heap0 = live_heap();
    let start = Instant::now();
    let kept: Vec<std::sync::Arc<T>> = pages
        .iter()
        .flat_map(|page| {
            serde_json::from_slice::<Items<T>>(page)
                .unwrap()
                .items
                .into_iter()
                .map(std::sync::Arc::new)
        })
        .collect();
    let kept_seconds = start.elapsed().as_secs_f64();
    let heap =
        live_heap() - heap0 - (kept.capacity() * std::mem::size_of::<std::sync::Arc<T>>()) as isize;
    println!(
        "{}",
        serde_json::json!({"client": "serde_json", "n": n, "sync_seconds": best, "first_pass_seconds": first, "kept_pass_seconds": kept_seconds, "bytes": bytes, "heap_bytes": heap})
    );
}

/// The decode ceiling in protobuf: the same pages as protobuf, decoded in a loop by
/// `informer_runtime::proto` (the best of 3).
async fn protobuf_ceiling_of<T: DeserializeOwned + Send + Sync + 'static>(
    server: &str,
    resource: &str,
    message: &'static informer_runtime::proto::Message,
) {
    let client = client(server);
    let mut pages = Vec::new();
    let mut cont = String::new();
    loop {
        let req = http::Request::get(format!("{}?limit=500&continue={cont}", collection(resource)))
            .header("Accept", informer_runtime::proto::CONTENT_TYPE)
            .body(Vec::new())
            .unwrap();
        let body = client.send(req.map(Into::into)).await.unwrap().into_body();
        let bytes = http_body_util::BodyExt::collect(body).await.unwrap().to_bytes().to_vec();
        let page = informer_runtime::proto::decode_list::<T>(message, &bytes).unwrap();
        pages.push(bytes);
        match page.continue_token {
            Some(next) => cont = next,
            None => break,
        }
    }
    let bytes: usize = pages.iter().map(Vec::len).sum();
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..3 {
        let start = Instant::now();
        n = 0;
        for page in &pages {
            n += informer_runtime::proto::decode_list::<T>(message, page).unwrap().items.len();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        serde_json::json!({"client": "informer_runtime::proto", "n": n, "sync_seconds": best, "bytes": bytes})
    );
}

/// The replay server's churn stamp on an object, for the event handlers.
trait Stamped {
    fn sent(&self) -> Option<&str>;
}

/// [`Stamped`] for types with k8s-openapi's `ObjectMeta`.
macro_rules! stamped_by_object_meta {
    ($($t:ty),*) => {$(
        impl Stamped for $t {
            fn sent(&self) -> Option<&str> {
                self.metadata.annotations.as_ref()?.get(SENT_ANNOTATION).map(String::as_str)
            }
        }
    )*};
}

stamped_by_object_meta!(Pod, ConfigMap, ServiceMonitor);

/// [`Stamped`] for lean roots (annotations kept in `LeanMeta`).
macro_rules! stamped_by_lean_meta {
    ($($t:ty),*) => {$(
        impl Stamped for $t {
            fn sent(&self) -> Option<&str> {
                self.metadata.annotations.as_ref()?.get(SENT_ANNOTATION).map(|s| s.as_str())
            }
        }
    )*};
}

stamped_by_lean_meta!(
    lean::Pod,
    lean::ConfigMap,
    LeanServiceMonitor,
    LeanPartialObjectMeta<Pod>,
    LeanPartialObjectMeta<ConfigMap>,
    LeanPartialObjectMeta<ServiceMonitor>
);

/// Registers `n` handlers that count churn updates (each on its own queue and thread, as
/// every handler is).
fn add_handlers<
    K: Stamped + informer_runtime::reexports::kube_core::Resource + Send + Sync + 'static,
>(
    informer: &SharedIndexInformer<K>,
    n: usize,
) -> (std::sync::Arc<HandlerCounter>, Vec<HandlerRegistration>) {
    let counter = std::sync::Arc::new(HandlerCounter::default());
    if flag("--streams") {
        // Handlers as event streams, each consumed by its own tokio task.
        let registrations = (0..n)
            .map(|_| {
                let counter = counter.clone();
                let mut stream = informer.stream().unwrap();
                let registration = stream.registration().clone();
                tokio::spawn(async move {
                    use futures::StreamExt as _;
                    while let Some(event) = stream.next().await {
                        if let Event::Update { new, .. } = &event {
                            counter.seen(new.sent());
                        }
                    }
                });
                registration
            })
            .collect();
        return (counter, registrations);
    }
    let registrations = (0..n)
        .map(|_| {
            let counter = counter.clone();
            informer
                .add_event_handler(HandlerFn(move |event: &Event<K>| {
                    if let Event::Update { new, .. } = event {
                        counter.seen(new.sent());
                    }
                }))
                .unwrap()
        })
        .collect();
    (counter, registrations)
}

/// After sync: waits for the handlers' initial events, then times churn events.
async fn run_events(
    name: &str,
    server: &str,
    handlers: Option<(std::sync::Arc<HandlerCounter>, Vec<HandlerRegistration>)>,
) {
    let (Some((counter, registrations)), Some(args)) = (handlers, EventArgs::from_args()) else {
        return;
    };
    for registration in &registrations {
        assert!(registration.wait_for_sync().await, "handler synced");
    }
    event_ops(name, server, &counter, &args).await;
}

/// Counts the informer's update events (a relist turns every cached object into one).
fn count_updates<K: informer_runtime::reexports::kube_core::Resource + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut stream = informer.stream().unwrap();
    let counted = count.clone();
    tokio::spawn(async move {
        use futures::StreamExt as _;
        while let Some(event) = stream.next().await {
            if let Event::Update { .. } = event {
                counted.fetch_add(1, std::sync::atomic::Ordering::Release);
            }
        }
    });
    count
}

/// Nanoseconds per `get` over `iters` lookups of `keys` (namespace, name) in a scattered
/// order; every key must be found.
fn time_gets(keys: &[(String, String)], iters: usize, get: impl Fn(&str, &str) -> bool) -> f64 {
    let start = Instant::now();
    let mut found = 0usize;
    for i in 0..iters {
        let (ns, name) = &keys[(i * 7919) % keys.len()];
        found += get(ns, name) as usize;
    }
    assert_eq!(found, iters);
    start.elapsed().as_nanos() as f64 / iters as f64
}

/// Lister operations over the synced Pods, timed in loops; prints one JSON line.
fn lister_ops<K>(
    name: &str,
    lister: &informer_runtime::Lister<K>,
    informer: &informer_runtime::SharedIndexInformer<K>,
) where
    K: informer_runtime::reexports::kube_core::Resource + Send + Sync + 'static,
{
    let keys: Vec<(String, String)> = lister
        .list(&Selector::default())
        .iter()
        .map(|p| {
            (
                p.meta().namespace.clone().unwrap(),
                p.meta().name.clone().unwrap(),
            )
        })
        .collect();
    let iters = 1_000_000;
    let get_ns = time_gets(&keys, iters, |ns, name| lister.namespace(ns).get(name).is_ok());
    let view = lister.read();
    let view_get_ns = time_gets(&keys, iters, |ns, name| view.namespace(ns).get(name).is_ok());
    drop(view);
    let rounds = 2000;
    let start = Instant::now();
    let mut listed = 0;
    for _ in 0..rounds {
        listed += lister.namespace("ns-007").list(&Selector::default()).len();
    }
    let ns_list_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    let selector = informer_runtime::parse_label_selector("app=app-7").unwrap();
    let start = Instant::now();
    let mut selected = 0;
    for _ in 0..rounds / 10 {
        selected += lister.list(&selector).len();
    }
    let selector_us = start.elapsed().as_secs_f64() * 1e6 / (rounds / 10) as f64;
    let start = Instant::now();
    let mut indexed = 0;
    for _ in 0..rounds {
        indexed += informer
            .indexer()
            .by_index(informer_runtime::NAMESPACE_INDEX, "ns-007")
            .unwrap()
            .len();
    }
    let index_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    println!(
        "{}",
        serde_json::json!({"client": name, "get_ns": get_ns, "view_get_ns": view_get_ns, "ns_list_us": ns_list_us, "selector_list_us": selector_us, "index_us": index_us,
            "ns_items": listed / rounds, "selector_items": selected / (rounds / 10), "index_items": indexed / rounds})
    );
}

/// Syncs one resource through the informers of a generated module tree (`$gen`), then
/// measures what the command line asks for (see [`measure`]).
macro_rules! sync {
    ($gen:path, $name:expr, $strip:expr, $server:expr, $resource:expr, $options:expr) => {{
        use generated::InformerFactoryExt as _;
        use $gen as generated;
        let factory = generated::new_factory(informer_client($server), $options);
        let before = start_measuring();
        let start = Instant::now();
        match $resource {
            "pods" => {
                let informer = factory.core().v1().pods().informer().unwrap();
                if let Some(strip) = $strip {
                    informer.set_transform(std::sync::Arc::new(strip)).unwrap();
                }
                measure($name, $server, &factory, informer, start, before).await
            }
            "configmaps" => {
                let informer = factory.core().v1().configmaps().informer().unwrap();
                measure($name, $server, &factory, informer, start, before).await
            }
            other => panic!("unknown resource {other}"),
        }
    }};
}

/// The heap and resident set before an informer starts, with their peaks reset first when
/// `--relist` asks for peaks.
fn start_measuring() -> (isize, isize) {
    if flag("--relist") {
        reset_peak_heap();
        reset_peak_rss();
    }
    (live_heap(), rss())
}

/// Starts `factory`, waits for `informer` to sync, reports the sync (time from `start`,
/// memory over `(heap0, rss0)`), then measures what the command line asks for: the peak
/// memory of a forced relist (`--relist`), watch events to handlers (`--handlers`,
/// `--events`), or, over Pods, the lister operations (`--listers`). Exits the process.
async fn measure<K>(
    name: &str,
    server: &str,
    factory: &informer_runtime::SharedInformerFactory,
    informer: SharedIndexInformer<K>,
    start: Instant,
    (heap0, rss0): (isize, isize),
) -> !
where
    K: Stamped + informer_runtime::reexports::kube_core::Resource + Send + Sync + 'static,
{
    let handlers = EventArgs::from_args().map(|a| add_handlers(&informer, a.handlers));
    let updates = flag("--relist").then(|| count_updates(&informer));
    let n = start_and_report(name, factory, &informer, start, (heap0, rss0)).await;
    let lister = informer.lister();
    if let Some(updates) = updates {
        relist_memory(
            name,
            server,
            || updates.load(std::sync::atomic::Ordering::Acquire) >= n,
            heap0,
            rss0,
        )
        .await;
    } else if handlers.is_some() {
        run_events(name, server, handlers).await;
    } else if flag("--listers") {
        lister_ops(name, &lister, &informer);
    }
    std::process::exit(0)
}

/// Starts `factory`, waits for `informer` to sync and reports the sync (time from `start`,
/// memory over `(heap0, rss0)`); returns how many objects it caches.
async fn start_and_report<K>(
    name: &str,
    factory: &informer_runtime::SharedInformerFactory,
    informer: &SharedIndexInformer<K>,
    start: Instant,
    (heap0, rss0): (isize, isize),
) -> usize
where
    K: informer_runtime::reexports::kube_core::Resource + Send + Sync + 'static,
{
    factory.start().unwrap();
    factory.wait_for_cache_sync().await;
    let n = informer.lister().list(&Selector::default()).len();
    report(
        name,
        n,
        start.elapsed().as_secs_f64(),
        live_heap() - heap0,
        rss() - rss0,
    );
    n
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = arg("--server").expect("--server URL");
    let resource = arg("--resource").unwrap_or_else(|| "pods".into());
    let lean = flag("--lean");
    if flag("--decode-ceiling") {
        return decode_ceiling(&server, &resource, lean).await;
    }
    let watch_list = if flag("--paged-list") {
        WatchListMode::Never
    } else {
        WatchListMode::Auto
    };
    let strip = flag("--strip-managed-fields");
    // JSON unless asked (protobuf: built-in kinds only, as for a user).
    let wire_format = if flag("--protobuf") { WireFormat::Protobuf } else { WireFormat::Json };
    let name = |json: &'static str, protobuf: &'static str| if wire_format == WireFormat::Protobuf { protobuf } else { json };
    if flag("--metadata") || resource == "servicemonitors" {
        use informer_gen_sample::InformerFactoryExt as _;
        let options = FactoryOptions {
            transform: strip.then(strip_managed_fields_meta),
            watch_list,
            ..Default::default()
        };
        // The client is made before the clock and the heap count start, as for kube-rs.
        let client = informer_client(&server);
        let before = start_measuring();
        let start = Instant::now();
        if lean && !flag("--metadata") {
            // Lean roots keep managedFields apart from ObjectMeta; their own transform drops them.
            use informer_gen_tests::lean_crds::InformerFactoryExt as Lean;
            let factory = informer_gen_tests::lean_crds::new_factory(client, FactoryOptions { watch_list, ..Default::default() });
            let informer = Lean::monitoring_coreos_com(&factory).v1().servicemonitors().informer().unwrap();
            if strip {
                informer.set_transform(std::sync::Arc::new(LeanServiceMonitor::without_managed_fields)).unwrap();
            }
            measure("informer-gen (lean)", &server, &factory, informer, start, before).await
        }
        let factory = informer_gen_sample::new_factory(client, options);
        if flag("--metadata") {
            let name = "informer-gen (metadata)";
            match resource.as_str() {
                "pods" => {
                    let informer = factory.core().v1().pods().metadata_informer().unwrap();
                    measure(name, &server, &factory, informer, start, before).await
                }
                "configmaps" => {
                    let informer = factory.core().v1().configmaps().metadata_informer().unwrap();
                    measure(name, &server, &factory, informer, start, before).await
                }
                "servicemonitors" => {
                    let servicemonitors = factory.monitoring_coreos_com().v1().servicemonitors();
                    let informer = servicemonitors.metadata_informer().unwrap();
                    measure(name, &server, &factory, informer, start, before).await
                }
                other => panic!("unknown resource {other}"),
            }
        }
        let informer = factory
            .monitoring_coreos_com()
            .v1()
            .servicemonitors()
            .informer()
            .unwrap();
        measure("informer-gen", &server, &factory, informer, start, before).await
    }
    if lean {
        // Lean roots keep managedFields apart from ObjectMeta; their own transform drops them.
        let options = FactoryOptions {
            watch_list,
            wire_format,
            ..Default::default()
        };
        let strip = strip.then_some(lean::Pod::without_managed_fields);
        sync!(
            informer_gen_tests::lean_builtin,
            name("informer-gen (lean)", "informer-gen (lean, protobuf)"),
            strip,
            &server,
            resource.as_str(),
            options
        )
    } else {
        let options = FactoryOptions {
            transform: strip.then(strip_managed_fields_meta),
            watch_list,
            wire_format,
            ..Default::default()
        };
        let strip: Option<fn(Pod) -> Pod> = None;
        sync!(
            informer_gen_sample,
            name("informer-gen", "informer-gen (protobuf)"),
            strip,
            &server,
            resource.as_str(),
            options
        )
    }
}
