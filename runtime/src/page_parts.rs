//! A list page decoded on a task of its own while its body arrives, handed over at its head
//! (resourceVersion and continue token) and then in parts, as its pieces decode: what the
//! JSON and the protobuf page decoders share.
//!
//! Invariants:
//! - The head is handed over once, before any part; an error before the head fails the
//!   page, one after it ends the parts. A task that ends without either has decoded every
//!   item, unless it panicked: the panic is raised where the page or its parts are awaited.
//! - At most [`PARTS_WAITING`] parts wait to be taken; the decode waits while they do.
//! - The task is cancelled when the page's future or its parts are dropped.
//! - Pieces decode on tokio's blocking pool, at most [`PieceBounds::pieces_in_flight`] at
//!   once, and come back in the order they were started.
//! - A piece's bytes and the pieces in flight are windows of the bytes the page's list has
//!   delivered so far ([`ListBytes`], over all its pages): a short list's decode holds a
//!   small share of what it caches, and a long one reaches the full bounds after its first
//!   2 MiB.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use futures::future::Either;
use futures::stream::BoxStream;

use crate::error::Error;
use crate::lister_watcher::{ListPage, PageInParts};
use crate::parallel::{decode_threads, decoded_off_worker, joined};
use crate::window::{SHARE, Window};

/// Chunks of a list response's body, in order; an `Err` ends the body.
pub(crate) type Chunks = BoxStream<'static, Result<Bytes, Error>>;

/// Bytes of items a piece holds before it is cut (at the end of the item those bytes end
/// in), a window of the bytes the list has delivered. The ceiling is enough that a blocking
/// task's start is small beside its decode, few beside a page (500 Pods of ≈8 KB): with the
/// pieces in flight they are what a page's decode holds, and 64 KB held 1,000 Pods' relist
/// to 1.22 × the steady heap (128 KB: 1.33) for 2–6% more sync time (32 KB: 1.18, for 12%
/// more). The floor keeps a short list of small objects from holding a large share of its
/// cache in pieces: at 64 KB, a relist of 1,000 ConfigMaps' metadata (≈0.9 MB cached)
/// peaked at about twice the steady heap.
pub(crate) const PIECE_BYTES: Window = Window { floor: 8 << 10, ceiling: 64 << 10, share: SHARE };

/// Most pieces being decoded at once while pieces are below [`PIECE_BYTES`]' ceiling: one
/// per decode thread and one cut ahead.
fn min_pieces_in_flight() -> usize {
    decode_threads() + 1
}

/// Most parts (a piece's items) decoded and waiting to be taken.
const PARTS_WAITING: usize = 2;

/// Most pieces being decoded at once: three per decode thread, so that a thread done with
/// one finds the next waiting instead of waiting for the reader to cut it (with one per
/// thread, 10,000 Pods synced 17% slower than from pages read whole).
pub(crate) fn max_pieces_in_flight() -> usize {
    3 * decode_threads()
}

/// The bytes a list has delivered so far, over all its pages: what the bounds of its pages'
/// decodes grow with. Clones share the count; a new list restarts it.
#[derive(Clone, Default, Debug)]
pub(crate) struct ListBytes(Arc<AtomicUsize>);

impl ListBytes {
    /// Bytes counted since the list started.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Starts counting a new list.
    pub(crate) fn restart(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    /// `chunks`, each counted as it is read.
    pub(crate) fn counted(&self, chunks: Chunks) -> Chunks {
        let count = self.0.clone();
        chunks
            .inspect(move |chunk| {
                if let Ok(chunk) = chunk {
                    count.fetch_add(chunk.len(), Ordering::Relaxed);
                }
            })
            .boxed()
    }
}

/// How large a page's pieces are and how many decode at once, from what its list has
/// delivered (see the module's invariants).
#[derive(Clone, Debug)]
pub(crate) struct PieceBounds {
    piece_window: Window,
    delivered: ListBytes,
}

impl PieceBounds {
    /// The bounds of a page of the list whose bytes `delivered` counts.
    pub(crate) fn of_list(delivered: ListBytes) -> Self {
        PieceBounds { piece_window: PIECE_BYTES, delivered }
    }

    /// Pieces of `piece_bytes` whatever was delivered, [`max_pieces_in_flight`] at once.
    #[cfg(test)]
    pub(crate) fn fixed(piece_bytes: usize) -> Self {
        PieceBounds { piece_window: Window::fixed(piece_bytes), delivered: ListBytes::default() }
    }

    /// Bytes of items the next piece holds before it is cut.
    pub(crate) fn piece_bytes(&self) -> usize {
        self.piece_window.limit(self.delivered.get())
    }

