//! The next page of a paged list, fetched while this one decodes: once a page's continue
//! token is read (before its items decode), the request for the next page is sent from a
//! task of its own. The next `list` with that token takes the response from the task
//! instead of sending the request again.
//!
//! Invariants:
//! - At most one page is fetched ahead per lister-watcher, and only the page a token just
//!   named. The memory held ahead is its body's chunks up to the one that reaches the bytes
//!   the fetch was started with ([`READ_AHEAD`], a window of what the list has delivered);
//!   the rest waits on the connection until the page is asked for and decoded as it
//!   arrives (see `json_page_stream` and `proto_page_stream`).
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
use futures::StreamExt;
use http_body_util::BodyExt;
use kube_client::Client;
use kube_client::client::Body;

use crate::error::Error;
use crate::parallel::joined;
use crate::proto::Message;
use crate::watch_events::{accept_protobuf, api_error, is_protobuf};
use crate::window::{SHARE, Window};

/// A list response that succeeded: its body, and the message a protobuf body decodes
/// with (`None` for a JSON body).
pub(crate) struct ListResponse {
    pub(crate) body: ListBody,
    pub(crate) protobuf: Option<&'static Message>,
}

/// A list body: the chunks read ahead of its decode, then the rest of it.
pub(crate) struct ListBody {
    read: std::collections::VecDeque<Bytes>,
    rest: Option<Body>,
}

impl ListBody {
    /// Reads chunks until `bytes` are held or the body ends; a body that fails fails here.
    async fn read_ahead(&mut self, bytes: usize) -> Result<(), Error> {
        let mut held: usize = self.read.iter().map(Bytes::len).sum();
        while held < bytes {
            let Some(chunk) = self.next_from_body().await? else { break };
            held += chunk.len();
            self.read.push_back(chunk);
        }
        Ok(())
    }

    /// The next non-empty chunk from the connection, or `None` at the body's end.
    async fn next_from_body(&mut self) -> Result<Option<Bytes>, Error> {
        let Some(body) = self.rest.as_mut() else { return Ok(None) };
        let chunk = next_chunk(body).await?;
        if chunk.is_none() {
            self.rest = None;
        }
        Ok(chunk)
    }

    /// The body's chunks in order, those read ahead first.
    pub(crate) fn into_chunks(self) -> crate::page_parts::Chunks {
        futures::stream::unfold(self, |mut body| async move {
            let next = match body.read.pop_front() {
                Some(chunk) => Ok(Some(chunk)),
                None => body.next_from_body().await,
            };
            match next {
                Ok(Some(chunk)) => Some((Ok(chunk), body)),
                Ok(None) => None,
                Err(e) => {
                    body.rest = None;
                    Some((Err(e), body))
                }
            }
        })
        .boxed()
    }
}

/// Most bytes of a body read by a fetch ahead before the page is asked for, a window of the
/// bytes the list has delivered: enough that its decode starts without waiting on the
/// server, a small part of a page, and of a short list's cache (what the server wrote
/// beyond it waits in the socket's buffers, outside the heap).
pub(crate) const READ_AHEAD: Window = Window { floor: 32 << 10, ceiling: 256 << 10, share: SHARE };

/// Sends a list request (asking for protobuf with `protobuf`) and reads `read_ahead` bytes
/// of its body at most. A status that is not success is the API's error.
async fn fetch(client: Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>, read_ahead: usize) -> Result<ListResponse, Error> {
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
    let mut body = ListBody { read: Default::default(), rest: Some(response.into_body()) };
    body.read_ahead(read_ahead).await?;
    Ok(ListResponse { body, protobuf })
}

/// The next non-empty data chunk of `body` (other frames skipped), or `None` at its end.
async fn next_chunk(body: &mut Body) -> Result<Option<Bytes>, Error> {
    while let Some(frame) = body.frame().await {
        match frame.map_err(Error::from)?.into_data() {
            Ok(chunk) if !chunk.is_empty() => return Ok(Some(chunk)),
            _ => {}
        }
    }
    Ok(None)
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

/// The fetch running ahead, if any.
type Shared = Arc<Mutex<Option<Ahead>>>;

fn lock(slot: &Shared) -> std::sync::MutexGuard<'_, Option<Ahead>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// The one fetch a lister-watcher may have running ahead.
#[derive(Default)]
pub(crate) struct PrefetchSlot(Shared);

/// Starts fetches ahead into a [`PrefetchSlot`], from any task.
#[derive(Clone)]
pub(crate) struct PrefetchStarter(Shared);

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
        let ahead = lock(&self.0).take().filter(|ahead| ahead.id == RequestId::of(&request, protobuf));
        match ahead {
            Some(ahead) => ahead.await,
            None => fetch(client.clone(), request, protobuf, 0).await,
        }
    }

    /// What starts fetches ahead into this slot.
    pub(crate) fn starter(&self) -> PrefetchStarter {
        PrefetchStarter(self.0.clone())
    }
}

