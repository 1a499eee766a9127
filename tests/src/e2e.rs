//! A real etcd + kube-apiserver on loopback for the end-to-end tests.
//!
//! Invariants:
//! - The binaries come from `tests/e2e/servers.sh build` (kube-apiserver v1.35.4 and etcd from
//!   the pinned Go module in `tests/go`, cached outside `target/`); they are built at most once
//!   per machine and module graph.
//! - Every process listens on 127.0.0.1 only, on ports picked free at start; clients reach
//!   nothing outside 127.0.0.0/8.
//! - Every server runs under a guard shell whose stdin is a pipe from the test process: when
//!   the [`Cluster`] is dropped, or the test process ends in any way (panic, abort, kill), the
//!   pipe closes and the guard kills the server. No server outlives its test binary.
//! - [`Cluster::shared`] is one cluster per test binary; tests isolate themselves with
//!   [`Cluster::namespace`]. Tests that restart or compact get their own [`Cluster::start`].
//! - Server logs stay in the cluster's directory; a failing test prints their tails.
//! - Without Go, [`servers`] returns `None` and tests skip with a message — except under
//!   `CI=true`, where a missing toolchain or a failed build fails the test.
//! - With `INFORMER_GEN_E2E_KUBECONFIG` set, [`Cluster::shared`] is the existing cluster of that
//!   kubeconfig and [`Cluster::start`] skips (with a message) the tests that need their own.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use informer_runtime::reexports::k8s_openapi::api::core::v1::Namespace;
use informer_runtime::reexports::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use informer_runtime::reexports::kube_client::config::{KubeConfigOptions, Kubeconfig};
use informer_runtime::reexports::kube_client::{Api, Client, Config};
use informer_runtime::reexports::serde_json::{self, json};
use informer_runtime::reexports::kube_client::api::PostParams;

/// The token of the cluster's single (all-powerful) user.
pub const TOKEN: &str = "informer-gen-e2e";

/// The directory holding `kube-apiserver`, `etcd` and `clientgo-events`, building them if
/// needed; `None` (after saying why) when they cannot be built here and CI is not set.
pub fn servers() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if let Ok(dir) = std::env::var("INFORMER_GEN_E2E_BIN") {
            return Some(PathBuf::from(dir));
        }
        let has_go = Command::new("go").arg("version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        if !has_go {
            assert!(!in_ci, "CI=true but Go is not installed: the end-to-end tests cannot build kube-apiserver");
            say("SKIPPED end-to-end tests: Go is not installed, so kube-apiserver and etcd cannot be built (see README, 'End-to-end tests')");
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/servers.sh");
        let started = Instant::now();
        let out = Command::new("bash").arg(&script).arg("build").stderr(Stdio::inherit()).output().expect("run tests/e2e/servers.sh");
        assert!(out.status.success(), "tests/e2e/servers.sh build failed ({})", out.status);
        let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        say(&format!("e2e servers ready in {:.1?}: {}", started.elapsed(), dir.display()));
        Some(dir)
    })
    .as_deref()
}

/// Writes to the terminal past the test harness's output capture.
pub fn say(line: &str) {
    let mut tty = std::fs::OpenOptions::new().write(true).open("/dev/tty").map(|f| Box::new(f) as Box<dyn Write>).unwrap_or_else(|_| Box::new(std::io::stderr()));
    let _ = writeln!(tty, "{line}");
}

/// How a cluster's kube-apiserver runs.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// `--watch-cache=false`: watches read etcd directly, so an etcd compaction makes an old
    /// resourceVersion fail with 410 Gone.
    pub no_watch_cache: bool,
    /// Extra `--feature-gates` entries, e.g. `WatchList=false`.
    pub feature_gates: Vec<String>,
}

