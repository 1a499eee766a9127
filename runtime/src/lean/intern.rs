//! Intern tables and [`Shared`], a hash-consed `Arc`.
//!
//! Invariants: a table holds each distinct value once; [`Shared::new`] returns the table's
//! `Arc` for a value equal to one already held, so equal `Shared`s point to one allocation
//! (equality and hashing are by address). A table sweeps entries with no reference outside
//! it when it has doubled since the last sweep.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

type Hasher_ = foldhash::fast::FixedState;

const FIRST_SWEEP: usize = 4096;

/// A table of interned values held through handles of type `H` (hashed and compared by
/// content).
pub struct Table<H> {
    inner: Mutex<Inner<H>>,
}

/// The table of [`Shared`] values of type `T`.
pub type InternTable<T> = Table<Arc<T>>;

struct Inner<H> {
    set: HashSet<H, Hasher_>,
    sweep_at: usize,
    hits: u64,
    misses: u64,
}

/// A handle a [`Table`] can hold and sweep.
pub trait Held: Clone + Hash + Eq {
    /// True when this handle is the only reference to its value.
    fn is_only_reference(&self) -> bool;
}

impl<T: ?Sized + Hash + Eq> Held for Arc<T> {
    fn is_only_reference(&self) -> bool {
        Arc::strong_count(self) == 1
    }
}

/// Counters of one table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Distinct values held.
    pub entries: usize,
    /// Interns that found an equal value.
    pub hits: u64,
    /// Interns that added a value.
    pub misses: u64,
}

impl<H: Held> Table<H> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        Table { inner: Mutex::new(Inner { set: HashSet::with_hasher(Hasher_::with_seed(0x5eed_1ea4)), sweep_at: FIRST_SWEEP, hits: 0, misses: 0 }) }
    }

    /// The held handle equal to `key`, or the one `make` builds, now held.
    pub fn intern<Q>(&self, key: &Q, make: impl FnOnce() -> H) -> H
    where
        H: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        match self.try_intern(key, || Ok::<H, std::convert::Infallible>(make())) {
            Ok(held) => held,
        }
    }

    /// The held handle equal to `key`, or the one `make` builds, now held; when `make`
    /// fails, its error and the table is unchanged. `make` runs only for a key not held
    /// (so a check it makes is skipped for every value seen before).
    pub fn try_intern<Q, E>(&self, key: &Q, make: impl FnOnce() -> Result<H, E>) -> Result<H, E>
    where
        H: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let mut inner = self.inner.lock();
        if let Some(found) = inner.set.get(key) {
            let found = found.clone();
            inner.hits += 1;
            return Ok(found);
        }
        Ok(inner.add(make()?))
    }

    /// Drops every entry nobody else references; returns how many are left.
    pub fn sweep(&self) -> usize {
        let mut inner = self.inner.lock();
        // Dropping an entry may release the last outside reference to another one (in
        // another table), so callers sweeping all tables repeat until nothing changes.
        inner.sweep();
        inner.set.len()
    }

    /// The table's counters.
    pub fn stats(&self) -> TableStats {
        let inner = self.inner.lock();
        TableStats { entries: inner.set.len(), hits: inner.hits, misses: inner.misses }
    }
}

impl<T: Hash + Eq> Table<Arc<T>> {
    /// The held `Arc` equal to `value`, or `value` itself, now held.
    pub fn intern_owned(&self, value: T) -> Arc<T> {
        let mut inner = self.inner.lock();
        if let Some(found) = inner.set.get(&value) {
            let found = found.clone();
            inner.hits += 1;
            return found;
        }
        inner.add(Arc::new(value))
    }
}

impl<H: Held> Inner<H> {
    fn add(&mut self, made: H) -> H {
        self.misses += 1;
        self.set.insert(made.clone());
        if self.set.len() >= self.sweep_at {
            self.sweep();
        }
        made
    }

    fn sweep(&mut self) {
        // Only the table can hand out a new reference, and it is locked: an entry seen as
        // the only reference stays so until it is dropped here.
        self.set.retain(|h| !h.is_only_reference());
        self.sweep_at = (self.set.len() * 2).max(FIRST_SWEEP);
    }
}

impl<H: Held> Default for Table<H> {
    fn default() -> Self {
        Self::new()
    }
}

/// A type whose values are hash-consed in one process-wide table. Generated lean types
/// implement it with a `static` table each.
pub trait Interned: Hash + Eq + Send + Sync + Sized + 'static {
    /// The table of this type.
    fn table() -> &'static InternTable<Self>;
}

/// A shared, immutable, interned value: equal values are one allocation.
pub struct Shared<T>(Arc<T>);

impl<T: Interned> Shared<T> {
    /// The interned handle of `value` (dropping `value` if an equal one is already held).
    pub fn new(value: T) -> Self {
        Shared(T::table().intern_owned(value))
    }
}

impl<T> Shared<T> {
    /// The underlying `Arc`.
    pub fn as_arc(this: &Self) -> &Arc<T> {
        &this.0
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Eq for Shared<T> {}

impl<T> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state)
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: Interned + Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Shared::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_are_one_allocation_and_unreferenced_ones_are_swept() {
        let table: InternTable<(u64, u64)> = InternTable::new();
        let a = table.intern_owned((1, 2));
        let b = table.intern_owned((1, 2));
        assert!(Arc::ptr_eq(&a, &b));
        let c = table.intern_owned((3, 4));
        assert_eq!(table.stats(), TableStats { entries: 2, hits: 1, misses: 2 });
        drop(c);
        assert_eq!(table.sweep(), 1, "(3, 4) had no reference left but the table's");
        drop((a, b));
        assert_eq!(table.sweep(), 0);
    }

    #[test]
    fn tables_sweep_by_themselves_when_they_double() {
        let table: InternTable<u64> = InternTable::new();
        let kept = table.intern_owned(u64::MAX);
        for i in 0..(FIRST_SWEEP as u64 * 3) {
            drop(table.intern_owned(i));
        }
        let entries = table.stats().entries;
        assert!(entries < FIRST_SWEEP, "{entries} entries held after interning and dropping {} values", FIRST_SWEEP * 3);
        assert!(Arc::ptr_eq(&kept, &table.intern_owned(u64::MAX)), "a referenced value survives sweeps");
    }
}
