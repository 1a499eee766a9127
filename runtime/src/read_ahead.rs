//! A response body read ahead of its consumer: a small task (the pump) takes the body's
//! chunks as they come and queues them, so the consumer waits only when it has used
//! everything received (see `watch_events` for why a watch body is read this way).
//!
//! Invariants:
//! - The queue holds at most its number of chunks and its number of bytes; a chunk larger
//!   than all of those bytes is queued alone. So memory held ahead is bounded whether the
//!   server writes small chunks (an API server's watch: mostly 2–4 KB) or large ones (hyper
//!   hands over up to ≈400 KB at once when the sender is ahead).
//! - Chunks come out in body order; an error ends the queue after it; empty chunks are
//!   skipped.
//! - The pump ends when the body ends, after its first error, or once the receiver is
//!   dropped, also while it waits for room (no connection is kept open for nobody).

use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::{Semaphore, mpsc};

use crate::error::Error;

/// Chunks queued ahead of the consumer: ≈256 KB of small objects' 4 KB chunks; an event
/// larger than that mostly comes as one chunk of its own.
pub(crate) const CHUNKS_AHEAD: usize = 64;

/// Bytes queued ahead of the consumer (more only as one chunk larger than this).
pub(crate) const BYTES_AHEAD: usize = 1 << 20;

/// A queue of at most `chunks` chunks and `bytes` bytes.
pub(crate) fn queue(chunks: usize, bytes: usize) -> (ChunkSender, ChunkReceiver) {
    let (sender, receiver) = mpsc::channel(chunks);
    let room = Arc::new(Semaphore::new(bytes));
    (ChunkSender { chunks: sender, room: room.clone(), bytes }, ChunkReceiver { chunks: receiver, room, bytes })
}

/// The body's chunks, read ahead by a spawned pump within [`CHUNKS_AHEAD`] and
/// [`BYTES_AHEAD`].
pub(crate) fn read_ahead(body: impl Stream<Item = Result<Bytes, Error>> + Send + 'static) -> ChunkReceiver {
    let (sender, receiver) = queue(CHUNKS_AHEAD, BYTES_AHEAD);
    tokio::spawn(pump(body, sender));
    receiver
}

