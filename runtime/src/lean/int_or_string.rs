//! [`IntOrString`]: the lean form of `intstr.IntOrString`.

use std::fmt;

use serde::de::{Error, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Str;

/// An integer or a string (ports, `maxUnavailable`, …), as sent.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum IntOrString {
    /// An integer.
    Int(i32),
    /// A string.
    String(Str),
}

impl Serialize for IntOrString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrString::Int(i) => s.serialize_i32(*i),
            IntOrString::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an int32 or a string")
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<IntOrString, E> {
                i32::try_from(v).map(IntOrString::Int).map_err(|_| E::custom(format!("{v} is out of int32 range")))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<IntOrString, E> {
                i32::try_from(v).map(IntOrString::Int).map_err(|_| E::custom(format!("{v} is out of int32 range")))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(Str::new(v)))
            }
        }
        d.deserialize_any(V)
    }
}
