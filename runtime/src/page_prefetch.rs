//! The next page of a paged list, fetched and decoded while this one decodes (client-go's
//! pager fetches ahead with its page buffer): a list response's bytes are read in, its
//! continue token found (before its items are decoded), and the next page is fetched and
//! decoded on a task of its own. The next `list` with that token takes the decoded page from
//! the task instead of sending the request again. So two pages decode at once, each on one
//! thread, with no hand-over through the reflector between one page's decode and the next.
//!
//! Invariants:
//! - At most one page is fetched ahead per lister-watcher, and only the page a token just
//!   named; the page after it, asked for by its decode, waits until it is taken. The memory
//!   held ahead is one page, its bytes and then its decoded objects.
//! - A page fetched ahead is used only for the very request that would have been sent (the
//!   same URI, the same `Accept`), and it answers as that request would have: its status
//!   error, body error, decode error or page, as they came.
//! - A fetch nobody takes is cancelled: when a request for another page is made, and when
//!   the slot (its lister-watcher) or the `list` call awaiting it is dropped; a page
//!   decoding ahead holds its slot only weakly. A request for another page also ends the
//!   list it belonged to: what that list's decodes ask for afterwards is not started. A
//!   clone of a lister-watcher starts with an empty slot.
//! - A page's buffer, once its items are decoded, is kept for the body of a page after it
//!   (pages alternate between two buffers instead of each allocating, and faulting in, its
//!   own megabyte): at most [`MAX_SPARE_BUFFERS`] are kept, only while a paged list goes on.
//!   The last page of a list, and a request that is not the page fetched ahead, drop them.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use kube_client::Client;
use kube_client::client::Body;

use crate::error::Error;
use crate::parallel::{MIN_BYTES_PER_THREAD, joined};
use crate::proto::Message;
use crate::watch_events::{accept_protobuf, api_error, is_protobuf};

/// A list response read in: its bytes, and the message they decode with when the server
/// answered in protobuf.
pub(crate) struct ListResponse {
    pub(crate) bytes: Bytes,
    pub(crate) protobuf: Option<&'static Message>,
}

/// Sends a list request (asking for protobuf with `protobuf`) and reads its whole body into
/// `buffer` (when the body comes in more than one chunk); a status that is not success is
/// the API's error.
async fn fetch(client: Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>, buffer: Vec<u8>) -> Result<ListResponse, Error> {
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
    let length = response.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let bytes = read_body(response.into_body(), length, buffer).await?;
    Ok(ListResponse { bytes, protobuf })
}

/// Largest `Content-Length` taken as the size to reserve up front; a longer body still reads
/// whole, growing its buffer as it comes.
const MAX_RESERVED_BODY: usize = 64 << 20;

/// Reads a whole body into `buf` (emptied first). Each chunk is copied in as it arrives and
/// dropped, so the connection's read buffer is reused for the next chunk instead of the
/// body's chunks all being held (and freshly allocated) until the end and then copied once
/// more; a body of one chunk is returned as it is. `length` (the `Content-Length`) sizes the
/// buffer.
async fn read_body(mut body: Body, length: Option<usize>, mut buf: Vec<u8>) -> Result<Bytes, Error> {
    buf.clear();
    let mut first: Option<Bytes> = None;
    while let Some(frame) = body.frame().await {
        let Ok(chunk) = frame.map_err(Error::from)?.into_data() else { continue };
        if chunk.is_empty() {
            continue;
        }
        match first.take() {
            None if buf.is_empty() => first = Some(chunk),
            None => buf.extend_from_slice(&chunk),
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
        None => Bytes::from(buf),
    })
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

/// A page fetched ahead and decoded: the `Result<ListPage<T>, Error>` the `list` that asked
/// for it would have returned, boxed (a slot serves lists of any item type).
pub(crate) type AheadPage = Box<dyn Any + Send>;

/// Decodes a page fetched ahead into an [`AheadPage`] (starting the fetch of the page after
/// it, as a `list` does).
pub(crate) type DecodeAhead = Box<dyn FnOnce(ListResponse) -> AheadPage + Send>;

/// What [`PrefetchSlot::send`] gives: the response of a request sent now, or the page
/// fetched and decoded ahead for exactly that request.
pub(crate) enum Sent {
    Fetched(ListResponse),
    DecodedAhead(AheadPage),
}

/// Fetches `request` and decodes its response with `decode` (on a blocking thread when it
/// is many bytes).
async fn fetch_and_decode(client: Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>, buffer: Vec<u8>, decode: DecodeAhead) -> Result<AheadPage, Error> {
    let response = fetch(client, request, protobuf, buffer).await?;
    if response.bytes.len() < MIN_BYTES_PER_THREAD {
        return Ok(decode(response));
    }
    joined(tokio::task::spawn_blocking(move || decode(response)).await, "list page decoded ahead")
}

/// A fetch and decode running on its own task, cancelled when dropped (a decode already
/// running on a blocking thread ends, and its result is dropped).
struct Ahead {
    id: RequestId,
    task: tokio::task::JoinHandle<Result<AheadPage, Error>>,
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Future for Ahead {
    type Output = Result<AheadPage, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.task).poll(cx).map(|task| joined(task, "list page fetched ahead").and_then(|page| page))
    }
}

