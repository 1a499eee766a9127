//! Helpers called by code that informer-gen emits. Hand-written code has no need for them.
//!
//! Invariant: decoding a string enum allocates only for a value the schema did not list;
//! listed values map to unit variants straight from the borrowed input.

use std::fmt;

use serde::Deserializer;
use serde::de::{Error, Visitor};

/// Decodes a string into a generated enum: `known` maps listed values to their variants,
/// `other` keeps any other value as sent.
pub fn deserialize_str_enum<'de, D, T>(deserializer: D, known: fn(&str) -> Option<T>, other: fn(String) -> T) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct StrEnum<T> {
        known: fn(&str) -> Option<T>,
        other: fn(String) -> T,
    }
    impl<T> Visitor<'_> for StrEnum<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: Error>(self, s: &str) -> Result<T, E> {
            Ok((self.known)(s).unwrap_or_else(|| (self.other)(s.to_owned())))
        }
        fn visit_string<E: Error>(self, s: String) -> Result<T, E> {
            Ok(match (self.known)(&s) {
                Some(t) => t,
                None => (self.other)(s),
            })
        }
    }
    deserializer.deserialize_str(StrEnum { known, other })
}
