//! An in-memory API server for deterministic tests of informers: a scriptable
//! [`ListerWatcher`] with real resourceVersion, paging, watch history, compaction (410),
//! WatchList, disconnects, injected events and injected failures.
//!
//! It is a fake for unit tests of the algorithms; end-to-end tests use a real
//! kube-apiserver through [`KubeListerWatcher`](crate::KubeListerWatcher).
//!
//! Invariants:
//! - Every write bumps one global resourceVersion and records one watch event.
//! - A watch from resourceVersion `r` first replays every recorded event newer than `r`,
//!   in order, then live events; `r` older than the last compaction gets a 410 `Expired`
//!   ERROR event and the stream ends, as kube-apiserver does without its watch cache.
//! - A paged list serves a snapshot taken at its first page; a continue token from before
//!   the last compaction fails with 410.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use kube_core::watch::{Bookmark, BookmarkMeta};
use kube_core::{Resource, TypeMeta};
use parking_lot::Mutex;

use crate::error::{ApiStatus, Error};
use crate::key::ObjectKey;
use crate::labels::{LabelMatcher, LabelsFn, meta_labels};
use crate::lister_watcher::{ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream};
use crate::reflector::INITIAL_EVENTS_END_ANNOTATION;
use crate::selector::parse_label_selector;

struct Watcher<K> {
    tx: mpsc::UnboundedSender<Result<WatchEvent<K>, Error>>,
    selector: LabelMatcher,
}

struct State<K> {
    labels: LabelsFn<K>,
    objects: BTreeMap<ObjectKey, K>,
    rv: u64,
    history: Vec<(u64, WatchEvent<K>)>,
    compacted: u64,
    watchers: Vec<Watcher<K>>,
    snapshots: HashMap<u64, (u64, Vec<K>)>,
    next_snapshot: u64,
    watch_list_supported: bool,
    initial_events_end: bool,
    list_calls: Vec<ListOptions>,
    watch_calls: Vec<WatchOptions>,
    list_failures: VecDeque<Error>,
    watch_failures: VecDeque<Error>,
    reachable: bool,
    compact_after_page: bool,
}

/// A scriptable in-memory API server for one resource; cheap to clone (clones share it).
pub struct FakeApiServer<K> {
    state: Arc<Mutex<State<K>>>,
}

impl<K> Clone for FakeApiServer<K> {
    fn clone(&self) -> Self {
        FakeApiServer { state: self.state.clone() }
    }
}

/// A 410 `Expired` status, as the server sends it.
pub fn expired_error() -> Error {
    Error::Api(ApiStatus {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version".into(),
        causes: vec![],
    })
}

fn status_event<K>(code: u16, reason: &str, message: &str) -> WatchEvent<K> {
    WatchEvent::Error(Box::new(kube_core::Status {
        status: Some(kube_core::response::StatusSummary::Failure),
        code,
        message: message.into(),
        metadata: None,
        reason: reason.into(),
        details: None,
    }))
}