/// A fetch ahead asked for while another still runs: started once that one is taken.
struct Start {
    id: RequestId,
    client: Client,
    request: http::Request<Vec<u8>>,
    protobuf: Option<&'static Message>,
    decode: DecodeAhead,
}

impl Start {
    fn launch(self, slot: &mut Slot, runtime: &tokio::runtime::Handle) {
        let buffer = slot.spare.pop().unwrap_or_default();
        let task = runtime.spawn(fetch_and_decode(self.client, self.request, self.protobuf, buffer, self.decode));
        slot.ahead = Some(Ahead { id: self.id, task });
    }
}

/// Most page buffers kept for the pages after them: one being decoded, one being read.
const MAX_SPARE_BUFFERS: usize = 2;

/// What a lister-watcher keeps between the pages of one list.
#[derive(Default)]
struct Slot {
    /// The fetch (and decode) running ahead.
    ahead: Option<Ahead>,
    /// The fetch asked for by the page running ahead, waiting for that page to be taken.
    pending: Option<Start>,
    /// Buffers of decoded pages, emptied, for the next pages' bodies.
    spare: Vec<Vec<u8>>,
    /// Counts the requests that were not a page fetched ahead: a starter made before the
    /// last of them belongs to a list that is over, and starts nothing.
    generation: u64,
}

type Shared = Arc<Mutex<Slot>>;

fn lock(slot: &Mutex<Slot>) -> std::sync::MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// The one fetch a lister-watcher may have running ahead (and the one it asked for), and its
/// spare page buffers.
#[derive(Default)]
pub(crate) struct PrefetchSlot(Shared);

/// Starts fetches ahead into a [`PrefetchSlot`] and takes decoded pages' buffers back into
/// it, from any thread (a page may decode on a blocking thread). It holds the slot weakly:
/// a page decoding ahead keeps no lister-watcher's slot alive, so dropping the
/// lister-watcher cancels its fetches ahead.
#[derive(Clone)]
pub(crate) struct PrefetchStarter {
    slot: Weak<Mutex<Slot>>,
    generation: u64,
}

impl Clone for PrefetchSlot {
    /// An empty slot: a fetch ahead belongs to the lister-watcher whose list asked for it.
    fn clone(&self) -> Self {
        PrefetchSlot::default()
    }
}

impl PrefetchSlot {
    /// Sends `request`, or takes the page fetched and decoded ahead for exactly it (and
    /// starts the fetch that page asked for); a fetch ahead for any other request is
    /// cancelled, the one waiting forgotten and the spare buffers dropped.
    pub(crate) async fn send(&self, client: &Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>) -> Result<Sent, Error> {
        let ahead = {
            let mut slot = lock(&self.0);
            let ahead = slot.ahead.take().filter(|ahead| ahead.id == RequestId::of(&request, protobuf));
            match (&ahead, tokio::runtime::Handle::try_current()) {
                (Some(_), Ok(runtime)) => {
                    if let Some(next) = slot.pending.take() {
                        next.launch(&mut slot, &runtime);
                    }
                }
                (Some(_), Err(_)) => slot.pending = None,
                (None, _) => {
                    slot.spare = Vec::new();
                    slot.pending = None;
                    slot.generation += 1;
                }
            }
            ahead
        };
        match ahead {
            Some(ahead) => ahead.await.map(Sent::DecodedAhead),
            None => fetch(client.clone(), request, protobuf, Vec::new()).await.map(Sent::Fetched),
        }
    }

    /// What starts fetches ahead into this slot for the list of the request sent last.
    pub(crate) fn starter(&self) -> PrefetchStarter {
        PrefetchStarter { slot: Arc::downgrade(&self.0), generation: lock(&self.0).generation }
    }
}

