//! Shared parts of the side-by-side benchmark: a counting allocator (live heap bytes), RSS,
//! and the one-line JSON result every client prints.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts live heap bytes; install with `#[global_allocator]`.
pub struct CountingAlloc;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

/// Live heap bytes right now.
pub fn live_heap() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Resident set size in bytes.
pub fn rss() -> isize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: isize = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// A client pointed at the replay server (plain HTTP on loopback).
pub fn client(server: &str) -> kube_client::Client {
    let mut config = kube_client::Config::new(server.parse().expect("server URL"));
    config.read_timeout = None;
    kube_client::Client::try_from(config).expect("client")
}

/// Prints the result line every client prints.
pub fn report(client: &str, n: usize, sync_seconds: f64, heap: isize, rss: isize) {
    println!("{}", serde_json::json!({"client": client, "n": n, "sync_seconds": sync_seconds, "heap_bytes": heap, "rss_bytes": rss}));
}

/// `--flag value` from the command line.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// Whether `--flag` is on the command line.
pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}