    /// Most pieces being decoded at once: [`max_pieces_in_flight`] once pieces are at their
    /// ceiling, one per decode thread and one more before.
    pub(crate) fn pieces_in_flight(&self) -> usize {
        if self.piece_bytes() >= self.piece_window.ceiling { max_pieces_in_flight() } else { min_pieces_in_flight() }
    }
}

/// A page's resourceVersion and continue token.
type PageHead = (String, Option<String>);

/// Where a page's decode hands over its head, then its items' parts, or the error that
/// ends them. A receiver gone means the page was dropped (and its decode is being
/// cancelled), so what is sent to it is dropped too.
pub(crate) struct PageOut<K> {
    head: Option<tokio::sync::oneshot::Sender<Result<PageHead, Error>>>,
    parts: tokio::sync::mpsc::Sender<Result<Vec<K>, Error>>,
}

impl<K> PageOut<K> {
    /// Hands over the page's head (only the first call counts).
    pub(crate) fn head(&mut self, resource_version: String, continue_token: Option<String>) {
        if let Some(head) = self.head.take() {
            _ = head.send(Ok((resource_version, continue_token)));
        }
    }

    /// Hands `items` over, once fewer than [`PARTS_WAITING`] parts wait.
    pub(crate) async fn part(&self, items: Vec<K>) {
        if !items.is_empty() {
            _ = self.parts.send(Ok(items)).await;
        }
    }

    /// Ends the page: with `result`'s error, if it is one.
    pub(crate) async fn finish(mut self, result: Result<(), Error>) {
        let Err(e) = result else { return };
        match self.head.take() {
            Some(head) => _ = head.send(Err(e)),
            None => _ = self.parts.send(Err(e)).await,
        }
    }
}

/// Runs `read` (which hands the page to the [`PageOut`] it is given, and finishes it) on a
/// task of its own; returns the page once its head is handed over, its parts to come.
pub(crate) async fn read_on_own_task<K, F, Fut>(read: F) -> Result<PageInParts<K>, Error>
where
    K: Send + 'static,
    F: FnOnce(PageOut<K>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (head, head_read) = tokio::sync::oneshot::channel();
    let (parts, parts_decoded) = tokio::sync::mpsc::channel(PARTS_WAITING);
    let task = CancelledOnDrop(tokio::spawn(read(PageOut { head: Some(head), parts })));
    let (resource_version, continue_token) = match head_read.await {
        Ok(head) => head?,
        // The task ended without a word: it panicked (raised here).
        Err(_) => {
            joined(task.await, "list page")?;
            return Err(Error::Decode("list page: ended before its head was read".into()));
        }
    };
    let parts = futures::stream::unfold((parts_decoded, Some(task)), |(mut decoded, task)| async move {
        match decoded.recv().await {
            Some(part) => Some((part, (decoded, task))),
            // The task has ended, and sent its error if it had one; unless it panicked.
            None => match joined(task?.await, "list page") {
                Ok(()) => None,
                Err(e) => Some((Err(e), (decoded, None))),
            },
        }
    });
    Ok(PageInParts::streamed(resource_version, continue_token, parts.boxed()))
}

/// A page read whole (`bytes` read so far, then the rest of `chunks`) and decoded by
/// `decode`, on a blocking thread when it is many bytes; its items are one part.
pub(crate) async fn read_whole<K: Send + 'static>(
    mut bytes: Vec<u8>,
    mut chunks: Chunks,
    out: &mut PageOut<K>,
    decode: impl FnOnce(&Bytes) -> Result<ListPage<K>, Error> + Send + 'static,
) -> Result<(), Error> {
    while let Some(chunk) = chunks.next().await {
        bytes.extend_from_slice(&chunk?);
    }
    let bytes = Bytes::from(bytes);
    let page = decoded_off_worker(bytes.len(), "list page", move || decode(&bytes)).await?;
    out.head(page.resource_version, page.continue_token);
    out.part(page.items).await;
    Ok(())
}

/// A task, cancelled when this is dropped.
struct CancelledOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for CancelledOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Future for CancelledOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// Appends a chunk to `pending`, the bytes not yet cut. `pending` grows by what the
/// chunk needs, or by an eighth of what it holds when that is more (so a long item is
/// gathered in linear time), not by doubling: a piece takes the buffer it was cut from
/// ([`InFlight::cut`]), and one grown by doubling would hold up to twice its bytes while
/// it decodes.
pub(crate) fn append_to_pending(pending: &mut Vec<u8>, chunk: &[u8]) {
    if pending.capacity() - pending.len() < chunk.len() {
        pending.reserve_exact(chunk.len().max(pending.len() / 8));
    }
    pending.extend_from_slice(chunk);
}

