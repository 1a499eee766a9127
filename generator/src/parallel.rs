//! Independent jobs run on every core, their results in job order.
//!
//! Invariant: the result of job `i` lands at index `i` whichever thread ran it, so whatever
//! is built from the results (files, error choice) does not depend on scheduling.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` applied to every job, on up to `available_parallelism` threads. The calling thread
/// first runs `first` (work that must stay on it, such as rendering token streams, which
/// are not `Send`) and then takes jobs like the others.
pub fn map_with<T: Sync, R: Send, M>(jobs: &[T], f: impl Fn(&T) -> R + Sync, first: impl FnOnce() -> M) -> (Vec<R>, M) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len() + 1);
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = jobs.get(i) else { break };
            let r = f(job);
            *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
    };
    let m = std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        let m = first();
        work();
        m
    });
    let results = slots.into_iter().map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner()).expect("every job ran before the scope ended")).collect();
    (results, m)
}

/// `f` applied to every job, in parallel; see [`map_with`].
pub fn map<T: Sync, R: Send>(jobs: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    map_with(jobs, f, || ()).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_in_job_order_whatever_thread_ran_them() {
        let jobs: Vec<u64> = (0..1000).collect();
        // Uneven job lengths, so threads finish out of order.
        let out = map(&jobs, |&i| {
            let mut x = i;
            for _ in 0..(i % 7) * 1000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            (i, x)
        });
        assert_eq!(out.len(), 1000);
        for (i, (j, _)) in out.iter().enumerate() {
            assert_eq!(i as u64, *j);
        }
    }

    #[test]
    fn first_runs_on_the_calling_thread_and_no_jobs_is_fine() {
        let caller = std::thread::current().id();
        let (out, ran_on) = map_with(&[] as &[u8], |_| 0, || std::thread::current().id());
        assert!(out.is_empty());
        assert_eq!(ran_on, caller);
    }
}
