//! [`Deltas`]: a list of deltas, oldest first, that holds one delta without an allocation.
//!
//! It is what a pop hands the informer ([`Popped::deltas`](crate::Popped)) and what the
//! DeltaFIFO queues under each key. A pop of the in-order FIFO is always one delta, and a
//! key of the DeltaFIFO nearly always has one pending, so a plain `Vec` cost an allocation
//! (made on the reflector's side, freed on the informer's) per event.
//!
//! Invariants:
//! - Holding no delta or one delta allocates nothing; a second delta moves both into a
//!   `Vec`, which is kept (with its room) while the list lives, whatever is removed.
//! - The deltas keep the order they were pushed in; as a slice (`Deref`) and when iterated
//!   they are read oldest first.

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::delta::Delta;

/// Deltas, oldest first; see the module documentation.
pub struct Deltas<K>(Repr<K>);

enum Repr<K> {
    Empty,
    One(Delta<K>),
    Many(Vec<Delta<K>>),
}

impl<K> Deltas<K> {
    /// No deltas.
    pub const fn new() -> Self {
        Deltas(Repr::Empty)
    }

    /// Exactly `delta`, without an allocation.
    pub const fn one(delta: Delta<K>) -> Self {
        Deltas(Repr::One(delta))
    }

    /// Appends `delta` as the newest.
    pub fn push(&mut self, delta: Delta<K>) {
        self.0 = match std::mem::replace(&mut self.0, Repr::Empty) {
            Repr::Empty => Repr::One(delta),
            Repr::One(first) => Repr::Many(vec![first, delta]),
            Repr::Many(mut list) => {
                list.push(delta);
                Repr::Many(list)
            }
        };
    }

    /// Removes and returns the newest delta.
    pub fn pop(&mut self) -> Option<Delta<K>> {
        match &mut self.0 {
            Repr::Many(list) => list.pop(),
            _ => match std::mem::replace(&mut self.0, Repr::Empty) {
                Repr::One(delta) => Some(delta),
                _ => None,
            },
        }
    }

    /// Removes and returns the delta at `index`, keeping the order of the rest.
    ///
    /// # Panics
    /// When `index` is out of bounds.
    pub fn remove(&mut self, index: usize) -> Delta<K> {
        let len = self.len();
        assert!(index < len, "removal index (is {index}) should be < len (is {len})");
        match &mut self.0 {
            Repr::Many(list) => list.remove(index),
            _ => self.pop().expect("one delta"),
        }
    }
}

impl<K> Default for Deltas<K> {
    fn default() -> Self {
        Deltas::new()
    }
}

impl<K> Deref for Deltas<K> {
    type Target = [Delta<K>];

    fn deref(&self) -> &[Delta<K>] {
        match &self.0 {
            Repr::Empty => &[],
            Repr::One(delta) => std::slice::from_ref(delta),
            Repr::Many(list) => list,
        }
    }
}

impl<K> DerefMut for Deltas<K> {
    fn deref_mut(&mut self) -> &mut [Delta<K>] {
        match &mut self.0 {
            Repr::Empty => &mut [],
            Repr::One(delta) => std::slice::from_mut(delta),
            Repr::Many(list) => list,
        }
    }
}

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Empty => Deltas::new(),
            Repr::One(delta) => Deltas::one(delta.clone()),
            Repr::Many(list) => Deltas(Repr::Many(list.clone())),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Deltas<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<K> From<Vec<Delta<K>>> for Deltas<K> {
    fn from(list: Vec<Delta<K>>) -> Self {
        Deltas(Repr::Many(list))
    }
}

impl<K> FromIterator<Delta<K>> for Deltas<K> {
    fn from_iter<I: IntoIterator<Item = Delta<K>>>(iter: I) -> Self {
        let mut deltas = Deltas::new();
        for delta in iter {
            deltas.push(delta);
        }
        deltas
    }
}

impl<K> IntoIterator for Deltas<K> {
    type Item = Delta<K>;
    type IntoIter = DeltasIntoIter<K>;

