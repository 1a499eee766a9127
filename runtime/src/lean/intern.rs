//! Intern tables and [`Shared`], a hash-consed `Arc`.
//!
//! Invariants: a table holds each distinct value once; [`Shared::new`] returns the table's
//! `Arc` for a value equal to one already held, so equal `Shared`s point to one allocation
//! (equality and hashing are by address). A table is [`SHARDS`] sets, each under its own
//! lock: a value's hash (computed before any lock is taken) picks its shard, so threads
//! decoding at once rarely wait on each other. A shard sweeps entries with no reference
//! outside the table when it has doubled since its last sweep.
//!
//! A table also remembers, for a bounded number of recent values, the protobuf bytes each
//! was decoded from (see `crate::proto::offered`), so equal bytes give the held value without
//! being decoded again. That memory (one lock of its own, never held while a shard's is
//! taken) has a bound in bytes, and one entry per [`BYTES_PER_ENCODING`] of it; it never
//! holds (nor has room for) more. It is emptied whenever it would grow past its bound and at
//! every sweep of any shard (so it never keeps a value from being swept for long). The bound
//! starts at [`FIRST_ENCODED_BYTES`] and doubles, up to [`MAX_ENCODED_BYTES`], each time the
//! memory fills after at least half the values decoded since it last started again were
//! already held (a larger memory would have spared their decoding); so a type whose values
//! are all new keeps a small memory. The memory is paused (freed, its bound back to the
//! first) for a while for a type whose bytes rarely repeat (where it would only cost).

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use hashbrown::HashTable;
use parking_lot::Mutex;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Error, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

type Hasher_ = foldhash::fast::FixedState;

/// Sets a table is cut into (a power of two).
const SHARDS: usize = 16;

/// Entries a table holds, over all its shards, before its shards first sweep.
const FIRST_SWEEP: usize = 4096;

/// The bound, in bytes, of a table's memory of encodings at first and after a pause.
pub(crate) const FIRST_ENCODED_BYTES: usize = 16 << 10;
/// The largest bound, in bytes, of a table's memory of encodings.
pub(crate) const MAX_ENCODED_BYTES: usize = 256 << 10;
/// Bytes of bound per entry the memory of encodings may hold.
pub(crate) const BYTES_PER_ENCODING: usize = 64;
/// The longest encoding remembered (one always fits an emptied memory).
pub(crate) const MAX_ENCODING_LEN: usize = MAX_ENCODED_BYTES / 16;
const _: () = assert!(MAX_ENCODING_LEN <= FIRST_ENCODED_BYTES && FIRST_ENCODED_BYTES <= MAX_ENCODED_BYTES);
/// Lookups by encoding judged at a time: fewer than 1 in 16 found pauses them.
const ENCODING_WINDOW: u32 = 1024;
/// Decodes that skip the lookup by encoding after a window judged not worth it.
const ENCODING_PAUSE: u32 = 16 * 1024;

/// A table of interned values held through handles of type `H` (hashed and compared by
/// content).
pub struct Table<H> {
    shards: [Shard<H>; SHARDS],
    hasher: Hasher_,
    memory: Mutex<EncodingMemory<H>>,
    /// Decodes left before lookups by encoding resume (0: they are on).
    encoding_pause: AtomicU32,
}

/// The table of [`Shared`] values of type `T`.
pub type InternTable<T> = Table<Arc<T>>;

/// One set of a table, on a cache line of its own.
#[repr(align(64))]
struct Shard<H> {
    inner: Mutex<Inner<H>>,
}

struct Inner<H> {
    set: HashTable<H>,
    sweep_at: usize,
    hits: u64,
    misses: u64,
}

/// A table's remembered encodings and how often they are found.
struct EncodingMemory<H> {
    encodings: Encodings<H>,
    reused: u64,
    window: u32,
    window_hits: u32,
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
    /// Decodes skipped because equal encoded bytes were remembered.
    pub reused_encodings: u64,
    /// The bound, in bytes, of the memory of encodings now.
    pub encodings_bound: usize,
    /// Heap the memory of encodings holds, about (its buffers' capacity).
    pub encodings_heap: usize,
}

impl<H> Shard<H> {
    const fn new() -> Self {
        Shard { inner: Mutex::new(Inner { set: HashTable::new(), sweep_at: FIRST_SWEEP / SHARDS, hits: 0, misses: 0 }) }
    }
}

