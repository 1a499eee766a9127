//! Helpers called by code that informer-gen emits. Hand-written code has no need for them.
//!
//! Invariants: decoding a string enum allocates only for a value the schema did not list;
//! listed values map to unit variants straight from the borrowed input. A `Vec` decoded
//! through [`required_vec`] or [`option_vec`] holds no spare capacity. A field name is
//! matched against its struct's [`FromFields::FIELDS`] without allocating; only a name kept
//! in a struct's map of unknown fields ([`FieldOrName`]) is copied.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, Error, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A struct decoded from a map: one `match` on the index of each key in
/// [`FIELDS`](FromFields::FIELDS), instead of serde's derived visitor (a field enum, its
/// visitor, and a sequence form no Kubernetes API sends), which is most of what `cargo
/// check` spends on emitted types. Implemented through [`from_fields!`](crate::from_fields).
///
/// `from_fields` reads every entry: a listed field is decoded into its slot (the last one
/// wins if a name repeats), an unlisted one is skipped (or kept in the struct's map of
/// unknown fields). A missing `Option` field is `None`; a missing required one is the error
/// serde gives (``missing field `x` ``).
pub trait FromFields: Sized {
    /// The type's name, for error messages.
    const NAME: &'static str;
    /// The wire names of the fields, in the order of the indexes `from_fields` matches on.
    const FIELDS: &'static [&'static str];
    /// Decodes the struct from the entries of `map`.
    fn from_fields<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// Implements [`FromFields`] and `Deserialize` for a struct, as `#[derive(Deserialize)]`
/// would, with less for the compiler to check. Each field is given as its index in the
/// list, its name on the wire, its Rust name and how it is read: a module of this one
/// ([`option`], [`option_vec`], [`required`], [`required_vec`], [`default`]). `extra,`
/// before the list keeps unknown fields in the struct's `extra` map.
///
/// ```
/// #[derive(Debug, PartialEq)]
/// struct Port {
///     name: Option<String>,
///     port: i32,
/// }
/// informer_runtime::from_fields!(Port, [(0, "name", name, option), (1, "port", port, required)]);
/// let p: Port = serde_json::from_str(r#"{"port":80}"#).unwrap();
/// assert_eq!(p, Port { name: None, port: 80 });
/// ```
#[macro_export]
macro_rules! from_fields {
    ($ty:ident, [$(($i:literal, $name:literal, $field:ident, $how:ident)),* $(,)?]) => {
        impl $crate::codegen::FromFields for $ty {
            const NAME: &'static str = ::core::stringify!($ty);
            const FIELDS: &'static [&'static str] = &[$($name),*];
            fn from_fields<'de, A: $crate::reexports::serde::de::MapAccess<'de>>(mut map: A) -> ::core::result::Result<Self, A::Error> {
                $( let mut $field = ::core::option::Option::None; )*
                let mut next = 0;
                while let ::core::option::Option::Some(field) = map.next_key_seed($crate::codegen::Field(Self::FIELDS, next))? {
                    // An unknown key (`FIELDS.len()`) leaves the search where it was, as in
                    // the arm that keeps unknown fields.
                    if field < Self::FIELDS.len() {
                        next = field + 1;
                    }
                    match field {
                        $( $i => $field = $crate::codegen::$how::read(&mut map)?, )*
                        _ => $crate::codegen::skip_value(&mut map)?,
                    }
                }
                ::core::result::Result::Ok(Self { $( $field: $crate::codegen::$how::finish($field, $name, &map)?, )* })
            }
        }
        $crate::from_fields!(@deserialize $ty);
    };
    ($ty:ident, extra, [$(($i:literal, $name:literal, $field:ident, $how:ident)),* $(,)?]) => {
        impl $crate::codegen::FromFields for $ty {
            const NAME: &'static str = ::core::stringify!($ty);
            const FIELDS: &'static [&'static str] = &[$($name),*];
            fn from_fields<'de, A: $crate::reexports::serde::de::MapAccess<'de>>(mut map: A) -> ::core::result::Result<Self, A::Error> {
                $( let mut $field = ::core::option::Option::None; )*
                let mut extra = ::std::collections::BTreeMap::new();
                let mut next = 0;
                while let ::core::option::Option::Some(field) = map.next_key_seed($crate::codegen::FieldOrName(Self::FIELDS, next))? {
                    if let ::core::result::Result::Ok(i) = field {
                        next = i + 1;
                    }
                    match field {
                        $( ::core::result::Result::Ok($i) => $field = $crate::codegen::$how::read(&mut map)?, )*
                        ::core::result::Result::Err(name) => $crate::codegen::keep_value(&mut map, &mut extra, name)?,
                        ::core::result::Result::Ok(_) => $crate::codegen::skip_value(&mut map)?,
                    }
                }
                ::core::result::Result::Ok(Self { $( $field: $crate::codegen::$how::finish($field, $name, &map)?, )* extra })
            }
        }
        $crate::from_fields!(@deserialize $ty);
    };
    (@deserialize $ty:ident) => {
        impl<'de> $crate::reexports::serde::Deserialize<'de> for $ty {
            fn deserialize<D: $crate::reexports::serde::Deserializer<'de>>(deserializer: D) -> ::core::result::Result<Self, D::Error> {
                $crate::codegen::deserialize_fields(deserializer)
            }
        }
    };
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

