//! Shared parts of the side-by-side benchmark: a counting allocator (live heap bytes), RSS,
//! and the one-line JSON result every client prints.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Counts live heap bytes; install with `#[global_allocator]`.
///
/// Each thread counts what it allocates and frees in a slot of its own among [`SLOTS`], each
/// on its own cache line, with a plain load and store: no locked instruction per allocation
/// (an atomic add on every allocation and free, uncontended as it was, still took 5–9% of
/// the client's samples in the events benchmark, where client-go's own heap statistics
/// cost nothing comparable). Threads past the first `SLOTS - 1`, and threads whose
/// thread-locals are being torn down, share the last slot with an atomic add. The live
/// heap is the sum of the slots (one may be negative: a thread frees what another
/// allocated).
pub struct CountingAlloc;

/// Slots of live heap bytes; the last one is shared.
const SLOTS: usize = 256;
const SHARED_SLOT: usize = SLOTS - 1;

/// One counter alone on a cache line (two lines: adjacent-line prefetch pairs them).
#[repr(align(128))]
struct Slot(AtomicIsize);

static LIVE: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static TRACK_PEAK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// This thread's slot (`usize::MAX` until its first allocation). Const-initialized
    /// and without a destructor, so reading it never allocates.
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Adds `by` to the calling thread's slot.
fn count(by: isize) {
    let i = SLOT
        .try_with(|slot| {
            if slot.get() == usize::MAX {
                slot.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(SHARED_SLOT));
            }
            slot.get()
        })
        .unwrap_or(SHARED_SLOT);
    let counter = &LIVE[i].0;
    if i == SHARED_SLOT {
        counter.fetch_add(by, Ordering::Relaxed);
    } else {
        // Only this thread writes this slot; readers sum whatever each slot holds.
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
    }
}

fn grew(by: isize) {
    count(by);
    if TRACK_PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(live_heap(), Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Live heap bytes right now: the sum of the counters.
pub fn live_heap() -> isize {
    // The slots given out so far, and the shared one: a handful in a benchmark's process.
    let given = NEXT_SLOT.load(Ordering::Relaxed).min(SHARED_SLOT);
    LIVE[..given].iter().chain([&LIVE[SHARED_SLOT]]).map(|slot| slot.0.load(Ordering::Relaxed)).sum()
}

/// Starts tracking the peak of the live heap (off by default: it sums the counters on
/// every allocation) and resets it to the live heap now.
pub fn reset_peak_heap() {
    TRACK_PEAK.store(true, Ordering::Relaxed);
    PEAK.store(live_heap(), Ordering::Relaxed);
}

/// Peak live heap since [`reset_peak_heap`].
pub fn peak_heap() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// Peak resident set size (`VmHWM`) in bytes.
pub fn peak_rss() -> isize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: isize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    kb * 1024
}

/// Resets the peak resident set size to the current one.
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5")
        .expect("reset VmHWM through /proc/self/clear_refs");
}

/// Resident set size in bytes.
pub fn rss() -> isize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: isize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The config of a client pointed at the replay server (plain HTTP on loopback).
fn config(server: &str) -> kube_client::Config {
    let mut config = kube_client::Config::new(server.parse().expect("server URL"));
    config.read_timeout = None;
    config
}

/// kube-client's default client pointed at the replay server, as kube-rs users have it.
pub fn client(server: &str) -> kube_client::Client {
    kube_client::Client::try_from(config(server)).expect("client")
}

/// The client informer-gen's users are pointed to ([`informer_runtime::informer_client`]:
/// HTTP/1 read buffers capped), or with `--kube-default-client` kube-client's default one.
pub fn informer_client(server: &str) -> kube_client::Client {
    if flag("--kube-default-client") {
        return client(server);
    }
    informer_runtime::informer_client(config(server)).expect("client")
}

/// Prints the result line every client prints.
pub fn report(client: &str, n: usize, sync_seconds: f64, heap: isize, rss: isize) {
    println!(
        "{}",
        serde_json::json!({"client": client, "n": n, "sync_seconds": sync_seconds, "heap_bytes": heap, "rss_bytes": rss})
    );
}

