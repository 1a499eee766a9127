//! Watch responses as event streams: [`watch_events`] sends a watch request through a kube
//! `Client` and decodes the newline-delimited events of its body.
//!
//! Why not kube's `Client::request_events`: hyper hands a response body over one chunk per
//! poll (4 KB chunks on an HTTP/1.1 watch stream, as the API server writes them), and each
//! chunk taken by a consumer that then decodes it wakes hyper's connection task and is woken
//! back by it. tokio stops favouring such a ping-pong pair after a few rounds and wakes an
//! idle worker for each turn: ≈20k thread wake-ups for a WatchList of 100k ConfigMaps. Here
//! the body is read ahead by a small task (the pump, [`crate::read_ahead`]), so the
//! consumer only waits when it has decoded everything received. Through
//! [`crate::informer_client`] the pump also drives the watch's connection itself (see
//! `watch_connection`), so a chunk takes no round between tasks at all.
//!
//! Invariants:
//! - At most [`read_ahead::CHUNKS_AHEAD`] chunks and a window of [`read_ahead::BYTES_AHEAD`]
//!   (or one larger chunk) are queued between the pump and the stream.
//! - The pump ends when the stream is dropped (no connection is kept open for nobody), when
//!   the body ends and after the first body error (which the stream yields, then ends).
//! - A protobuf response (asked for with [`accept_protobuf`], and sent with the protobuf
//!   content type) is read as length-prefixed frames, one event each, decoded with the
//!   kind's table. Otherwise one non-blank line is one event (read as a stream of JSON
//!   values: an event spread over several lines, which no API server sends, decodes when
//!   those lines come in one chunk).
//! - Chunks are not cut into events on the async worker: each is only scanned for where
//!   its first and last events end (its first and last newlines; for protobuf, the frame
//!   lengths), and the chunks up to there are gathered as they are (shared, not copied).
//!   Events that lie within one chunk are decoded where they lie; only an event cut across
//!   chunks is copied, into a buffer of its own, on the thread that decodes its batch. The
//!   JSON lines of one chunk are checked as UTF-8 at once and read by one serde_json
//!   stream deserializer (its buffer for strings with escapes reused); a line that does
//!   not decode is an error in its place and the next line decodes as if it were alone;
//!   in a chunk that is not all UTF-8, each line is decoded alone.
//! - The whole events received so far (up to a window of [`BATCH_BYTES`] ahead of the
//!   batches not yet yielded) make one batch. A batch of at least `MIN_BYTES_PER_THREAD`
//!   bytes is decoded on one of the runtime's decoding threads (`decode_pool`), so the
//!   async worker stays free for the connection and the pump while it decodes; at most
//!   `decode_threads()` batches decode at once, and the next one gathers meanwhile, also
//!   while the events of an earlier batch are being yielded. Fewer bytes wait for a free
//!   thread while another batch is on its way, and are decoded in place when none is and
//!   nothing is left to yield (a watch's single events, without a thread hand-over). Batches are yielded in wire
//!   order; the stream waits for the pump only when it has nothing decoded to yield and no
//!   batch decoding.
//! - A batch's events are decoded into the largest emptied vector of a batch yielded before
//!   it when that has room for them, else into a new one, allocated once at twice the
//!   capacity of the vector it replaces or at their count, whichever is more: a watch
//!   streaming events soon allocates no vector per batch (a large allocation, which in
//!   glibc's malloc also merges all small freed chunks first). At most
//!   `decode_threads()` emptied vectors are kept (as many batches decode at once), and
//!   none while the stream waits for the pump with nothing to yield.
//! - A panic while decoding a batch is raised again where the stream is polled.
//! - A line that is not an event but a `Status` yields [`Error::Api`]; any other line that
//!   does not decode yields [`Error::Decode`]. An unterminated last line that is cut short
//!   is dropped, as kube does: the reflector watches again from its last resourceVersion.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use kube_client::Client;
use kube_client::client::Body;
use kube_core::{Status, WatchEvent};
use serde::de::DeserializeOwned;

use crate::error::{ApiStatus, Error};
use crate::lister_watcher::WatchStream;
use crate::decode_pool::{Decoding, on_decode_thread};
use crate::exact_json::{Scanned, VecSizing, with_scanned};
use crate::parallel::{MIN_BYTES_PER_THREAD, decode_threads};
use crate::proto::{self, Message};
use crate::read_ahead::{self, ChunkReceiver};
use crate::window::{WIRE_SHARE, Window};

/// Bytes of events gathered ahead of the batches past which no more chunks are taken until
/// a batch starts: from 16 KiB up to 1 MiB, a `WIRE_SHARE`th of what the body has
/// delivered. Below `MIN_BYTES_PER_THREAD` (over a body's first 4 MiB, unless one chunk
/// brings more) a batch is decoded where the stream is polled, once the one before it is
/// yielded: a short list is held beside the cache as at most 16 KiB of gathered events and
/// one decoded batch, and the read ahead.
const BATCH_BYTES: Window = Window { floor: MIN_BYTES_PER_THREAD / 2, ceiling: 1 << 20, share: WIRE_SHARE };