/// The index of `name` in `fields`, looked for from `from` on, then before it. Objects
/// usually list their fields in one order (the API server writes a custom resource's keys
/// sorted, as the generator lists them), so the search from the field after the last one
/// found mostly ends at its first comparison.
#[inline]
fn index_of(fields: &[&str], name: &str, from: usize) -> Option<usize> {
    let (before, after) = fields.split_at(from.min(fields.len()));
    match after.iter().position(|f| same(f, name)) {
        Some(i) => Some(from + i),
        None => before.iter().position(|f| same(f, name)),
    }
}

/// `a == b` for field names, compared in place by machine words (the first and last word
/// overlap for a length that is not a multiple of one) instead of through a call to
/// `memcmp`, which costs more than the comparison itself for names of a few bytes.
#[inline(always)]
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if word8(a, i) != word8(b, i) {
                return false;
            }
            i += 8;
        }
        return word8(a, n - 8) == word8(b, n - 8);
    }
    if n >= 4 {
        return word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// The 8 bytes of `s` from `i`.
#[inline(always)]
fn word8(s: &[u8], i: usize) -> u64 {
    let w: [u8; 8] = s[i..i + 8].try_into().expect("8 bytes");
    u64::from_ne_bytes(w)
}

/// The 4 bytes of `s` from `i`.
#[inline(always)]
fn word4(s: &[u8], i: usize) -> u32 {
    let w: [u8; 4] = s[i..i + 4].try_into().expect("4 bytes");
    u32::from_ne_bytes(w)
}

/// Reads a key as the index of its name in `fields` (`.0`), looked for first from `.1` on
/// (the index after the field read last); `fields.len()` for a name not listed.
pub struct Field(pub &'static [&'static str], pub usize);

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
        Ok(index_of(self.0, s, self.1).unwrap_or(self.0.len()))
    }
    fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<usize, E> {
        Ok(std::str::from_utf8(b).ok().and_then(|s| index_of(self.0, s, self.1)).unwrap_or(self.0.len()))
    }
}

/// Reads a key as the index of its name in `fields` (`.0`, looked for first from `.1` on),
/// or, for a name not listed, the name itself (for a struct that keeps unknown fields).
pub struct FieldOrName(pub &'static [&'static str], pub usize);

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
        Ok(index_of(self.0, s, self.1).ok_or_else(|| s.to_owned()))
    }
    fn visit_string<E: Error>(self, s: String) -> Result<Self::Value, E> {
        Ok(index_of(self.0, &s, self.1).ok_or(s))
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

/// Drops a `Vec`'s spare capacity. JSON gives no length up front, so serde grows a `Vec` by
/// doubling as elements arrive: five large structs would otherwise keep room for eight in
/// every cached object.
fn exact<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

/// An `Option` field: `null` or absent is `None`. Its slot is the field's value.
pub mod option {
    use super::*;

    /// The field's value.
    pub fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A) -> Result<Option<T>, A::Error> {
        map.next_value()
    }

    /// The field from its slot.
    pub fn finish<'de, A: MapAccess<'de>, T>(slot: Option<T>, _name: &'static str, _map: &A) -> Result<Option<T>, A::Error> {
        Ok(slot)
    }
}

