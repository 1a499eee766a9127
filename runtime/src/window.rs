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
//! reaches the ceiling after its first [`SHARE`] × ceiling units.
//!
//! Invariants:
//! - [`Window::limit`] is `delivered / SHARE` clamped to `[floor, ceiling]`: never below the
//!   floor (so a list that has delivered nothing still moves), never above the ceiling, and
//!   it never shrinks as `delivered` grows.
//! - The unit is the caller's (bytes or objects); a window only compares and divides.

/// The share of what has been delivered that each bound allows, as a divisor.
pub(crate) const SHARE: usize = 32;

/// A bound between `floor` and `ceiling` that grows with what has been delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) floor: usize,
    pub(crate) ceiling: usize,
}

impl Window {
    /// A bound that does not grow.
    #[cfg(test)]
    pub(crate) const fn fixed(limit: usize) -> Self {
        Window { floor: limit, ceiling: limit }
    }

    /// What may be in flight once `delivered` units have been delivered.
    pub(crate) fn limit(&self, delivered: usize) -> usize {
        (delivered / SHARE).clamp(self.floor, self.ceiling.max(self.floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_grows_with_what_was_delivered_between_its_floor_and_ceiling() {
        let share = SHARE;
        let window = Window { floor: 64, ceiling: 1024 };
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
        let floor_over_ceiling = Window { floor: 64, ceiling: 10 };
        assert_eq!((floor_over_ceiling.limit(0), floor_over_ceiling.limit(1 << 20)), (64, 64));
    }
}
