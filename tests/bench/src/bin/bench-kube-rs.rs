//! kube-rs's side of the benchmark: `kube_runtime::watcher` feeding a `reflector` store, as
//! kube-rs users cache objects, syncing one resource from the replay server. `--metadata`:
//! a watcher of `PartialObjectMeta` instead (metadata-only requests), measured as the others
//! are; `--resource servicemonitors`: the custom resource, decoded into the types
//! informer-gen emits from its CRD (a kube-rs user would emit equivalent plain structs with
//! kopium).

use std::time::Instant;

use futures::StreamExt;
use informer_gen_bench::{
    CountingAlloc, EventArgs, HandlerCounter, SENT_ANNOTATION, arg, client, event_ops, flag,
    live_heap, relist_memory, report, reset_peak_heap, reset_peak_rss, rss,
};
use informer_gen_sample::monitoring_coreos_com::v1::ServiceMonitor;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube_client::Api;
use kube_client::core::{PartialObjectMeta, Resource};
use kube_runtime::{WatchStreamExt, reflector, watcher};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

async fn run<K>(
    api: Api<K>,
    strip: bool,
    server: &str,
    start: Instant,
    heap0: isize,
    rss0: isize,
) -> (usize, reflector::Store<K>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let modify = move |o: &mut K| {
        if strip {
            o.meta_mut().managed_fields = None;
        }
    };
    let config = watcher_config();
    let Some(args) = EventArgs::from_args() else {
        let (reader, writer) = reflector::store();
        let stream = watcher(api, config).modify(modify).reflect(writer);
        // Lists completed so far (the initial one, then relists).
        let lists = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let listed = lists.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Ok(watcher::Event::InitDone) = event {
                    listed.fetch_add(1, std::sync::atomic::Ordering::Release);
                }
            }
        });
        reader.wait_until_ready().await.unwrap();
        let n = reader.state().len();
        if flag("--relist") {
            report(
                "kube-rs",
                n,
                start.elapsed().as_secs_f64(),
                live_heap() - heap0,
                rss() - rss0,
            );
            relist_memory(
                "kube-rs",
                server,
                || lists.load(std::sync::atomic::Ordering::Acquire) >= 2,
                heap0,
                rss0,
            )
            .await;
            std::process::exit(0);
        }
        return (n, reader);
    };
    // Handlers, as kube-rs offers them: subscribers of a shared reflector, each its own task.
    // They get every object of the initial list first, then every applied object.
    let (reader, writer) = reflector::store_shared(args.events.max(1024));
    let counter = std::sync::Arc::new(HandlerCounter::default());
    let initial = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..args.handlers {
        let mut handle: reflector::ReflectHandle<K> = writer.subscribe().unwrap();
        let (counter, initial) = (counter.clone(), initial.clone());
        tokio::spawn(async move {
            while let Some(obj) = handle.next().await {
                match obj
                    .meta()
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SENT_ANNOTATION))
                {
                    Some(sent) => counter.seen(Some(sent)),
                    None => {
                        initial.fetch_add(1, std::sync::atomic::Ordering::Release);
                    }
                }
            }
        });
    }
    let stream = watcher(api, config)
        .modify(modify)
        .reflect_shared(writer)
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    let n = reader.state().len();
    report(
        "kube-rs",
        n,
        start.elapsed().as_secs_f64(),
        live_heap() - heap0,
        rss() - rss0,
    );
    while initial.load(std::sync::atomic::Ordering::Acquire) < n * args.handlers {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    event_ops("kube-rs", server, &counter, &args).await;
    std::process::exit(0);
}

/// The watcher's configuration: kube-rs's default paged list, or WatchList with
/// `--watch-list`.
fn watcher_config() -> watcher::Config {
    if flag("--watch-list") {
        watcher::Config::default().streaming_lists()
    } else {
        watcher::Config::default()
    }
}

/// The same lister operations as ours, as a kube-rs user writes them over the reflector
/// store (it has a key lookup but no namespace or custom index: those are scans).
fn lister_ops(reader: &reflector::Store<Pod>) {
    let keys: Vec<(String, String)> = reader
        .state()
        .iter()
        .map(|p| {
            (
                p.metadata.namespace.clone().unwrap(),
                p.metadata.name.clone().unwrap(),
            )
        })
        .collect();
    let iters = 1_000_000;
    let start = Instant::now();
    let mut found = 0usize;
    for i in 0..iters {
        let (ns, name) = &keys[(i * 7919) % keys.len()];
        found += reader
            .get(&reflector::ObjectRef::new(name).within(ns))
            .is_some() as usize;
    }
    let get_ns = start.elapsed().as_nanos() as f64 / iters as f64;
    assert_eq!(found, iters);
    let rounds = 200;
    let start = Instant::now();
    let mut listed = 0;
    for _ in 0..rounds {
        listed += reader
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some("ns-007"))
            .count();
    }
    let ns_list_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    let start = Instant::now();
    let mut selected = 0;
    for _ in 0..rounds {
        selected += reader
            .state()
            .into_iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .is_some_and(|a| a == "app-7")
            })
            .count();
    }
    let selector_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    println!(
        "{}",
        serde_json::json!({"client": "kube-rs", "get_ns": get_ns, "ns_list_us": ns_list_us, "selector_list_us": selector_us, "index_us": null,
            "ns_items": listed / rounds, "selector_items": selected / rounds})
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = arg("--server").expect("--server URL");
    let strip = flag("--strip-managed-fields");
    let client = client(&server);
    if flag("--relist") {
        reset_peak_heap();
        reset_peak_rss();
    }
    let (heap0, rss0) = (live_heap(), rss());
    let start = Instant::now();
    let resource = arg("--resource").unwrap_or_else(|| "pods".into());
    // An `Api` of `PartialObjectMeta` makes metadata-only requests.
    let n = match resource.as_str() {
        "pods" if flag("--metadata") => {
            run(Api::<PartialObjectMeta<Pod>>::all(client), strip, &server, start, heap0, rss0).await.0
        }
        "configmaps" if flag("--metadata") => {
            run(Api::<PartialObjectMeta<ConfigMap>>::all(client), strip, &server, start, heap0, rss0).await.0
        }
        "servicemonitors" if flag("--metadata") => {
            run(Api::<PartialObjectMeta<ServiceMonitor>>::all(client), strip, &server, start, heap0, rss0).await.0
        }
        "servicemonitors" => {
            run(
                Api::<ServiceMonitor>::all(client),
                strip,
                &server,
                start,
                heap0,
                rss0,
            )
            .await
            .0
        }
        "pods" => {
            let (n, reader) =
                run(Api::<Pod>::all(client), strip, &server, start, heap0, rss0).await;
            if flag("--listers") {
                report(
                    "kube-rs",
                    n,
                    start.elapsed().as_secs_f64(),
                    live_heap() - heap0,
                    rss() - rss0,
                );
                lister_ops(&reader);
                std::process::exit(0);
            }
            n
        }
        "configmaps" => {
            run(
                Api::<ConfigMap>::all(client),
                strip,
                &server,
                start,
                heap0,
                rss0,
            )
            .await
            .0
        }
        other => panic!("unknown resource {other}"),
    };
    let elapsed = start.elapsed().as_secs_f64();
    report("kube-rs", n, elapsed, live_heap() - heap0, rss() - rss0);
    std::process::exit(0);
}
