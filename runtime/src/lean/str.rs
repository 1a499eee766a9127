//! [`Str`]: an interned, immutable string.
//!
//! Invariants: every `Str` comes from a string table — the process-wide one, or (for
//! [`super::RawJson`]'s texts) a table of its own whose `Str`s are never compared with
//! these — so equal strings of one table share one allocation and compare and hash by
//! address. The allocation (a [`ThinStr`]) is freed when the last `Str` (the table's
//! included) is dropped.
//!
//! Each thread also keeps the short strings (at most [`RECENT_MAX_LEN`] bytes) of the
//! process-wide table it interned last, one per slot of [`RECENT_SLOTS`] chosen by a hash
//! of their bytes; a string found there is taken without the table's lock. Those slots are
//! references like any other: a string held only by the table and a slot outlives its last
//! outside reference (and survives sweeps) until the slot is reused or the thread ends —
//! at most `RECENT_SLOTS × RECENT_MAX_LEN` bytes of text per thread.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::convert::Infallible;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use serde::de::{Error, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::intern::{Held, Table, TableStats};
use crate::thin_str::ThinStr;

/// A table of strings, looked up by their bytes.
pub(crate) type StrTable = Table<ByContent>;

static STRINGS: StrTable = Table::new();

/// Longest string a thread's recent strings hold.
const RECENT_MAX_LEN: usize = 64;
/// Slots of a thread's recent strings (a power of two).
const RECENT_SLOTS: usize = 1024;
const RECENT_HASHER: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x5eed_1ea7);

thread_local! {
    /// The short strings of [`STRINGS`] this thread interned last (empty until first used).
    static RECENT: RefCell<Vec<Option<Str>>> = const { RefCell::new(Vec::new()) };
}

/// `bytes` interned in [`STRINGS`], found first among the thread's recent strings; for
/// bytes not held yet, `check` gives the text to hold (equal to `bytes`) or the error.
fn intern_global<'b, E>(bytes: &'b [u8], check: impl FnOnce(&'b [u8]) -> Result<&'b str, E>) -> Result<Str, E> {
    if bytes.len() > RECENT_MAX_LEN {
        return Str::try_intern_in(&STRINGS, bytes, check);
    }
    let slot = {
        use std::hash::BuildHasher;
        (RECENT_HASHER.hash_one(bytes) >> (64 - RECENT_SLOTS.trailing_zeros())) as usize
    };
    let recent = RECENT.try_with(|recent| recent.borrow().get(slot).and_then(Option::as_ref).filter(|s| s.as_bytes() == bytes).cloned());
    if let Ok(Some(found)) = recent {
        return Ok(found);
    }
    let held = Str::try_intern_in(&STRINGS, bytes, check)?;
    // During the thread's exit the slots are gone: the table alone answers.
    let _ = RECENT.try_with(|recent| {
        let mut recent = recent.borrow_mut();
        if recent.is_empty() {
            recent.resize_with(RECENT_SLOTS, || None);
        }
        recent[slot] = Some(held.clone());
    });
    Ok(held)
}

/// An interned string: one pointer (8 bytes, 8 with `Option`), to a count, a length and
/// the text, stored once per distinct value.
#[derive(Clone)]
pub struct Str(ThinStr);

impl Str {
    /// The interned `s`; allocates only for a string not held yet.
    pub fn new(s: &str) -> Self {
        match intern_global(s.as_bytes(), |_| Ok::<_, Infallible>(s)) {
            Ok(held) => held,
        }
    }

    /// The interned text of `bytes`; they are checked to be UTF-8 only when not held yet.
    pub fn from_utf8(bytes: &[u8]) -> Result<Self, std::str::Utf8Error> {
        intern_global(bytes, std::str::from_utf8)
    }

    /// `s` interned in `table`.
    pub(crate) fn intern_in(table: &StrTable, s: &str) -> Self {
        table.intern(s.as_bytes(), || ByContent(Str::alloc(s))).0
    }

    /// `bytes` interned in `table`; for bytes not held yet, `check` gives the text to hold
    /// (which must equal `bytes`) or the error returned.
    pub(crate) fn try_intern_in<'b, E>(table: &StrTable, bytes: &'b [u8], check: impl FnOnce(&'b [u8]) -> Result<&'b str, E>) -> Result<Self, E> {
        let held = table.try_intern(bytes, || {
            let text = check(bytes)?;
            debug_assert_eq!(text.as_bytes(), bytes);
            Ok(ByContent(Str::alloc(text)))
        })?;
        Ok(held.0)
    }