impl<K: Resource + Clone + Send + Sync + 'static> Default for FakeApiServer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> FakeApiServer<K> {
    /// An empty server at resourceVersion 1, supporting WatchList.
    pub fn new() -> Self {
        FakeApiServer {
            state: Arc::new(Mutex::new(State {
                labels: meta_labels::<K>,
                objects: BTreeMap::new(),
                rv: 1,
                history: Vec::new(),
                compacted: 0,
                watchers: Vec::new(),
                snapshots: HashMap::new(),
                next_snapshot: 1,
                watch_list_supported: true,
                initial_events_end: true,
                list_calls: Vec::new(),
                watch_calls: Vec::new(),
                list_failures: VecDeque::new(),
                watch_failures: VecDeque::new(),
                reachable: true,
                compact_after_page: false,
            })),
        }
    }

    /// This server, selecting objects by the labels `labels` reads (lean roots:
    /// [`lean_labels`](crate::lean::lean_labels)) instead of `meta().labels`.
    pub fn with_labels(self, labels: LabelsFn<K>) -> Self {
        self.state.lock().labels = labels;
        self
    }

    fn record(st: &mut State<K>, ev: WatchEvent<K>) {
        st.history.push((st.rv, ev.clone()));
        let labels = st.labels;
        st.watchers.retain(|w| {
            let send = match &ev {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => w.selector.matches(labels(o)),
                _ => true,
            };
            !send || w.tx.unbounded_send(Ok(ev.clone())).is_ok()
        });
    }

    fn write(&self, mut obj: K, kind: fn(K) -> WatchEvent<K>) -> K {
        let mut st = self.state.lock();
        st.rv += 1;
        obj.meta_mut().resource_version = Some(st.rv.to_string());
        let key = ObjectKey::of(&obj).expect("test objects carry metadata.name");
        st.objects.insert(key, obj.clone());
        Self::record(&mut st, kind(obj.clone()));
        obj
    }

    /// Creates (or overwrites) an object; returns it with its new resourceVersion.
    pub fn create(&self, obj: K) -> K {
        self.write(obj, WatchEvent::Added)
    }

    /// Updates an object; returns it with its new resourceVersion.
    pub fn update(&self, obj: K) -> K {
        self.write(obj, WatchEvent::Modified)
    }

    /// Deletes the object under `key` (`ns/name` or `name`); returns its final state.
    pub fn delete(&self, key: &str) -> Option<K> {
        let mut st = self.state.lock();
        let mut obj = st.objects.remove(key)?;
        st.rv += 1;
        obj.meta_mut().resource_version = Some(st.rv.to_string());
        Self::record(&mut st, WatchEvent::Deleted(obj.clone()));
        Some(obj)
    }

    /// Forgets history up to the current resourceVersion: watches from older versions and
    /// continue tokens taken before now fail with 410.
    pub fn compact(&self) {
        let mut st = self.state.lock();
        st.compacted = st.rv;
        let rv = st.rv;
        st.history.retain(|(r, _)| *r > rv);
    }

    /// Ends every open watch stream (a dropped connection).
    pub fn disconnect_watchers(&self) {
        self.state.lock().watchers.clear();
    }

    /// Sends a 410 ERROR event on every open watch and ends them.
    pub fn expire_watchers(&self) {
        let mut st = self.state.lock();
        for w in st.watchers.drain(..) {
            let _ = w.tx.unbounded_send(Ok(status_event(410, "Expired", "too old resource version")));
        }
    }

    /// Sends a BOOKMARK at the current resourceVersion to every open watch.
    pub fn bookmark(&self) {
        let mut st = self.state.lock();
        let rv = st.rv.to_string();
        st.watchers.retain(|w| w.tx.unbounded_send(Ok(bookmark(&rv, false))).is_ok());
    }

    /// Sends `event` as is to every open watch, without changing the state (duplicates,
    /// stale or out-of-order events).
    pub fn inject(&self, event: WatchEvent<K>) {
        let mut st = self.state.lock();
        st.watchers.retain(|w| w.tx.unbounded_send(Ok(event.clone())).is_ok());
    }

    /// Takes the server off the network (`false`): open watches end and every call fails
    /// with a transport error until it is reachable again.
    pub fn set_reachable(&self, yes: bool) {
        let mut st = self.state.lock();
        st.reachable = yes;
        if !yes {
            st.watchers.clear();
        }
    }

    /// Compacts right after serving the next page that has a continue token, so that
    /// token expires (410) when it is used.
    pub fn compact_after_next_page(&self) {
        self.state.lock().compact_after_page = true;
    }

    /// Makes the next list call fail with `err`.
    pub fn fail_next_list(&self, err: Error) {
        self.state.lock().list_failures.push_back(err);
    }

    /// Makes the next watch call fail with `err`.
    pub fn fail_next_watch(&self, err: Error) {
        self.state.lock().watch_failures.push_back(err);
    }

    /// Whether `sendInitialEvents` watches are accepted (else: 422 Invalid).
    pub fn set_watch_list_supported(&self, yes: bool) {
        self.state.lock().watch_list_supported = yes;
    }

    /// Whether WatchList streams end their initial events with the end bookmark.
    pub fn set_initial_events_end(&self, yes: bool) {
        self.state.lock().initial_events_end = yes;
    }

    /// The list calls received so far.
    pub fn list_calls(&self) -> Vec<ListOptions> {
        self.state.lock().list_calls.clone()
    }

    /// The watch calls received so far.
    pub fn watch_calls(&self) -> Vec<WatchOptions> {
        self.state.lock().watch_calls.clone()
    }

    /// Number of open watch streams.
    pub fn open_watches(&self) -> usize {
        let mut st = self.state.lock();
        st.watchers.retain(|w| !w.tx.is_closed());
        st.watchers.len()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> String {
        self.state.lock().rv.to_string()
    }

    /// The current objects by key, with their resourceVersions.
    pub fn key_versions(&self) -> BTreeMap<String, String> {
        self.state
            .lock()
            .objects
            .iter()
            .map(|(k, o)| (k.to_string(), o.meta().resource_version.clone().unwrap_or_default()))
            .collect()
    }

    /// The current objects.
    pub fn objects(&self) -> Vec<K> {
        self.state.lock().objects.values().cloned().collect()
    }
}

