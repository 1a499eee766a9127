//! Helpers called by code that informer-gen emits. Hand-written code has no need for them.
//!
//! Invariants: decoding a string enum allocates only for a value the schema did not list;
//! listed values map to unit variants straight from the borrowed input. A `Vec` decoded
//! through [`deserialize_vec_exact`] holds no spare capacity.

use std::fmt;

use serde::de::{Error, Visitor};
use serde::{Deserialize, Deserializer};

/// Decodes a `Vec` to its exact length. JSON gives no length up front, so serde grows a
/// `Vec` by doubling as elements arrive: five large structs would otherwise keep room for
/// eight in every cached object.
pub fn deserialize_vec_exact<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut v = Vec::<T>::deserialize(deserializer)?;
    v.shrink_to_fit();
    Ok(v)
}

/// [`deserialize_vec_exact`] for an optional `Vec` (`null` is `None`).
pub fn deserialize_option_vec_exact<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut v = Option::<Vec<T>>::deserialize(deserializer)?;
    if let Some(v) = &mut v {
        v.shrink_to_fit();
    }
    Ok(v)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        #[serde(deserialize_with = "deserialize_vec_exact")]
        items: Vec<[u64; 8]>,
        #[serde(default, deserialize_with = "deserialize_option_vec_exact")]
        more: Option<Vec<String>>,
        #[serde(default, deserialize_with = "deserialize_option_vec_exact")]
        absent: Option<Vec<String>>,
        #[serde(default, deserialize_with = "deserialize_option_vec_exact")]
        null: Option<Vec<String>>,
    }

    #[test]
    fn vectors_decode_to_their_exact_length() {
        let row = "[1,2,3,4,5,6,7,8]";
        let json = format!(r#"{{"items":[{row},{row},{row},{row},{row}],"more":["a","b","c","d","e"],"null":null}}"#);
        let h: Holder = serde_json::from_str(&json).unwrap();
        assert_eq!((h.items.len(), h.items.capacity()), (5, 5));
        assert_eq!(h.items[4][7], 8);
        let more = h.more.unwrap();
        assert_eq!((more.len(), more.capacity()), (5, 5));
        assert_eq!(more[4], "e");
        assert_eq!(h.absent, None);
        assert_eq!(h.null, None);
        // Plain serde would have kept spare room (the reason for the helper).
        let plain: Vec<[u64; 8]> = serde_json::from_str(&format!("[{row},{row},{row},{row},{row}]")).unwrap();
        assert!(plain.capacity() > plain.len());
    }
}