    fn alloc(s: &str) -> Self {
        Str(ThinStr::new(s))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Counters of the string table.
    pub fn table_stats() -> TableStats {
        STRINGS.stats()
    }

    /// Sweeps the string table (see [`super::Table::sweep`]).
    pub fn sweep_table() -> usize {
        STRINGS.sweep()
    }
}

/// A `Str` hashed and compared by its bytes, as a table holds it.
#[derive(Clone)]
pub(crate) struct ByContent(Str);

impl PartialEq for ByContent {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for ByContent {}

impl Hash for ByContent {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_bytes().hash(state)
    }
}

impl Borrow<[u8]> for ByContent {
    fn borrow(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Held for ByContent {
    fn is_only_reference(&self) -> bool {
        self.0.0.is_only_reference()
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str::new(s)
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Self) -> bool {
        self.0.allocation() == other.0.allocation()
    }
}

impl Eq for Str {}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Hash for Str {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0.allocation(), state)
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl Serialize for Str {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: Error>(self, s: &str) -> Result<Str, E> {
        Ok(Str::new(s))
    }
    /// Text not checked to be UTF-8 yet, from a deserializer that answers [`TOKEN`].
    fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Str, E> {
        Str::from_utf8(bytes).map_err(E::custom)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Str, D::Error> {
        d.deserialize_str(self)
    }
}

/// The newtype-struct name under which [`Str`] asks for its value: a deserializer holding
/// the text as bytes not yet checked to be UTF-8 (the protobuf decoder) may answer
/// `visit_bytes` with them, so a string already interned is never checked again; any other
/// deserializer is asked for a string.
pub(crate) const TOKEN: &str = "$informer_runtime::Str";

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(TOKEN, StrVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_allocation_per_distinct_string_freed_with_the_last_reference() {
        assert_eq!(std::mem::size_of::<Option<Str>>(), 8);
        let a = Str::new("thin-str-test-value");
        let b = Str::from("thin-str-test-value");
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_ptr(), b.as_ptr()));
        assert_eq!(a.as_str(), "thin-str-test-value");
        assert_ne!(a, Str::new("thin-str-test-other"));
        assert_eq!(Str::new("").as_str(), "");
        let c = a.clone();
        drop((a, b));
        assert_eq!(c, "thin-str-test-value");
        let decoded: Str = serde_json::from_str(r#""thin-str-test-value""#).unwrap();
        assert!(std::ptr::eq(decoded.as_ptr(), c.as_ptr()));
        assert_eq!(serde_json::to_string(&decoded).unwrap(), r#""thin-str-test-value""#);
        // From bytes: a held string is found without a check, a new one is checked.
        assert!(std::ptr::eq(Str::from_utf8(b"thin-str-test-value").unwrap().as_ptr(), c.as_ptr()));
        assert_eq!(Str::from_utf8("thin-str-t\u{e9}st".as_bytes()).unwrap(), "thin-str-t\u{e9}st");
        assert!(Str::from_utf8(b"thin-str-test-\xff").is_err());
        // As map keys and values through serde_json.
        let map: std::collections::HashMap<Str, Str> = serde_json::from_str(r#"{"thin-str-test-value":"v"}"#).unwrap();
        assert_eq!(map.get(&c).map(Str::as_str), Some("v"));
    }

    #[test]
    fn recent_strings_answer_the_table_s_string_on_every_thread() {
        // More strings than slots, so slots are reused and some lookups go to the table.
        let texts: Vec<String> = (0..4 * RECENT_SLOTS).map(|i| format!("recent-str-test-{i}")).collect();
        let first: Vec<Str> = texts.iter().map(|t| Str::new(t)).collect();
        let same_again = |texts: &[String], first: &[Str]| {
            for (t, held) in texts.iter().zip(first) {
                let again = Str::from_utf8(t.as_bytes()).unwrap();
                assert!(std::ptr::eq(again.as_ptr(), held.as_ptr()), "{t}");
                assert_eq!(again, t.as_str());
                assert!(std::ptr::eq(Str::new(t).as_ptr(), held.as_ptr()), "{t}");
            }
        };
        same_again(&texts, &first);
        std::thread::scope(|scope| scope.spawn(|| same_again(&texts, &first)).join().unwrap());
        // Longer than the slots hold: the table alone.
        let long = "recent-str-test-".repeat(RECENT_MAX_LEN / 16 + 1);
        assert!(std::ptr::eq(Str::new(&long).as_ptr(), Str::from_utf8(long.as_bytes()).unwrap().as_ptr()));
        // Bytes that are not UTF-8 are refused, recent strings or not.
        assert!(Str::from_utf8(b"recent-str-test-\xff").is_err());
    }
}
