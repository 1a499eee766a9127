//! The examples against a real kube-apiserver: the `pods-per-node` controller does its job,
//! the `watch` tool prints and dumps what the server holds, and `watch` and client-go's shared
//! informers report the same sequence of events on the same scenario.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use informer_gen_examples::pods_per_node::CONFIG_MAP_NAME;
use informer_gen_examples::watch_events::EventLine;
use informer_gen_tests::e2e::{Cluster, ClusterOptions, create_config_maps, eventually, install_crds, server_config_maps, servers};
use informer_runtime::reexports::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use informer_runtime::reexports::kube_client::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use informer_runtime::reexports::kube_client::{Api, Client};
use informer_runtime::reexports::serde_json::{self, json};

/// A child process whose stdout lines are collected; killed if still running when dropped.
struct Running {
    child: Child,
    lines: Arc<parking_lot::Mutex<Vec<String>>>,
    name: &'static str,
}

impl Running {
    fn spawn(name: &'static str, mut cmd: Command) -> Running {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let lines = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().push(line);
            }
        });
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{name}] {line}");
            }
        });
        Running { child, lines, name }
    }

    fn events(&self) -> Vec<EventLine> {
        self.lines.lock().iter().map(|l| EventLine::parse(l).unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", self.name))).collect()
    }

    /// SIGTERM, then the exit status must be success.
    fn terminate(&mut self) {
        let status = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "{} exited with {exit} after SIGTERM", self.name);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the lines say the cache holds: key → resourceVersion.
fn view(events: &[EventLine]) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    for e in events {
        match e.kind.as_str() {
            "ADDED" | "UPDATED" => {
                v.insert(e.key.clone(), e.resource_version.clone());
            }
            "DELETED" => {
                v.remove(&e.key);
            }
            _ => {}
        }
    }
    v
}

fn dump(path: &Path) -> BTreeMap<String, String> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn watch_cmd(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_watch"));
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    cmd
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2e");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}-{name}", std::process::id()))
}