/// `--flag value` from the command line.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Whether `--flag` is on the command line.
pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// The annotation the replay server's churn events carry: the wall clock (Unix nanoseconds)
/// of the server's write.
pub const SENT_ANNOTATION: &str = "bench/sent-ns";

/// Wall clock, Unix nanoseconds (the clock the replay server stamps events with).
pub fn unix_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// User + system CPU seconds of this process so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Counts the churn events the handlers of one informer got and, while recording, their
/// latencies from the server's write. Shared by every handler (`Arc`).
#[derive(Default)]
pub struct HandlerCounter {
    updates: std::sync::atomic::AtomicU64,
    record: std::sync::atomic::AtomicBool,
    latencies: std::sync::Mutex<Vec<i64>>,
}

impl HandlerCounter {
    /// One handler got a churn event stamped `sent` (the annotation's text); a no-op for
    /// objects without the stamp.
    pub fn seen(&self, sent: Option<&str>) {
        let Some(sent) = sent.and_then(|s| s.parse::<i64>().ok()) else {
            return;
        };
        if self.record.load(Ordering::Relaxed) {
            let latency = unix_nanos() - sent;
            self.latencies.lock().unwrap().push(latency);
        }
        self.updates.fetch_add(1, Ordering::Release);
    }

    async fn wait_for(&self, n: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
        while self.updates.load(Ordering::Acquire) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "handlers got {} of {n} events",
                self.updates.load(Ordering::Relaxed)
            );
            tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        }
    }
}

async fn churn(client: &kube_client::Client, events: usize, rate: usize) {
    let req = http::Request::get(format!("/churn?events={events}&rate={rate}"))
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.expect("churn");
    assert!(text.starts_with("1 "), "churn reached {text:?}");
}

/// What `--handlers`, `--events`, `--paced-events` and `--rate` ask for.
pub struct EventArgs {
    /// Handlers registered before the informer starts.
    pub handlers: usize,
    /// Events churned as fast as possible (throughput, CPU).
    pub events: usize,
    /// Events churned at `rate` per second afterwards (latency).
    pub paced: usize,
    /// Rate of the paced events.
    pub rate: usize,
}

impl EventArgs {
    /// From the command line; `None` without `--handlers` and `--events`.
    pub fn from_args() -> Option<Self> {
        let num = |name: &str, default: usize| {
            arg(name).map(|s| s.parse().expect(name)).unwrap_or(default)
        };
        let (handlers, events) = (num("--handlers", 0), num("--events", 0));
        (handlers > 0 && events > 0).then(|| EventArgs {
            handlers,
            events,
            paced: num("--paced-events", 0),
            rate: num("--rate", 1000),
        })
    }
}