/// Asks for protobuf first and JSON second (what a server that has no protobuf for the
/// kind sends instead).
pub(crate) fn accept_protobuf<B>(request: &mut http::Request<B>) {
    static ACCEPT_BOTH: HeaderValue = HeaderValue::from_static("application/vnd.kubernetes.protobuf, application/json");
    request.headers_mut().insert(ACCEPT, ACCEPT_BOTH.clone());
}

/// Whether a response is Kubernetes protobuf (a watch's content type has `;stream=watch`).
pub(crate) fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with(proto::CONTENT_TYPE))
}

/// Sends the watch `request` and returns its events; with `protobuf`, asks for protobuf
/// and decodes it with that table when the server sends it.
pub(crate) async fn watch_events<T>(
    client: &Client,
    request: http::Request<Vec<u8>>,
    name: &'static str,
    protobuf: Option<&'static Message>,
    sizing: VecSizing,
) -> Result<WatchStream<T>, Error>
where
    T: DeserializeOwned + Send + 'static,
{
    let mut request = request.map(Body::from);
    if protobuf.is_some() {
        accept_protobuf(&mut request);
    }
    request.extensions_mut().insert(name);
    // kube-client's decompression reads only the first gzip member; watch streams are not
    // compressed for it (as kube's own `request_events` asks).
    request.headers_mut().entry(ACCEPT_ENCODING).or_insert(HeaderValue::from_static("identity"));
    let response = client.send(request).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(api_error(status, response).await);
    }
    let framed = protobuf.filter(|_| is_protobuf(response.headers()));
    let received = read_ahead::read_ahead(response.into_body().into_data_stream().map_err(Error::from));
    Ok(match framed {
        Some(message) => WatchBody::<T, _>::new(received, Frames(message)).boxed(),
        None => WatchBody::<T, _>::new(received, Lines(sizing)).boxed(),
    })
}

/// The error a failed response carries: its `Status` (JSON or protobuf), or its code and
/// text.
pub(crate) async fn api_error(code: http::StatusCode, response: http::Response<Body>) -> Error {
    let protobuf = is_protobuf(response.headers());
    let bytes = match response.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Error::from(e),
    };
    let status = if protobuf {
        proto::decode_object::<Status>(&proto::envelope::STATUS, &bytes).ok()
    } else {
        serde_json::from_slice::<Status>(&bytes).ok()
    };
    match status {
        Some(status) => Error::Api(ApiStatus::from(&status)),
        None => Error::Api(ApiStatus {
            code: code.as_u16(),
            reason: code.canonical_reason().unwrap_or_default().to_string(),
            message: String::from_utf8_lossy(&bytes).trim().to_string(),
            causes: Vec::new(),
        }),
    }
}

/// How a watch body is cut into events, and how they are decoded.
trait Framing: Unpin + Copy + Send + 'static {
    /// What is known, between chunks, of the event being read.
    type Cursor: Default + Unpin + Send;
    /// Reads `chunk`, which follows the bytes `cursor` has read, and returns where the first
    /// and the last events that end in it end; `None` when none does.
    fn scan(cursor: &mut Self::Cursor, chunk: &[u8]) -> Option<(usize, usize)>;
    /// At least as many as the events encoded in `events` (whole events, back to back),
    /// counted without decoding them.
    fn count(events: &[u8]) -> usize;
    /// Appends to `out` the events encoded in `events` (whole events, back to back), in
    /// order (a blank line is none), decoded on the calling thread.
    fn decode<T: DeserializeOwned>(&self, events: &[u8], out: &mut Decoded<T>);
    /// The event the bytes left at the body's end hold, if they are not one cut short.
    fn last<T: DeserializeOwned>(&self, rest: &[u8]) -> Option<Result<WatchEvent<T>, Error>>;
}

/// Newline-delimited JSON events, their objects' `Vec`s sized as it says.
#[derive(Clone, Copy)]
struct Lines(VecSizing);

impl Framing for Lines {
    type Cursor = ();

    fn scan(_: &mut (), chunk: &[u8]) -> Option<(usize, usize)> {
        let last = memchr::memrchr(b'\n', chunk)?;
        Some((memchr::memchr(b'\n', chunk).unwrap_or(last) + 1, last + 1))
    }

    /// The newlines, and one for a last line without its own.
    fn count(lines: &[u8]) -> usize {
        memchr::memchr_iter(b'\n', lines).count() + usize::from(lines.last().is_some_and(|&b| b != b'\n'))
    }

    /// The lines are checked as UTF-8 at once and read by one deserializer; when they are
    /// not all UTF-8, each is decoded alone, so that only a line with bad bytes fails.
    fn decode<T: DeserializeOwned>(&self, lines: &[u8], events: &mut Decoded<T>) {
        match std::str::from_utf8(lines) {
            Ok(text) => decode_lines(text, self.0, events),
            Err(_) => events.extend(
                lines.split(|&b| b == b'\n').filter_map(|line| decode(line, self.0).map(|r| r.map_err(|e| line_error(e, line)))),
            ),
        }
    }

    fn last<T: DeserializeOwned>(&self, rest: &[u8]) -> Option<Result<WatchEvent<T>, Error>> {
        match decode::<T>(rest, self.0) {
            Some(Err(e)) if e.is_eof() => None,
            other => other.map(|r| r.map_err(|e| line_error(e, rest))),
        }
    }
}

