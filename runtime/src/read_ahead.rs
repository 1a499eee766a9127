//! A response body read ahead of its consumer: a small task (the pump) takes the body's
//! chunks as they come and queues them, so the consumer waits only when it has used
//! everything received (see `watch_events` for why a watch body is read this way).
//!
//! Invariants:
//! - The queue holds at most its number of chunks and its window of bytes (a [`Window`] of
//!   the bytes sent through it so far); a chunk larger than the window at the time is queued
//!   alone. So memory held ahead is bounded whether the server writes small chunks (an API
//!   server's watch: mostly 2–4 KB) or large ones (hyper hands over up to its read buffer's
//!   size at once when the sender is ahead), and it stays a small share of what a short list
//!   has delivered.
//! - A chunk gives back, when it is taken out, exactly the room it took when it was queued.
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
use crate::window::{WIRE_SHARE, Window};

/// Chunks queued ahead of the consumer: ≈256 KB of small objects' 4 KB chunks; an event
/// larger than that mostly comes as one chunk of its own.
pub(crate) const CHUNKS_AHEAD: usize = 64;

/// Bytes queued ahead of the consumer (more only as one chunk larger than the window at the
/// time): from 16 KiB up to 1 MiB, a [`WIRE_SHARE`]th of what the body has delivered. With
/// a floor of 64 KiB, a WatchList relist of 1,000 ConfigMaps' metadata (≈0.8 MB cached)
/// peaked at 1.27–2.17× the steady heap; with 16 KiB at 1.28–1.74×, syncing and handling
/// events as fast.
pub(crate) const BYTES_AHEAD: Window = Window { floor: 16 << 10, ceiling: 1 << 20, share: WIRE_SHARE };

/// A queue of at most `chunks` chunks and a window of `bytes`.
pub(crate) fn queue(chunks: usize, bytes: Window) -> (ChunkSender, ChunkReceiver) {
    let (sender, receiver) = mpsc::channel(chunks);
    let granted = bytes.limit(0);
    let room = Arc::new(Semaphore::new(granted));
    (ChunkSender { chunks: sender, room: room.clone(), window: bytes, sent: 0, granted }, ChunkReceiver { chunks: receiver, room })
}

/// The body's chunks, read ahead by a spawned pump within [`CHUNKS_AHEAD`] and
/// [`BYTES_AHEAD`] of what it has delivered.
pub(crate) fn read_ahead(body: impl Stream<Item = Result<Bytes, Error>> + Send + 'static) -> ChunkReceiver {
    read_ahead_within(body, CHUNKS_AHEAD, BYTES_AHEAD)
}

/// The body's chunks, read ahead by a spawned pump within `chunks` chunks and a window of
/// `bytes`.
fn read_ahead_within(body: impl Stream<Item = Result<Bytes, Error>> + Send + 'static, chunks: usize, bytes: Window) -> ChunkReceiver {
    let (sender, receiver) = queue(chunks, bytes);
    tokio::spawn(pump(body, sender));
    receiver
}

/// Moves the body's chunks into `chunks` until the body ends, fails, or nobody reads.
async fn pump(body: impl Stream<Item = Result<Bytes, Error>>, mut chunks: ChunkSender) {
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
    /// Each chunk with the room it took.
    chunks: mpsc::Sender<(Result<Bytes, Error>, u32)>,
    /// Permits for the bytes not queued: a chunk takes its length's (at most `granted`).
    room: Arc<Semaphore>,
    window: Window,
    /// Bytes sent so far.
    sent: usize,
    /// Permits created so far: `window.limit(sent)` as of the last send.
    granted: usize,
}

impl ChunkSender {
    /// Queues `item` once there is room for it; `Err` when the receiver is gone.
    pub(crate) async fn send(&mut self, item: Result<Bytes, Error>) -> Result<(), ()> {
        let mut permits = 0;
        if let Ok(chunk) = &item {
            permits = u32::try_from(chunk.len().min(self.granted)).unwrap_or(u32::MAX);
            // Closed (so an error) only when the receiver is dropped.
            self.room.acquire_many(permits).await.map_err(|_| ())?.forget();
            self.sent += chunk.len();
        }
        self.chunks.send((item, permits)).await.map_err(|_| ())?;
        let limit = self.window.limit(self.sent);
        if limit > self.granted {
            self.room.add_permits(limit - self.granted);
            self.granted = limit;
        }
        Ok(())
    }
}

