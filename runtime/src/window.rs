//! Bounds on what a list in progress holds in flight that grow with what it has delivered
//! (a slow start, as TCP's window).
//!
//! A streamed list (a WatchList) holds, beside the objects already cached, what is in
//! flight: chunks read ahead of the decoder, events gathered into a batch, batches
//! decoding, decoded objects on their way to the store. Bounds sized for a large list (a
//! megabyte each, 256 objects) would be a large part of a small one: 1,000 Pods are ≈8 MB
//! of JSON, and during a relist whatever is in flight is held beside the whole cache. A
//! [`Window`] is instead a share of what the list has delivered so far, so what it holds in
//! flight stays a small part of what it has cached, whatever its size, and a large list
//! reaches the ceiling after its first `share` × ceiling units.
//!
//! Invariants:
//! - [`Window::limit`] is `delivered / share` clamped to `[floor, ceiling]`: never below the
//!   floor (so a list that has delivered nothing still moves), never above the ceiling, and
//!   it never shrinks as `delivered` grows.
//! - The unit is the caller's (bytes or objects); a window only compares and divides.

/// The share of what has been delivered that a bound allows, as a divisor: for a paged list's
/// pieces and read ahead, and the reflector's replace batches.
pub(crate) const SHARE: usize = 32;

/// The share for bounds on a streamed list's JSON or protobuf bytes in flight (its read
/// ahead and its gathering batch): several such bounds' worth is held at once (read ahead,
/// gathering, batches decoding), and a lean type caches less than half of its JSON, so at
/// [`SHARE`] what was in flight came to a third of the cache.
pub(crate) const WIRE_SHARE: usize = 128;

/// A bound between `floor` and `ceiling` that grows with what has been delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) floor: usize,
    pub(crate) ceiling: usize,
    /// The divisor of what has been delivered (at least 1).
    pub(crate) share: usize,
}

impl Window {
    /// A bound that does not grow.
    #[cfg(test)]
    pub(crate) const fn fixed(limit: usize) -> Self {
        Window { floor: limit, ceiling: limit, share: 1 }
    }

    /// What may be in flight once `delivered` units have been delivered.
    pub(crate) fn limit(&self, delivered: usize) -> usize {
        (delivered / self.share.max(1)).clamp(self.floor, self.ceiling.max(self.floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_grows_with_what_was_delivered_between_its_floor_and_ceiling() {
        let window = Window { floor: 64, ceiling: 1024, share: SHARE };
        let share = window.share;
        assert_eq!(window.limit(0), 64);
        assert_eq!(window.limit(64 * share - 1), 64);
        assert_eq!(window.limit(100 * share + 7), 100);
        assert_eq!(window.limit(1024 * share), 1024);
        assert_eq!(window.limit(usize::MAX), 1024);
        let mut last = 0;
        for delivered in (0..2048 * share).step_by(97) {
            let limit = window.limit(delivered);
            assert!(limit >= last && (64..=1024).contains(&limit), "{delivered}: {limit} after {last}");
            last = limit;
        }
        assert_eq!(Window::fixed(5).limit(0), 5);
        assert_eq!(Window::fixed(5).limit(1 << 40), 5);
        let wire = Window { floor: 64, ceiling: 1024, share: WIRE_SHARE };
        assert_eq!((wire.limit(64 * WIRE_SHARE - 1), wire.limit(100 * WIRE_SHARE), wire.limit(100 * SHARE)), (64, 100, 64));
        let floor_over_ceiling = Window { floor: 64, ceiling: 10, share: SHARE };
        assert_eq!((floor_over_ceiling.limit(0), floor_over_ceiling.limit(1 << 20)), (64, 64));
    }
}