/// Length-prefixed protobuf frames whose objects are `.0` messages.
#[derive(Clone, Copy)]
struct Frames(&'static Message);

/// Where a protobuf body stands between chunks: inside a frame's body (`body_left` bytes of
/// it still to come), or, when `body_left` is 0, inside the 4-byte length of the next frame
/// (`length_read` of its bytes read, in `length`).
#[derive(Default)]
struct FrameCursor {
    length: [u8; 4],
    length_read: usize,
    body_left: usize,
}

impl Framing for Frames {
    type Cursor = FrameCursor;

    fn scan(cursor: &mut FrameCursor, chunk: &[u8]) -> Option<(usize, usize)> {
        let (mut at, mut first, mut end) = (0, None, None);
        while at < chunk.len() {
            if cursor.body_left > 0 {
                let take = cursor.body_left.min(chunk.len() - at);
                cursor.body_left -= take;
                at += take;
                if cursor.body_left == 0 {
                    first = first.or(Some(at));
                    end = Some(at);
                }
                continue;
            }
            let take = (4 - cursor.length_read).min(chunk.len() - at);
            cursor.length[cursor.length_read..cursor.length_read + take].copy_from_slice(&chunk[at..at + take]);
            cursor.length_read += take;
            at += take;
            if cursor.length_read == 4 {
                cursor.length_read = 0;
                cursor.body_left = u32::from_be_bytes(cursor.length) as usize;
                if cursor.body_left == 0 {
                    first = first.or(Some(at));
                    end = Some(at);
                }
            }
        }
        first.zip(end)
    }

    fn count(frames: &[u8]) -> usize {
        whole_frames(frames).count()
    }

    fn decode<T: DeserializeOwned>(&self, frames: &[u8], events: &mut Decoded<T>) {
        events.extend(whole_frames(frames).map(|frame| proto::decode_watch_event(self.0, frame).map_err(|e| Error::Decode(e.to_string()))));
    }

    /// Whole frames are all taken before: what is left is one cut short, dropped as a
    /// cut-off line is.
    fn last<T: DeserializeOwned>(&self, _: &[u8]) -> Option<Result<WatchEvent<T>, Error>> {
        None
    }
}

/// The bodies of the whole frames at the start of `bytes`, in order (a frame cut short at
/// the end is left out).
fn whole_frames(mut bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (frame, used) = proto::envelope::split_frame(bytes)?;
        bytes = &bytes[used..];
        Some(frame)
    })
}

/// Decoded events, in wire order; the body's error, if any, last.
type Decoded<T> = Vec<Result<WatchEvent<T>, Error>>;

/// Whole events, back to back, as gathered from the chunks that brought them.
enum Piece {
    /// Events that lie within one chunk.
    Within(Bytes),
    /// One event cut across chunks: its parts, in order.
    Across(Vec<Bytes>),
}

/// The events in `pieces`, in order: decoded where they lie, but for each one cut across
/// chunks, which is copied into a buffer of its own first. They go into `spare` (empty) when
/// it has room for them all, else into a vector allocated once, at twice `spare`'s capacity
/// or at their count, whichever is more (so that vectors passed from batch to batch soon
/// have room for any).
fn decode_pieces<T: DeserializeOwned, F: Framing>(framing: F, pieces: &[Piece], spare: Decoded<T>) -> Decoded<T> {
    debug_assert!(spare.is_empty());
    let count: usize = pieces.iter().map(|piece| match piece {
        Piece::Within(events_here) => F::count(events_here),
        Piece::Across(_) => 1,
    }).sum();
    // A fresh vector rather than a grown one: growing would copy the spare's whole buffer.
    let mut events = if spare.capacity() >= count { spare } else { Vec::with_capacity(count.max(2 * spare.capacity())) };
    for piece in pieces {
        match piece {
            Piece::Within(events_here) => framing.decode(events_here, &mut events),
            Piece::Across(parts) => framing.decode(&parts.concat(), &mut events),
        }
    }
    events
}

/// A batch of events, in wire order among the others.
enum Batch<T> {
    /// Decoding on a decoding thread.
    Decoding(Decoding<Decoded<T>>),
    /// Decoded here, or the body's error or end in its place.
    Done(Decoded<T>),
}

/// The events of a watch body, from its queued chunks. The chunks holding whole events are
/// gathered into batches; a batch of many bytes is decoded on a decoding thread (up to
/// [`decode_threads`] of them at once) while the next one gathers, a small one right here
/// when no other batch is on its way; batches are yielded in wire order. It waits for a
/// chunk only when it has nothing decoded to yield and no batch decoding.
struct WatchBody<T, F: Framing> {
    received: ChunkReceiver,
    framing: F,
    /// Where the bytes received so far end, between or inside events.
    cursor: F::Cursor,
    /// Whole events not yet in a batch, in wire order, and their bytes.
    gathered: Vec<Piece>,
    gathered_bytes: usize,
    /// Bytes taken from `received` so far.
    received_bytes: usize,
    /// What follows the last whole event: the start of one not yet received whole.
    tail: Vec<Bytes>,
    /// Batches not yet yielded, in wire order.
    batches: VecDeque<Batch<T>>,
    /// The batch being yielded, its events taken from the front.
    decoded: VecDeque<Result<WatchEvent<T>, Error>>,
    /// Emptied vectors of batches yielded, for the next batches to decode into, smallest
    /// first: at most [`decode_threads`], none while the stream waits for the pump with
    /// nothing to yield.
    spares: Vec<Decoded<T>>,
    /// Nothing more comes from `received`.
    ended: bool,
}