impl PrefetchStarter {
    /// Starts fetching `request` on a task of its own and decoding it with `decode`; if a
    /// fetch ahead still runs (the page whose decode asks for this one), it starts once that
    /// one is taken. Nothing starts outside a tokio runtime, once the slot is gone, or when
    /// the slot has served another list since this starter was made.
    pub(crate) fn start(&self, client: &Client, request: http::Request<Vec<u8>>, protobuf: Option<&'static Message>, decode: DecodeAhead) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let Some(shared) = self.slot.upgrade() else { return };
        let mut slot = lock(&shared);
        if slot.generation != self.generation {
            return;
        }
        let start = Start { id: RequestId::of(&request, protobuf), client: client.clone(), request, protobuf, decode };
        if slot.ahead.is_some() {
            slot.pending = Some(start);
        } else {
            start.launch(&mut slot, &runtime);
        }
    }

    /// Takes back the bytes of a decoded page: kept for a later page's body when `more`
    /// pages follow and nothing else holds them; when none follow, every spare buffer is
    /// dropped.
    pub(crate) fn done_with(&self, bytes: Bytes, more: bool) {
        let Some(shared) = self.slot.upgrade() else { return };
        let mut slot = lock(&shared);
        if slot.generation != self.generation {
            return;
        }
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

    /// A client whose every response is `body` cut into `chunk`-byte frames, with a
    /// `Content-Length` header of `length` when given; `fail_after` frames, the body breaks.
    fn chunked_server(body: &'static [u8], chunk: usize, length: Option<usize>, fail_after: Option<usize>) -> Client {
        let service = tower::service_fn(move |_req: http::Request<Body>| async move {
            let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> =
                body.chunks(chunk).map(|c| Ok(Frame::data(Bytes::from_static(c)))).collect();
            if let Some(n) = fail_after {
                frames.truncate(n);
                frames.push(Err(std::io::Error::other("connection reset")));
            }
            let mut response = http::Response::builder().status(200);
            if let Some(n) = length {
                response = response.header(http::header::CONTENT_LENGTH, n.to_string());
            }
            Ok::<_, Infallible>(response.body(StreamBody::new(futures::stream::iter(frames))).unwrap())
        });
        Client::new(service, "default")
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
                let response = fetch(client, get(), None, b"left over".to_vec()).await.unwrap();
                assert_eq!(&response.bytes[..], BODY, "chunks of {chunk}, length {length:?}");
                assert!(response.protobuf.is_none());
            }
        }
    }

    fn page(token: &str) -> http::Request<Vec<u8>> {
        http::Request::get(format!("/api/v1/configmaps?limit=2&continue={token}")).body(Vec::new()).unwrap()
    }

    fn spares(slot: &PrefetchSlot) -> usize {
        lock(&slot.0).spare.len()
    }

    /// A decode ahead that keeps the page's bytes as they are.
    fn keep_bytes() -> DecodeAhead {
        Box::new(|response: ListResponse| Box::new(response.bytes) as AheadPage)
    }

    fn bytes_of(sent: Sent) -> Bytes {
        match sent {
            Sent::Fetched(response) => response.bytes,
            Sent::DecodedAhead(page) => *page.downcast::<Bytes>().expect("bytes kept"),
        }
    }

    fn ahead_uri(slot: &PrefetchSlot) -> Option<String> {
        lock(&slot.0).ahead.as_ref().map(|ahead| ahead.id.uri.clone())
    }

    #[tokio::test]
    async fn pages_of_one_list_alternate_between_two_buffers_and_the_last_page_drops_them() {
        let client = chunked_server(BODY, 17, Some(BODY.len()), None);
        let slot = PrefetchSlot::default();
        // As a list goes: the next page is started while this one decodes, then this one's
        // bytes are handed back.
        let first = bytes_of(slot.send(&client, page(""), None).await.unwrap());
        let starter = slot.starter();
        starter.start(&client, page("p2"), None, keep_bytes());
        let first_buffer = first.as_ptr();
        starter.done_with(first, true);
        assert_eq!(spares(&slot), 1);
        let second = bytes_of(slot.send(&client, page("p2"), None).await.unwrap());
        assert_ne!(second.as_ptr(), first_buffer, "the second page was read while the first decoded");
        starter.start(&client, page("p3"), None, keep_bytes());
        assert_eq!(spares(&slot), 0, "the fetch ahead took the spare buffer");
        starter.done_with(second, true);
        let third = bytes_of(slot.send(&client, page("p3"), None).await.unwrap());
        assert_eq!(&third[..], BODY);
        assert_eq!(third.as_ptr(), first_buffer, "the third page is read into the first page's buffer");
        starter.done_with(third, false);
        assert_eq!(spares(&slot), 0, "the last page drops every spare buffer");

        // Bytes something else still holds are not reused.
        let held = bytes_of(slot.send(&client, page(""), None).await.unwrap());
        let starter = slot.starter();
        let clone = held.clone();
        starter.done_with(held, true);
        assert_eq!(spares(&slot), 0);
        drop(clone);
        // At most two are kept; a request other than the page fetched ahead drops them.
        for _ in 0..3 {
            let r = bytes_of(slot.send(&client, page("x"), None).await.unwrap());
            slot.starter().done_with(r, true);
        }
        assert_eq!(spares(&slot), 1, "each send that is not the page fetched ahead starts without spares");
        let starter = slot.starter();
        let (a, b, c) = (
            fetch(client.clone(), get(), None, Vec::new()).await.unwrap(),
            fetch(client.clone(), get(), None, Vec::new()).await.unwrap(),
            fetch(client.clone(), get(), None, Vec::new()).await.unwrap(),
        );
        for r in [a, b, c] {
            starter.done_with(r.bytes, true);
        }
        assert_eq!(spares(&slot), MAX_SPARE_BUFFERS);
        slot.send(&client, page("y"), None).await.unwrap();
        assert_eq!(spares(&slot), 0);
    }

    #[tokio::test]
    async fn a_page_asked_for_by_a_page_still_ahead_starts_when_that_one_is_taken() {
        let client = chunked_server(BODY, 17, Some(BODY.len()), None);
        let slot = PrefetchSlot::default();
        slot.send(&client, page(""), None).await.unwrap();
        let starter = slot.starter();
        starter.start(&client, page("p2"), None, keep_bytes());
        // What p2's decode asks for while p2 is still in the slot.
        starter.start(&client, page("p3"), None, keep_bytes());
        assert!(ahead_uri(&slot).unwrap().ends_with("continue=p2"));
        assert!(lock(&slot.0).pending.is_some());
        assert_eq!(&bytes_of(slot.send(&client, page("p2"), None).await.unwrap())[..], BODY);
        assert!(ahead_uri(&slot).unwrap().ends_with("continue=p3"), "taking p2 started p3");
        assert!(lock(&slot.0).pending.is_none());
        assert!(matches!(slot.send(&client, page("p3"), None).await.unwrap(), Sent::DecodedAhead(_)));

        // A request for another page forgets what waits, and a starter of the list before
        // it starts nothing more.
        starter.start(&client, page("p4"), None, keep_bytes());
        starter.start(&client, page("p5"), None, keep_bytes());
        assert!(matches!(slot.send(&client, page(""), None).await.unwrap(), Sent::Fetched(_)));
        assert!(ahead_uri(&slot).is_none() && lock(&slot.0).pending.is_none());
        starter.start(&client, page("p2"), None, keep_bytes());
        assert!(ahead_uri(&slot).is_none(), "a starter of a list that is over starts nothing");
        slot.starter().start(&client, page("p2"), None, keep_bytes());
        assert!(ahead_uri(&slot).is_some());
    }

    #[tokio::test]
    async fn a_page_decoding_ahead_does_not_keep_its_slot_alive() {
        let client = chunked_server(BODY, 17, Some(BODY.len()), None);
        let slot = PrefetchSlot::default();
        let starter = slot.starter();
        // As a page's decode does: the decode ahead holds a starter of the same slot.
        let held = starter.clone();
        starter.start(&client, page("p2"), None, Box::new(move |response: ListResponse| Box::new((held, response.bytes)) as AheadPage));
        assert!(ahead_uri(&slot).is_some());
        drop(slot);
        assert!(starter.slot.upgrade().is_none(), "the slot, and with it the fetch ahead, is gone");
    }

    #[tokio::test]
    async fn a_body_that_breaks_is_an_error_not_a_short_page() {
        for fail_after in [0, 1, 3] {
            let client = chunked_server(BODY, 17, None, Some(fail_after));
            assert!(fetch(client, get(), None, Vec::new()).await.is_err(), "broken after {fail_after} chunks");
        }
    }
}
