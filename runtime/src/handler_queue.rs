//! The queue between an informer and one handler thread or event stream: events are queued
//! without waking the consumer, and a flush wakes it once for everything queued since it
//! last looked.
//!
//! A thread woken per event sleeps again after handling it whenever the informer is slower
//! than the handler, so with many handler threads on few cores every event costs a context
//! switch per handler. Woken per flush, a consumer takes everything queued at once. Streams'
//! tasks take their events from the same queue, so both kinds of handler are woken by one
//! rule.
//!
//! Invariants:
//! - Events come out in the order they were pushed, each exactly once.
//! - A consumer waits only while the queue is empty and open; it is woken by the first
//!   [`flush`](HandlerQueue::flush) after something was pushed, or by
//!   [`close`](HandlerQueue::close). So an event pushed and then flushed is never left
//!   waiting for a later push.
//! - After `close`, pushes are refused, and the consumer is handed what was queued before
//!   it and then told the queue ended.
//! - One consumer per queue: a thread ([`take_all`](HandlerQueue::take_all)) or a task
//!   ([`poll_take_all`](HandlerQueue::poll_take_all)).
//! - The consumer's batch gives its capacity back once drained (as queues do after a burst,
//!   see [`crate::queue::Backlog`]), so a burst's room is not kept for good.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::queue::Backlog;

/// One handler thread's or stream's queue (see the module's invariants).
pub(crate) struct HandlerQueue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
    /// The consumer thread waits on `wake`.
    waiting: bool,
    /// The consumer task waits for this waker.
    waker: Option<Waker>,
}

impl<T> Default for HandlerQueue<T> {
    fn default() -> Self {
        HandlerQueue { state: Mutex::new(State { items: VecDeque::new(), closed: false, waiting: false, waker: None }), wake: Condvar::new() }
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
        if !st.items.is_empty() {
            self.wake_consumer(st);
        }
    }

    /// Ends the queue: the consumer is handed what is queued, then told it ended.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        self.wake_consumer(st);
    }

    /// Wakes a waiting consumer: the thread on `wake`, or the task through its waker (woken
    /// after the lock is released, so the task may take the queue at once).
    fn wake_consumer(&self, mut st: parking_lot::MutexGuard<'_, State<T>>) {
        if st.waiting {
            self.wake.notify_one();
        }
        let waker = st.waker.take();
        drop(st);
        if let Some(waker) = waker {
            waker.wake();
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

    /// [`take_all`](Self::take_all) for a task: `Pending` (with the task's waker kept for a
    /// flush) while the queue is empty and open.
    pub(crate) fn poll_take_all(&self, cx: &mut Context<'_>, batch: &mut VecDeque<T>) -> Poll<bool> {
        debug_assert!(batch.is_empty());
        batch.release_drained();
        let mut st = self.state.lock();
        if st.items.is_empty() {
            if st.closed {
                return Poll::Ready(false);
            }
            if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                st.waker = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
        st.waker = None;
        std::mem::swap(&mut st.items, batch);
        Poll::Ready(true)
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

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Wakes {
        fn count(&self) -> usize {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[test]
    fn a_task_is_woken_by_a_flush_not_by_pushes_and_takes_everything_pushed() {
        let q = HandlerQueue::default();
        let wakes = Arc::new(Wakes::default());
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut batch = VecDeque::new();
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Pending);
        // Polled again while waiting: still one waker kept, nothing woken.
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Pending);
        for i in 0..100u32 {
            q.push(i).unwrap();
        }
        assert_eq!(wakes.count(), 0, "pushes do not wake the task");
        q.flush();
        q.flush();
        assert_eq!(wakes.count(), 1, "the first flush wakes it; the waker is used up");
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Ready(true));
        assert_eq!(batch.drain(..).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
        // Nothing queued: a flush does not wake, and a task not waiting is not woken.
        q.flush();
        assert_eq!(wakes.count(), 1);
        // Pushed while the task was not waiting: taken at its next poll, no wake needed.
        q.push(100).unwrap();
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Ready(true));
        assert_eq!(batch.drain(..).collect::<Vec<_>>(), vec![100]);
        // Close wakes a waiting task; what was queued before comes out, then the end.
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Pending);
        q.close();
        assert_eq!(wakes.count(), 2, "close wakes the waiting task");
        assert_eq!(q.push(101), Err(101));
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Ready(false));
        let q = HandlerQueue::default();
        q.push(7).unwrap();
        q.close();
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Ready(true));
        assert_eq!(batch.drain(..).collect::<Vec<_>>(), vec![7]);
        assert_eq!(q.poll_take_all(&mut cx, &mut batch), Poll::Ready(false));
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