// Nothing in it is pinned: events are moved out of `decoded` as they are yielded, and a
// `JoinHandle` is `Unpin`.
impl<T, F: Framing> Unpin for WatchBody<T, F> {}

impl<T, F: Framing> WatchBody<T, F> {
    fn new(received: ChunkReceiver, framing: F) -> Self {
        WatchBody {
            received,
            framing,
            cursor: F::Cursor::default(),
            gathered: Vec::new(),
            gathered_bytes: 0,
            received_bytes: 0,
            tail: Vec::new(),
            batches: VecDeque::new(),
            decoded: VecDeque::new(),
            spares: Vec::new(),
            ended: false,
        }
    }

    /// Takes `chunk`: up to the end of the last event that ends in it to `gathered` (the
    /// event the tail before it starts, up to the first end, as one cut across chunks), the
    /// rest to `tail`. Nothing is copied.
    fn take(&mut self, mut chunk: Bytes) {
        self.received_bytes += chunk.len();
        match F::scan(&mut self.cursor, &chunk) {
            Some((first, last)) => {
                let rest = chunk.split_off(last);
                self.gathered_bytes += self.tail.iter().map(Bytes::len).sum::<usize>() + chunk.len();
                if !self.tail.is_empty() {
                    self.tail.push(chunk.split_to(first));
                    self.gathered.push(Piece::Across(std::mem::take(&mut self.tail)));
                }
                if !chunk.is_empty() {
                    self.gathered.push(Piece::Within(chunk));
                }
                if !rest.is_empty() {
                    self.tail.push(rest);
                }
            }
            None => self.tail.push(chunk),
        }
    }

    /// Keeps `emptied` for a later batch, in place of the smallest spare when
    /// [`decode_threads`] are kept already (or drops it when it is that smallest).
    fn keep_spare(&mut self, emptied: Decoded<T>) {
        let at = self.spares.partition_point(|spare| spare.capacity() < emptied.capacity());
        self.spares.insert(at, emptied);
        if self.spares.len() > decode_threads() {
            self.spares.remove(0);
        }
    }

    /// Batches on decoding threads.
    fn decoding(&self) -> usize {
        self.batches.iter().filter(|b| matches!(b, Batch::Decoding(_))).count()
    }
}

impl<T: DeserializeOwned + Send + 'static, F: Framing> WatchBody<T, F> {
    /// Makes the gathered events a batch: decoded on a decoding thread when they are many
    /// bytes, here otherwise.
    fn start_batch(&mut self) {
        if self.gathered.is_empty() {
            return;
        }
        let pieces = std::mem::take(&mut self.gathered);
        let offload = std::mem::take(&mut self.gathered_bytes) >= MIN_BYTES_PER_THREAD;
        let framing = self.framing;
        let events = self.spares.pop().unwrap_or_default();
        self.batches.push_back(if offload {
            Batch::Decoding(on_decode_thread(move || decode_pieces::<T, F>(framing, &pieces, events)))
        } else {
            Batch::Done(decode_pieces::<T, F>(framing, &pieces, events))
        });
    }
}

impl<T: DeserializeOwned + Send + 'static, F: Framing> Stream for WatchBody<T, F> {
    type Item = Result<WatchEvent<T>, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            // Also while a batch is being yielded: take the chunks queued so far (at most
            // a window of [`BATCH_BYTES`] of events ahead of the batches), and start a batch
            // whenever a decoding thread is free for one, so that the pump keeps reading and
            // the threads keep decoding while the events are consumed.
            while !this.ended && this.gathered_bytes < BATCH_BYTES.limit(this.received_bytes) {
                match this.received.poll_recv(cx) {
                    Poll::Pending => break,
                    Poll::Ready(Some(Ok(chunk))) => this.take(chunk),
                    Poll::Ready(Some(Err(e))) => {
                        this.start_batch();
                        this.batches.push_back(Batch::Done(vec![Err(e)]));
                        this.ended = true;
                    }
                    Poll::Ready(None) => {
                        this.start_batch();
                        let rest = std::mem::take(&mut this.tail).concat();
                        this.batches.push_back(Batch::Done(this.framing.last::<T>(&rest).into_iter().collect()));
                        this.ended = true;
                    }
                }
            }
            if this.gathered_bytes >= MIN_BYTES_PER_THREAD && this.decoding() < decode_threads() {
                this.start_batch();
            }
            if let Some(event) = this.decoded.pop_front() {
                return Poll::Ready(Some(event));
            }
            if this.decoded.capacity() > 0 {
                let emptied = Vec::from(std::mem::take(&mut this.decoded));
                this.keep_spare(emptied);
            }
            // Nothing left to yield: fewer bytes start too when no other batch is on its way
            // (a watch's single events, decoded here at once).
            if this.batches.is_empty() {
                this.start_batch();
            }
            match this.batches.front_mut() {
                None if this.ended => return Poll::Ready(None),
                // Nothing gathered (a batch would have started): `received` is polled.
                // (`decoded`, emptied, went to the spares above.)
                None => {
                    this.spares = Vec::new();
                    return Poll::Pending;
                }
                Some(Batch::Done(events)) => this.decoded = std::mem::take(events).into(),
                Some(Batch::Decoding(decoding)) => {
                    this.decoded = match ready!(Pin::new(decoding).poll(cx)) {
                        Ok(events) => events.into(),
                        Err(e) => VecDeque::from([Err(e)]),
                    };
                }
            }
            this.batches.pop_front();
        }
    }
}