fn bookmark<K>(rv: &str, initial_end: bool) -> WatchEvent<K> {
    let mut annotations = BTreeMap::new();
    if initial_end {
        annotations.insert(INITIAL_EVENTS_END_ANNOTATION.to_string(), "true".to_string());
    }
    WatchEvent::Bookmark(Bookmark {
        types: TypeMeta::default(),
        metadata: BookmarkMeta { resource_version: rv.to_string(), annotations },
    })
}

fn selector_of(s: &Option<String>) -> Result<LabelMatcher, Error> {
    match s {
        Some(s) => parse_label_selector(s).map(|s| LabelMatcher::new(&s)).map_err(|e| {
            Error::Api(ApiStatus { code: 400, reason: "BadRequest".into(), message: e.to_string(), causes: vec![] })
        }),
        None => Ok(LabelMatcher::default()),
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> ListerWatcher<K> for FakeApiServer<K> {
    async fn list(&self, opts: &ListOptions) -> Result<ListPage<K>, Error> {
        let mut st = self.state.lock();
        st.list_calls.push(opts.clone());
        if !st.reachable {
            return Err(Error::Transport("connection refused".into()));
        }
        if let Some(e) = st.list_failures.pop_front() {
            return Err(e);
        }
        let selector = selector_of(&opts.label_selector)?;
        let labels = st.labels;
        let (id, offset) = match &opts.continue_token {
            Some(token) => {
                let (id, offset) = token
                    .split_once(':')
                    .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<usize>().ok()?)))
                    .ok_or_else(|| Error::Api(ApiStatus { code: 400, reason: "BadRequest".into(), message: "bad continue".into(), causes: vec![] }))?;
                match st.snapshots.get(&id) {
                    Some((rv, _)) if *rv >= st.compacted => (id, offset),
                    _ => return Err(expired_error()),
                }
            }
            None => {
                let id = st.next_snapshot;
                st.next_snapshot += 1;
                let items: Vec<K> = st.objects.values().filter(|o| selector.matches(labels(o))).cloned().collect();
                let rv = st.rv;
                st.snapshots.insert(id, (rv, items));
                (id, 0)
            }
        };
        let (rv, items) = &st.snapshots[&id];
        let limit = opts.limit.map(|l| l as usize).filter(|l| *l > 0).unwrap_or(usize::MAX);
        let end = offset.saturating_add(limit).min(items.len());
        let page = items[offset.min(items.len())..end].to_vec();
        let more = end < items.len();
        let rv = rv.to_string();
        if !more {
            st.snapshots.remove(&id);
        } else if st.compact_after_page {
            st.compact_after_page = false;
            // An unrelated write elsewhere in etcd moves the revision on; then compact.
            st.rv += 1;
            st.compacted = st.rv;
        }
        Ok(ListPage { items: page, resource_version: rv, continue_token: more.then(|| format!("{id}:{end}")) })
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<K>, Error> {
        let mut st = self.state.lock();
        st.watch_calls.push(opts.clone());
        if !st.reachable {
            return Err(Error::Transport("connection refused".into()));
        }
        if let Some(e) = st.watch_failures.pop_front() {
            return Err(e);
        }
        let selector = selector_of(&opts.label_selector)?;
        let labels = st.labels;
        let (tx, rx) = mpsc::unbounded();
        if opts.send_initial_events {
            if !st.watch_list_supported {
                return Err(Error::Api(ApiStatus {
                    code: 422,
                    reason: "Invalid".into(),
                    message: "sendInitialEvents is not supported".into(),
                    causes: vec![],
                }));
            }
            for o in st.objects.values().filter(|o| selector.matches(labels(o))) {
                let _ = tx.unbounded_send(Ok(WatchEvent::Added(o.clone())));
            }
            if st.initial_events_end {
                let _ = tx.unbounded_send(Ok(bookmark(&st.rv.to_string(), true)));
            }
        } else {
            let from = opts.resource_version.as_str();
            if from.is_empty() || from == "0" {
                for o in st.objects.values().filter(|o| selector.matches(labels(o))) {
                    let _ = tx.unbounded_send(Ok(WatchEvent::Added(o.clone())));
                }
            } else {
                let from: u64 = from.parse().map_err(|_| {
                    Error::Api(ApiStatus { code: 400, reason: "BadRequest".into(), message: "bad resourceVersion".into(), causes: vec![] })
                })?;
                if from < st.compacted {
                    let _ = tx.unbounded_send(Ok(status_event(410, "Expired", "too old resource version")));
                    drop(tx);
                    return Ok(rx.boxed());
                }
                for (rv, ev) in &st.history {
                    let send = match ev {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => selector.matches(labels(o)),
                        _ => true,
                    };
                    if *rv > from && send {
                        let _ = tx.unbounded_send(Ok(ev.clone()));
                    }
                }
            }
        }
        st.watchers.push(Watcher { tx, selector });
        Ok(rx.boxed())
    }
}