/// Times watch events to the handlers once the informer has synced: throughput and CPU at
/// full speed, then latency from the server's write to the handler at a set rate. Prints one
/// JSON line.
pub async fn event_ops(name: &str, server: &str, counter: &HandlerCounter, args: &EventArgs) {
    let client = client(server);
    let (cpu0, start) = (cpu_seconds(), std::time::Instant::now());
    churn(&client, args.events, 0).await;
    counter.wait_for((args.events * args.handlers) as u64).await;
    let (elapsed, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    let mut result = serde_json::json!({"client": name, "handlers": args.handlers, "events": args.events,
        "events_per_s": args.events as f64 / elapsed, "cpu_s_per_million": cpu / args.events as f64 * 1e6});
    if args.paced > 0 {
        counter.updates.store(0, Ordering::Release);
        counter.record.store(true, Ordering::Relaxed);
        churn(&client, args.paced, args.rate).await;
        counter.wait_for((args.paced * args.handlers) as u64).await;
        let mut l = counter.latencies.lock().unwrap().clone();
        l.sort_unstable();
        result["p50_us"] = (l[l.len() / 2] as f64 / 1e3).into();
        result["p99_us"] = (l[l.len() * 99 / 100] as f64 / 1e3).into();
        result["paced_rate"] = args.rate.into();
    }
    println!("{result}");
}

/// Ends the informer's watch stream on the replay server with 410 Expired, forcing a
/// relist. A client counts as synced once the list's objects are applied, which may be
/// before its watch request has reached the server: while no stream is open yet, this asks
/// again (for at most 10 s).
async fn expire(server: &str) {
    let start = std::time::Instant::now();
    loop {
        let text = get_over_plain_connection(server, "/expire").await;
        if text.starts_with("1 ") {
            return;
        }
        assert!(text.starts_with("0 ") && start.elapsed() < std::time::Duration::from_secs(10), "expire reached {text:?}");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// The body of `GET path` from the replay server, over a loopback connection of its own
/// (HTTP/1.0, so the body is sent as it is and the connection closed). This allocates a few
/// hundred bytes: a kube client built for the request would allocate its TLS configuration
/// and its connection's buffers (≈200 KB), which a peak measured around the request would
/// count as the informer's.
async fn get_over_plain_connection(server: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect to the replay server");
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.expect("send");
    let mut response = Vec::new();
    conn.read_to_end(&mut response).await.expect("read");
    let response = String::from_utf8(response).expect("a text response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a response head");
    assert!(head.starts_with("HTTP/1.") && head[9..].starts_with("200"), "{path}: {head}");
    body.to_string()
}

/// After the initial sync: the memory it took at its peak and once synced, then the same
/// around a relist forced by a 410 from the watch, until `relisted` says it ended. Prints one
/// JSON line (bytes: growth over the process before the informer started, `heap0`/`rss0`;
/// the peaks must have been reset before the informer started).
pub async fn relist_memory(
    client_name: &str,
    server: &str,
    relisted: impl Fn() -> bool,
    heap0: isize,
    rss0: isize,
) {
    let (initial_peak_heap, initial_peak_rss) = (peak_heap() - heap0, peak_rss() - rss0);
    let (steady_heap, steady_rss) = (live_heap() - heap0, rss() - rss0);
    reset_peak_heap();
    reset_peak_rss();
    let start = std::time::Instant::now();
    expire(server).await;
    while !relisted() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    println!(
        "{}",
        serde_json::json!({"client": client_name, "initial_peak_heap": initial_peak_heap, "initial_peak_rss": initial_peak_rss,
            "steady_heap": steady_heap, "steady_rss": steady_rss, "relist_peak_heap": peak_heap() - heap0,
            "relist_peak_rss": peak_rss() - rss0, "relist_seconds": start.elapsed().as_secs_f64()})
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOC: CountingAlloc = CountingAlloc;

    /// Allocations by the harness's other threads while a test runs, at most.
    const SLACK: isize = 256 << 10;

    #[test]
    fn the_live_heap_counts_allocations_and_frees_on_any_thread_past_the_owned_slots() {
        const MB: isize = 1 << 20;
        let before = live_heap();
        let big: Vec<u8> = Vec::with_capacity(MB as usize);
        let with_big = live_heap();
        assert!((with_big - before - MB).abs() < SLACK, "{before} → {with_big}");
        // Freed on another thread: that thread's slot goes negative, the sum back down.
        std::thread::spawn(move || drop(big)).join().unwrap();
        let freed = live_heap();
        assert!((freed - before).abs() < SLACK, "{before} → {freed}");
        // More threads than slots of their own: the later ones share the last slot.
        let kept: Vec<Box<[u8]>> = (0..SLOTS + 44)
            .map(|_| std::thread::spawn(|| vec![1u8; 16 << 10].into_boxed_slice()).join().unwrap())
            .collect();
        let with_kept = live_heap();
        let expected = (SLOTS as isize + 44) * (16 << 10);
        assert!((with_kept - freed - expected).abs() < SLACK, "{freed} → {with_kept}, {expected} expected");
        assert!(NEXT_SLOT.load(Ordering::Relaxed) > SLOTS, "threads past the owned slots");
        drop(kept);
        let end = live_heap();
        assert!((end - freed).abs() < SLACK, "{freed} → {end}");
    }
}