/// A supervised server process (see the module invariants).
struct Guarded {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Guarded {
    fn spawn(bin: &Path, args: &[String], log: &Path) -> Guarded {
        let log_file = std::fs::File::create(log).unwrap();
        // The guard kills the server when its stdin reaches EOF, i.e. when the test process
        // closes the pipe or dies, and exits when the server does (so `exited` sees a server
        // that failed to start). The reader gets stdin as fd 3: a background job's own stdin
        // is /dev/null.
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(r#"bin="$1"; shift; exec 3<&0; "$bin" "$@" </dev/null & pid=$!; { read -r _ <&3; kill -KILL $pid 2>/dev/null; } & reader=$!; wait $pid; status=$?; kill $reader 2>/dev/null; exit $status"#)
            .arg("guard")
            .arg(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let stdin = child.stdin.take();
        Guarded { child, stdin }
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    fn kill(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill();
    }
}

/// etcd and kube-apiserver on loopback, with a kubeconfig for them.
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    options: ClusterOptions,
    etcd: Option<Guarded>,
    etcd_port: u16,
    apiserver: Option<Guarded>,
    api_port: u16,
    restarts: u32,
    /// Set when the tests run against an existing cluster (`INFORMER_GEN_E2E_KUBECONFIG`).
    external: Option<PathBuf>,
}

/// The kubeconfig of an existing cluster to run the shared-cluster tests against.
fn external_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("INFORMER_GEN_E2E_KUBECONFIG").map(PathBuf::from)
}

fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// The lowest port a server of these tests listens on when ports are picked below the
/// kernel's ephemeral range.
const LISTEN_PORTS_FROM: u16 = 10_000;

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), from
/// which outgoing connections and `bind(0)` take their local ports.
fn ephemeral_ports_from() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// `N` distinct ports that were free when picked, for servers to listen on.
///
/// Invariants:
/// - When the ephemeral range starts above `LISTEN_PORTS_FROM + 1000`, every port is below
///   it: no outgoing connection (etcd and kube-apiserver open many to each other and to
///   themselves while starting) can take a port between its pick and the server's bind,
///   which a port from `bind(0)` allows.
/// - No port is handed out twice by one process; each was bindable on 127.0.0.1 at its pick.
/// - Otherwise (no `/proc`, or a range starting low) the ports come from `bind(0)`, all held
///   at once before any is released, so they are distinct.
fn free_ports<const N: usize>() -> [u16; N] {
    static NEXT: std::sync::Mutex<Option<u16>> = std::sync::Mutex::new(None);
    let Some(end) = ephemeral_ports_from().filter(|&e| e > LISTEN_PORTS_FROM + 1000) else {
        let listeners: [TcpListener; N] = std::array::from_fn(|_| TcpListener::bind("127.0.0.1:0").unwrap());
        return listeners.map(|l| l.local_addr().unwrap().port());
    };
    let span = u32::from(end - LISTEN_PORTS_FROM);
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    // Test binaries of one run start apart in the span, so they rarely probe the same ports.
    let mut port = next.unwrap_or_else(|| LISTEN_PORTS_FROM + (std::process::id().wrapping_mul(7919) % span) as u16);
    let mut tried = 0;
    std::array::from_fn(|_| loop {
        assert!(tried < span, "no free port on 127.0.0.1 from {LISTEN_PORTS_FROM} to {end}");
        let candidate = port;
        port = if port + 1 >= end { LISTEN_PORTS_FROM } else { port + 1 };
        tried += 1;
        *next = Some(port);
        if TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
            break candidate;
        }
    })
}

