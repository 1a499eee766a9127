//! kube-rs's side of the benchmark: `kube_runtime::watcher` feeding a `reflector` store, as
//! kube-rs users cache objects, syncing one resource from the replay server.

use std::time::Instant;

use futures::StreamExt;
use informer_gen_bench::{CountingAlloc, arg, client, flag, live_heap, report, rss};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube_client::Api;
use kube_client::core::Resource;
use kube_runtime::{WatchStreamExt, reflector, watcher};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

async fn run<K>(api: Api<K>, strip: bool) -> usize
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .modify(move |o: &mut K| {
            if strip {
                o.meta_mut().managed_fields = None;
            }
        })
        .reflect(writer)
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    reader.state().len()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = arg("--server").expect("--server URL");
    let strip = flag("--strip-managed-fields");
    let client = client(&server);
    let (heap0, rss0) = (live_heap(), rss());
    let start = Instant::now();
    let n = match arg("--resource").as_deref().unwrap_or("pods") {
        "pods" => run(Api::<Pod>::all(client), strip).await,
        "configmaps" => run(Api::<ConfigMap>::all(client), strip).await,
        other => panic!("unknown resource {other}"),
    };
    let elapsed = start.elapsed().as_secs_f64();
    report("kube-rs", n, elapsed, live_heap() - heap0, rss() - rss0);
    std::process::exit(0);
}
