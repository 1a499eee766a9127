//! Helpers called by code that informer-gen emits. Hand-written code has no need for them.
//!
//! Invariants: decoding a string enum allocates only for a value the schema did not list;
//! listed values map to unit variants straight from the borrowed input. A `Vec` decoded
//! through [`next_vec_exact`] or [`next_option_vec_exact`] holds no spare capacity. A field
//! name is matched against its struct's [`FromFields::FIELDS`] without allocating; only a
//! name kept in a struct's map of unknown fields ([`FieldOrName`]) is copied.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, Error, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A struct decoded from a map by code informer-gen emits: one `match` on the index of each
/// key in [`FIELDS`](FromFields::FIELDS), instead of serde's derived visitor (a field enum,
/// its visitor, and a sequence form no Kubernetes API sends), which is most of what
/// `cargo check` spends on the emitted types.
///
/// The emitted `from_fields` reads every entry: a listed field is decoded into its slot
/// (the last one wins if a name repeats), an unlisted one is skipped (or kept in the
/// struct's map of unknown fields). A missing `Option` field is `None`; a missing required
/// one is the error serde gives (`missing field `x``).
pub trait FromFields: Sized {
    /// The type's name, for error messages.
    const NAME: &'static str;
    /// The wire names of the fields, in the order of the indexes `from_fields` matches on.
    const FIELDS: &'static [&'static str];
    /// Decodes the struct from the entries of `map`.
    fn from_fields<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// `Deserialize::deserialize` of a [`FromFields`] type.
pub fn deserialize_fields<'de, T: FromFields, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    struct Fields<T>(PhantomData<T>);
    impl<'de, T: FromFields> Visitor<'de> for Fields<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "struct {}", T::NAME)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::from_fields(map)
        }
    }
    deserializer.deserialize_struct(T::NAME, T::FIELDS, Fields(PhantomData))
}

fn index_of(fields: &[&str], name: &str) -> Option<usize> {
    fields.iter().position(|f| *f == name)
}

/// Reads a key as the index of its name in `fields`; `fields.len()` for a name not listed.
pub struct Field(pub &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Field {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for Field {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: Error>(self, s: &str) -> Result<usize, E> {
        Ok(index_of(self.0, s).unwrap_or(self.0.len()))
    }
    fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<usize, E> {
        Ok(std::str::from_utf8(b).ok().and_then(|s| index_of(self.0, s)).unwrap_or(self.0.len()))
    }
}

/// Reads a key as the index of its name in `fields`, or, for a name not listed, the name
/// itself (for a struct that keeps unknown fields).
pub struct FieldOrName(pub &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for FieldOrName {
    type Value = Result<usize, String>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for FieldOrName {
    type Value = Result<usize, String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(index_of(self.0, s).ok_or_else(|| s.to_owned()))
    }
    fn visit_string<E: Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(index_of(self.0, &s).ok_or(s))
    }
    fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<Self::Value, E> {
        match std::str::from_utf8(b) {
            Ok(s) => self.visit_str(s),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Bytes(b), &self)),
        }
    }
}

/// Skips the value of a field not listed.
pub fn skip_value<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(drop)
}

/// Keeps the value of a field not listed under its name.
pub fn keep_value<'de, A: MapAccess<'de>>(
    map: &mut A,
    extra: &mut BTreeMap<String, serde_json::Value>,
    name: String,
) -> Result<(), A::Error> {
    let value = map.next_value()?;
    extra.insert(name, value);
    Ok(())
}

/// The value of a required field, or serde's error for a missing one (`map` names the
/// error type).
pub fn required<'de, T, A: MapAccess<'de>>(value: Option<T>, name: &'static str, map: &A) -> Result<T, A::Error> {
    let _ = map;
    value.ok_or_else(|| A::Error::missing_field(name))
}

/// The next value as a `Vec` of its exact length. JSON gives no length up front, so serde
/// grows a `Vec` by doubling as elements arrive: five large structs would otherwise keep
/// room for eight in every cached object.
pub fn next_vec_exact<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A) -> Result<Vec<T>, A::Error> {
    let mut v: Vec<T> = map.next_value()?;
    v.shrink_to_fit();
    Ok(v)
}

