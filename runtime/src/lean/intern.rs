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

/// A table of interned values of type `T`.
pub struct InternTable<T: ?Sized> {
    inner: Mutex<Inner<T>>,
}

struct Inner<T: ?Sized> {
    set: HashSet<Arc<T>, Hasher_>,
    sweep_at: usize,
    hits: u64,
    misses: u64,
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

impl<T: ?Sized + Hash + Eq> InternTable<T> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        InternTable {
            inner: Mutex::new(Inner { set: HashSet::with_hasher(Hasher_::with_seed(0x5eed_1ea4)), sweep_at: FIRST_SWEEP, hits: 0, misses: 0 }),
        }
    }

    /// The held `Arc` equal to `key`, or the one `make` builds, now held.
    pub fn intern<Q>(&self, key: &Q, make: impl FnOnce() -> Arc<T>) -> Arc<T>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let mut inner = self.inner.lock();
        if let Some(found) = inner.set.get(key) {
            let found = found.clone();
            inner.hits += 1;
            return found;
        }
        inner.add(make())
    }

    /// The held `Arc` equal to `value`, or `value` itself, now held.
    pub fn intern_owned(&self, value: T) -> Arc<T>
    where
        T: Sized,
    {
        let mut inner = self.inner.lock();
        if let Some(found) = inner.set.get(&value) {
            let found = found.clone();
            inner.hits += 1;
            return found;
        }
        inner.add(Arc::new(value))
    }

    /// Drops every entry nobody else references; returns how many are left.
    pub fn sweep(&self) -> usize {
        let mut inner = self.inner.lock();
        // Dropping an entry may release the last outside reference to another one (in
        // another table), so callers sweeping all tables repeat until nothing changes.
        inner.set.retain(|a| Arc::strong_count(a) > 1);
        inner.sweep_at = (inner.set.len() * 2).max(FIRST_SWEEP);
        inner.set.len()
    }

    /// The table's counters.
    pub fn stats(&self) -> TableStats {
        let inner = self.inner.lock();
        TableStats { entries: inner.set.len(), hits: inner.hits, misses: inner.misses }
    }
}

impl<T: ?Sized + Hash + Eq> Inner<T> {
    fn add(&mut self, made: Arc<T>) -> Arc<T> {
        self.misses += 1;
        self.set.insert(made.clone());
        if self.set.len() >= self.sweep_at {
            self.set.retain(|a| Arc::strong_count(a) > 1);
            self.sweep_at = (self.set.len() * 2).max(FIRST_SWEEP);
        }
        made
    }
}

impl<T: ?Sized + Hash + Eq> Default for InternTable<T> {
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
