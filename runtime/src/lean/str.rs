//! [`Str`]: an interned, immutable string.
//!
//! Invariant: every `Str` comes from the one process-wide string table, so equal strings
//! share one allocation and compare and hash by address.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{Error, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::intern::{InternTable, TableStats};

static STRINGS: InternTable<str> = InternTable::new();

/// An interned string (16 bytes; the text is stored once per distinct value).
#[derive(Clone)]
pub struct Str(Arc<str>);

impl Str {
    /// The interned `s`; allocates only for a string not held yet.
    pub fn new(s: &str) -> Self {
        Str(STRINGS.intern(s, || Arc::from(s)))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Counters of the string table.
    pub fn table_stats() -> TableStats {
        STRINGS.stats()
    }

    /// Sweeps the string table (see [`super::InternTable::sweep`]).
    pub fn sweep_table() -> usize {
        STRINGS.sweep()
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str::new(s)
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Str {}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl Hash for Str {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0) as *const u8, state)
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl Serialize for Str {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

struct StrVisitor;

impl Visitor<'_> for StrVisitor {
    type Value = Str;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: Error>(self, s: &str) -> Result<Str, E> {
        Ok(Str::new(s))
    }
}

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor)
    }
}
