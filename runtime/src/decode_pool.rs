//! [`on_decode_thread`]: the few long-lived threads batches of watch events are decoded on.
//!
//! Invariants:
//! - At most one thread per core this process may use, started when a job finds none
//!   idle, and kept for the process's life (an idle one is parked and costs no CPU).
//! - Jobs start in the order they were submitted. A job that finds threads idle wakes the
//!   one that became idle last (else the first thread done with its job takes it), so a
//!   watch whose batches come one at a time keeps them on one thread, whose
//!   per-thread state (the string table's recent strings, the allocator's caches) stays
//!   warm (tokio's blocking pool hands each to any of its idle threads, up to 512).
//! - A job's result, or its panic, reaches the [`Decoding`] future; a panic is raised again
//!   where that future is polled, and the thread goes on to the next job.
//! - A job never waits on another job, so a full pool only delays jobs.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, ready};
use std::thread::{Thread, ThreadId};

use crate::error::Error;
use crate::parallel::cores;

type Job = Box<dyn FnOnce() + Send>;

/// The pool's jobs not started yet and its idle threads.
struct Pool {
    state: Mutex<State>,
    /// Most threads started.
    threads: usize,
}

struct State {
    jobs: VecDeque<Job>,
    /// Parked threads, the one idle longest first.
    idle: Vec<Thread>,
    started: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool { state: Mutex::new(State { jobs: VecDeque::new(), idle: Vec::new(), started: 0 }), threads: cores() })
}

impl Pool {
    /// The state; nothing panics while holding it (jobs run outside it), so a poisoned lock
    /// still holds a consistent state.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `decode` on a decoding thread; the future gives its result (and raises its panic).
pub(crate) fn on_decode_thread<R: Send + 'static>(decode: impl FnOnce() -> R + Send + 'static) -> Decoding<R> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = sender.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)));
    });
    let pool = pool();
    let mut state = pool.state();
    state.jobs.push_back(job);
    if let Some(thread) = state.idle.pop() {
        drop(state);
        thread.unpark();
    } else if state.started < pool.threads {
        state.started += 1;
        drop(state);
        let spawned = std::thread::Builder::new().name("informer-decode".into()).spawn(move || work(pool));
        if spawned.is_err() {
            // The job stays queued for a running thread; with none, its future errs below.
            let mut state = pool.state();
            state.started -= 1;
            if state.started == 0 {
                state.jobs.clear();
            }
        }
    }
    Decoding(receiver)
}

/// One decoding thread: runs jobs while there are any, else parks as the newest idle one.
fn work(pool: &'static Pool) {
    let me: ThreadId = std::thread::current().id();
    loop {
        let job = {
            let mut state = pool.state();
            match state.jobs.pop_front() {
                Some(job) => Some(job),
                None => {
                    // Woken without being taken off the idle list (a spurious wake-up):
                    // it is there already.
                    if !state.idle.iter().any(|t| t.id() == me) {
                        state.idle.push(std::thread::current());
                    }
                    None
                }
            }
        };
        match job {
            Some(job) => job(),
            None => std::thread::park(),
        }
    }
}

/// The result of a job run by [`on_decode_thread`].
pub(crate) struct Decoding<R>(tokio::sync::oneshot::Receiver<std::thread::Result<R>>);

impl<R> Future for Decoding<R> {
    type Output = Result<R, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(Pin::new(&mut self.0).poll(cx)) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => Err(Error::Decode("no decoding thread could be started".into())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn results_come_back_in_any_number() {
        let decodings: Vec<_> = (0..64u64).map(|i| on_decode_thread(move || (i * i, std::thread::current().name().map(str::to_owned)))).collect();
        for (i, decoding) in decodings.into_iter().enumerate() {
            let (square, thread) = decoding.await.unwrap();
            assert_eq!(square, (i * i) as u64);
            assert_eq!(thread.as_deref(), Some("informer-decode"));
        }
        assert!(pool().state.lock().unwrap().started <= pool().threads);
    }

    #[tokio::test]
    async fn jobs_one_at_a_time_stay_on_one_thread() {
        // Each job waits for the one before, so the thread that ran it is idle again (the
        // newest idle one) when the next is submitted — unless another test's jobs took it
        // in between, which leaves another idle thread no newer than it: so over 50 jobs
        // in a row most must share one thread.
        let mut threads = std::collections::HashMap::new();
        for _ in 0..50 {
            let id = on_decode_thread(|| std::thread::current().id()).await.unwrap();
            // The thread parks itself after sending: wait until it is idle again.
            while !pool().state.lock().unwrap().idle.iter().any(|t| t.id() == id) {
                std::thread::yield_now();
            }
            *threads.entry(id).or_insert(0) += 1;
        }
        assert!(threads.values().any(|&n| n >= 25), "jobs spread over threads: {threads:?}");
    }

    #[tokio::test]
    async fn a_panic_is_raised_where_awaited_and_the_thread_goes_on() {
        let panicked = tokio::spawn(on_decode_thread(|| -> u8 { panic!("bad bytes") })).await.unwrap_err();
        assert!(panicked.is_panic());
        let message = panicked.into_panic();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"bad bytes"));
        assert_eq!(on_decode_thread(|| 7).await.unwrap(), 7);
    }
}