    fn into_iter(self) -> DeltasIntoIter<K> {
        DeltasIntoIter(match self.0 {
            Repr::Empty => IterRepr::One(None),
            Repr::One(delta) => IterRepr::One(Some(delta)),
            Repr::Many(list) => IterRepr::Many(list.into_iter()),
        })
    }
}

impl<'a, K> IntoIterator for &'a Deltas<K> {
    type Item = &'a Delta<K>;
    type IntoIter = std::slice::Iter<'a, Delta<K>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The deltas of a [`Deltas`], taken out oldest first.
pub struct DeltasIntoIter<K>(IterRepr<K>);

enum IterRepr<K> {
    One(Option<Delta<K>>),
    Many(std::vec::IntoIter<Delta<K>>),
}

impl<K> Iterator for DeltasIntoIter<K> {
    type Item = Delta<K>;

    fn next(&mut self) -> Option<Delta<K>> {
        match &mut self.0 {
            IterRepr::One(delta) => delta.take(),
            IterRepr::Many(list) => list.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            IterRepr::One(delta) => usize::from(delta.is_some()),
            IterRepr::Many(list) => list.len(),
        };
        (n, Some(n))
    }
}

impl<K> ExactSizeIterator for DeltasIntoIter<K> {}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::alloc_count::allocations_of;
    use crate::delta::DeltaType;
    use crate::key::ObjectKey;

    fn delta(kind: DeltaType, name: &str) -> Delta<()> {
        Delta::new(kind, ObjectKey::new(Some("ns"), name), Arc::new(()))
    }

    fn names(deltas: &Deltas<()>) -> Vec<&str> {
        deltas.iter().map(|d| d.key.name()).collect()
    }

    #[test]
    fn one_delta_is_held_and_handed_out_without_an_allocation() {
        let d = delta(DeltaType::Added, "a");
        let (taken, allocations) = allocations_of(|| {
            let mut deltas = Deltas::new();
            deltas.push(d);
            assert_eq!(deltas.len(), 1);
            assert_eq!(deltas.last().map(|d| d.kind), Some(DeltaType::Added));
            let mut it = deltas.into_iter();
            assert_eq!(it.size_hint(), (1, Some(1)));
            let taken = it.next();
            assert!(it.next().is_none());
            taken
        });
        assert_eq!(allocations, 0);
        assert_eq!(taken.map(|d| d.key.name().to_owned()).as_deref(), Some("a"));
    }

    #[test]
    fn deltas_keep_their_order_through_pushes_removals_and_iteration() {
        let mut deltas = Deltas::new();
        assert!(deltas.is_empty());
        assert!(deltas.pop().is_none());
        for name in ["a", "b", "c", "d"] {
            deltas.push(delta(DeltaType::Updated, name));
        }
        assert_eq!(names(&deltas), ["a", "b", "c", "d"]);
        assert_eq!(deltas.remove(1).key.name(), "b");
        assert_eq!(deltas.pop().map(|d| d.key.name().to_owned()).as_deref(), Some("d"));
        assert_eq!(names(&deltas), ["a", "c"]);
        deltas[0].kind = DeltaType::Deleted;
        assert_eq!(deltas[0].kind, DeltaType::Deleted);
        assert_eq!(names(&deltas.clone()), ["a", "c"]);
        let taken: Vec<_> = deltas.into_iter().map(|d| d.key.name().to_owned()).collect();
        assert_eq!(taken, ["a", "c"]);

        let mut one = Deltas::one(delta(DeltaType::Sync, "x"));
        assert_eq!(one.remove(0).key.name(), "x");
        assert!(one.is_empty());
        one.push(delta(DeltaType::Added, "y"));
        one.push(delta(DeltaType::Deleted, "z"));
        assert_eq!(names(&one), ["y", "z"]);
        let collected: Deltas<()> = one.into_iter().collect::<Vec<_>>().into_iter().rev().collect();
        assert_eq!(names(&collected), ["z", "y"]);
        assert_eq!(format!("{:?}", Deltas::<()>::new()), "[]");
    }

    #[test]
    #[should_panic(expected = "removal index")]
    fn removing_past_the_end_panics_like_a_vec() {
        Deltas::one(delta(DeltaType::Added, "a")).remove(1);
    }
}