/// The consumer's end of a [`queue`].
pub(crate) struct ChunkReceiver {
    chunks: mpsc::Receiver<(Result<Bytes, Error>, u32)>,
    room: Arc<Semaphore>,
}

impl ChunkReceiver {
    /// The next chunk (its room given back), the error that ends the body, or `None` at its
    /// end.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Error>>> {
        self.chunks.poll_recv(cx).map(|item| {
            item.map(|(item, permits)| {
                self.room.add_permits(permits as usize);
                item
            })
        })
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
        let (size, bytes) = (256 << 10, 1 << 20);
        let mut receiver = read_ahead_within(body(40, size, taken.clone()), CHUNKS_AHEAD, Window::fixed(bytes));
        settle().await;
        // bytes / size chunks queued, and one more taken from the body waiting for room.
        let ahead = taken.load(Ordering::SeqCst);
        assert_eq!(ahead, bytes / size + 1, "chunks taken from the body before any was read");
        let mut got = 0;
        while let Some(chunk) = std::future::poll_fn(|cx| receiver.poll_recv(cx)).await {
            let chunk = chunk.unwrap();
            assert_eq!((chunk.len(), chunk[0]), (size, got as u8));
            got += 1;
            settle().await;
            assert!(taken.load(Ordering::SeqCst) <= got + bytes / size + 1, "after {got} read");
        }
        assert_eq!(got, 40);
    }

    #[tokio::test]
    async fn the_bytes_read_ahead_grow_with_the_bytes_delivered_up_to_the_ceiling() {
        let taken = Arc::new(AtomicUsize::new(0));
        let (size, n) = (1024, 4096);
        let window = Window { floor: 4 * size, ceiling: 64 * size, share: crate::window::SHARE };
        let mut receiver = read_ahead_within(body(n, size, taken.clone()), 1000, window);
        settle().await;
        assert_eq!(taken.load(Ordering::SeqCst), 4 + 1, "the floor's chunks queued, one waiting for room");
        let mut got = 0;
        while let Some(chunk) = std::future::poll_fn(|cx| receiver.poll_recv(cx)).await {
            assert_eq!(chunk.unwrap().len(), size);
            got += 1;
            settle().await;
            let taken = taken.load(Ordering::SeqCst);
            let ahead = taken - got;
            assert!(ahead <= window.limit(taken * size) / size + 1, "{ahead} ahead after {got} read");
            if got == 3000 {
                // 3 MB delivered: the window is at its ceiling.
                assert_eq!(ahead, 64 + 1, "after {got} read");
            }
        }
        assert_eq!(got, n);
    }

    #[tokio::test]
    async fn small_chunks_are_read_ahead_within_the_chunks_and_a_chunk_over_the_bytes_passes_alone() {
        let taken = Arc::new(AtomicUsize::new(0));
        let mut receiver = read_ahead_within(body(100, 2048, taken.clone()), CHUNKS_AHEAD, Window::fixed(1 << 20));
        settle().await;
        assert_eq!(taken.load(Ordering::SeqCst), CHUNKS_AHEAD + 1);
        drop(receiver);

        let taken = Arc::new(AtomicUsize::new(0));
        let size = 3 * BYTES_AHEAD.ceiling;
        receiver = read_ahead(body(3, size, taken.clone()));
        for i in 0..3u8 {
            let chunk = std::future::poll_fn(|cx| receiver.poll_recv(cx)).await.unwrap().unwrap();
            assert_eq!((chunk.len(), chunk[0]), (size, i));
        }
        assert!(std::future::poll_fn(|cx| receiver.poll_recv(cx)).await.is_none());
    }

    #[tokio::test]
    async fn a_pump_waiting_for_room_ends_when_the_receiver_is_dropped() {
        let taken = Arc::new(AtomicUsize::new(0));
        let (sender, receiver) = queue(CHUNKS_AHEAD, BYTES_AHEAD);
        let pump = tokio::spawn(pump(body(10, BYTES_AHEAD.ceiling, taken.clone()), sender));
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
