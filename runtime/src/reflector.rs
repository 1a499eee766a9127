//! The reflector: lists, then watches, and writes what it sees into a [`Queue`]
//! (client-go's `Reflector`).
//!
//! Invariants:
//! - The resourceVersion of a relist is `"0"` before the first successful list (served from
//!   the watch cache), the last synced resourceVersion after it, and `""` (a consistent read
//!   from etcd) after a list failed with `410 Gone`/`Expired` or "too large resource
//!   version". A watch that fails with 410 relists at the last synced resourceVersion
//!   first: a list at a resourceVersion already means "at least as new as".
//! - Lists are paged (`page_size`, 500 by default); each part of a page is written to the
//!   queue as it arrives ([`ListerWatcher::list_in_parts`]), once the queue holds at most
//!   256 batches (`MAX_QUEUED_AHEAD`), and only the keys of the listed objects are kept until
//!   the list ends: a relist holds beside the cache only the new objects not yet applied
//!   (at most those batches and a part) and those of one page being decoded, never a
//!   second copy. A listed object that the store holds at the same resourceVersion is
//!   swapped for the held one, and its key for the held key, before it is queued
//!   ([`Queue::reuse_unchanged`]), so only changed objects count among those. The next
//!   page is asked for once a page's parts are queued (the lister-watcher may fetch it
//!   ahead meanwhile, as `KubeListerWatcher` does). A continue token that expires mid-list
//!   falls back to one unpaged list at the same resourceVersion.
//! - Watches ask for bookmarks and time out server-side after a random 5–10 minutes; the
//!   client gives up on a watch that stays silent for longer than that plus a margin.
//! - A watch's events are handed to the queue in the order they came, those the stream has
//!   ready together (up to `WATCH_BATCH`, [`Queue::watched`]); none is kept back while the
//!   stream is waited for, nor past a bookmark, an error or the stream's end. The
//!   resourceVersion the next watch starts from is the last one handed over (or a
//!   bookmark's).
//! - With WatchList ([`WatchListMode`]), the initial state is streamed by a watch with
//!   `sendInitialEvents=true`; it counts as synced only at the bookmark annotated
//!   `k8s.io/initial-events-end`. Its objects are handed to the queue in batches as they
//!   are read, without waiting for the queue to drain: a watch is read as the server
//!   writes it, so only a paged list is held back. A stream that ends, fails, or stays
//!   without that bookmark for `initial_events_timeout` falls back to list + watch in the
//!   same round; a server that rejects the request (4xx) is never asked for WatchList
//!   again.
//! - Errors other than a watch 410 wait an exponential backoff (800 ms → 30 s, reset after
//!   2 min without errors) before the next round; every error goes to the error hook.
//! - Cancellation stops the reflector at its next await point.
//! - Every object is stored once, in an `Arc`, after the transform; its metadata's lists
//!   (`managedFields`, `ownerReferences`, `finalizers`) hold no spare capacity (serde grows
//!   them by doubling while decoding, and a cache keeps every object).

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use kube_core::Resource;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::backoff::{Backoff, BackoffConfig};
use crate::delta::DeltaType;
use crate::error::Error;
use crate::key::{KeySet, ObjectKey};
use crate::lister_watcher::{ListOptions, ListerWatcher, PageInParts, WatchEvent, WatchOptions, WatchStream};
use crate::queue::Queue;
use crate::transform::TransformFn;
use crate::window::{SHARE, Window};

/// The annotation on the bookmark that ends a WatchList's initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Initial WatchList objects handed to the queue at once (the last batch is handed over at
/// the `initial-events-end` bookmark): a window of the objects streamed so far, from 16 up
/// to 256. One call per batch takes one lock and wakes the informer once; one call per
/// object would wake an idle informer task per object, a thread wake-up that costs more
/// than decoding a small object. Nothing is synced before the bookmark anyway; but during a
/// relist a batch's changed objects are held beside the cached ones they replace (the
/// unchanged ones are swapped for the cached ones only as the batch is handed over), so a
/// short list hands over smaller batches.
const REPLACE_BATCH: Window = Window { floor: 16, ceiling: 256, share: SHARE };

