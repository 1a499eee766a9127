//! Lister `get` in isolation: where its nanoseconds go.
//!
//! `cargo bench -p informer-runtime --bench lister` prints one table. The store holds N
//! ConfigMaps (≈1 KB of data each, made on another thread in a shuffled order and stored on
//! this one, so objects and keys lie scattered in memory as a reflector leaves them), and
//! `get` is called for every key in a shuffled order, back to back, as client-go's and
//! kube-rs's lister loops in the side-by-side benchmark do. Columns take the lookup apart:
//! the lister as users call it (`lister.namespace(ns).get(name)`), with namespace listers
//! made once, through one read view (`lister.read()`: the object borrowed, its `Arc`'s
//! count untouched), the store alone (namespace and name hashed without joining them), the
//! store given the joined key, and the store given a key joined on the stack just before
//! the call. The step from 100 objects (all in cache) to 10,000 and 100,000 is memory
//! latency, not code; the last column shows what reading back a key just written costs
//! back-to-back lookups (see `key_hash.rs`). A second table times lists: two scans of the
//! whole store (a label-selector list, and a list of everything through a view) and the list
//! of one namespace through its index.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use informer_runtime::{Indexer, Lister, ObjectKey, Selector, parse_label_selector};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn config_map(i: usize) -> ConfigMap {
    let mut data = BTreeMap::new();
    for d in 0..8 {
        data.insert(format!("key-{d}"), format!("{i:08}-{}", "v".repeat(120)));
    }
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("config-{i:06}-{:x}", i.wrapping_mul(0x9e37_79b9))),
            namespace: Some(format!("ns-{:03}", i % 50)),
            uid: Some(format!("{:032x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15))),
            resource_version: Some((1000 + i).to_string()),
            labels: Some(BTreeMap::from([("app".to_string(), format!("app-{}", i % 20))])),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

/// The lookups of one run: namespaces (few, cache-resident), and names and whole keys each
/// in one buffer, so that every row pays the same to read its query.
struct Queries {
    namespaces: Vec<String>,
    /// (namespace index, name's range in `text`), in a scattered order.
    names: Vec<(usize, std::ops::Range<usize>)>,
    /// The range in `text` of `namespace/name` of the same lookups, in the same order.
    keys: Vec<std::ops::Range<usize>>,
    text: String,
}

impl Queries {
    fn name(&self, i: usize) -> (&str, &str) {
        let (ns, name) = &self.names[i];
        (&self.namespaces[*ns], &self.text[name.clone()])
    }

    fn key(&self, i: usize) -> &str {
        &self.text[self.keys[i].clone()]
    }
}

/// A store of `n` ConfigMaps and the lookups of every one of them in a scattered order.
fn store(n: usize) -> (Lister<ConfigMap>, Queries) {
    let mut order: Vec<usize> = (0..n).collect();
    fastrand::seed(7);
    fastrand::shuffle(&mut order);
    let indexer = Arc::new(Indexer::<ConfigMap>::new());
    // Objects are made on another thread and stored on this one, as a reflector's decoding
    // threads and its informer's task do.
    let (made, stored) = std::sync::mpsc::sync_channel::<(ObjectKey, Arc<ConfigMap>)>(256);
    let to_make = order.clone();
    let maker = std::thread::spawn(move || {
        for i in to_make {
            let cm = config_map(i);
            made.send((ObjectKey::of(&cm).unwrap(), Arc::new(cm))).unwrap();
        }
    });
    for (key, obj) in stored {
        indexer.upsert(key, obj);
    }
    maker.join().unwrap();
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| config_map(i).metadata.namespace.unwrap()).collect();
    fastrand::shuffle(&mut order);
    let mut q = Queries { namespaces, names: Vec::new(), keys: Vec::new(), text: String::new() };
    for &i in &order {
        let name = config_map(i).metadata.name.unwrap();
        let start = q.text.len();
        q.text.push_str(&name);
        q.names.push((i % NAMESPACES, start..q.text.len()));
    }
    for i in 0..n {
        let (ns, name) = q.name(i);
        let key = format!("{ns}/{name}");
        let start = q.text.len();
        q.text.push_str(&key);
        q.keys.push(start..q.text.len());
    }
    (Lister::new(indexer, "configmaps"), q)
}

const NAMESPACES: usize = 50;

/// Nanoseconds per call of `f` (given the lookup's index), median of 5 rounds of `iters`
/// calls over `n` lookups.
fn time(n: usize, iters: usize, mut f: impl FnMut(usize) -> bool) -> f64 {
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut found = 0usize;
            for i in 0..iters {
                found += f(i % n) as usize;
            }
            assert_eq!(found, iters, "every key is in the store");
            start.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

/// Microseconds per call of `f`, median of 5 rounds of 20 calls.
fn time_scan(mut f: impl FnMut() -> usize) -> f64 {
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..20 {
                black_box(f());
            }
            start.elapsed().as_nanos() as f64 / 20_000.0
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

fn main() {
    let iters = 2_000_000;
    let mut scans = Vec::new();
    println!("| objects | `lister.namespace(ns).get(name)` | namespace listers reused | `lister.read()`, then `view.namespace(ns).get(name)` | `indexer.get_by_name` | `indexer.get(\"ns/name\")` | `indexer.get` of a key just joined on the stack |");
    println!("|---|---|---|---|---|---|---|");
    for n in [100, 10_000, 100_000] {
        let (lister, q) = store(n);
        let by_lister = time(n, iters, |i| {
            let (ns, name) = q.name(i);
            black_box(lister.namespace(ns).get(name)).is_ok()
        });
        let listers: Vec<_> = q.namespaces.iter().map(|ns| lister.namespace(ns)).collect();
        let reused = time(n, iters, |i| {
            let name = &q.text[q.names[i].1.clone()];
            black_box(listers[q.names[i].0].get(name)).is_ok()
        });
        let by_name = time(n, iters, |i| {
            let (ns, name) = q.name(i);
            black_box(lister.indexer().get_by_name(Some(ns), name)).is_some()
        });
        let view = lister.read();
        let viewed = time(n, iters, |i| {
            let (ns, name) = q.name(i);
            black_box(view.namespace(ns).get(name)).is_ok()
        });
        drop(view);
        let by_key = time(n, iters, |i| black_box(lister.indexer().get(q.key(i))).is_some());
        let joined_before = time(n, iters, |i| {
            let (ns, name) = q.name(i);
            let mut buf = [0u8; 320];
            let len = ns.len() + 1 + name.len();
            buf[..ns.len()].copy_from_slice(ns.as_bytes());
            buf[ns.len()] = b'/';
            buf[ns.len() + 1..len].copy_from_slice(name.as_bytes());
            black_box(lister.indexer().get(std::str::from_utf8(&buf[..len]).expect("UTF-8"))).is_some()
        });
        println!("| {n} | {by_lister:.1} ns | {reused:.1} ns | {viewed:.1} ns | {by_name:.1} ns | {by_key:.1} ns | {joined_before:.1} ns |");
        let selector = parse_label_selector("app=app-3").expect("a valid selector");
        let selected = time_scan(|| lister.list(&selector).len());
        assert_eq!(lister.list(&selector).len(), n / 20, "one object in 20 has app=app-3");
        let all = time_scan(|| lister.read().list(&Selector::default()).len());
        let namespace = &q.namespaces[7];
        let in_namespace = time_scan(|| lister.namespace(namespace).list(&Selector::default()).len());
        assert_eq!(lister.namespace(namespace).list(&Selector::default()).len(), n / NAMESPACES, "one object in 50 is in each namespace");
        scans.push((n, selected, all, in_namespace));
    }
    println!();
    println!("Lists, per call:");
    println!();
    println!("| objects | `lister.list(app=app-3)` (one in 20) | `lister.read().list(everything)` | `lister.namespace(ns).list(everything)` (one in 50) |");
    println!("|---|---|---|---|");
    for (n, selected, all, in_namespace) in scans {
        println!("| {n} | {selected:.1} µs | {all:.1} µs | {in_namespace:.1} µs |");
    }
}