/// The next value as an optional `Vec` of its exact length (`null` is `None`).
pub fn next_option_vec_exact<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A) -> Result<Option<Vec<T>>, A::Error> {
    let mut v: Option<Vec<T>> = map.next_value()?;
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

    /// A struct as informer-gen emits one: `items` a required `Vec`, `more` an optional
    /// one, `name` required, `note` optional.
    #[derive(Debug, PartialEq)]
    struct Holder {
        items: Vec<[u64; 8]>,
        more: Option<Vec<String>>,
        name: String,
        note: Option<String>,
    }

    impl FromFields for Holder {
        const NAME: &'static str = "Holder";
        const FIELDS: &'static [&'static str] = &["items", "more", "name", "note"];
        fn from_fields<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
            let (mut f0, mut f1, mut f2, mut f3) = (None, None, None, None);
            while let Some(field) = map.next_key_seed(Field(Self::FIELDS))? {
                match field {
                    0 => f0 = Some(next_vec_exact(&mut map)?),
                    1 => f1 = next_option_vec_exact(&mut map)?,
                    2 => f2 = Some(map.next_value()?),
                    3 => f3 = map.next_value()?,
                    _ => skip_value(&mut map)?,
                }
            }
            Ok(Holder { items: required(f0, "items", &map)?, more: f1, name: required(f2, "name", &map)?, note: f3 })
        }
    }

    impl<'de> Deserialize<'de> for Holder {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserialize_fields(deserializer)
        }
    }

    /// One that keeps the fields it does not name.
    #[derive(Debug, PartialEq)]
    struct Open {
        name: Option<String>,
        extra: BTreeMap<String, serde_json::Value>,
    }

    impl FromFields for Open {
        const NAME: &'static str = "Open";
        const FIELDS: &'static [&'static str] = &["name"];
        fn from_fields<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
            let mut f0 = None;
            let mut extra = BTreeMap::new();
            while let Some(field) = map.next_key_seed(FieldOrName(Self::FIELDS))? {
                match field {
                    Ok(0) => f0 = map.next_value()?,
                    Err(name) => keep_value(&mut map, &mut extra, name)?,
                    Ok(_) => skip_value(&mut map)?,
                }
            }
            Ok(Open { name: f0, extra })
        }
    }

    impl<'de> Deserialize<'de> for Open {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserialize_fields(deserializer)
        }
    }

    const ROW: &str = "[1,2,3,4,5,6,7,8]";

    /// Decodes `json` from bytes (keys borrowed), from a string with every key escaped
    /// (keys copied by the decoder) and from a `serde_json::Value` (keys owned): each way a
    /// key reaches the field visitor.
    /// Errors without their position, which only a decoder from text gives.
    fn every_way<T: serde::de::DeserializeOwned + PartialEq + fmt::Debug>(json: &str) -> Result<T, String> {
        let message = |e: serde_json::Error| {
            let e = e.to_string();
            e.split(" at line ").next().unwrap_or_default().to_string()
        };
        let borrowed = serde_json::from_slice::<T>(json.as_bytes()).map_err(message);
        let owned = serde_json::from_value::<T>(serde_json::from_str(json).unwrap()).map_err(message);
        // `"name":` becomes `"\u006eame":`, which the decoder unescapes into a scratch buffer.
        let escaped = json.replace("\"n", "\"\\u006e").replace("\"i", "\"\\u0069").replace("\"m", "\"\\u006d");
        let copied = serde_json::from_str::<T>(&escaped).map_err(message);
        assert_eq!(borrowed, owned, "{json}");
        assert_eq!(borrowed, copied, "{escaped}");
        borrowed
    }

    #[test]
    fn fields_decode_by_name_whatever_their_order_and_unknown_ones_are_skipped() {
        let json = format!(r#"{{"note":"n","zzz":{{"deep":[1,{{"x":null}}]}},"name":"a","items":[{ROW}],"more":null}}"#);
        let h: Holder = every_way(&json).unwrap();
        assert_eq!(h, Holder { items: vec![[1, 2, 3, 4, 5, 6, 7, 8]], more: None, name: "a".into(), note: Some("n".into()) });
        // Absent optional fields are `None`; `null` is `None` too.
        let h: Holder = every_way(r#"{"name":"b","items":[],"note":null}"#).unwrap();
        assert_eq!((h.more, h.note), (None, None));
        // A repeated field: the last one wins.
        let h: Holder = every_way(r#"{"name":"b","items":[],"name":"c"}"#).unwrap();
        assert_eq!(h.name, "c");
    }

    #[test]
    fn a_missing_required_field_or_a_wrong_shape_is_serdes_error() {
        let e = every_way::<Holder>(r#"{"items":[]}"#).unwrap_err();
        assert!(e.starts_with("missing field `name`"), "{e}");
        let e = every_way::<Holder>(r#"{"name":"a"}"#).unwrap_err();
        assert!(e.starts_with("missing field `items`"), "{e}");
        let e = every_way::<Holder>(r#"{"name":null,"items":[]}"#).unwrap_err();
        assert!(e.contains("expected a string"), "{e}");
        let e = every_way::<Holder>(r#"["a",[]]"#).unwrap_err();
        assert!(e.contains("expected struct Holder"), "{e}");
    }

    #[test]
    fn vectors_decode_to_their_exact_length() {
        let json = format!(r#"{{"items":[{ROW},{ROW},{ROW},{ROW},{ROW}],"more":["a","b","c","d","e"],"name":"x"}}"#);
        let h: Holder = every_way(&json).unwrap();
        assert_eq!((h.items.len(), h.items.capacity()), (5, 5));
        assert_eq!(h.items[4][7], 8);
        let more = h.more.unwrap();
        assert_eq!((more.len(), more.capacity()), (5, 5));
        assert_eq!(more[4], "e");
        // Plain serde would have kept spare room (the reason for the helpers).
        let plain: Vec<[u64; 8]> = serde_json::from_str(&format!("[{ROW},{ROW},{ROW},{ROW},{ROW}]")).unwrap();
        assert!(plain.capacity() > plain.len());
    }

    #[test]
    fn a_struct_that_preserves_unknown_fields_keeps_them_by_name() {
        let o: Open = every_way(r#"{"other":{"a":[1,2]},"name":"n","more":null}"#).unwrap();
        assert_eq!(o.name.as_deref(), Some("n"));
        assert_eq!(o.extra.len(), 2);
        assert_eq!(o.extra["other"], serde_json::json!({"a": [1, 2]}));
        assert_eq!(o.extra["more"], serde_json::Value::Null);
    }
}