/// Whether the reflector streams its lists through WatchList.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WatchListMode {
    /// Try WatchList; fall back to list + watch when it fails (the default, as in
    /// client-go 1.35 with `WatchListClient` on).
    #[default]
    Auto,
    /// Always list + watch.
    Never,
    /// Only WatchList; failures are retried with backoff instead of falling back.
    Always,
}

/// Called with every error the reflector meets (client-go's `WatchErrorHandler`).
pub type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

/// Settings of a [`Reflector`].
#[derive(Clone)]
pub struct ReflectorConfig {
    /// Page size of lists; `0` for unpaged lists.
    pub page_size: u32,
    /// Label selector applied to lists and watches.
    pub label_selector: Option<String>,
    /// Field selector applied to lists and watches.
    pub field_selector: Option<String>,
    /// Whether to stream lists through WatchList.
    pub watch_list: WatchListMode,
    /// Lower bound of the random server-side watch timeout; the upper bound is twice it.
    pub min_watch_timeout: Duration,
    /// How long a WatchList may stream before its `initial-events-end` bookmark.
    pub initial_events_timeout: Duration,
    /// Backoff between failed rounds.
    pub backoff: BackoffConfig,
}

impl std::fmt::Debug for ReflectorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReflectorConfig")
            .field("page_size", &self.page_size)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("watch_list", &self.watch_list)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            page_size: 500,
            label_selector: None,
            field_selector: None,
            watch_list: WatchListMode::Auto,
            min_watch_timeout: Duration::from_secs(300),
            initial_events_timeout: Duration::from_secs(600),
            backoff: BackoffConfig::default(),
        }
    }
}

/// Observable state of a reflector, shared with its informer.
#[derive(Debug, Default)]
pub struct ReflectorState {
    last_sync_resource_version: Mutex<String>,
    using_watch_list: Mutex<Option<bool>>,
}

impl ReflectorState {
    /// The resourceVersion of the last list, event or bookmark applied; `""` before any.
    pub fn last_sync_resource_version(&self) -> String {
        self.last_sync_resource_version.lock().clone()
    }

    /// Whether the last successful initial state came through WatchList (`None` before any).
    pub fn used_watch_list(&self) -> Option<bool> {
        *self.using_watch_list.lock()
    }

    fn set_rv(&self, rv: &str) {
        if !rv.is_empty() {
            let mut cur = self.last_sync_resource_version.lock();
            cur.clear();
            cur.push_str(rv);
        }
    }
}

/// Lists and watches through `L`, writing into `Q`. See the module documentation.
pub struct Reflector<K, L, Q> {
    lw: Arc<L>,
    queue: Arc<Q>,
    config: ReflectorConfig,
    transform: Option<TransformFn<K>>,
    error_handler: Option<WatchErrorHandler>,
    state: Arc<ReflectorState>,
    rv_unavailable: bool,
    watch_list_refused: bool,
}

enum Round {
    /// Relist now, without backoff.
    Relist,
}

/// Most batches a list leaves queued before it queues more (it waits for the informer to
/// apply them): on a relist, the new objects decoded and not yet applied, beside the
/// objects they replace, are at most these and the parts being decoded.
const MAX_QUEUED_AHEAD: usize = 256;

/// The most watch events handed to the queue at once: those the stream has ready, up to
/// this many (one lock of the queue and one wake of the informer for each hand-over,
/// instead of one per event).
const WATCH_BATCH: usize = 32;

/// What a relist in progress has listed, for ending it.
enum Listed {
    /// Every key listed and not deleted since: for [`Queue::replace_finish`].
    Keys(KeySet),
    /// The relist began with the queue and the store empty, so the queue knows every key
    /// it listed; only those deleted since and not listed again are kept, for
    /// [`Queue::replace_finish_from_empty`] (a first sync keeps no set of all its keys).
    FromEmpty(KeySet),
}