/// Moves the body's chunks into `chunks` until the body ends, fails, or nobody reads.
async fn pump(body: impl Stream<Item = Result<Bytes, Error>>, chunks: ChunkSender) {
    let mut body = pin!(body);
    loop {
        let next = tokio::select! {
            biased;
            next = body.next() => next,
            _ = chunks.chunks.closed() => return,
        };
        let sent = match next {
            None => return,
            Some(Ok(chunk)) if chunk.is_empty() => continue,
            Some(Ok(chunk)) => chunks.send(Ok(chunk)).await,
            Some(Err(e)) => {
                let _ = chunks.send(Err(e)).await;
                return;
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// The pump's end of a [`queue`].
pub(crate) struct ChunkSender {
    chunks: mpsc::Sender<Result<Bytes, Error>>,
    /// Permits for the bytes not queued: a chunk takes its length's (at most `bytes`).
    room: Arc<Semaphore>,
    bytes: usize,
}

impl ChunkSender {
    /// Queues `item` once there is room for it; `Err` when the receiver is gone.
    pub(crate) async fn send(&self, item: Result<Bytes, Error>) -> Result<(), ()> {
        if let Ok(chunk) = &item {
            // Closed (so an error) only when the receiver is dropped.
            let permits = u32::try_from(chunk.len().min(self.bytes)).unwrap_or(u32::MAX);
            self.room.acquire_many(permits).await.map_err(|_| ())?.forget();
        }
        self.chunks.send(item).await.map_err(|_| ())
    }
}

/// The consumer's end of a [`queue`].
pub(crate) struct ChunkReceiver {
    chunks: mpsc::Receiver<Result<Bytes, Error>>,
    room: Arc<Semaphore>,
    bytes: usize,
}

impl ChunkReceiver {
    /// The next chunk (its bytes' room given back), the error that ends the body, or `None`
    /// at its end.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        let polled = self.chunks.poll_recv(cx);
        if let Poll::Ready(Some(Ok(chunk))) = &polled {
            self.room.add_permits(chunk.len().min(self.bytes));
        }
        polled
    }
}

impl Drop for ChunkReceiver {
    fn drop(&mut self) {
        // Wakes a pump waiting for room, which then ends.
        self.room.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `n` chunks of `size` bytes (chunk i filled with byte i), counting those taken.
    fn body(n: usize, size: usize, taken: Arc<AtomicUsize>) -> impl Stream<Item = Result<Bytes, Error>> + Send + 'static {
        futures::stream::iter(0..n).map(move |i| {
            taken.fetch_add(1, Ordering::SeqCst);
            Ok(Bytes::from(vec![i as u8; size]))
        })
    }

    async fn settle() {
        for _ in 0..200 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn large_chunks_are_read_ahead_within_the_bytes_and_all_come_out_in_order() {
        let taken = Arc::new(AtomicUsize::new(0));
        let size = 256 << 10;
        let mut receiver = read_ahead(body(40, size, taken.clone()));
        settle().await;
        // BYTES_AHEAD / size chunks queued, and one more taken from the body waiting for room.
        let ahead = taken.load(Ordering::SeqCst);
        assert_eq!(ahead, BYTES_AHEAD / size + 1, "chunks taken from the body before any was read");
        let mut got = 0;
        while let Some(chunk) = std::future::poll_fn(|cx| receiver.poll_recv(cx)).await {
            let chunk = chunk.unwrap();
            assert_eq!((chunk.len(), chunk[0]), (size, got as u8));
            got += 1;
            settle().await;
            assert!(taken.load(Ordering::SeqCst) <= got + BYTES_AHEAD / size + 1, "after {got} read");
        }
        assert_eq!(got, 40);
    }

    #[tokio::test]
    async fn small_chunks_are_read_ahead_within_the_chunks_and_a_chunk_over_the_bytes_passes_alone() {
        let taken = Arc::new(AtomicUsize::new(0));
        let mut receiver = read_ahead(body(100, 2048, taken.clone()));
        settle().await;
        assert_eq!(taken.load(Ordering::SeqCst), CHUNKS_AHEAD + 1);
        drop(receiver);

        let taken = Arc::new(AtomicUsize::new(0));
        receiver = read_ahead(body(3, 3 * BYTES_AHEAD, taken.clone()));
        for i in 0..3u8 {
            let chunk = std::future::poll_fn(|cx| receiver.poll_recv(cx)).await.unwrap().unwrap();
            assert_eq!((chunk.len(), chunk[0]), (3 * BYTES_AHEAD, i));
        }
        assert!(std::future::poll_fn(|cx| receiver.poll_recv(cx)).await.is_none());
    }

    #[tokio::test]
    async fn a_pump_waiting_for_room_ends_when_the_receiver_is_dropped() {
        let taken = Arc::new(AtomicUsize::new(0));
        let (sender, receiver) = queue(CHUNKS_AHEAD, BYTES_AHEAD);
        let pump = tokio::spawn(pump(body(10, BYTES_AHEAD, taken.clone()), sender));
        settle().await;
        assert_eq!(taken.load(Ordering::SeqCst), 2, "one chunk queued, one waiting for room");
        assert!(!pump.is_finished());
        drop(receiver);
        tokio::time::timeout(std::time::Duration::from_secs(10), pump).await.expect("the pump ended").unwrap();
        assert_eq!(taken.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_error_ends_the_queue_after_it_and_empty_chunks_are_skipped() {
        let items = vec![Ok(Bytes::from_static(b"a")), Ok(Bytes::new()), Err(Error::Decode("cut".into())), Ok(Bytes::from_static(b"b"))];
        let mut receiver = read_ahead(futures::stream::iter(items));
        let mut got = Vec::new();
        while let Some(item) = std::future::poll_fn(|cx| receiver.poll_recv(cx)).await {
            got.push(item.map_err(|e| e.to_string()));
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].as_deref().ok(), Some(&b"a"[..]));
        assert!(got[1].as_ref().is_err_and(|e| e.contains("cut")), "{got:?}");
    }
}