async fn pod(client: &Client, ns: &str, name: &str, node: Option<&str>) {
    let mut spec = json!({"containers": [{"name": "c", "image": "registry.invalid/app:1"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "spec": spec})).unwrap();
    Api::<Pod>::namespaced(client.clone(), ns).create(&PostParams::default(), &pod).await.unwrap();
}

async fn delete_pod(client: &Client, ns: &str, name: &str) {
    Api::<Pod>::namespaced(client.clone(), ns).delete(name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
}

/// The controller's ConfigMap data in `ns`, or `None` when there is none.
async fn pods_per_node(client: &Client, ns: &str) -> Option<BTreeMap<String, String>> {
    Api::<ConfigMap>::namespaced(client.clone(), ns).get_opt(CONFIG_MAP_NAME).await.unwrap().map(|cm| cm.data.unwrap_or_default())
}

async fn wait_for_data(client: &Client, ns: &str, want: Option<&[(&str, &str)]>) {
    let want = want.map(|w| w.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = pods_per_node(client, ns).await;
        if got == want {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{ns}: ConfigMap data {got:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_per_node_controller_keeps_its_config_maps_in_line_with_the_pods() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    let a = cluster.namespace(&client, "ctl-a").await.name.clone();
    let b = cluster.namespace(&client, "ctl-b").await.name.clone();
    // Some state before the controller starts, some after.
    pod(&client, &a, "p1", Some("node-1")).await;
    pod(&client, &a, "p2", Some("node-2")).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pods-per-node"));
    cmd.env("KUBECONFIG", cluster.kubeconfig_path()).env("RUST_LOG", "info");
    let mut controller = Running::spawn("pods-per-node", cmd);

    wait_for_data(&client, &a, Some(&[("node-1", "p1"), ("node-2", "p2")])).await;
    pod(&client, &a, "p3", Some("node-1")).await;
    pod(&client, &a, "pending", None).await;
    pod(&client, &b, "q1", Some("node-3")).await;
    wait_for_data(&client, &a, Some(&[("node-1", "p1,p3"), ("node-2", "p2")])).await;
    wait_for_data(&client, &b, Some(&[("node-3", "q1")])).await;

    delete_pod(&client, &a, "p2").await;
    wait_for_data(&client, &a, Some(&[("node-1", "p1,p3")])).await;

    // Drift is repaired: an edited ConfigMap and a deleted one come back.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &a);
    cms.patch(CONFIG_MAP_NAME, &PatchParams::default(), &Patch::Merge(&json!({"data": {"node-9": "bogus"}}))).await.unwrap();
    wait_for_data(&client, &a, Some(&[("node-1", "p1,p3")])).await;
    Api::<ConfigMap>::namespaced(client.clone(), &b).delete(CONFIG_MAP_NAME, &DeleteParams::default()).await.unwrap();
    wait_for_data(&client, &b, Some(&[("node-3", "q1")])).await;

    // The last scheduled Pod gone: the ConfigMap goes too.
    delete_pod(&client, &b, "q1").await;
    wait_for_data(&client, &b, None).await;
    // A burst: 30 Pods over 3 nodes.
    for i in 0..30 {
        pod(&client, &b, &format!("w{i:02}"), Some(&format!("node-{}", i % 3))).await;
    }
    let names = |r: usize| (0..30).filter(|i| i % 3 == r).map(|i| format!("w{i:02}")).collect::<Vec<_>>().join(",");
    let (n0, n1, n2) = (names(0), names(1), names(2));
    wait_for_data(&client, &b, Some(&[("node-0", n0.as_str()), ("node-1", n1.as_str()), ("node-2", n2.as_str())])).await;
    controller.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_events_of_built_in_and_custom_resources_and_dumps_its_cache() {
    let Some(cluster) = Cluster::shared().await else { return };
    let client = cluster.client().await.unwrap();
    install_crds(&client, &["cert-manager.io_certificates.yaml"]).await;
    let ns = cluster.namespace(&client, "watch").await.name.clone();
    create_config_maps(&client, &ns, "cm", 3).await;
    let dump_file = tmp("watch-dump.json");
    let mut watch = Running::spawn(
        "watch",
        watch_cmd(&cluster.kubeconfig_path(), &["--namespace", &ns, "--dump", dump_file.to_str().unwrap(), "configmaps", "deployments.apps", "certificates.cert-manager.io"]),
    );
    eventually(Duration::from_secs(30), "SYNCED", || watch.events().iter().any(|e| e.kind == "SYNCED")).await;
    let events = watch.events();
    let synced_at = events.iter().position(|e| e.kind == "SYNCED").unwrap();
    assert_eq!(synced_at, 3, "three initial adds, then SYNCED: {events:?}");
    assert!(events[..3].iter().all(|e| e.kind == "ADDED" && e.initial && e.resource == "configmaps"));

    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    let deployments: Api<informer_runtime::reexports::k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    let d = deployments.create(&PostParams::default(), &serde_json::from_value(deploy).unwrap()).await.unwrap();
    let ar = informer_runtime::reexports::kube_client::api::ApiResource::from_gvk_with_plural(
        &informer_runtime::reexports::kube_client::api::GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    let cert: DynamicObject = serde_json::from_value(json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "tls", "namespace": ns},
        "spec": {"secretName": "tls", "issuerRef": {"name": "ca"}, "dnsNames": ["a.example.test"]}}))
    .unwrap();
    let c = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &ar).create(&PostParams::default(), &cert).await.unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &ns).delete("cm-0", &DeleteParams::default()).await.unwrap();
    let key = |n: &str| format!("{ns}/{n}");
    eventually(Duration::from_secs(30), "events of all three resources", || {
        let e = watch.events();
        e.iter().any(|e| e.resource == "deployments.apps" && e.kind == "ADDED" && e.key == key("web") && Some(&e.resource_version) == d.metadata.resource_version.as_ref())
            && e.iter().any(|e| e.resource == "certificates.cert-manager.io" && e.kind == "ADDED" && e.key == key("tls") && Some(&e.resource_version) == c.metadata.resource_version.as_ref())
            && e.iter().any(|e| e.resource == "configmaps" && e.kind == "DELETED" && e.key == key("cm-0") && !e.tombstone)
    })
    .await;
    watch.terminate();
    let cache = dump(&dump_file);
    let mut want: BTreeMap<String, String> = server_config_maps(&client, &ns).await.into_iter().map(|(k, v)| (format!("configmaps:{k}"), v)).collect();
    want.insert(format!("deployments.apps:{}", key("web")), d.metadata.resource_version.clone().unwrap());
    want.insert(format!("certificates.cert-manager.io:{}", key("tls")), c.metadata.resource_version.clone().unwrap());
    assert_eq!(cache, want);
    let _ = std::fs::remove_file(dump_file);
}

/// (type, key, resourceVersion, initial, tombstone) of an event.
type Event = (String, String, String, bool, bool);

fn sorted(events: &[Event]) -> Vec<Event> {
    let mut v = events.to_vec();
    v.sort();
    v
}

/// The comparable part of each event, `SYNCED` included.
fn comparable(events: &[EventLine]) -> Vec<Event> {
    events.iter().map(|e| (e.kind.clone(), e.key.clone(), e.resource_version.clone(), e.initial, e.tombstone)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_client_go_report_the_same_events() {
    let Some(mut cluster) = Cluster::start(ClusterOptions { no_watch_cache: true, ..Default::default() }).await else { return };
    let clientgo_bin = servers().unwrap().join("clientgo-events");
    let client = cluster.client().await.unwrap();
    let ns = cluster.namespace(&client, "diff").await.name.clone();
    create_config_maps(&client, &ns, "cm", 8).await;

    let (ours_dump, theirs_dump) = (tmp("diff-ours.json"), tmp("diff-client-go.json"));
    let kubeconfig = cluster.kubeconfig_path();
    let mut ours = Running::spawn("watch", watch_cmd(&kubeconfig, &["--namespace", &ns, "--dump", ours_dump.to_str().unwrap(), "configmaps"]));
    let mut go = Command::new(&clientgo_bin);
    go.arg("--kubeconfig").arg(&kubeconfig).args(["--namespace", &ns, "--dump", theirs_dump.to_str().unwrap(), "configmaps"]);
    let mut theirs = Running::spawn("client-go", go);
    let both_see = |what: &str, server: BTreeMap<String, String>| {
        let (ours, theirs) = (&ours, &theirs);
        let what = what.to_string();
        async move {
            eventually(Duration::from_secs(60), &what, || view(&ours.events()) == server && view(&theirs.events()) == server).await;
        }
    };
    eventually(Duration::from_secs(30), "both synced", || ours.events().iter().any(|e| e.kind == "SYNCED") && theirs.events().iter().any(|e| e.kind == "SYNCED")).await;

    // Creates, updates, deletes, one at a time.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    create_config_maps(&client, &ns, "late", 3).await;
    for (name, v) in [("cm-1", "a"), ("cm-2", "a"), ("cm-1", "b"), ("late-0", "a")] {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&json!({"data": {"v": v}}))).await.unwrap();
    }
    for name in ["cm-3", "late-1"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    both_see("changes", server_config_maps(&client, &ns).await).await;
    let live_end = (ours.events().len(), theirs.events().len());

    // A relist across deletions: the watchers' server goes away, objects change on a second
    // server, etcd is compacted (so the old resourceVersion is gone: 410), the server returns.
    let peer = cluster.start_peer().await;
    cluster.kill_apiserver();
    let peer_client = peer.client().await;
    let api: Api<ConfigMap> = Api::namespaced(peer_client.clone(), &ns);
    for name in ["cm-0", "cm-4", "late-2"] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    api.patch("cm-5", &PatchParams::default(), &Patch::Merge(&json!({"data": {"v": "offline"}}))).await.unwrap();
    create_config_maps(&peer_client, &ns, "offline", 2).await;
    cluster.compact_etcd().await;
    cluster.restart_apiserver().await;
    let server = server_config_maps(&peer_client, &ns).await;
    both_see("relist", server.clone()).await;
    // Let any trailing events arrive before comparing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    ours.terminate();
    theirs.terminate();

    let (o, t) = (comparable(&ours.events()), comparable(&theirs.events()));
    let show = |name: &str, events: &[Event]| format!("{name}:\n{}", events.iter().map(|e| format!("  {e:?}")).collect::<Vec<_>>().join("\n"));
    let context = format!("{}\n{}", show("ours", &o), show("client-go", &t));
    let synced = |events: &[Event]| events.iter().position(|e| e.0 == "SYNCED").unwrap();
    let (so, st) = (synced(&o), synced(&t));
    // The initial list: the same events; client-go's order is that of a Go map (WatchList
    // collects the initial events in a temporary store), ours the server's.
    assert_eq!(sorted(&o[..so]), sorted(&t[..st]), "initial events\n{context}");
    // Live changes: exactly the same sequence.
    assert_eq!(o[so..live_end.0], t[st..live_end.1], "live events\n{context}");
    // The relist: the same events. Order differs by design: client-go queues the tombstones
    // first and the relisted objects in Go-map order; ours streams the relisted objects in
    // list order as pages arrive (never holding the whole list) and can only tell which keys
    // vanished once the list is complete, so its tombstones come last.
    let (ro, rt) = (&o[live_end.0..], &t[live_end.1..]);
    assert_eq!(sorted(ro), sorted(rt), "relist events\n{context}");
    let first_tombstone = ro.iter().position(|e| e.4).expect("tombstones in the relist");
    assert!(ro[first_tombstone..].iter().all(|e| e.4), "ours: tombstones after the relisted objects\n{context}");
    assert_eq!(ro.iter().filter(|e| e.4).count(), 3, "three tombstones from the relist\n{context}");
    // client-go reports every surviving object as updated after a relist, unchanged or not; so do we.
    assert_eq!(ro.iter().filter(|e| e.0 == "UPDATED").count(), server.len() - 2, "{context}");
    assert_eq!(dump(&ours_dump), server);
    assert_eq!(dump(&theirs_dump), server);
    let _ = (std::fs::remove_file(ours_dump), std::fs::remove_file(theirs_dump));
}