/// Pieces of a page being decoded on the blocking pool, oldest first, and the buffers of
/// pieces decoded, for the next pieces (so a page's decode allocates its buffers once).
pub(crate) struct InFlight<T> {
    tasks: VecDeque<tokio::task::JoinHandle<T>>,
    spare: Vec<Vec<u8>>,
}

/// What came first: the body's next chunk, its end, or the oldest piece's decode.
pub(crate) enum Arrived<T> {
    Chunk(Bytes),
    End,
    Decoded(T),
}

impl<T: Send + 'static> InFlight<T> {
    pub(crate) fn new() -> Self {
        InFlight { tasks: VecDeque::new(), spare: Vec::new() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// `lead` then `bytes`, in a buffer given back by a decoded piece if one waits, grown to
    /// exactly their size when it is smaller.
    pub(crate) fn buffer(&mut self, lead: &[u8], bytes: &[u8]) -> Vec<u8> {
        let mut buffer = self.spare.pop().unwrap_or_default();
        buffer.clear();
        buffer.reserve_exact(lead.len() + bytes.len());
        buffer.extend_from_slice(lead);
        buffer.extend_from_slice(bytes);
        buffer
    }

    /// Cuts a piece off the front of `pending`: `pending[..end]` then `close`. `pending`
    /// keeps `open` then its bytes from `from` on. The piece takes `pending`'s buffer unless
    /// that is over twice the piece's size (as when pieces are small beside a chunk): then
    /// the piece is copied out, so a piece in flight holds at most about twice its bytes (or
    /// a buffer a piece before it gave back).
    pub(crate) fn cut(&mut self, pending: &mut Vec<u8>, end: usize, close: &[u8], open: &[u8], from: usize) -> Vec<u8> {
        if pending.capacity() > 2 * (end + close.len()) {
            let piece = self.buffer(&pending[..end], close);
            pending.splice(..from, open.iter().copied());
            return piece;
        }
        let rest = self.buffer(open, &pending[from..]);
        let mut piece = std::mem::replace(pending, rest);
        piece.truncate(end);
        piece.extend_from_slice(close);
        piece
    }

    /// Keeps a decoded piece's buffer for a next piece.
    pub(crate) fn give_back(&mut self, buffer: Vec<u8>) {
        self.spare.push(buffer);
    }

    /// While `most` are being decoded, waits for the oldest and returns it, to be dealt with
    /// before another starts; `None` once one more may start.
    pub(crate) async fn oldest_when_full(&mut self, most: usize) -> Option<Result<T, Error>> {
        if self.tasks.len() < most {
            return None;
        }
        self.oldest().await
    }

    /// Starts `decode` on the blocking pool, after the pieces started before it.
    pub(crate) fn start(&mut self, decode: impl FnOnce() -> T + Send + 'static) {
        self.tasks.push_back(tokio::task::spawn_blocking(decode));
    }

    /// Waits for the oldest piece's decode; `None` when none is being decoded.
    pub(crate) async fn oldest(&mut self) -> Option<Result<T, Error>> {
        let task = self.tasks.pop_front()?;
        Some(joined(task.await, "list page piece"))
    }

    /// Waits for the body's next chunk or for the oldest piece's decode, whichever comes
    /// first; a piece already decoded comes first.
    pub(crate) async fn next(&mut self, chunks: &mut Chunks) -> Result<Arrived<T>, Error> {
        let chunk = match self.tasks.front_mut() {
            None => chunks.next().await,
            Some(oldest) => match futures::future::select(oldest, chunks.next()).await {
                Either::Left((decoded, _)) => {
                    self.tasks.pop_front();
                    return joined(decoded, "list page piece").map(Arrived::Decoded);
                }
                Either::Right((chunk, _)) => chunk,
            },
        };
        Ok(match chunk {
            Some(chunk) => Arrived::Chunk(chunk?),
            None => Arrived::End,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_grow_with_what_the_list_delivered_and_more_decode_at_once_at_full_size() {
        let delivered = ListBytes::default();
        let bounds = PieceBounds::of_list(delivered.clone());
        let grow = |bytes: usize| delivered.0.fetch_add(bytes, Ordering::Relaxed);
        assert_eq!((bounds.piece_bytes(), bounds.pieces_in_flight()), (PIECE_BYTES.floor, min_pieces_in_flight()));
        grow(PIECE_BYTES.floor * PIECE_BYTES.share * 2);
        assert_eq!((bounds.piece_bytes(), bounds.pieces_in_flight()), (2 * PIECE_BYTES.floor, min_pieces_in_flight()));
        grow(PIECE_BYTES.ceiling * PIECE_BYTES.share);
        assert_eq!((bounds.piece_bytes(), bounds.pieces_in_flight()), (PIECE_BYTES.ceiling, max_pieces_in_flight()));
        assert!(min_pieces_in_flight() < max_pieces_in_flight());
        delivered.restart();
        assert_eq!((bounds.piece_bytes(), bounds.pieces_in_flight()), (PIECE_BYTES.floor, min_pieces_in_flight()), "a new list starts small");
        let fixed = PieceBounds::fixed(300);
        assert_eq!((fixed.piece_bytes(), fixed.pieces_in_flight()), (300, max_pieces_in_flight()));
    }

    #[test]
    fn a_piece_takes_the_pending_buffer_unless_that_is_over_twice_its_size() {
        let bytes = br#"[{"a":1111111111},{"b":2}"#;
        let comma = memchr::memmem::find(bytes, b"},").unwrap() + 1;
        let mut in_flight = InFlight::<()>::new();
        // A buffer about the piece's size: the piece keeps it, the rest is moved out.
        let mut pending = bytes.to_vec();
        let buffer = pending.as_ptr();
        let piece = in_flight.cut(&mut pending, comma, b"]", b"[", comma + 1);
        assert_eq!((piece.as_slice(), pending.as_slice()), (&br#"[{"a":1111111111}]"#[..], &br#"[{"b":2}"#[..]));
        assert_eq!(piece.as_ptr(), buffer);
        // A buffer many times the piece's size: the piece is copied out, into a small buffer.
        let mut pending = Vec::with_capacity(64 << 10);
        pending.extend_from_slice(bytes);
        let buffer = pending.as_ptr();
        let piece = in_flight.cut(&mut pending, comma, b"]", b"[", comma + 1);
        assert_eq!((piece.as_slice(), pending.as_slice()), (&br#"[{"a":1111111111}]"#[..], &br#"[{"b":2}"#[..]));
        assert_eq!(pending.as_ptr(), buffer, "the bytes not yet cut stay in their buffer");
        assert!(piece.capacity() < 1024, "a piece of {} bytes in a buffer of {}", piece.len(), piece.capacity());
        // Without a closing or opening mark (protobuf's fields), both ways.
        for capacity in [bytes.len(), 64 << 10] {
            let mut pending = Vec::with_capacity(capacity);
            pending.extend_from_slice(bytes);
            let piece = in_flight.cut(&mut pending, comma, &[], &[], comma);
            assert_eq!((piece.as_slice(), pending.as_slice()), (&br#"[{"a":1111111111}"#[..], &br#",{"b":2}"#[..]), "capacity {capacity}");
        }
    }

    #[test]
    fn pending_bytes_grow_to_what_they_hold_not_by_doubling() {
        let chunk = vec![b'x'; 32 << 10];
        let mut pending = Vec::new();
        for n in 1..=3 {
            append_to_pending(&mut pending, &chunk);
            assert_eq!(pending.len(), n * chunk.len());
            assert_eq!(pending.capacity(), pending.len(), "{n} chunks");
        }
        // A long item: growth by an eighth of what is held, at most that much to spare.
        let small = [b'y'; 100];
        let mut grown = 0;
        for _ in 0..20_000 {
            let before = pending.capacity();
            append_to_pending(&mut pending, &small);
            assert!(pending.capacity() <= pending.len() + pending.len() / 8 + small.len());
            grown += usize::from(pending.capacity() != before);
        }
        assert!(grown < 40, "grew {grown} times over 2 MB");
        let mut in_flight = InFlight::<()>::new();
        in_flight.give_back(Vec::with_capacity(8));
        let buffer = in_flight.buffer(b"[", &chunk);
        assert_eq!((buffer.len(), buffer.capacity()), (chunk.len() + 1, chunk.len() + 1), "a spare buffer grown exactly");
    }

    #[tokio::test]
    async fn counted_chunks_add_their_bytes_to_the_list_and_pass_through_unchanged() {
        let delivered = ListBytes::default();
        let chunks: Vec<Result<Bytes, Error>> = vec![Ok(Bytes::from_static(b"abc")), Ok(Bytes::from_static(b"de")), Err(Error::Decode("cut".into()))];
        let read: Vec<_> = delivered.counted(futures::stream::iter(chunks).boxed()).collect().await;
        assert_eq!(read.len(), 3);
        assert_eq!((read[0].as_ref().unwrap().as_ref(), read[1].as_ref().unwrap().as_ref()), (&b"abc"[..], &b"de"[..]));
        assert!(read[2].is_err());
        assert_eq!(delivered.get(), 5);
        let shared = delivered.clone();
        shared.restart();
        assert_eq!(delivered.get(), 0, "clones share the count");
    }
}
