//! The next page of a paged list, fetched while this one decodes: once a page's continue
//! token is read (before its items decode), the request for the next page is sent from a
//! task of its own. The next `list` with that token takes the response from the task
//! instead of sending the request again.
//!
//! Invariants:
//! - At most one page is fetched ahead per lister-watcher, and only the page a token just
//!   named. The memory held ahead is a JSON body's chunks up to the one that reaches
//!   [`JSON_READ_AHEAD`] bytes (the rest waits on the connection until the page is asked
//!   for and decoded as it arrives, see `json_page_stream`), or a whole protobuf body.
//! - A fetched-ahead response is used only for the very request that would have been sent
//!   (the same URI, the same `Accept`), and it answers as that request would have: its
//!   status error, body error or bytes, as they came.
//! - A fetch nobody takes is cancelled: when a request for another page is made, and when
//!   the slot (its lister-watcher) or the `list` call awaiting it is dropped. A clone of a
//!   lister-watcher starts with an empty slot.
//! - A protobuf page's buffer, once its items are decoded, is kept for the body of a page
//!   after it (pages alternate between two buffers instead of each allocating, and faulting
//!   in, its own megabyte): at most [`MAX_SPARE_BUFFERS`] are kept, only while a paged list goes on.
//!   A list's last page drops them as soon as its metadata shows it is the last, before its
//!   items decode; a request that is not the page fetched ahead drops them too.

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