/// Appends the events of `lines` (whole lines) to `events`: one stream deserializer over
/// all of them, so that its buffer for strings with escapes is reused from event to event
/// and strings are not checked as UTF-8 one by one; after a line that does not decode
/// (whose error takes its place) it starts again on the next line.
/// Objects' `Vec`s are sized as `sizing` says (`crate::exact_json`).
fn decode_lines<T: DeserializeOwned>(lines: &str, sizing: VecSizing, events: &mut Vec<Result<WatchEvent<T>, Error>>) {
    let mut at = 0;
    while at < lines.len() {
        let text = &lines[at..];
        // Where to start again after a bad line; `None` once all of `text` is read.
        let again = with_scanned(text.as_bytes(), sizing, || {
            let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Scanned<WatchEvent<T>>>();
            loop {
                match stream.next() {
                    None => return None,
                    Some(Ok(Scanned(event))) => events.push(Ok(event)),
                    Some(Err(e)) => {
                        // The bad line starts after the last event decoded.
                        let from = at + stream.byte_offset();
                        let start = from + lines[from..].bytes().take_while(u8::is_ascii_whitespace).count();
                        let end = memchr::memchr(b'\n', &lines.as_bytes()[start..]).map_or(lines.len(), |i| start + i);
                        events.push(Err(line_error(e, &lines.as_bytes()[start..end])));
                        return Some(end + 1);
                    }
                }
            }
        });
        match again {
            Some(next) => at = next,
            None => return,
        }
    }
}

/// The event on `line` (its object's `Vec`s sized as `sizing` says); `None` for a blank line.
fn decode<T: DeserializeOwned>(line: &[u8], sizing: VecSizing) -> Option<Result<WatchEvent<T>, serde_json::Error>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(with_scanned(line, sizing, || serde_json::from_slice::<Scanned<WatchEvent<T>>>(line)).map(|event| event.0))
}