impl<H: Held> Table<H> {
    /// An empty table (usable in a `static`).
    pub const fn new() -> Self {
        Table {
            shards: [const { Shard::new() }; SHARDS],
            hasher: Hasher_::with_seed(0x5eed_1ea4),
            memory: Mutex::new(EncodingMemory {
                encodings: Encodings {
                    by_hash: std::collections::HashMap::with_hasher(Hasher_::with_seed(0x5eed_1ea5)),
                    arena: Vec::new(),
                    bound: FIRST_ENCODED_BYTES,
                    decoded_held: 0,
                    decoded_new: 0,
                },
                reused: 0,
                window: 0,
                window_hits: 0,
            }),
            encoding_pause: AtomicU32::new(0),
        }
    }

    /// The shard a value of hash `hash` belongs in: bits the shard's own set does not use
    /// to place it (its low bits) or to tag it (its top seven).
    fn shard(&self, hash: u64) -> &Shard<H> {
        &self.shards[(hash >> 40) as usize & (SHARDS - 1)]
    }

    /// The value decoded before from `encoding` (of the schema `tag`), if remembered;
    /// `Err(())` when lookups by encoding are paused for this table (decode, and do not
    /// remember the result).
    pub(crate) fn find_encoded(&self, tag: usize, encoding: &[u8]) -> Result<Option<H>, ()> {
        if self.encoding_pause.load(Ordering::Relaxed) != 0 && self.encoding_pause.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
            return Err(());
        }
        let hash = ENCODING_HASHER.hash_one(encoding);
        let mut memory = self.memory.lock();
        let found = memory.encodings.get(hash, tag, encoding).cloned();
        memory.window += 1;
        memory.window_hits += u32::from(found.is_some());
        memory.reused += u64::from(found.is_some());
        if memory.window == ENCODING_WINDOW {
            if memory.window_hits < ENCODING_WINDOW / 16 {
                self.encoding_pause.store(ENCODING_PAUSE, Ordering::Relaxed);
                // Paused: nothing is remembered until the pause ends, so the memory goes too.
                memory.encodings.release();
            }
            memory.window = 0;
            memory.window_hits = 0;
        }
        Ok(found)
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
        self.find_or_add(self.hasher.hash_one(key), key, |h, key| <H as Borrow<Q>>::borrow(h) == *key, |_| make()).map(|(held, _)| held)
    }

    /// The held handle of hash `hash` that `is(held, &key)` says is equal to `key` (a hit),
    /// or the one `make(key)` builds, now held (a miss); `make`'s error leaves the table
    /// unchanged. The one find-or-add step every intern takes, under the shard's lock. With
    /// the handle, whether it was found.
    fn find_or_add<K, E>(&self, hash: u64, key: K, is: impl Fn(&H, &K) -> bool, make: impl FnOnce(K) -> Result<H, E>) -> Result<(H, bool), E> {
        let mut inner = self.shard(hash).inner.lock();
        if let Some(found) = inner.set.find(hash, |h| is(h, &key)) {
            let found = found.clone();
            inner.hits += 1;
            return Ok((found, true));
        }
        let made = make(key)?;
        Ok((self.add(&mut inner, hash, made), false))
    }

    /// Drops every entry nobody else references; returns how many are left.
    pub fn sweep(&self) -> usize {
        // Dropping an entry may release the last outside reference to another one (in
        // another table), so callers sweeping all tables repeat until nothing changes.
        self.shards
            .iter()
            .map(|shard| {
                let mut inner = shard.inner.lock();
                self.sweep_shard(&mut inner);
                inner.set.len()
            })
            .sum()
    }

    /// The table's counters.
    pub fn stats(&self) -> TableStats {
        let mut stats = {
            let memory = self.memory.lock();
            let encodings = &memory.encodings;
            TableStats { reused_encodings: memory.reused, encodings_bound: encodings.bound, encodings_heap: encodings.heap(), ..TableStats::default() }
        };
        for shard in &self.shards {
            let inner = shard.inner.lock();
            stats.entries += inner.set.len();
            stats.hits += inner.hits;
            stats.misses += inner.misses;
        }
        stats
    }

    /// Holds `made` (of hash `hash`, not held yet) in the shard `inner`, sweeping the shard
    /// when it has doubled.
    fn add(&self, inner: &mut Inner<H>, hash: u64, made: H) -> H {
        inner.misses += 1;
        inner.set.insert_unique(hash, made.clone(), |h| self.hasher.hash_one(h));
        if inner.set.len() >= inner.sweep_at {
            self.sweep_shard(inner);
        }
        made
    }

    fn sweep_shard(&self, inner: &mut Inner<H>) {
        // Remembered encodings hold references; they are a cache, forgotten first (the
        // memory's lock is taken inside a shard's, never the other way round).
        self.memory.lock().encodings.clear();
        // Only the table can hand out a new reference, and the shard is locked: an entry
        // seen as the only reference stays so until it is dropped here.
        inner.set.retain(|h| !h.is_only_reference());
        inner.sweep_at = (inner.set.len() * 2).max(FIRST_SWEEP / SHARDS);
    }
}