/// An `Option<Vec<_>>` field, decoded to its exact length.
pub mod option_vec {
    use super::*;

    /// The field's value.
    pub fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A) -> Result<Option<Vec<T>>, A::Error> {
        Ok(map.next_value::<Option<Vec<T>>>()?.map(exact))
    }

    pub use super::option::finish;
}

/// A required field: absent is serde's error for a missing field.
pub mod required {
    use super::*;

    /// The field's value, in its slot.
    pub fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A) -> Result<Option<T>, A::Error> {
        map.next_value().map(Some)
    }

    /// The field from its slot (`map` names the error type).
    pub fn finish<'de, A: MapAccess<'de>, T>(slot: Option<T>, name: &'static str, _map: &A) -> Result<T, A::Error> {
        slot.ok_or_else(|| A::Error::missing_field(name))
    }
}

/// A required `Vec`, decoded to its exact length.
pub mod required_vec {
    use super::*;

    /// The field's value, in its slot.
    pub fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A) -> Result<Option<Vec<T>>, A::Error> {
        map.next_value().map(|v| Some(exact(v)))
    }

    pub use super::required::finish;
}

/// A field that is its type's default when absent (a resource's `metadata`).
pub mod default {
    use super::*;

    pub use super::required::read;

    /// The field from its slot.
    pub fn finish<'de, A: MapAccess<'de>, T: Default>(slot: Option<T>, _name: &'static str, _map: &A) -> Result<T, A::Error> {
        Ok(slot.unwrap_or_default())
    }
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

    crate::from_fields!(
        Holder,
        [(0, "items", items, required_vec), (1, "more", more, option_vec), (2, "name", name, required), (3, "note", note, option)]
    );

    /// One that keeps the fields it does not name.
    #[derive(Debug, PartialEq)]
    struct Open {
        name: Option<String>,
        extra: BTreeMap<String, serde_json::Value>,
    }

    crate::from_fields!(Open, extra, [(0, "name", name, option)]);

    /// Fields named as the macro's own locals.
    #[derive(Debug, PartialEq)]
    struct Clash {
        map: Option<String>,
        field: i32,
        name: Vec<u8>,
    }

    crate::from_fields!(Clash, [(0, "map", map, option), (1, "field", field, required), (2, "name", name, required_vec)]);

    #[test]
    fn fields_may_share_a_name_with_the_macros_own_variables() {
        let c: Clash = every_way(r#"{"name":[1],"field":2,"map":"m"}"#).unwrap();
        assert_eq!(c, Clash { map: Some("m".into()), field: 2, name: vec![1] });
    }

    #[test]
    fn a_field_is_found_wherever_the_search_starts() {
        let fields = ["a", "b", "c", "d"];
        for from in 0..6 {
            for (i, f) in fields.iter().enumerate() {
                assert_eq!(index_of(&fields, f, from), Some(i), "{f} from {from}");
            }
            assert_eq!(index_of(&fields, "e", from), None);
        }
    }

    #[test]
    fn names_compare_equal_exactly_when_their_bytes_do() {
        // Every length from empty to past two words, against itself, against the same name
        // with one byte changed at each position, and against a name one byte longer.
        let base = "abcdefghijklmnopqrstuvwxyz";
        for n in 0..=20 {
            let a = &base[..n];
            let copy = String::from(a);
            assert!(same(a, &copy), "{a}");
            assert!(!same(a, &base[..n + 1]), "{a}");
            for i in 0..n {
                let mut b = a.as_bytes().to_vec();
                b[i] = b'_';
                let b = String::from_utf8(b).unwrap();
                assert!(!same(a, &b), "{a} {b}");
            }
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
