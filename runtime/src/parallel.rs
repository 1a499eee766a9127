//! Decoding many independent encoded objects (a list page's items, a batch of watch
//! events) on several threads at once.
//!
//! Invariants:
//! - At most [`MAX_DECODE_THREADS`] threads work on one call, the calling thread among them,
//!   never more than the cores this process may use, and each given at least
//!   [`MIN_BYTES_PER_THREAD`] bytes (by [`threads_for`]).
//! - Inputs are cut into contiguous parts, one per thread; the parts' results come back in
//!   input order, so callers keep wire order.
//! - A panic on a helper thread is raised again on the calling thread, as if it had
//!   decoded everything itself; so is one on a tokio task whose result is read through
//!   [`joined`].

use std::sync::OnceLock;

use crate::error::Error;

/// Most threads one page or batch is decoded on.
const MAX_DECODE_THREADS: usize = 4;

/// Fewest encoded bytes a decoding thread is given: below that, starting it costs more than
/// it saves (≈0.3 ms of decoding a Pod's protobuf).
pub(crate) const MIN_BYTES_PER_THREAD: usize = 32 << 10;

/// The cores this process may use (asked once: the answer reads cgroup files).
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Threads a decode may use: the cores this process may use, at most [`MAX_DECODE_THREADS`].
pub(crate) fn decode_threads() -> usize {
    cores().min(MAX_DECODE_THREADS)
}

/// Threads `encoded` objects are decoded on: one per [`MIN_BYTES_PER_THREAD`] bytes, within
/// the cores this process may use.
pub(crate) fn threads_for(encoded: &[impl AsRef<[u8]>]) -> usize {
    threads_for_bytes(encoded.iter().map(|e| e.as_ref().len()).sum())
}

/// Threads `bytes` encoded bytes are decoded on, as [`threads_for`].
pub(crate) fn threads_for_bytes(bytes: usize) -> usize {
    decode_threads().min(bytes / MIN_BYTES_PER_THREAD).max(1)
}

/// Runs `part(first, inputs[first..first + len])` over `inputs` cut into `threads` contiguous
/// parts (fewer when there are fewer inputs), the first on this thread, and returns each
/// part's result in input order.
pub(crate) fn in_parts<I, R, F>(inputs: &[I], threads: usize, part: F) -> Vec<R>
where
    I: Sync,
    R: Send,
    F: Fn(usize, &[I]) -> R + Sync,
{
    let threads = threads.clamp(1, inputs.len().max(1));
    if threads == 1 {
        return vec![part(0, inputs)];
    }
    let per_thread = inputs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let part = &part;
        let mut parts = inputs.chunks(per_thread).enumerate();
        let (_, own) = parts.next().expect("at least one input");
        let helpers: Vec<_> = parts.map(|(p, inputs)| scope.spawn(move || part(p * per_thread, inputs))).collect();
        let mut results = Vec::with_capacity(threads);
        results.push(part(0, own));
        results.extend(helpers.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))));
        results
    })
}

/// The parts' items in order as one Vec; the only part is returned as it is.
pub(crate) fn concat<T>(parts: Vec<Vec<T>>) -> Vec<T> {
    if parts.len() == 1 {
        return parts.into_iter().next().expect("one part");
    }
    let mut all = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        all.extend(part);
    }
    all
}

/// The result of a tokio task (a blocking decode, a fetch): a panic in it is raised again
/// here, and a task cancelled before it ended is an error saying `what` it was doing.
pub(crate) fn joined<R>(joined: Result<R, tokio::task::JoinError>, what: &str) -> Result<R, Error> {
    match joined {
        Ok(result) => Ok(result),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Error::Decode(format!("{what}: {e}"))),
    }
}

/// `decode()` on this thread when it reads fewer than [`MIN_BYTES_PER_THREAD`] encoded
/// `bytes`, else on a blocking thread, so an async worker is not held while it decodes
/// (`what` names it if its task is cancelled; a panic in it is raised here).
pub(crate) async fn decoded_off_worker<R: Send + 'static>(
    bytes: usize,
    what: &str,
    decode: impl FnOnce() -> Result<R, Error> + Send + 'static,
) -> Result<R, Error> {
    if bytes < MIN_BYTES_PER_THREAD {
        return decode();
    }
    joined(tokio::task::spawn_blocking(decode).await, what)?
}

/// [`concat`] of parts that may have failed: the first error in part order, if any.
pub(crate) fn try_concat<T, E>(parts: Vec<Result<Vec<T>, E>>) -> Result<Vec<T>, E> {
    Ok(concat(parts.into_iter().collect::<Result<Vec<_>, E>>()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_every_input_once_in_order_with_their_first_index() {
        let inputs: Vec<u32> = (0..103).collect();
        for threads in [0, 1, 2, 3, 4, 200] {
            let parts = in_parts(&inputs, threads, |first, part| (first, part.to_vec()));
            assert!(parts.len() <= threads.max(1), "{threads} threads: {} parts", parts.len());
            let mut next = 0;
            for (first, part) in &parts {
                assert_eq!(*first, next, "{threads} threads");
                assert_eq!(part[0] as usize, *first);
                next += part.len();
            }
            assert_eq!(parts.into_iter().flat_map(|(_, p)| p).collect::<Vec<_>>(), inputs, "{threads} threads");
        }
        assert_eq!(in_parts(&[] as &[u32], 4, |_, part| part.len()), vec![0]);
    }

    #[test]
    fn parts_concatenate_in_order_and_the_first_error_wins() {
        assert_eq!(concat(vec![vec![1, 2], vec![], vec![3]]), vec![1, 2, 3]);
        assert_eq!(concat(vec![vec![4, 5]]), vec![4, 5]);
        assert_eq!(try_concat::<u8, &str>(vec![Ok(vec![1]), Ok(vec![2, 3])]), Ok(vec![1, 2, 3]));
        assert_eq!(try_concat(vec![Ok(vec![1]), Err("second"), Err("third")]), Err("second"));
    }

    #[test]
    fn a_helper_s_panic_is_raised_on_the_caller() {
        let inputs: Vec<u32> = (0..8).collect();
        let caught = std::panic::catch_unwind(|| in_parts(&inputs, 2, |first, _| assert_eq!(first, 0, "helper part")));
        assert!(caught.is_err());
    }
}