/// Hashes remembered encodings' bytes.
const ENCODING_HASHER: Hasher_ = Hasher_::with_seed(0x5eed_1ea6);

impl<T: Hash + Eq> Table<Arc<T>> {
    /// [`Table::intern_owned`], remembering that `encoding` (of the schema `tag`) decodes to
    /// the result.
    pub(crate) fn intern_encoded(&self, value: T, tag: usize, encoding: &[u8]) -> Arc<T> {
        let (held, was_held) = self.intern_found(value);
        if encoding.len() <= MAX_ENCODING_LEN && self.encoding_pause.load(Ordering::Relaxed) == 0 {
            let hash = ENCODING_HASHER.hash_one(encoding);
            self.memory.lock().encodings.insert(hash, tag, encoding, held.clone(), was_held);
        }
        held
    }

    /// The held `Arc` equal to `value`, or `value` itself, now held.
    pub fn intern_owned(&self, value: T) -> Arc<T> {
        self.intern_found(value).0
    }

    /// [`Table::intern_owned`], and whether an equal value was held.
    fn intern_found(&self, value: T) -> (Arc<T>, bool) {
        let hash = self.hasher.hash_one(&value);
        match self.find_or_add(hash, value, |h, value| **h == *value, |value| Ok::<_, std::convert::Infallible>(Arc::new(value))) {
            Ok(found) => found,
        }
    }
}

/// Remembered encodings: their bytes one after another in one buffer (no allocation per
/// entry), each found by the hash of its bytes and then compared in full. Two encodings
/// with one hash keep the later. Invariants: `arena.capacity() <= bound` and
/// `by_hash.len() <= bound / BYTES_PER_ENCODING`.
struct Encodings<H> {
    by_hash: std::collections::HashMap<u64, Encoded<H>, Hasher_>,
    arena: Vec<u8>,
    /// The most bytes remembered at once.
    bound: usize,
    /// Values remembered since the memory last started again that the table already held
    /// (decoded where a larger memory might have found them) …
    decoded_held: u32,
    /// … and that were new.
    decoded_new: u32,
}

struct Encoded<H> {
    /// The schema the bytes encode (two schemas may encode different values alike).
    tag: usize,
    start: usize,
    len: usize,
    held: H,
}

impl<H> Encodings<H> {
    /// The value remembered for `encoding` (of hash `hash`, by [`ENCODING_HASHER`]).
    fn get(&self, hash: u64, tag: usize, encoding: &[u8]) -> Option<&H> {
        let e = self.by_hash.get(&hash)?;
        (e.tag == tag && self.arena[e.start..e.start + e.len] == *encoding).then_some(&e.held)
    }

    /// Remembers that `encoding` (at most [`MAX_ENCODING_LEN`] bytes, of hash `hash`) decodes
    /// to `held`, which the table already held before this decode if `was_held`.
    fn insert(&mut self, hash: u64, tag: usize, encoding: &[u8], held: H, was_held: bool) {
        if self.by_hash.len() >= self.bound / BYTES_PER_ENCODING || self.arena.len() + encoding.len() > self.bound {
            if self.decoded_held >= self.decoded_new {
                self.bound = (self.bound * 2).min(MAX_ENCODED_BYTES);
            }
            self.clear();
        }
        // Saturating: an insert that replaces an entry of the same hash and adds no bytes
        // (an empty encoding of another schema) does not fill the memory.
        if was_held {
            self.decoded_held = self.decoded_held.saturating_add(1);
        } else {
            self.decoded_new = self.decoded_new.saturating_add(1);
        }
        let start = self.arena.len();
        let needed = start + encoding.len();
        if needed > self.arena.capacity() {
            // Grows by doubling as a `Vec` does, but never past the bound.
            self.arena.reserve_exact(needed.max(2 * self.arena.capacity()).min(self.bound) - start);
        }
        self.arena.extend_from_slice(encoding);
        self.by_hash.insert(hash, Encoded { tag, start, len: encoding.len(), held });
    }

