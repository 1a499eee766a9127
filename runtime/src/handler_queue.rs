//! The queue between an informer and one handler thread: events are queued without waking
//! the thread, and a flush wakes it once for everything queued since it last looked.
//!
//! A thread woken per event sleeps again after handling it whenever the informer is slower
//! than the handler, so with many handler threads on few cores every event costs a context
//! switch per handler. Woken per flush, a thread takes everything queued at once.
//!
//! Invariants:
//! - Events come out in the order they were pushed, each exactly once.
//! - A thread waits only while the queue is empty and open; it is woken by the first
//!   [`flush`](HandlerQueue::flush) after something was pushed, or by
//!   [`close`](HandlerQueue::close). So an event pushed and then flushed is never left
//!   waiting for a later push.
//! - After `close`, pushes are refused, and the thread is handed what was queued before it
//!   and then told the queue ended.
//! - The consumer's batch gives its capacity back once drained (as queues do after a burst,
//!   see [`crate::queue::Backlog`]), so a burst's room is not kept for good.

use std::collections::VecDeque;

use parking_lot::{Condvar, Mutex};

use crate::queue::Backlog;

/// One handler thread's queue (see the module's invariants).
pub(crate) struct HandlerQueue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
    /// The consumer waits on `wake`.
    waiting: bool,
}

impl<T> Default for HandlerQueue<T> {
    fn default() -> Self {
        HandlerQueue { state: Mutex::new(State { items: VecDeque::new(), closed: false, waiting: false }), wake: Condvar::new() }
    }
}

impl<T> HandlerQueue<T> {
    /// Queues `item` without waking the consumer; gives it back once the queue is closed.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(item);
        }
        st.items.push_back(item);
        Ok(())
    }

    /// Wakes the consumer if it waits and something is queued.
    pub(crate) fn flush(&self) {
        let st = self.state.lock();
        if st.waiting && !st.items.is_empty() {
            self.wake.notify_one();
        }
    }

    /// Ends the queue: the consumer is handed what is queued, then told it ended.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        if st.waiting {
            self.wake.notify_one();
        }
    }

    /// Waits until something is queued or the queue is closed, then moves everything queued
    /// into `batch` (which must be empty). Returns `false`, with `batch` left empty, once the
    /// queue is closed and drained.
    pub(crate) fn take_all(&self, batch: &mut VecDeque<T>) -> bool {
        debug_assert!(batch.is_empty());
        batch.release_drained();
        let mut st = self.state.lock();
        while st.items.is_empty() {
            if st.closed {
                return false;
            }
            st.waiting = true;
            self.wake.wait(&mut st);
            st.waiting = false;
        }
        std::mem::swap(&mut st.items, batch);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// A consumer on its own thread, returning every batch it took.
    fn consume(q: Arc<HandlerQueue<u32>>) -> std::thread::JoinHandle<Vec<Vec<u32>>> {
        std::thread::spawn(move || {
            let mut batches = Vec::new();
            let mut batch = VecDeque::new();
            while q.take_all(&mut batch) {
                batches.push(batch.drain(..).collect());
            }
            batches
        })
    }

    /// Waits until the consumer is parked on the queue.
    fn until_waiting(q: &HandlerQueue<u32>) {
        while !q.state.lock().waiting {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn pushes_do_not_wake_the_consumer_a_flush_does_with_everything_pushed() {
        let q = Arc::new(HandlerQueue::default());
        let consumer = consume(q.clone());
        until_waiting(&q);
        for i in 0..100 {
            q.push(i).unwrap();
        }
        // Not woken by the pushes: still waiting, everything still queued.
        std::thread::sleep(Duration::from_millis(50));
        assert!(q.state.lock().waiting);
        assert_eq!(q.state.lock().items.len(), 100);
        q.flush();
        // Taken at once, as one batch.
        while !q.state.lock().items.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        until_waiting(&q);
        q.close();
        assert_eq!(consumer.join().unwrap(), vec![(0..100).collect::<Vec<_>>()]);
    }

    #[test]
    fn close_hands_over_what_was_queued_then_ends_and_refuses_more() {
        let q = Arc::new(HandlerQueue::default());
        q.push(1).unwrap();
        q.push(2).unwrap();
        q.close();
        assert_eq!(q.push(3), Err(3));
        let batches = consume(q.clone()).join().unwrap();
        assert_eq!(batches, vec![vec![1, 2]]);
        // A consumer already waiting is woken by close alone.
        let q = Arc::new(HandlerQueue::default());
        let consumer = consume(q.clone());
        until_waiting(&q);
        q.close();
        assert_eq!(consumer.join().unwrap(), Vec::<Vec<u32>>::new());
    }

    #[test]
    fn order_is_kept_across_many_flushes_from_another_thread() {
        let q = Arc::new(HandlerQueue::default());
        let consumer = consume(q.clone());
        for i in 0..10_000u32 {
            q.push(i).unwrap();
            if i % 7 == 0 {
                q.flush();
            }
        }
        q.flush();
        q.close();
        let taken: Vec<u32> = consumer.join().unwrap().into_iter().flatten().collect();
        assert_eq!(taken, (0..10_000).collect::<Vec<_>>());
    }
}
