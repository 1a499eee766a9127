//! Our side of the benchmark: the generated informer from `generated-sample` syncs one
//! resource from the replay server. `--decode-ceiling` instead times plain serde_json decoding
//! of the same LIST bytes into the same types (the ceiling our sync throughput is measured
//! against).

use std::time::Instant;

use informer_gen_bench::{CountingAlloc, arg, client, flag, live_heap, report, rss};
use informer_gen_sample::InformerFactoryExt;
use informer_runtime::{FactoryOptions, Selector, WatchListMode, strip_managed_fields_meta};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::List;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

async fn decode_ceiling(server: &str, resource: &str) {
    let client = client(server);
    let mut pages = Vec::new();
    let mut cont = String::new();
    loop {
        let req = http::Request::get(format!("/api/v1/{resource}?limit=500&continue={cont}")).body(Vec::new()).unwrap();
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
    let mut n = 0;
    for _ in 0..3 {
        let start = Instant::now();
        n = 0;
        for page in &pages {
            n += if resource == "pods" {
                serde_json::from_slice::<List<Pod>>(page).unwrap().items.len()
            } else {
                serde_json::from_slice::<List<ConfigMap>>(page).unwrap().items.len()
            };
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    // The live heap of the decoded objects alone, each in an Arc: what any cache of these
    // types must hold at least.
    let heap0 = live_heap();
    let kept: Vec<std::sync::Arc<dyn std::any::Any>> = pages
        .iter()
        .flat_map(|page| -> Vec<std::sync::Arc<dyn std::any::Any>> {
            if resource == "pods" {
                serde_json::from_slice::<List<Pod>>(page).unwrap().items.into_iter().map(|p| std::sync::Arc::new(p) as _).collect()
            } else {
                serde_json::from_slice::<List<ConfigMap>>(page).unwrap().items.into_iter().map(|c| std::sync::Arc::new(c) as _).collect()
            }
        })
        .collect();
    let heap = live_heap() - heap0 - (kept.capacity() * std::mem::size_of::<std::sync::Arc<dyn std::any::Any>>()) as isize;
    println!("{}", serde_json::json!({"client": "serde_json", "n": n, "sync_seconds": best, "bytes": bytes, "heap_bytes": heap}));
}

/// Lister operations over the synced Pods, timed in loops; prints one JSON line.
fn lister_ops(lister: &informer_gen_sample::core::v1::pods::PodLister, informer: &informer_runtime::SharedIndexInformer<Pod>) {
    let keys: Vec<(String, String)> = lister
        .list(&Selector::default())
        .iter()
        .map(|p| (p.metadata.namespace.clone().unwrap(), p.metadata.name.clone().unwrap()))
        .collect();
    let iters = 1_000_000;
    let start = Instant::now();
    let mut found = 0usize;
    for i in 0..iters {
        let (ns, name) = &keys[(i * 7919) % keys.len()];
        found += lister.pods(ns).get(name).is_ok() as usize;
    }
    let get_ns = start.elapsed().as_nanos() as f64 / iters as f64;
    assert_eq!(found, iters);
    let rounds = 2000;
    let start = Instant::now();
    let mut listed = 0;
    for _ in 0..rounds {
        listed += lister.pods("ns-007").list(&Selector::default()).len();
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
        indexed += informer.indexer().by_index(informer_runtime::NAMESPACE_INDEX, "ns-007").unwrap().len();
    }
    let index_us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    println!(
        "{}",
        serde_json::json!({"client": "informer-gen", "get_ns": get_ns, "ns_list_us": ns_list_us, "selector_list_us": selector_us, "index_us": index_us,
            "ns_items": listed / rounds, "selector_items": selected / (rounds / 10), "index_items": indexed / rounds})
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = arg("--server").expect("--server URL");
    let resource = arg("--resource").unwrap_or_else(|| "pods".into());
    if flag("--decode-ceiling") {
        return decode_ceiling(&server, &resource).await;
    }
    let watch_list = if flag("--paged-list") { WatchListMode::Never } else { WatchListMode::Auto };
    let options = FactoryOptions { transform: flag("--strip-managed-fields").then(strip_managed_fields_meta), watch_list, ..Default::default() };
    let factory = informer_gen_sample::new_factory(client(&server), options);
    let (heap0, rss0) = (live_heap(), rss());
    let start = Instant::now();
    let n = match resource.as_str() {
        "pods" => {
            let pods = factory.core().v1().pods();
            let informer = pods.informer().unwrap();
            factory.start().unwrap();
            factory.wait_for_cache_sync().await;
            let n = pods.lister().unwrap().list(&Selector::default()).len();
            if flag("--listers") {
                let elapsed = start.elapsed().as_secs_f64();
                report("informer-gen", n, elapsed, live_heap() - heap0, rss() - rss0);
                lister_ops(&pods.lister().unwrap(), &informer);
                std::process::exit(0);
            }
            n
        }
        "configmaps" => {
            let cms = factory.core().v1().configmaps();
            cms.informer().unwrap();
            factory.start().unwrap();
            factory.wait_for_cache_sync().await;
            cms.lister().unwrap().list(&Selector::default()).len()
        }
        other => panic!("unknown resource {other}"),
    };
    let elapsed = start.elapsed().as_secs_f64();
    report("informer-gen", n, elapsed, live_heap() - heap0, rss() - rss0);
    std::process::exit(0);
}