    /// Forgets every encoding, keeping the memory for the next ones (within the bound).
    fn clear(&mut self) {
        self.by_hash.clear();
        self.arena.clear();
        self.decoded_held = 0;
        self.decoded_new = 0;
    }

    /// Forgets every encoding, frees the memory that held them and sets the bound back to
    /// the first.
    fn release(&mut self) {
        self.by_hash = std::collections::HashMap::with_hasher(self.by_hash.hasher().clone());
        self.arena = Vec::new();
        self.bound = FIRST_ENCODED_BYTES;
        self.decoded_held = 0;
        self.decoded_new = 0;
    }

    /// Heap held: the buffer's and the index's capacity.
    fn heap(&self) -> usize {
        self.arena.capacity() + self.by_hash.capacity() * (std::mem::size_of::<(u64, Encoded<H>)>() + 1)
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

/// The newtype-struct name under which [`Shared`] asks for its value: the protobuf
/// deserializer answers `visit_borrowed_bytes` with the sub-message's bytes (offering its
/// schema, see `crate::proto::offered`), so a value decoded from equal bytes before is
/// reused; any other deserializer is asked for the value itself.
pub(crate) const TOKEN: &str = "$informer_runtime::Shared";

impl<'de, T: Interned + Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(TOKEN, SharedVisitor(PhantomData))
    }
}

struct SharedVisitor<T>(PhantomData<T>);

