//! The next page of a paged list, fetched while this one decodes (client-go's pager does the
//! same with its page buffer): a list response's bytes are read in, its continue token found
//! (the scan that splits its items does that), and the request for the next page is sent
//! from a task of its own before the items are decoded. The next `list` with that token
//! takes the bytes from the task instead of sending the request again.
//!
//! Invariants:
//! - At most one page is fetched ahead per lister-watcher, and only the page a token just
//!   named: the memory held ahead is one response's bytes.
//! - A fetched-ahead response is used only for the very request that would have been sent
//!   (the same URI, the same `Accept`), and it answers as that request would have: its
//!   status error, body error or bytes, as they came.
//! - A fetch nobody takes is cancelled: when a request for another page is made, and when
//!   the slot (its lister-watcher) or the `list` call awaiting it is dropped. A clone of a
//!   lister-watcher starts with an empty slot.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use kube_client::Client;
use kube_client::client::Body;

use crate::error::Error;
use crate::parallel::joined;
use crate::proto::Message;
use crate::watch_events::{accept_protobuf, api_error, is_protobuf};

/// A list response read in: its bytes, and the message they decode with when the server
/// answered in protobuf.
pub(crate) struct ListResponse {
    pub(crate) bytes: Bytes,
    pub(crate) protobuf: Option<&'static Message>,
}

/// Sends a list request (asking for protobuf with `protobuf`) and reads its whole body; a
/// status that is not success is the API's error.
async fn fetch(client: Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>) -> Result<ListResponse, Error> {
    let mut request = request.map(Body::from);
    if protobuf.is_some() {
        accept_protobuf(&mut request);
    }
    request.extensions_mut().insert("list");
    let response = client.send(request).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(api_error(status, response).await);
    }
    let protobuf = protobuf.filter(|_| is_protobuf(response.headers()));
    let bytes = response.into_body().collect().await.map_err(Error::from)?.to_bytes();
    Ok(ListResponse { bytes, protobuf })
}

/// What identifies a list request: its URI and whether it asks for protobuf.
#[derive(PartialEq, Eq)]
struct RequestId {
    uri: String,
    protobuf: bool,
}

impl RequestId {
    fn of(request: &http::Request<Vec<u8>>, protobuf: Option<&'static Message>) -> Self {
        RequestId { uri: request.uri().to_string(), protobuf: protobuf.is_some() }
    }
}

/// A fetch running on its own task, cancelled when dropped.
struct Ahead {
    id: RequestId,
    task: tokio::task::JoinHandle<Result<ListResponse, Error>>,
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Future for Ahead {
    type Output = Result<ListResponse, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.task).poll(cx).map(|task| joined(task, "list page fetched ahead").and_then(|response| response))
    }
}

/// The one fetch a lister-watcher may have running ahead.
#[derive(Default)]
pub(crate) struct PrefetchSlot(Arc<Mutex<Option<Ahead>>>);

/// Starts fetches ahead into a [`PrefetchSlot`], from any thread (a page may decode on a
/// blocking thread).
pub(crate) struct PrefetchStarter(Arc<Mutex<Option<Ahead>>>);

impl Clone for PrefetchSlot {
    /// An empty slot: a fetch ahead belongs to the lister-watcher whose list asked for it.
    fn clone(&self) -> Self {
        PrefetchSlot::default()
    }
}

impl PrefetchSlot {
    /// Sends `request`, or takes its response from the fetch ahead made for exactly it; a
    /// fetch ahead for any other request is cancelled.
    pub(crate) async fn send(&self, client: &Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>) -> Result<ListResponse, Error> {
        let ahead = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        match ahead {
            Some(ahead) if ahead.id == RequestId::of(&request, protobuf) => ahead.await,
            _ => fetch(client.clone(), request, protobuf).await,
        }
    }

    /// What starts fetches ahead into this slot.
    pub(crate) fn starter(&self) -> PrefetchStarter {
        PrefetchStarter(self.0.clone())
    }
}

impl PrefetchStarter {
    /// Starts fetching `request` on a task of its own, in place of any fetch ahead there was
    /// (outside a tokio runtime, nothing is fetched ahead).
    pub(crate) fn start(&self, client: &Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let id = RequestId::of(&request, protobuf);
        let task = runtime.spawn(fetch(client.clone(), request, protobuf));
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Ahead { id, task });
    }
}