impl Cluster {
    /// The cluster shared by the tests of one test binary; `None` when e2e tests are skipped.
    /// With `INFORMER_GEN_E2E_KUBECONFIG` set, the cluster that kubeconfig points at.
    pub async fn shared() -> Option<&'static Cluster> {
        static SHARED: tokio::sync::OnceCell<Option<Cluster>> = tokio::sync::OnceCell::const_new();
        SHARED
            .get_or_init(|| async {
                match external_kubeconfig() {
                    Some(path) => {
                        say(&format!("e2e: using the existing cluster of {}", path.display()));
                        Some(Cluster {
                            dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2e"),
                            bin: PathBuf::new(),
                            options: ClusterOptions::default(),
                            etcd: None,
                            etcd_port: 0,
                            apiserver: None,
                            api_port: 0,
                            restarts: 0,
                            external: Some(path),
                        })
                    }
                    None => Cluster::start(ClusterOptions::default()).await,
                }
            })
            .await
            .as_ref()
    }

    /// Starts a cluster of its own; `None` when e2e tests are skipped, or when they run
    /// against an existing cluster (a test that kills, restarts or compacts needs its own).
    pub async fn start(options: ClusterOptions) -> Option<Cluster> {
        if external_kubeconfig().is_some() {
            say(&format!(
                "SKIPPED {}: it needs a kube-apiserver of its own, not the one of INFORMER_GEN_E2E_KUBECONFIG",
                std::thread::current().name().unwrap_or("a test")
            ));
            return None;
        }
        let bin = servers()?.to_path_buf();
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2e");
        std::fs::create_dir_all(&base).unwrap();
        remove_stale_cluster_dirs(&base);
        let dir = base.join(format!("cluster-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tokens.csv"), format!("{TOKEN},admin,admin,system:masters\n")).unwrap();
        let sa_key = dir.join("sa.key");
        let status = Command::new("openssl").args(["genrsa", "-out"]).arg(&sa_key).arg("2048").stderr(Stdio::null()).status().expect("openssl");
        assert!(status.success(), "openssl genrsa failed");

        let [etcd_port, peer_port, api_port] = free_ports();
        let etcd = Guarded::spawn(
            &bin.join("etcd"),
            &[
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
                "--listen-metrics-urls=".into(),
                "--quota-backend-bytes=4294967296".into(),
                "--unsafe-no-fsync".into(),
            ],
            &dir.join("etcd.log"),
        );
        let mut cluster = Cluster { dir, bin, options, etcd: Some(etcd), etcd_port, apiserver: None, api_port, restarts: 0, external: None };
        cluster.start_apiserver().await;
        Some(cluster)
    }

    fn apiserver_args(&self, port: u16, tag: &str) -> Vec<String> {
        let d = &self.dir;
        let mut args = vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_port),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", d.join(format!("certs-{tag}")).display()),
            format!("--token-auth-file={}", d.join("tokens.csv").display()),
            "--authorization-mode=AlwaysAllow".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", d.join("sa.key").display()),
            format!("--service-account-signing-key-file={}", d.join("sa.key").display()),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            // No controller-manager runs, so nothing would create the `default` service account
            // that this admission plugin requires of every Pod.
            "--disable-admission-plugins=ServiceAccount".into(),
            "--enable-priority-and-fairness=false".into(),
            "--profiling=false".into(),
        ];
        if self.options.no_watch_cache {
            args.push("--watch-cache=false".into());
        }
        if !self.options.feature_gates.is_empty() {
            args.push(format!("--feature-gates={}", self.options.feature_gates.join(",")));
        }
        args
    }

    async fn start_apiserver(&mut self) {
        let log = self.dir.join(format!("kube-apiserver.{}.log", self.restarts));
        let mut guard = Guarded::spawn(&self.bin.join("kube-apiserver"), &self.apiserver_args(self.api_port, "main"), &log);
        self.wait_ready(&mut guard, self.api_port, "main").await;
        self.apiserver = Some(guard);
        if self.restarts == 0 {
            std::fs::write(self.kubeconfig_path(), self.kubeconfig_yaml(self.api_port, "main")).unwrap();
        }
    }

    async fn wait_ready(&mut self, server: &mut Guarded, port: u16, tag: &str) {
        let started = Instant::now();
        loop {
            if server.exited() || self.etcd.as_mut().is_some_and(Guarded::exited) {
                self.print_logs();
                panic!("kube-apiserver or etcd exited during start; logs in {}", self.dir.display());
            }
            if started.elapsed() > Duration::from_secs(120) {
                self.print_logs();
                panic!("kube-apiserver not ready after 120 s; logs in {}", self.dir.display());
            }
            if self.ensure_ca(tag) {
                if let Ok(client) = client_for(&self.kubeconfig_yaml(port, tag)).await {
                    let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
                    if client.request_text(req).await.is_ok_and(|t| t.trim() == "ok") {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Starts a second kube-apiserver on the same etcd (as in an HA control plane), for
    /// changes made while the first one is down.
    pub async fn start_peer(&mut self) -> Peer {
        let port = free_port();
        let log = self.dir.join(format!("kube-apiserver.peer-{port}.log"));
        let tag = format!("peer-{port}");
        let mut guard = Guarded::spawn(&self.bin.join("kube-apiserver"), &self.apiserver_args(port, &tag), &log);
        self.wait_ready(&mut guard, port, &tag).await;
        Peer { _guard: guard, kubeconfig: self.kubeconfig_yaml(port, &tag) }
    }

    /// Kills kube-apiserver (SIGKILL); etcd keeps running.
    pub fn kill_apiserver(&mut self) {
        if let Some(mut a) = self.apiserver.take() {
            a.kill();
        }
    }

    /// Starts kube-apiserver again on the same port and waits until it is ready.
    pub async fn restart_apiserver(&mut self) {
        self.kill_apiserver();
        self.restarts += 1;
        self.start_apiserver().await;
    }

    /// The API server's URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The kubeconfig file for this cluster (written once the server is first ready).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.external.clone().unwrap_or_else(|| self.dir.join("kubeconfig"))
    }

    /// Copies the CA of a kube-apiserver's self-signed serving certificate to `ca-TAG.crt`
    /// once the certificate file is complete (it holds the certificate followed by its CA).
    fn ensure_ca(&self, tag: &str) -> bool {
        let ca = self.dir.join(format!("ca-{tag}.crt"));
        if ca.exists() {
            return true;
        }
        let Ok(pem) = std::fs::read_to_string(self.dir.join(format!("certs-{tag}/apiserver.crt"))) else { return false };
        let Some(start) = pem.rfind("-----BEGIN CERTIFICATE-----") else { return false };
        if start == 0 || !pem[start..].contains("-----END CERTIFICATE-----") {
            return false;
        }
        std::fs::write(&ca, &pem[start..]).unwrap();
        true
    }

    fn kubeconfig_yaml(&self, port: u16, tag: &str) -> String {
        let ca = self.dir.join(format!("ca-{tag}.crt"));
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\n\
             users:\n- name: admin\n  user:\n    token: {TOKEN}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: admin\n    namespace: default\n\
             current-context: e2e\n",
            ca.display()
        )
    }

    /// A new client for this cluster, the one users are pointed to
    /// ([`informer_runtime::informer_client`]; clients belong to the runtime that creates
    /// them, so each test makes its own).
    pub async fn client(&self) -> Result<Client, informer_runtime::reexports::kube_client::Error> {
        match &self.external {
            Some(path) => {
                // Read from the file, so paths in it resolve against its directory.
                let kc = Kubeconfig::read_from(path).expect("read INFORMER_GEN_E2E_KUBECONFIG");
                informer_runtime::informer_client(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config"))
            }
            None => client_for(&self.kubeconfig_yaml(self.api_port, "main")).await,
        }
    }

    /// Creates a fresh namespace `prefix-N`; its guard prints the server logs if the test fails.
    pub async fn namespace(&self, client: &Client, prefix: &str) -> TestNamespace<'_> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!("{prefix}-{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let ns = Namespace { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, ..Default::default() };
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create namespace");
        TestNamespace { name, cluster: self }
    }

    /// Compacts etcd at its current revision, physically: afterwards a watch from any older
    /// resourceVersion fails with 410 Gone (when the watch cache is off).
    pub async fn compact_etcd(&self) -> i64 {
        let etcd = Client::try_from(Config::new(format!("http://127.0.0.1:{}", self.etcd_port).parse().unwrap())).unwrap();
        let req = http::Request::post("/v3/kv/range").body(br#"{"key":"AA=="}"#.to_vec()).unwrap();
        let range: serde_json::Value = serde_json::from_str(&etcd.request_text(req).await.expect("etcd range")).unwrap();
        let rev: i64 = range["header"]["revision"].as_str().unwrap().parse().unwrap();
        let body = serde_json::to_vec(&json!({"revision": rev.to_string(), "physical": true})).unwrap();
        let req = http::Request::post("/v3/kv/compaction").body(body).unwrap();
        etcd.request_text(req).await.expect("etcd compaction");
        rev
    }

    /// Prints the tails of the server logs to the terminal.
    pub fn print_logs(&self) {
        if self.external.is_some() {
            return;
        }
        let mut logs: Vec<_> = std::fs::read_dir(&self.dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "log")).collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            say(&format!("----- last 40 lines of {} -----", log.display()));
            for l in &lines[lines.len().saturating_sub(40)..] {
                say(l);
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
        self.kill_apiserver();
        if let Some(etcd) = &mut self.etcd {
            etcd.kill();
        }
        if !std::thread::panicking() && self.external.is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

async fn client_for(kubeconfig: &str) -> Result<Client, informer_runtime::reexports::kube_client::Error> {
    let kc = Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    informer_runtime::informer_client(config)
}

/// A second kube-apiserver of a [`Cluster`], stopped when dropped.
pub struct Peer {
    _guard: Guarded,
    kubeconfig: String,
}

impl Peer {
    /// A new client for this server.
    pub async fn client(&self) -> Client {
        client_for(&self.kubeconfig).await.unwrap()
    }
}

/// A namespace of one test in a shared cluster.
pub struct TestNamespace<'a> {
    /// The namespace's name.
    pub name: String,
    cluster: &'a Cluster,
}

impl Drop for TestNamespace<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            say(&format!("test in namespace {} failed; server logs follow", self.name));
            self.cluster.print_logs();
        }
    }
}

/// Removes the directories of clusters whose test process is gone (kept only while a failed
/// run's logs may still be read).
fn remove_stale_cluster_dirs(base: &Path) {
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("cluster-").and_then(|r| r.split('-').next()) else { continue };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Polls `check` every 50 ms until it returns true or `timeout` passes.
pub async fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One handler call, as the end-to-end tests compare them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `ADDED`, `UPDATED` or `DELETED`.
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub key: String,
    /// The object's resourceVersion.
    pub rv: String,
    /// Add from the initial list.
    pub initial: bool,
    /// Delete through a `DeletedFinalStateUnknown` tombstone.
    pub tombstone: bool,
}

/// Records every event a handler receives.
pub struct EventLog<K> {
    seen: std::sync::Arc<parking_lot::Mutex<Vec<Seen>>>,
    _k: std::marker::PhantomData<fn(K)>,
}

impl<K> Clone for EventLog<K> {
    fn clone(&self) -> Self {
        EventLog { seen: self.seen.clone(), _k: std::marker::PhantomData }
    }
}

impl<K> Default for EventLog<K> {
    fn default() -> Self {
        EventLog { seen: Default::default(), _k: std::marker::PhantomData }
    }
}

impl<K> EventLog<K> {
    /// Everything recorded so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }
    /// How many events were recorded.
    pub fn len(&self) -> usize {
        self.seen.lock().len()
    }
    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The cache key (as the runtime builds it) and resourceVersion of `obj`.
fn key_rv<K: informer_runtime::reexports::kube_core::Resource>(obj: &K) -> (String, String) {
    let key = informer_runtime::ObjectKey::of(obj).map(|k| k.as_str().to_string()).unwrap_or_default();
    (key, obj.meta().resource_version.clone().unwrap_or_default())
}

impl<K> informer_runtime::EventHandler<K> for EventLog<K>
where
    K: informer_runtime::reexports::kube_core::Resource + Send + Sync + 'static,
{
    fn on_event(&mut self, event: &informer_runtime::Event<K>) {
        use informer_runtime::Event;
        let (kind, initial, tombstone) = match event {
            Event::Add { is_in_initial_list, .. } => ("ADDED", *is_in_initial_list, false),
            Event::Update { .. } => ("UPDATED", false, false),
            Event::Delete(d) => ("DELETED", false, d.is_tombstone()),
        };
        let (key, rv) = key_rv(event.object().as_ref());
        let seen = Seen { kind, key, rv, initial, tombstone };
        self.seen.lock().push(seen);
    }
}

/// Asserts that `seen` is exactly `expected`, in order. An expected event with an empty
/// resourceVersion (a delete, whose final resourceVersion the API does not return) matches
/// any resourceVersion newer than the previous one seen for that key.
#[track_caller]
pub fn assert_sequence(seen: &[Seen], expected: &[Seen]) {
    let mut last: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    let normalized: Vec<Seen> = seen
        .iter()
        .zip(expected.iter().chain(std::iter::repeat(&expected[0])))
        .map(|(s, e)| {
            let rv: u64 = s.rv.parse().unwrap_or_else(|_| panic!("resourceVersion {:?} of {s:?} is not a number", s.rv));
            if let Some(prev) = last.insert(&s.key, rv) {
                assert!(rv > prev, "resourceVersions of {} go backwards: {prev} then {rv}", s.key);
            }
            let mut s = s.clone();
            if e.rv.is_empty() && e.key == s.key {
                s.rv.clear();
            }
            s
        })
        .collect();
    assert_eq!(normalized, expected, "handler events, in order");
}

/// Creates ConfigMaps `prefix-0` … `prefix-(n-1)` in `ns` (16 requests in flight), labelled
/// `test=<ns>`, with `data.v = "0"`.
pub async fn create_config_maps(client: &Client, ns: &str, prefix: &str, n: usize) {
    use informer_runtime::reexports::k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..n {
        let api = api.clone();
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("{prefix}-{i}"), "namespace": ns, "labels": {"test": ns}},
            "data": {"v": "0"}
        }))
        .unwrap();
        pending.spawn(async move { api.create(&PostParams::default(), &cm).await.unwrap() });
        if pending.len() >= 16 {
            pending.join_next().await.unwrap().unwrap();
        }
    }
    while let Some(r) = pending.join_next().await {
        r.unwrap();
    }
}

