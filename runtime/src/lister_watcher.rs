//! The transport an informer lists and watches through.
//!
//! Invariants of every implementation:
//! - `list` returns one page: its objects, the list's resourceVersion and, if more pages
//!   follow, a continue token. A page asked for with a continue token carries no
//!   resourceVersion in the request (the token pins it).
//! - `list_in_parts` returns the same page, its items handed over in parts, in wire order,
//!   as they decode; the parts of a page are its items, or end with an error.
//! - `watch` returns a stream of events that ends when the server closes the watch; an
//!   `ERROR` event is delivered as [`WatchEvent::Error`], never swallowed.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::StreamExt;
use futures::stream::BoxStream;
pub use kube_core::WatchEvent;
pub use kube_core::params::VersionMatch;

use crate::error::Error;

/// Options of one list call (one page).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOptions {
    /// Label selector, in the API's string form.
    pub label_selector: Option<String>,
    /// Field selector, in the API's string form.
    pub field_selector: Option<String>,
    /// Page size; `None` for no limit.
    pub limit: Option<u32>,
    /// Continue token of the previous page.
    pub continue_token: Option<String>,
    /// resourceVersion to list at (`"0"`: any, `""`/`None`: most recent, consistent read).
    pub resource_version: Option<String>,
    /// How `resource_version` is matched.
    pub resource_version_match: Option<VersionMatch>,
}

/// Options of one watch call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Label selector, in the API's string form.
    pub label_selector: Option<String>,
    /// Field selector, in the API's string form.
    pub field_selector: Option<String>,
    /// resourceVersion to watch from (exclusive).
    pub resource_version: String,
    /// Ask the server for BOOKMARK events.
    pub allow_watch_bookmarks: bool,
    /// WatchList: stream the current state first, then the `initial-events-end` bookmark
    /// (implies `resourceVersionMatch=NotOlderThan`).
    pub send_initial_events: bool,
    /// Server-side timeout in seconds.
    pub timeout_seconds: Option<u32>,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage<K> {
    /// The objects of this page.
    pub items: Vec<K>,
    /// The list's resourceVersion.
    pub resource_version: String,
    /// Continue token, if more pages follow.
    pub continue_token: Option<String>,
}

/// One page of a list whose items are handed over in parts as they decode: a reflector
/// that queues each part as it comes never holds a whole page of new objects beside the
/// cache they replace.
pub struct PageInParts<K> {
    /// The list's resourceVersion.
    pub resource_version: String,
    /// Continue token, if more pages follow.
    pub continue_token: Option<String>,
    parts: Parts<K>,
}

/// The items of a [`PageInParts`] not yet handed over.
enum Parts<K> {
    /// One part, or none once it was handed over.
    Whole(Option<Vec<K>>),
    /// Parts as they decode; an `Err` ends them.
    Streamed(BoxStream<'static, Result<Vec<K>, Error>>),
}

impl<K> PageInParts<K> {
    /// A page whose items are handed over as one part.
    pub fn whole(page: ListPage<K>) -> Self {
        PageInParts { resource_version: page.resource_version, continue_token: page.continue_token, parts: Parts::Whole(Some(page.items)) }
    }

    /// A page whose items `parts` hands over, in wire order; an `Err` ends them.
    pub fn streamed(resource_version: String, continue_token: Option<String>, parts: BoxStream<'static, Result<Vec<K>, Error>>) -> Self {
        PageInParts { resource_version, continue_token, parts: Parts::Streamed(parts) }
    }

    /// The page's next part; `None` once every item was handed over.
    pub async fn next_part(&mut self) -> Option<Result<Vec<K>, Error>> {
        match &mut self.parts {
            Parts::Whole(items) => items.take().map(Ok),
            Parts::Streamed(parts) => {
                let part = parts.next().await;
                if matches!(part, Some(Err(_))) {
                    // Nothing follows an error.
                    self.parts = Parts::Whole(None);
                }
                part
            }
        }
    }

    /// The page with every part gathered.
    pub async fn gathered(mut self) -> Result<ListPage<K>, Error> {
        let mut items = Vec::new();
        while let Some(part) = self.next_part().await {
            let part = part?;
            if items.is_empty() {
                items = part;
            } else {
                items.extend(part);
            }
        }
        Ok(ListPage { items, resource_version: self.resource_version, continue_token: self.continue_token })
    }
}

impl<K> std::fmt::Debug for PageInParts<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageInParts").field("resource_version", &self.resource_version).field("continue_token", &self.continue_token).finish_non_exhaustive()
    }
}

/// A stream of watch events.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, Error>>;

/// Something that can list and watch objects of type `K`.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list(&self, opts: &ListOptions) -> impl Future<Output = Result<ListPage<K>, Error>> + Send;
    /// Lists one page, its items handed over in parts as they decode (by default, the page
    /// `list` returns, as one part).
    fn list_in_parts(&self, opts: &ListOptions) -> impl Future<Output = Result<PageInParts<K>, Error>> + Send {
        let page = self.list(opts);
        async move { page.await.map(PageInParts::whole) }
    }
    /// Opens a watch.
    fn watch(&self, opts: &WatchOptions) -> impl Future<Output = Result<WatchStream<K>, Error>> + Send;
}

/// The object-safe form of [`ListerWatcher`], implemented for every `ListerWatcher`.
trait DynListerWatcher<K>: Send + Sync {
    fn list_boxed<'a>(&'a self, opts: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>>;
    fn list_in_parts_boxed<'a>(&'a self, opts: &'a ListOptions) -> BoxFuture<'a, Result<PageInParts<K>, Error>>;
    fn watch_boxed<'a>(&'a self, opts: &'a WatchOptions) -> BoxFuture<'a, Result<WatchStream<K>, Error>>;
}

impl<K: 'static, L: ListerWatcher<K>> DynListerWatcher<K> for L {
    fn list_boxed<'a>(&'a self, opts: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        Box::pin(self.list(opts))
    }
    fn list_in_parts_boxed<'a>(&'a self, opts: &'a ListOptions) -> BoxFuture<'a, Result<PageInParts<K>, Error>> {
        Box::pin(self.list_in_parts(opts))
    }
    fn watch_boxed<'a>(&'a self, opts: &'a WatchOptions) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        Box::pin(self.watch(opts))
    }
}

/// A type-erased [`ListerWatcher`], so informers need not name their transport's type.
pub struct BoxListerWatcher<K>(Arc<dyn DynListerWatcher<K>>);

impl<K> Clone for BoxListerWatcher<K> {
    fn clone(&self) -> Self {
        BoxListerWatcher(self.0.clone())
    }
}

impl<K: 'static> BoxListerWatcher<K> {
    /// Erases the type of `lw`.
    pub fn new(lw: impl ListerWatcher<K>) -> Self {
        BoxListerWatcher(Arc::new(lw))
    }
}

impl<K: 'static> ListerWatcher<K> for BoxListerWatcher<K> {
    async fn list(&self, opts: &ListOptions) -> Result<ListPage<K>, Error> {
        self.0.list_boxed(opts).await
    }
    async fn list_in_parts(&self, opts: &ListOptions) -> Result<PageInParts<K>, Error> {
        self.0.list_in_parts_boxed(opts).await
    }
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<K>, Error> {
        self.0.watch_boxed(opts).await
    }
}