impl PrefetchStarter {
    /// Starts fetching `request` on a task of its own, reading `read_ahead` bytes of its body
    /// at most, in place of any fetch ahead there was (outside a tokio runtime, nothing is
    /// fetched ahead).
    pub(crate) fn start(&self, client: &Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>, read_ahead: usize) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let id = RequestId::of(&request, protobuf);
        let task = runtime.spawn(fetch(client.clone(), request, protobuf, read_ahead));
        *lock(&self.0) = Some(Ahead { id, task });
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::StreamBody;
    use http_body::Frame;

    use super::*;

    /// A client whose every response is `body` cut into `chunk`-byte frames, answered with
    /// `content_type`; after `fail_after` frames, the body breaks. It counts the requests
    /// it gets.
    fn served(body: &'static [u8], chunk: usize, fail_after: Option<usize>, content_type: &'static str) -> (Client, Arc<std::sync::atomic::AtomicUsize>) {
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = asked.clone();
        let service = tower::service_fn(move |_req: http::Request<Body>| {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> =
                    body.chunks(chunk).map(|c| Ok(Frame::data(Bytes::from_static(c)))).collect();
                if let Some(n) = fail_after {
                    frames.truncate(n);
                    frames.push(Err(std::io::Error::other("connection reset")));
                }
                let response = http::Response::builder().status(200).header(http::header::CONTENT_TYPE, content_type);
                Ok::<_, Infallible>(response.body(StreamBody::new(futures::stream::iter(frames))).unwrap())
            }
        });
        (Client::new(service, "default"), asked)
    }

    /// Any message: these tests read bodies and decode none.
    const PROTOBUF: Option<&'static Message> = Some(&crate::proto::envelope::LIST_META);

    fn get() -> http::Request<Vec<u8>> {
        http::Request::get("/api/v1/configmaps?limit=500").body(Vec::new()).unwrap()
    }

    const BODY: &[u8] = b"{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}";

    /// The bytes a response read ahead, and all its chunks or the error that ended them.
    async fn chunks(response: ListResponse) -> (usize, Result<Vec<u8>, Error>) {
        let read_ahead = response.body.read.iter().map(Bytes::len).sum();
        let mut bytes = Vec::new();
        let mut chunks = response.body.into_chunks();
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(e) => {
                    assert!(chunks.next().await.is_none(), "nothing comes after a body's error");
                    return (read_ahead, Err(e));
                }
            }
        }
        (read_ahead, Ok(bytes))
    }

    #[tokio::test]
    async fn a_body_is_read_ahead_only_so_far_and_then_in_order() {
        let body: &'static [u8] = Vec::leak((0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect());
        for (content_type, protobuf) in [(crate::proto::CONTENT_TYPE, true), ("application/json", false)] {
            let (client, _) = served(body, 1000, None, content_type);
            for read_ahead in [0, 1, 4500, body.len(), 2 * body.len()] {
                // Asked for protobuf; answered in JSON, read as JSON.
                let response = fetch(client.clone(), get(), PROTOBUF, read_ahead).await.unwrap();
                assert_eq!(response.protobuf.is_some(), protobuf, "{content_type}");
                let (held, bytes) = chunks(response).await;
                assert_eq!(held, read_ahead.div_ceil(1000).min(300) * 1000, "{content_type}, reading {read_ahead} ahead: whole chunks, no more than that");
                assert_eq!(bytes.unwrap(), body, "{content_type}, reading {read_ahead} ahead");
            }
        }
    }

    #[tokio::test]
    async fn a_body_that_breaks_fails_the_fetch_or_ends_its_chunks_with_the_error() {
        let (client, _) = served(BODY, 17, Some(3), "application/json");
        assert!(fetch(client.clone(), get(), None, 1 << 20).await.is_err(), "broken within the bytes read ahead");
        let response = fetch(client, get(), None, 17).await.unwrap();
        let (held, bytes) = chunks(response).await;
        assert_eq!(held, 17);
        assert!(bytes.is_err(), "broken after the bytes read ahead");
    }

    fn page(token: &str) -> http::Request<Vec<u8>> {
        http::Request::get(format!("/api/v1/configmaps?limit=2&continue={token}")).body(Vec::new()).unwrap()
    }

    #[tokio::test]
    async fn a_fetch_ahead_answers_only_its_own_request_and_is_cancelled_by_another() {
        let (client, asked) = served(BODY, 17, None, crate::proto::CONTENT_TYPE);
        let slot = PrefetchSlot::default();
        let starter = slot.starter();
        starter.start(&client, page("p2"), PROTOBUF, READ_AHEAD.ceiling);
        let (_, bytes) = chunks(slot.send(&client, page("p2"), PROTOBUF).await.unwrap()).await;
        assert_eq!(bytes.unwrap(), BODY);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1, "the page fetched ahead answered");
        // Another page, or the same page without protobuf, is asked for anew.
        starter.start(&client, page("p3"), PROTOBUF, READ_AHEAD.ceiling);
        chunks(slot.send(&client, page("p3"), None).await.unwrap()).await.1.unwrap();
        assert!(lock(&slot.0).is_none(), "the fetch ahead is dropped");
        starter.start(&client, page("p4"), PROTOBUF, READ_AHEAD.ceiling);
        chunks(slot.send(&client, page("p5"), PROTOBUF).await.unwrap()).await.1.unwrap();
        assert!(lock(&slot.0).is_none(), "the fetch ahead is dropped");
    }
}