/// The error for a line that is not an event: the `Status` it holds, if it is one.
fn line_error(e: serde_json::Error, line: &[u8]) -> Error {
    match serde_json::from_slice::<Status>(line) {
        Ok(status) => Error::Api(ApiStatus::from(&status)),
        Err(_) => Error::Decode(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    const A: &str = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"1"}}}"#;
    const B: &str = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","resourceVersion":"2"}}}"#;
    const GONE: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}"#;

    /// The stream's items for `chunks` followed by `end` (a body error, or the body's end).
    async fn events(chunks: &[&str], end: Option<Error>) -> Vec<Result<WatchEvent<ConfigMap>, Error>> {
        let (mut tx, rx) = read_ahead::queue(chunks.len() + 1, Window::fixed(1 << 30));
        for c in chunks {
            tx.send(Ok(Bytes::copy_from_slice(c.as_bytes()))).await.unwrap();
        }
        if let Some(e) = end {
            tx.send(Err(e)).await.unwrap();
        }
        drop(tx);
        WatchBody::<ConfigMap, _>::new(rx, Lines(VecSizing::Exact)).collect().await
    }

    fn name(e: &Result<WatchEvent<ConfigMap>, Error>) -> String {
        match e {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => o.metadata.name.clone().unwrap(),
            other => panic!("not an object event: {other:?}"),
        }
    }

    #[tokio::test]
    async fn lines_split_anywhere_across_chunks_decode_to_the_same_events() {
        // Three events: a middle chunk may hold the end of one, a whole one and the start
        // of the next.
        let text = format!("{A}\n\n{B}\n{A}\n");
        for cut in 0..=text.len() {
            for cut2 in cut..=text.len() {
                let got = events(&[&text[..cut], &text[cut..cut2], &text[cut2..]], None).await;
                let names: Vec<String> = got.iter().map(name).collect();
                assert_eq!(names, ["a", "b", "a"], "chunks cut at {cut} and {cut2}");
            }
        }
    }

    #[tokio::test]
    async fn a_status_line_is_an_api_error_and_garbage_a_decode_error() {
        let got = events(&[&format!("{GONE}\n{{\"type\":\n")], None).await;
        assert_eq!(got.len(), 2);
        assert!(matches!(&got[0], Err(e) if e.is_expired()), "{:?}", got[0]);
        assert!(matches!(&got[1], Err(Error::Decode(_))), "{:?}", got[1]);
    }

    #[tokio::test]
    async fn bad_lines_among_good_ones_in_one_batch_are_errors_in_their_places() {
        let got = events(&[&format!("{A}\n{GONE}\n{{\"type\":\n  \n{{]\n{B}\n")], None).await;
        assert_eq!(got.len(), 5, "{got:?}");
        assert_eq!(name(&got[0]), "a");
        assert!(matches!(&got[1], Err(e) if e.is_expired()), "{:?}", got[1]);
        assert!(matches!(&got[2], Err(Error::Decode(_))), "{:?}", got[2]);
        assert!(matches!(&got[3], Err(Error::Decode(_))), "{:?}", got[3]);
        assert_eq!(name(&got[4]), "b");
        // Bytes that are not UTF-8 fail their line only, also among good lines in one chunk.
        let lines = [Piece::Within(Bytes::from([format!("{A}\n").as_bytes(), b"{\"type\":\xff}\n", format!("{B}\n").as_bytes()].concat()))];
        let got: Vec<_> = decode_pieces::<ConfigMap, _>(Lines(VecSizing::Exact), &lines, Vec::new());
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((name(&got[0]), name(&got[2])), ("a".to_string(), "b".to_string()));
        assert!(matches!(&got[1], Err(Error::Decode(_))), "{:?}", got[1]);
    }

    #[test]
    fn lines_are_counted_with_a_last_one_without_its_newline() {
        assert_eq!((Lines::count(b""), Lines::count(b"\n"), Lines::count(b"a\nb\n"), Lines::count(b"a\nb")), (0, 1, 2, 2));
        let pieces = [Piece::Within(Bytes::from(format!("{A}\n{B}\n"))), Piece::Across(vec![Bytes::from(format!("{A}\n"))])];
        let got = decode_pieces::<ConfigMap, _>(Lines(VecSizing::Exact), &pieces, Vec::new());
        assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a", "b", "a"]);
        assert_eq!(got.capacity(), got.len(), "one allocation at the count");
    }

    #[test]
    fn a_spare_vector_is_decoded_into_when_it_has_room_and_replaced_when_not() {
        let pieces = [Piece::Within(Bytes::from(format!("{A}\n{B}\n")))];
        let spare = Vec::with_capacity(5);
        let at = spare.as_ptr();
        let got = decode_pieces::<ConfigMap, _>(Lines(VecSizing::Exact), &pieces, spare);
        assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!((got.as_ptr(), got.capacity()), (at, 5), "decoded into the spare");
        let got = decode_pieces::<ConfigMap, _>(Lines(VecSizing::Exact), &pieces, Vec::with_capacity(1));
        assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(got.capacity(), 2, "a fresh vector at the count");
        let three = [Piece::Within(Bytes::from(format!("{A}\n{B}\n{A}\n")))];
        let got = decode_pieces::<ConfigMap, _>(Lines(VecSizing::Exact), &three, Vec::with_capacity(2));
        assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a", "b", "a"]);
        assert_eq!(got.capacity(), 4, "a fresh vector at twice the spare's capacity");
    }

    /// Polls `body` once, without waiting.
    fn poll_once(body: &mut WatchBody<ConfigMap, Lines>) -> Poll<Option<Result<WatchEvent<ConfigMap>, Error>>> {
        Pin::new(body).poll_next(&mut Context::from_waker(futures::task::noop_waker_ref()))
    }

    #[tokio::test]
    async fn a_yielded_batch_vector_is_decoded_into_by_the_next_and_freed_when_the_stream_waits() {
        let (mut tx, rx) = read_ahead::queue(8, Window::fixed(1 << 30));
        let mut body = WatchBody::<ConfigMap, _>::new(rx, Lines(VecSizing::Exact));
        tx.send(Ok(Bytes::from(format!("{A}\n{B}\n{A}\n")))).await.unwrap();
        assert!(matches!(poll_once(&mut body), Poll::Ready(Some(Ok(_)))));
        assert_eq!(body.decoded.capacity(), 3);
        for _ in 0..2 {
            assert!(matches!(poll_once(&mut body), Poll::Ready(Some(Ok(_)))));
        }
        tx.send(Ok(Bytes::from(format!("{B}\n{A}\n")))).await.unwrap();
        assert_eq!(name(&ready(poll_once(&mut body))), "b");
        // A vector of its own would hold 2 (and could be at the freed one's address).
        assert_eq!(body.decoded.capacity(), 3, "the second batch is in the first one's vector");
        assert_eq!(name(&ready(poll_once(&mut body))), "a");
        assert!(poll_once(&mut body).is_pending());
        assert_eq!((body.decoded.capacity(), body.spares.len()), (0, 0), "nothing kept while waiting");
        tx.send(Ok(Bytes::from(format!("{B}\n")))).await.unwrap();
        assert_eq!(name(&ready(poll_once(&mut body))), "b");
    }

    #[tokio::test]
    async fn the_largest_spares_are_kept_as_many_as_batches_decode_at_once() {
        let (_tx, rx) = read_ahead::queue(1, Window::fixed(1 << 30));
        let mut body = WatchBody::<ConfigMap, _>::new(rx, Lines(VecSizing::Exact));
        let capacities = [30, 10, 40, 10, 50, 90, 20, 60];
        for n in capacities {
            body.keep_spare(Vec::with_capacity(n));
        }
        let mut kept: Vec<usize> = body.spares.iter().map(Vec::capacity).collect();
        kept.sort_unstable();
        let mut sorted = capacities;
        sorted.sort_unstable();
        assert_eq!(kept, sorted[sorted.len() - decode_threads()..], "the largest ones");
        body.start_batch();
        assert_eq!(body.spares.len(), decode_threads(), "nothing gathered: no batch, no spare taken");
        body.gathered.push(Piece::Within(Bytes::from(format!("{A}\n"))));
        body.start_batch();
        let Some(Batch::Done(events)) = body.batches.pop_front() else { panic!("a small batch is decoded in place") };
        assert_eq!(events.capacity(), 90, "the batch took the largest spare");
    }

    fn ready<T>(poll: Poll<Option<T>>) -> T {
        match poll {
            Poll::Ready(Some(item)) => item,
            Poll::Ready(None) => panic!("the stream ended"),
            Poll::Pending => panic!("the stream waits"),
        }
    }

    #[tokio::test]
    async fn an_unterminated_last_line_is_decoded_when_whole_and_dropped_when_cut() {
        let got = events(&[&format!("{A}\n{B}")], None).await;
        assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a", "b"]);
        let got = events(&[&format!("{A}\n{}", &B[..40])], None).await;
        assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a"]);
    }

    #[tokio::test]
    async fn many_events_queued_at_once_come_out_in_wire_order_with_errors_in_place() {
        // 300 events of ≈1 KB in 4 KB chunks: batches of many bytes, decoded on several
        // threads where the machine has the cores.
        let data = "x".repeat(1000);
        let mut text = String::new();
        for i in 0..300 {
            match i {
                150 => text.push_str("{\"type\":\n"),
                151 => text.push_str(GONE),
                _ => text.push_str(&format!(
                    r#"{{"type":"ADDED","object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i}"}},"data":{{"d":"{data}"}}}}}}"#
                )),
            }
            text.push('\n');
        }
        let chunks: Vec<&str> = text.as_bytes().chunks(4096).map(|c| std::str::from_utf8(c).unwrap()).collect();
        let got = events(&chunks, None).await;
        assert_eq!(got.len(), 300);
        for (i, event) in got.iter().enumerate() {
            match i {
                150 => assert!(matches!(event, Err(Error::Decode(_))), "{event:?}"),
                151 => assert!(matches!(event, Err(e) if e.is_expired()), "{event:?}"),
                _ => assert_eq!(name(event), format!("cm-{i}")),
            }
        }
    }

    /// ≈2 MB of events arriving over time in 16 KB chunks: many batches, several decoding on
    /// decoding threads at once while the next gather, some decoded in place. They come out
    /// in wire order, none lost or repeated.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_decoding_at_once_are_yielded_in_wire_order() {
        let data = "y".repeat(900);
        let text: String = (0..2000)
            .map(|i| format!("{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"cm-{i}\"}},\"data\":{{\"d\":\"{data}\"}}}}}}\n"))
            .collect();
        let (mut tx, rx) = read_ahead::queue(read_ahead::CHUNKS_AHEAD, read_ahead::BYTES_AHEAD);
        let sender = tokio::spawn(async move {
            for (n, chunk) in text.as_bytes().chunks(16 << 10).enumerate() {
                tx.send(Ok(Bytes::copy_from_slice(chunk))).await.unwrap();
                if n % 8 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
        let got: Vec<_> = WatchBody::<ConfigMap, _>::new(rx, Lines(VecSizing::Exact)).collect().await;
        sender.await.unwrap();
        let names: Vec<String> = got.iter().map(name).collect();
        let want: Vec<String> = (0..2000).map(|i| format!("cm-{i}")).collect();
        assert_eq!(names, want);
    }

    /// An object whose decoding panics when its name is `boom`.
    #[derive(Debug, Clone)]
    struct Boom;

    impl<'de> serde::Deserialize<'de> for Boom {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let v = serde_json::Value::deserialize(d)?;
            assert_ne!(v["metadata"]["name"], "boom", "decoded boom");
            Ok(Boom)
        }
    }

    #[tokio::test]
    async fn a_panic_decoding_a_batch_on_a_decoding_thread_is_raised_where_the_stream_is_polled() {
        use futures::FutureExt;
        let data = "z".repeat(1000);
        let mut text: String = (0..64)
            .map(|i| format!("{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"cm-{i}\"}},\"data\":{{\"d\":\"{data}\"}}}}}}\n"))
            .collect();
        text.push_str("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"boom\"}}}\n");
        assert!(text.len() >= MIN_BYTES_PER_THREAD, "one batch decoded on a decoding thread");
        let (mut tx, rx) = read_ahead::queue(1, Window::fixed(1 << 30));
        tx.send(Ok(Bytes::from(text))).await.unwrap();
        drop(tx);
        let collected = std::panic::AssertUnwindSafe(WatchBody::<Boom, _>::new(rx, Lines(VecSizing::Exact)).collect::<Vec<_>>()).catch_unwind().await;
        let panic = collected.expect_err("the decoding thread's panic reaches the stream's caller");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("decoded boom"), "{message}");
    }

    /// A watch served over a real socket: the pump gives the connection up as soon as the
    /// stream is dropped, while the server still holds the watch open.
    #[tokio::test]
    async fn dropping_the_stream_closes_the_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = conn.read(&mut buf).await.unwrap();
            assert!(buf[..n].starts_with(b"GET /api/v1/configmaps?&watch=true"), "{}", String::from_utf8_lossy(&buf[..n]));
            let line = format!("{A}\n");
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            conn.write_all(format!("{head}{:x}\r\n{line}\r\n", line.len()).as_bytes()).await.unwrap();
            // The watch stays open; the client must be the one to close it.
            tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut buf)).await
        });
        let client = Client::try_from(kube_client::Config::new(url.parse().unwrap())).unwrap();
        let request = kube_core::Request::new("/api/v1/configmaps").watch(&Default::default(), "0").unwrap();
        let mut stream = watch_events::<ConfigMap>(&client, request, "watch", None, VecSizing::Exact).await.unwrap();
        assert_eq!(name(&stream.next().await.unwrap()), "a");
        drop(stream);
        let read = server.await.unwrap().expect("the connection was still open 10 s after the stream was dropped");
        assert_eq!(read.unwrap(), 0, "the client closed the connection");
    }

    mod frames {
        use super::*;
        use crate::proto::{Field, Kind};

        static META: Message = Message {
            name: "ObjectMeta",
            fields: &[Field::new(1, "name", Kind::String, "z"), Field::new(6, "resourceVersion", Kind::String, "z")],
        };
        static CONFIG_MAP: Message = Message { name: "ConfigMap", fields: &[Field::new(1, "metadata", Kind::Message(&META), "")] };

        /// A length-delimited field.
        fn ld(number: u8, bytes: &[u8]) -> Vec<u8> {
            assert!(bytes.len() < 128);
            [vec![number << 3 | 2, bytes.len() as u8], bytes.to_vec()].concat()
        }

        /// One length-prefixed watch frame: a ConfigMap `name` at resourceVersion `rv`.
        fn frame(kind: &str, name: &str, rv: &str) -> Vec<u8> {
            let object = ld(1, &[ld(1, name.as_bytes()), ld(6, rv.as_bytes())].concat());
            let unknown = [ld(1, &[ld(1, b"v1"), ld(2, b"ConfigMap")].concat()), ld(2, &object)].concat();
            let event = [ld(1, kind.as_bytes()), ld(2, &ld(1, &[b"k8s\0".to_vec(), unknown].concat()))].concat();
            [(event.len() as u32).to_be_bytes().to_vec(), event].concat()
        }

        async fn events(chunks: &[&[u8]]) -> Vec<Result<WatchEvent<ConfigMap>, Error>> {
            let (mut tx, rx) = read_ahead::queue(chunks.len() + 1, Window::fixed(1 << 30));
            for c in chunks {
                tx.send(Ok(Bytes::copy_from_slice(c))).await.unwrap();
            }
            drop(tx);
            WatchBody::<ConfigMap, _>::new(rx, Frames(&CONFIG_MAP)).collect().await
        }

        #[tokio::test]
        async fn frames_split_anywhere_across_chunks_decode_to_the_same_events() {
            let body = [frame("ADDED", "a", "1"), frame("MODIFIED", "b", "2"), frame("ADDED", "c", "3")].concat();
            for cut in 0..=body.len() {
                for cut2 in cut..=body.len() {
                    let got = events(&[&body[..cut], &body[cut..cut2], &body[cut2..]]).await;
                    let names: Vec<String> = got.iter().map(name).collect();
                    assert_eq!(names, ["a", "b", "c"], "chunks cut at {cut} and {cut2}");
                }
            }
        }

        #[test]
        fn frames_are_counted_whole_and_a_batch_is_allocated_at_its_count() {
            let a = frame("ADDED", "a", "1");
            let body = [a.clone(), frame("MODIFIED", "b", "2"), frame("ADDED", "c", "3")].concat();
            assert_eq!(Frames::count(&body), 3);
            assert_eq!(Frames::count(&body[..body.len() - 1]), 2, "a frame cut short is not counted");
            assert_eq!(Frames::count(&[]), 0);
            let pieces = [
                Piece::Within(Bytes::from(body.clone())),
                // `a` cut across two chunks, exactly.
                Piece::Across(vec![Bytes::copy_from_slice(&a[..5]), Bytes::copy_from_slice(&a[5..])]),
                Piece::Within(Bytes::from(body)),
            ];
            let got = decode_pieces::<ConfigMap, _>(Frames(&CONFIG_MAP), &pieces, Vec::new());
            assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a", "b", "c", "a", "a", "b", "c"]);
            assert_eq!(got.capacity(), got.len(), "one allocation at the count");
        }

        #[tokio::test]
        async fn a_cut_off_last_frame_is_dropped_and_a_bad_one_is_a_decode_error() {
            let a = frame("ADDED", "a", "1");
            let b = frame("MODIFIED", "b", "2");
            let got = events(&[&[a.clone(), b[..b.len() - 3].to_vec()].concat()]).await;
            assert_eq!(got.iter().map(name).collect::<Vec<_>>(), ["a"]);
            let bad = frame("RENAMED", "c", "3");
            let got = events(&[&[a, bad].concat()]).await;
            assert_eq!(got.len(), 2);
            assert!(matches!(&got[1], Err(Error::Decode(m)) if m.contains("RENAMED")), "{:?}", got[1]);
        }
    }

    #[tokio::test]
    async fn a_body_error_is_yielded_after_the_events_before_it_and_ends_the_stream() {
        let got = events(&[&format!("{A}\n{}", &B[..40])], Some(Error::Transport("connection reset".into()))).await;
        assert_eq!(got.len(), 2);
        assert_eq!(name(&got[0]), "a");
        assert!(matches!(&got[1], Err(Error::Transport(m)) if m == "connection reset"));
    }
}