impl<'de, T: Interned + Deserialize<'de>> Visitor<'de> for SharedVisitor<T> {
    type Value = Shared<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Shared<T>, D::Error> {
        T::deserialize(d).map(Shared::new)
    }
    /// An encoded protobuf message, offered by the protobuf deserializer.
    fn visit_borrowed_bytes<E: Error>(self, encoding: &'de [u8]) -> Result<Shared<T>, E> {
        let Some(message) = crate::proto::offered::take() else {
            return Err(E::invalid_type(Unexpected::Bytes(encoding), &self));
        };
        let tag = std::ptr::from_ref(message) as usize;
        let table = T::table();
        match table.find_encoded(tag, encoding) {
            Ok(Some(found)) => Ok(Shared(found)),
            Ok(None) => Ok(Shared(table.intern_encoded(crate::proto::offered::decode(message, encoding).map_err(E::custom)?, tag, encoding))),
            Err(()) => crate::proto::offered::decode(message, encoding).map(Shared::new).map_err(E::custom),
        }
    }
    // Deserializers that present a newtype struct as its content.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shared<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Shared::new)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Shared<T>, A::Error> {
        T::deserialize(SeqAccessDeserializer::new(seq)).map(Shared::new)
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
        assert_eq!(table.stats(), TableStats { entries: 2, hits: 1, misses: 2, reused_encodings: 0, encodings_bound: FIRST_ENCODED_BYTES, encodings_heap: 0 });
        drop(c);
        assert_eq!(table.sweep(), 1, "(3, 4) had no reference left but the table's");
        drop((a, b));
        assert_eq!(table.sweep(), 0);
    }

    #[test]
    fn encodings_are_remembered_within_bounds_and_paused_where_they_do_not_repeat() {
        let table: InternTable<u64> = InternTable::new();
        assert_eq!(table.find_encoded(1, b"seven"), Ok(None));
        let seven = table.intern_encoded(7, 1, b"seven");
        assert!(Arc::ptr_eq(&table.find_encoded(1, b"seven").unwrap().unwrap(), &seven));
        assert_eq!(table.find_encoded(2, b"seven"), Ok(None), "the same bytes of another schema");
        assert_eq!(table.stats().reused_encodings, 1);
        // Values that are all new: the memory starts again whenever it is full, and keeps its
        // first bound in entries and bytes.
        let within_bound = |table: &InternTable<u64>| {
            let memory = table.memory.lock();
            let e = &memory.encodings;
            assert!(e.by_hash.len() <= e.bound / BYTES_PER_ENCODING && e.arena.len() <= e.bound && e.arena.capacity() <= e.bound, "{} entries, {} bytes in {} of room, bound {}", e.by_hash.len(), e.arena.len(), e.arena.capacity(), e.bound);
            e.bound
        };
        for i in 0..10_000u64 {
            table.intern_encoded(i + 100, 1, &i.to_le_bytes());
            assert_eq!(within_bound(&table), FIRST_ENCODED_BYTES, "nothing decoded was held before");
        }
        for i in 0..1_000u64 {
            table.intern_encoded(i + 100_000, 1, &[i as u8; 100]);
            assert_eq!(within_bound(&table), FIRST_ENCODED_BYTES, "nothing decoded was held before");
        }
        // Too big to remember.
        let big = vec![0u8; MAX_ENCODING_LEN + 1];
        table.intern_encoded(1, 1, &big);
        assert_eq!(table.find_encoded(1, &big), Ok(None));
        // Values held before, decoded from bytes the memory no longer has: its bound doubles
        // each time it fills, up to the largest; then its bytes and entries stay within it.
        let values: Vec<Arc<u64>> = (0..20_000u64).map(|i| table.intern_owned(i + 1_000_000)).collect();
        let mut bounds = vec![within_bound(&table)];
        for round in 0..3u64 {
            for (i, value) in values.iter().enumerate() {
                let encoding = [(i as u64 + round).to_le_bytes().as_slice(), &[0; 92]].concat();
                assert!(Arc::ptr_eq(&table.intern_encoded(**value, 1, &encoding), value));
                let bound = within_bound(&table);
                if bounds.last() != Some(&bound) {
                    bounds.push(bound);
                }
            }
        }
        assert_eq!(bounds, [16, 32, 64, 128, 256].map(|k| k << 10), "from the first bound to the largest, doubling");
        assert_eq!((FIRST_ENCODED_BYTES, MAX_ENCODED_BYTES), (16 << 10, 256 << 10));
        let stats = table.stats();
        assert_eq!(stats.encodings_bound, MAX_ENCODED_BYTES);
        assert!(stats.encodings_heap >= MAX_ENCODED_BYTES && stats.encodings_heap < 2 * MAX_ENCODED_BYTES, "{} bytes", stats.encodings_heap);
        // Sweeps forget every encoding (they hold references).
        table.sweep();
        assert_eq!(table.memory.lock().encodings.by_hash.len(), 0);
        // Bytes that never repeat pause the lookups for a while, then they resume.
        let table: InternTable<u64> = InternTable::new();
        let mut paused = 0;
        for i in 0..(ENCODING_WINDOW + ENCODING_PAUSE + 1) as u64 {
            match table.find_encoded(1, &i.to_le_bytes()) {
                Ok(None) => drop(table.intern_encoded(i, 1, &i.to_le_bytes())),
                Ok(Some(_)) => panic!("bytes {i} were never seen"),
                Err(()) => {
                    if paused == 0 {
                        let memory = table.memory.lock();
                        assert_eq!((memory.encodings.arena.capacity(), memory.encodings.by_hash.capacity()), (0, 0), "a paused table frees what held its encodings");
                        assert_eq!(memory.encodings.bound, FIRST_ENCODED_BYTES);
                    }
                    paused += 1
                }
            }
        }
        assert_eq!(paused, ENCODING_PAUSE);
        assert_eq!(table.find_encoded(1, &0u64.to_le_bytes()), Ok(None), "resumed, and forgot what it had");
        assert_eq!(table.memory.lock().encodings.by_hash.len(), 1, "only what came after the pause");
    }

    #[test]
    fn threads_interning_at_once_get_one_allocation_per_value() {
        let table: InternTable<u64> = InternTable::new();
        let values: Vec<u64> = (0..20_000).map(|i| i * 7919).collect();
        let held: Vec<Vec<Arc<u64>>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|t| {
                    let (table, values) = (&table, &values);
                    // Each thread in its own order, so that they race on every value.
                    scope.spawn(move || {
                        let mut order: Vec<usize> = (0..values.len()).collect();
                        order.rotate_left(t * values.len() / 4);
                        let mut held = vec![None; values.len()];
                        for i in order {
                            held[i] = Some(table.intern_owned(values[i]));
                        }
                        held.into_iter().map(Option::unwrap).collect()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for (i, value) in values.iter().enumerate() {
            assert_eq!(*held[0][i], *value);
            assert!(held.iter().all(|h| Arc::ptr_eq(&h[i], &held[0][i])), "value {value} held twice");
        }
        let stats = table.stats();
        assert_eq!((stats.entries, stats.misses, stats.hits), (values.len(), values.len() as u64, 3 * values.len() as u64));
        drop(held);
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