/// `namespace/name` → resourceVersion of the ConfigMaps the server holds in `ns`.
pub async fn server_config_maps(client: &Client, ns: &str) -> std::collections::BTreeMap<String, String> {
    use informer_runtime::reexports::k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let list = api.list(&Default::default()).await.unwrap();
    list.items.iter().map(|o| (format!("{ns}/{}", o.metadata.name.as_deref().unwrap()), o.metadata.resource_version.clone().unwrap())).collect()
}

/// `namespace/name` → resourceVersion of cached objects.
pub fn cached<K: informer_runtime::reexports::kube_core::Resource>(objs: &[std::sync::Arc<K>]) -> std::collections::BTreeMap<String, String> {
    objs.iter().map(|o| key_rv(o.as_ref())).collect()
}

/// Creates every CRD in the named files of `generated-sample/schemas/crds` (an existing one is
/// kept) and waits until each is Established.
pub async fn install_crds(client: &Client, files: &[&str]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../generated-sample/schemas/crds");
    let crds: Api<informer_runtime::reexports::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for doc in informer_gen::yaml::documents(&text).unwrap() {
            let crd: informer_runtime::reexports::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition = serde_json::from_value(doc).unwrap();
            names.push(crd.metadata.name.clone().unwrap());
            match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(informer_runtime::reexports::kube_client::Error::Api(e)) if e.code == 409 => {}
                Err(e) => panic!("create CRD from {file}: {e}"),
            }
        }
    }
    for name in names {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let crd = crds.get(&name).await.unwrap();
            let established = crd.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "CRD {name} not established");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..40).flat_map(|_| free_ports::<3>()).chain((0..10).map(|_| free_port())).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice: {ports:?}");
        match ephemeral_ports_from().filter(|&e| e > LISTEN_PORTS_FROM + 1000) {
            Some(end) => assert!(
                ports.iter().all(|&p| (LISTEN_PORTS_FROM..end).contains(&p)),
                "ports outside {LISTEN_PORTS_FROM}..{end}: {ports:?}"
            ),
            None => say("free_ports: no ephemeral range above 11000 here, so the ports came from bind(0)"),
        }
        // All at once: each is still free, and none is another's.
        let _held: Vec<TcpListener> = ports
            .iter()
            .map(|&p| TcpListener::bind(("127.0.0.1", p)).unwrap_or_else(|e| panic!("port {p} handed out but not bindable: {e}")))
            .collect();
    }
}