impl Listed {
    fn begin<K>(queue: &impl Queue<K>) -> Self {
        if queue.knows_nothing() {
            Listed::FromEmpty(KeySet::default())
        } else {
            Listed::Keys(KeySet::default())
        }
    }

    fn listed(&mut self, key: &ObjectKey) {
        match self {
            Listed::Keys(keys) => {
                keys.insert(key.clone());
            }
            Listed::FromEmpty(unlisted) => {
                if !unlisted.is_empty() {
                    unlisted.remove(key);
                }
            }
        }
    }

    fn deleted(&mut self, key: ObjectKey) {
        match self {
            Listed::Keys(keys) => {
                keys.remove(&key);
            }
            Listed::FromEmpty(unlisted) => {
                unlisted.insert(key);
            }
        }
    }

    fn finish<K>(&self, queue: &impl Queue<K>) {
        match self {
            Listed::Keys(keys) => queue.replace_finish(keys),
            Listed::FromEmpty(unlisted) => queue.replace_finish_from_empty(unlisted),
        }
    }
}

impl<K, L, Q> Reflector<K, L, Q>
where
    K: Resource + Send + Sync + 'static,
    L: ListerWatcher<K>,
    Q: Queue<K> + 'static,
{
    /// A reflector from `lw` into `queue`.
    pub fn new(lw: Arc<L>, queue: Arc<Q>, config: ReflectorConfig) -> Self {
        Reflector {
            lw,
            queue,
            config,
            transform: None,
            error_handler: None,
            state: Arc::new(ReflectorState::default()),
            rv_unavailable: false,
            watch_list_refused: false,
        }
    }

    /// Sets the per-object transform.
    pub fn with_transform(mut self, t: Option<TransformFn<K>>) -> Self {
        self.transform = t;
        self
    }

    /// Shares `state` instead of a fresh one.
    pub fn with_state(mut self, state: Arc<ReflectorState>) -> Self {
        self.state = state;
        self
    }

    /// Sets the error hook.
    pub fn with_error_handler(mut self, h: Option<WatchErrorHandler>) -> Self {
        self.error_handler = h;
        self
    }

    /// The shared observable state.
    pub fn state(&self) -> Arc<ReflectorState> {
        self.state.clone()
    }

    /// Runs until `cancel` fires.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut backoff = Backoff::new(self.config.backoff);
        while !cancel.is_cancelled() {
            let result = tokio::select! {
                _ = cancel.cancelled() => return,
                r = self.list_and_watch(&cancel, &mut backoff) => r,
            };
            match result {
                Ok(Round::Relist) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "reflector round failed");
                    self.report(&e);
                    let delay = backoff.next_delay();
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    fn report(&self, e: &Error) {
        if let Some(h) = &self.error_handler {
            h(e);
        }
    }

    fn relist_resource_version(&self) -> String {
        if self.rv_unavailable {
            return String::new();
        }
        let rv = self.state.last_sync_resource_version();
        if rv.is_empty() { "0".to_string() } else { rv }
    }

    /// Hands each part of `page` to the queue as it arrives, once the queue holds at most
    /// [`MAX_QUEUED_AHEAD`] batches.
    async fn queue_parts(&self, page: &mut PageInParts<K>, listed: &mut Listed) -> Result<(), Error> {
        while let Some(part) = page.next_part().await {
            let part = part?;
            self.queue.drained_to(MAX_QUEUED_AHEAD).await;
            self.queue_part(part, listed);
        }
        Ok(())
    }

    /// Prepares a listed part's objects and hands them to the queue as one batch.
    fn queue_part(&self, items: Vec<K>, listed: &mut Listed) {
        let batch = items.into_iter().filter_map(|obj| self.prepare(obj)).collect();
        self.hand_over(batch, listed);
    }

    /// Hands a batch of a relist to the queue: each object the store holds unchanged is
    /// first swapped for the held one ([`Queue::reuse_unchanged`]), then the keys are
    /// recorded in `listed`.
    fn hand_over(&self, mut batch: Vec<(ObjectKey, Arc<K>)>, listed: &mut Listed) {
        self.queue.reuse_unchanged(&mut batch);
        for (key, _) in &batch {
            listed.listed(key);
        }
        self.queue.replace_items(batch);
    }

    fn prepare(&self, obj: K) -> Option<(ObjectKey, Arc<K>)> {
        let obj = self.transformed(obj);
        let key = ObjectKey::of(&obj)?;
        Some((key, Arc::new(obj)))
    }

    /// `obj` after the transform, its metadata's lists without spare capacity: as the store
    /// keeps it.
    fn transformed(&self, obj: K) -> K {
        let mut obj = match &self.transform {
            Some(t) => t(obj),
            None => obj,
        };
        let meta = obj.meta_mut();
        if let Some(v) = &mut meta.managed_fields {
            v.shrink_to_fit();
        }
        if let Some(v) = &mut meta.owner_references {
            v.shrink_to_fit();
        }
        if let Some(v) = &mut meta.finalizers {
            v.shrink_to_fit();
        }
        obj
    }

    fn watch_timeout(&self) -> u32 {
        let min = self.config.min_watch_timeout.as_secs().max(1);
        (min + fastrand::u64(0..=min)) as u32
    }

    async fn list_and_watch(&mut self, cancel: &CancellationToken, backoff: &mut Backoff) -> Result<Round, Error> {
        let use_watch_list = match self.config.watch_list {
            WatchListMode::Never => false,
            WatchListMode::Always => true,
            WatchListMode::Auto => !self.watch_list_refused,
        };
        let mut stream = None;
        if use_watch_list {
            match self.watch_list().await {
                Ok(s) => {
                    *self.state.using_watch_list.lock() = Some(true);
                    stream = Some(s);
                }
                Err(e) => {
                    self.report(&e);
                    if self.config.watch_list == WatchListMode::Always {
                        return Err(e);
                    }
                    if matches!(&e, Error::Api(s) if (400..500).contains(&s.code) && s.code != 410 && s.code != 429) {
                        self.watch_list_refused = true;
                    }
                    if e.is_expired() || e.is_too_large_resource_version() {
                        self.rv_unavailable = true;
                    }
                    tracing::info!(error = %e, "WatchList failed; falling back to list + watch");
                }
            }
        }
        if stream.is_none() {
            self.list().await?;
            *self.state.using_watch_list.lock() = Some(false);
        }
        loop {
            let s = match stream.take() {
                Some(s) => s,
                None => {
                    let opts = WatchOptions {
                        label_selector: self.config.label_selector.clone(),
                        field_selector: self.config.field_selector.clone(),
                        resource_version: self.state.last_sync_resource_version(),
                        allow_watch_bookmarks: true,
                        send_initial_events: false,
                        timeout_seconds: Some(self.watch_timeout()),
                    };
                    match self.lw.watch(&opts).await {
                        Ok(s) => s,
                        Err(e) if e.is_expired() => {
                            self.report(&e);
                            return Ok(Round::Relist);
                        }
                        Err(e) if e.is_retriable_watch_start() => {
                            self.report(&e);
                            let delay = backoff.next_delay();
                            tokio::select! {
                                _ = cancel.cancelled() => return Ok(Round::Relist),
                                _ = tokio::time::sleep(delay) => {}
                            }
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            match self.handle_watch(s).await {
                Ok(()) => continue,
                Err(e) if e.is_expired() => {
                    self.report(&e);
                    return Ok(Round::Relist);
                }
                Err(e @ Error::Api(_)) => return Err(e),
                Err(e) => {
                    // A broken stream: watch again from the last resourceVersion after a backoff.
                    self.report(&e);
                    let delay = backoff.next_delay();
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok(Round::Relist),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// Lists every page into the queue and ends the relist.
    async fn list(&mut self) -> Result<(), Error> {
        let mut rv = self.relist_resource_version();
        let page_limit = (self.config.page_size > 0).then_some(self.config.page_size);
        'attempt: loop {
            let mut listed = Listed::begin(&*self.queue);
            let mut opts = ListOptions {
                label_selector: self.config.label_selector.clone(),
                field_selector: self.config.field_selector.clone(),
                limit: page_limit,
                continue_token: None,
                resource_version: Some(rv.clone()),
                resource_version_match: None,
            };
            loop {
                let mut page = match self.lw.list_in_parts(&opts).await {
                    Ok(p) => p,
                    Err(e) if e.is_expired() && opts.continue_token.is_some() => {
                        // The continue token expired: one unpaged list at the same version.
                        tracing::info!("continue token expired; listing without pages");
                        opts.continue_token = None;
                        opts.limit = None;
                        // The pages queued so far may name keys this list will not.
                        listed = Listed::Keys(KeySet::default());
                        continue;
                    }
                    Err(e) if (e.is_expired() || e.is_too_large_resource_version()) && !rv.is_empty() => {
                        self.report(&e);
                        self.rv_unavailable = true;
                        rv = String::new();
                        continue 'attempt;
                    }
                    Err(e) => return Err(e),
                };
                // The next page is asked for once this page's parts are queued: the
                // lister-watcher may fetch it ahead, but one page decodes at a time.
                self.queue_parts(&mut page, &mut listed).await?;
                match page.continue_token.take() {
                    Some(token) => opts.continue_token = Some(token),
                    None => {
                        listed.finish(&*self.queue);
                        self.state.set_rv(&page.resource_version);
                        self.rv_unavailable = false;
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Streams the initial state through WatchList; returns the open stream after the
    /// `initial-events-end` bookmark.
    async fn watch_list(&mut self) -> Result<WatchStream<K>, Error> {
        let rv = if self.rv_unavailable { String::new() } else { self.state.last_sync_resource_version() };
        let timeout = self.watch_timeout();
        let opts = WatchOptions {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            resource_version: rv,
            allow_watch_bookmarks: true,
            send_initial_events: true,
            timeout_seconds: Some(timeout),
        };
        let mut listed = Listed::begin(&*self.queue);
        let mut stream = self.lw.watch(&opts).await?;
        // One timer for the whole stream (not one per event), polled after the stream.
        let deadline = tokio::time::sleep(self.config.initial_events_timeout);
        tokio::pin!(deadline);
        let mut batch: Vec<(ObjectKey, Arc<K>)> = Vec::new();
        let mut streamed = 0;
        loop {
            let next = tokio::select! {
                biased;
                next = stream.next() => next,
                () = &mut deadline => {
                    return Err(Error::Protocol(format!(
                        "no {INITIAL_EVENTS_END_ANNOTATION} bookmark within {:?}",
                        self.config.initial_events_timeout
                    )));
                }
            };
            match next {
                None => {
                    return Err(Error::Protocol(format!(
                        "WatchList stream ended before the {INITIAL_EVENTS_END_ANNOTATION} bookmark"
                    )));
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(WatchEvent::Added(obj))) | Some(Ok(WatchEvent::Modified(obj))) => {
                    if let Some(prepared) = self.prepare(obj) {
                        batch.push(prepared);
                        streamed += 1;
                        if batch.len() >= REPLACE_BATCH.limit(streamed) {
                            self.hand_over(std::mem::take(&mut batch), &mut listed);
                        }
                    }
                }
                Some(Ok(WatchEvent::Deleted(obj))) => {
                    if let Some(key) = ObjectKey::of(&obj) {
                        // The batch's keys are listed first: a deletion undoes a listing before it.
                        if !batch.is_empty() {
                            self.hand_over(std::mem::take(&mut batch), &mut listed);
                        }
                        listed.deleted(key);
                    }
                }
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    let end = b.metadata.annotations.get(INITIAL_EVENTS_END_ANNOTATION).is_some_and(|v| v == "true");
                    if end {
                        self.hand_over(std::mem::take(&mut batch), &mut listed);
                        listed.finish(&*self.queue);
                        self.state.set_rv(&b.metadata.resource_version);
                        self.rv_unavailable = false;
                        return Ok(stream);
                    }
                }
                Some(Ok(WatchEvent::Error(status))) => return Err(Error::Api((&*status).into())),
            }
        }
    }

    /// Applies a watch stream's events until it ends. `Ok` when the server closed it.
    async fn handle_watch(&mut self, mut stream: WatchStream<K>) -> Result<(), Error> {
        // The server closes the watch after at most 2 × min_watch_timeout; a stream silent
        // for longer than that (plus a margin) is dead.
        let silence = self.config.min_watch_timeout * 2 + Duration::from_secs(30);
        // One timer for the whole stream, armed only when the stream has to wait: an event
        // ready at once costs no clock read and no timer update.
        let silent = tokio::time::sleep(silence);
        tokio::pin!(silent);
        // Events the stream had ready and not yet handed to the queue: handed over before
        // the stream is waited for (so none waits on a later event) and before anything
        // that is not an object's event.
        let mut ready: Vec<(DeltaType, Arc<K>)> = Vec::new();
        loop {
            // The stream is polled once per wake. On its first `Pending` for this event, the
            // ready events are handed over and the timer armed; a later wake polls the stream
            // and then the timer.
            let mut waiting = false;
            let next = std::future::poll_fn(|cx| {
                if let Poll::Ready(next) = stream.poll_next_unpin(cx) {
                    return Poll::Ready(Ok(next));
                }
                if !waiting {
                    waiting = true;
                    self.hand_watched(&mut ready);
                    silent.as_mut().reset(tokio::time::Instant::now() + silence);
                }
                silent.as_mut().poll(cx).map(Err)
            })
            .await;
            let Ok(next) = next else {
                return Err(Error::Transport(format!("watch silent for {silence:?}")));
            };
            match next {
                Some(Ok(WatchEvent::Added(obj))) => self.gather_watched(&mut ready, DeltaType::Added, obj),
                Some(Ok(WatchEvent::Modified(obj))) => self.gather_watched(&mut ready, DeltaType::Updated, obj),
                Some(Ok(WatchEvent::Deleted(obj))) => self.gather_watched(&mut ready, DeltaType::Deleted, obj),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    self.hand_watched(&mut ready);
                    self.state.set_rv(&b.metadata.resource_version);
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    self.hand_watched(&mut ready);
                    return Err(Error::Api((&*status).into()));
                }
                Some(Err(e)) => {
                    self.hand_watched(&mut ready);
                    return Err(e);
                }
                None => {
                    self.hand_watched(&mut ready);
                    return Ok(());
                }
            }
        }
    }

    /// Adds a watch event's object, as the store keeps it, to those `ready` to be handed
    /// over; hands them over once [`WATCH_BATCH`] are.
    fn gather_watched(&self, ready: &mut Vec<(DeltaType, Arc<K>)>, kind: DeltaType, obj: K) {
        ready.push((kind, Arc::new(self.transformed(obj))));
        if ready.len() >= WATCH_BATCH {
            self.hand_watched(ready);
        }
    }

    /// Hands the `ready` watch events to the queue at once (which keys them, and drops an
    /// object without a name with a warning), after recording the last resourceVersion
    /// among them as the one the next watch starts from: as client-go's watch handler
    /// records each event's whatever the store made of the object. Recorded before the
    /// hand-over, from the objects themselves: the store applies them later either way.
    fn hand_watched(&self, ready: &mut Vec<(DeltaType, Arc<K>)>) {
        if ready.is_empty() {
            return;
        }
        if let Some(rv) = ready.iter().rev().find_map(|(_, obj)| obj.meta().resource_version.as_deref().filter(|rv| !rv.is_empty())) {
            self.state.set_rv(rv);
        }
        self.queue.watched(ready);
    }
}