/// A list response that succeeded.
pub(crate) enum ListResponse {
    /// A protobuf body, read whole, and the message it decodes with.
    Protobuf { bytes: Bytes, message: &'static Message },
    /// A JSON body, read as it is decoded.
    Json(JsonBody),
}

/// A JSON list body: the chunks read ahead of its decode, then the rest of it.
pub(crate) struct JsonBody {
    read: std::collections::VecDeque<Bytes>,
    rest: Option<Body>,
}

impl JsonBody {
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
    pub(crate) fn into_chunks(self) -> crate::json_page_stream::Chunks {
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

/// Most bytes of a JSON body read by a fetch ahead before the page is asked for: enough
/// that its decode starts without waiting on the server, a small part of a page.
pub(crate) const JSON_READ_AHEAD: usize = 256 << 10;

/// Sends a list request (asking for protobuf with `protobuf`). A protobuf body is read
/// whole into `buffer` (when it comes in more than one chunk); of a JSON body, `read_ahead`
/// bytes at most are read. A status that is not success is the API's error.
async fn fetch(client: Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>, buffer: Vec<u8>, read_ahead: usize) -> Result<ListResponse, Error> {
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
    let Some(message) = protobuf.filter(|_| is_protobuf(response.headers())) else {
        let mut body = JsonBody { read: Default::default(), rest: Some(response.into_body()) };
        body.read_ahead(read_ahead).await?;
        return Ok(ListResponse::Json(body));
    };
    let length = response.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let bytes = read_body(response.into_body(), length, buffer).await?;
    Ok(ListResponse::Protobuf { bytes, message })
}

/// Largest `Content-Length` taken as the size to reserve up front; a longer body still reads
/// whole, growing its buffer as it comes.
const MAX_RESERVED_BODY: usize = 64 << 20;

/// Reads a whole body into `buf` (emptied first). Each chunk is copied in as it arrives and
/// dropped, so the connection's read buffer is reused for the next chunk instead of the
/// body's chunks all being held (and freshly allocated) until the end and then copied once
/// more; a body of one chunk is returned as it is. `length` (the `Content-Length`) sizes the
/// buffer. Without it (kube-apiserver streams a list without one), the buffer ends at most
/// an eighth above the body's size (see [`Growth`]).
async fn read_body(mut body: Body, length: Option<usize>, mut buf: Vec<u8>) -> Result<Bytes, Error> {
    buf.clear();
    let growth = Growth::of(&buf);
    let mut first: Option<Bytes> = None;
    while let Some(chunk) = next_chunk(&mut body).await? {
        match first.take() {
            None if buf.is_empty() => first = Some(chunk),
            None => {
                growth.make_room(&mut buf, chunk.len());
                buf.extend_from_slice(&chunk);
            }
            Some(earlier) => {
                let want = length.filter(|&n| n <= MAX_RESERVED_BODY).unwrap_or(0).max(earlier.len() + chunk.len());
                buf.reserve_exact(want);
                buf.extend_from_slice(&earlier);
                buf.extend_from_slice(&chunk);
            }
        }
    }
    Ok(match first {
        Some(only) => only,
        None => {
            growth.trim(&mut buf);
            Bytes::from(buf)
        }
    })
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

/// How a body's buffer grows when the body has no `Content-Length`. A fresh buffer doubles
/// (few copies while it grows), then gives back what it holds beyond an eighth over the
/// body once the body is read. A buffer reused from an earlier page of the list already
/// holds about a page: it grows by an eighth at a time. Either way a page's buffer ends
/// within an eighth of its size, where plain doubling leaves up to twice it (and keeps that
/// for every page the buffer is reused for).
#[derive(Clone, Copy)]
struct Growth {
    reused: bool,
}

impl Growth {
    fn of(buf: &Vec<u8>) -> Self {
        Growth { reused: buf.capacity() > 0 }
    }

    /// Makes room in `buf` for `more` bytes.
    fn make_room(self, buf: &mut Vec<u8>, more: usize) {
        let need = buf.len() + more;
        let capacity = buf.capacity();
        if need <= capacity {
            return;
        }
        let target = if self.reused { need.max(capacity + capacity / 8) } else { need.max(capacity * 2) };
        buf.reserve_exact(target - buf.len());
    }

    /// Gives back what the buffer holds beyond an eighth over the body it was filled with
    /// (a fresh buffer's doubling, or a reused one's room for a longer page).
    fn trim(self, buf: &mut Vec<u8>) {
        if buf.capacity() - buf.len() > buf.len() / 8 {
            buf.shrink_to_fit();
        }
    }
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

/// Most page buffers kept for the pages after them: one being decoded, one being read.
const MAX_SPARE_BUFFERS: usize = 2;

/// What a lister-watcher keeps between the pages of one list.
#[derive(Default)]
struct Slot {
    /// The fetch running ahead.
    ahead: Option<Ahead>,
    /// Buffers of decoded pages, emptied, for the next pages' bodies.
    spare: Vec<Vec<u8>>,
}

type Shared = Arc<Mutex<Slot>>;

fn lock(slot: &Shared) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// The one fetch a lister-watcher may have running ahead, and its spare page buffers.
#[derive(Default)]
pub(crate) struct PrefetchSlot(Shared);

/// Starts fetches ahead into a [`PrefetchSlot`] and takes decoded pages' buffers back into
/// it, from any thread (a page may decode on a blocking thread).
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
    /// fetch ahead for any other request is cancelled, and the spare buffers dropped.
    pub(crate) async fn send(&self, client: &Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>) -> Result<ListResponse, Error> {
        let ahead = {
            let mut slot = lock(&self.0);
            let ahead = slot.ahead.take().filter(|ahead| ahead.id == RequestId::of(&request, protobuf));
            if ahead.is_none() {
                slot.spare = Vec::new();
            }
            ahead
        };
        match ahead {
            Some(ahead) => ahead.await,
            None => fetch(client.clone(), request, protobuf, Vec::new(), 0).await,
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
        let mut slot = lock(&self.0);
        let buffer = slot.spare.pop().unwrap_or_default();
        let task = runtime.spawn(fetch(client.clone(), request, protobuf, buffer, JSON_READ_AHEAD));
        slot.ahead = Some(Ahead { id, task });
    }

    /// The page being decoded is a list's last: no body follows to take a spare buffer, so
    /// they are dropped before its items decode beside them.
    pub(crate) fn last_page(&self) {
        lock(&self.0).spare = Vec::new();
    }

    /// Takes back the bytes of a decoded page: kept for a later page's body when `more`
    /// pages follow and nothing else holds them; when none follow, every spare buffer is
    /// dropped.
    pub(crate) fn done_with(&self, bytes: Bytes, more: bool) {
        let mut slot = lock(&self.0);
        if !more {
            slot.spare = Vec::new();
            return;
        }
        if slot.spare.len() < MAX_SPARE_BUFFERS {
            if let Ok(unique) = bytes.try_into_mut() {
                slot.spare.push(Vec::from(unique));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::StreamBody;
    use http_body::Frame;

    use super::*;

    /// A client whose every response is `body` cut into `chunk`-byte frames, in protobuf,
    /// with a `Content-Length` header of `length` when given; `fail_after` frames, the body
    /// breaks.
    fn chunked_server(body: &'static [u8], chunk: usize, length: Option<usize>, fail_after: Option<usize>) -> Client {
        served(body, chunk, length, fail_after, crate::proto::CONTENT_TYPE)
    }

    /// [`chunked_server`] answering with `content_type`.
    fn served(body: &'static [u8], chunk: usize, length: Option<usize>, fail_after: Option<usize>, content_type: &'static str) -> Client {
        let service = tower::service_fn(move |_req: http::Request<Body>| async move {
            let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> =
                body.chunks(chunk).map(|c| Ok(Frame::data(Bytes::from_static(c)))).collect();
            if let Some(n) = fail_after {
                frames.truncate(n);
                frames.push(Err(std::io::Error::other("connection reset")));
            }
            let mut response = http::Response::builder().status(200).header(http::header::CONTENT_TYPE, content_type);
            if let Some(n) = length {
                response = response.header(http::header::CONTENT_LENGTH, n.to_string());
            }
            Ok::<_, Infallible>(response.body(StreamBody::new(futures::stream::iter(frames))).unwrap())
        });
        Client::new(service, "default")
    }

    /// Any message: these tests read bodies and decode none.
    const PROTOBUF: Option<&'static Message> = Some(&crate::proto::envelope::LIST_META);

    /// The bytes of a protobuf response.
    fn bytes(response: ListResponse) -> Bytes {
        match response {
            ListResponse::Protobuf { bytes, .. } => bytes,
            ListResponse::Json(_) => panic!("a protobuf response was read as JSON"),
        }
    }

    fn get() -> http::Request<Vec<u8>> {
        http::Request::get("/api/v1/configmaps?limit=500").body(Vec::new()).unwrap()
    }

    const BODY: &[u8] = b"{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}";

    #[tokio::test]
    async fn a_body_of_many_chunks_reads_whole_and_in_order() {
        // One chunk, few, one byte each; with the right length, none, one too small and one
        // absurdly large (not reserved; the body still reads whole).
        for chunk in [BODY.len(), 17, 1] {
            for length in [Some(BODY.len()), None, Some(3), Some(1 << 40)] {
                let client = chunked_server(BODY, chunk, length, None);
                let response = bytes(fetch(client, get(), PROTOBUF, b"left over".to_vec(), 0).await.unwrap());
                assert_eq!(&response[..], BODY, "chunks of {chunk}, length {length:?}");
            }
        }
    }

    fn page(token: &str) -> http::Request<Vec<u8>> {
        http::Request::get(format!("/api/v1/configmaps?limit=2&continue={token}")).body(Vec::new()).unwrap()
    }

    fn spares(slot: &PrefetchSlot) -> usize {
        lock(&slot.0).spare.len()
    }

    #[tokio::test]
    async fn pages_of_one_list_alternate_between_two_buffers_and_the_last_page_drops_them() {
        let client = chunked_server(BODY, 17, Some(BODY.len()), None);
        let slot = PrefetchSlot::default();
        let starter = slot.starter();
        // As a list goes: the next page is started while this one decodes, then this one's
        // bytes are handed back.
        let first = bytes(slot.send(&client, page(""), PROTOBUF).await.unwrap());
        starter.start(&client, page("p2"), PROTOBUF);
        let first_buffer = first.as_ptr();
        starter.done_with(first, true);
        assert_eq!(spares(&slot), 1);
        let second = bytes(slot.send(&client, page("p2"), PROTOBUF).await.unwrap());
        assert_ne!(second.as_ptr(), first_buffer, "the second page was read while the first decoded");
        starter.start(&client, page("p3"), PROTOBUF);
        assert_eq!(spares(&slot), 0, "the fetch ahead took the spare buffer");
        starter.done_with(second, true);
        let third = bytes(slot.send(&client, page("p3"), PROTOBUF).await.unwrap());
        assert_eq!(&third[..], BODY);
        assert_eq!(third.as_ptr(), first_buffer, "the third page is read into the first page's buffer");
        assert_eq!(spares(&slot), 1, "the second page's buffer, for a fourth");
        starter.last_page();
        assert_eq!(spares(&slot), 0, "the last page drops every spare buffer before its items decode");
        starter.done_with(third, false);
        assert_eq!(spares(&slot), 0, "and keeps none after");

        // Bytes something else still holds are not reused.
        let held = bytes(slot.send(&client, page(""), PROTOBUF).await.unwrap());
        let clone = held.clone();
        starter.done_with(held, true);
        assert_eq!(spares(&slot), 0);
        drop(clone);
        // At most two are kept; a request other than the page fetched ahead drops them.
        for _ in 0..3 {
            let r = bytes(slot.send(&client, page("x"), PROTOBUF).await.unwrap());
            starter.done_with(r, true);
        }
        assert_eq!(spares(&slot), 1, "each send that is not the page fetched ahead starts without spares");
        let (a, b, c) = (
            fetch(client.clone(), get(), PROTOBUF, Vec::new(), 0).await.unwrap(),
            fetch(client.clone(), get(), PROTOBUF, Vec::new(), 0).await.unwrap(),
            fetch(client.clone(), get(), PROTOBUF, Vec::new(), 0).await.unwrap(),
        );
        for r in [a, b, c] {
            starter.done_with(bytes(r), true);
        }
        assert_eq!(spares(&slot), MAX_SPARE_BUFFERS);
        bytes(slot.send(&client, page("y"), PROTOBUF).await.unwrap());
        assert_eq!(spares(&slot), 0);
    }

    #[tokio::test]
    async fn a_body_without_a_length_ends_in_a_buffer_at_most_an_eighth_over_its_size() {
        let body: &'static [u8] = Vec::leak((0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect());
        let client = chunked_server(body, 1000, None, None);
        let capacity = |bytes: Bytes| bytes.try_into_mut().expect("nothing else holds the page").capacity();
        // A fresh buffer, and buffers reused from a page a little shorter, the same size, and
        // far shorter (where doubling would have left up to twice the body).
        for reused in [0, body.len() - 5_000, body.len(), 40_000] {
            let response = bytes(fetch(client.clone(), get(), PROTOBUF, Vec::with_capacity(reused), 0).await.unwrap());
            assert_eq!(&response[..], body);
            let held = capacity(response);
            assert!(held <= body.len() + body.len() / 8, "reusing {reused} bytes: a buffer of {held} for {}", body.len());
        }
    }

    /// All the chunks of a JSON response, or the error that ended them.
    async fn json_chunks(response: ListResponse) -> (usize, Result<Vec<u8>, Error>) {
        let ListResponse::Json(body) = response else { panic!("a JSON response was read as protobuf") };
        let read_ahead = body.read.iter().map(Bytes::len).sum();
        let mut bytes = Vec::new();
        let mut chunks = body.into_chunks();
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
    async fn a_json_body_is_read_ahead_only_so_far_and_then_in_order() {
        let body: &'static [u8] = Vec::leak((0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect());
        let client = served(body, 1000, None, None, "application/json");
        for read_ahead in [0, 1, 4500, body.len(), 2 * body.len()] {
            // Asked for protobuf, answered in JSON: read as JSON.
            let response = fetch(client.clone(), get(), PROTOBUF, Vec::new(), read_ahead).await.unwrap();
            let (held, bytes) = json_chunks(response).await;
            assert_eq!(held, read_ahead.div_ceil(1000).min(300) * 1000, "reading {read_ahead} ahead: whole chunks, no more than that");
            assert_eq!(bytes.unwrap(), body, "reading {read_ahead} ahead");
        }
    }

    #[tokio::test]
    async fn a_json_body_that_breaks_fails_the_fetch_or_ends_its_chunks_with_the_error() {
        let client = served(BODY, 17, None, Some(3), "application/json");
        assert!(fetch(client.clone(), get(), None, Vec::new(), 1 << 20).await.is_err(), "broken within the bytes read ahead");
        let response = fetch(client, get(), None, Vec::new(), 17).await.unwrap();
        let (held, bytes) = json_chunks(response).await;
        assert_eq!(held, 17);
        assert!(bytes.is_err(), "broken after the bytes read ahead");
    }

    #[tokio::test]
    async fn a_body_that_breaks_is_an_error_not_a_short_page() {
        for fail_after in [0, 1, 3] {
            let client = chunked_server(BODY, 17, None, Some(fail_after));
            assert!(fetch(client, get(), PROTOBUF, Vec::new(), 0).await.is_err(), "broken after {fail_after} chunks");
        }
    }
}
