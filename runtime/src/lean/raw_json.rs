//! [`RawJson`]: any JSON value kept as its compact text, interned (for `FieldsV1`,
//! `RawExtension`, `JSON` and other free-form fields).
//!
//! Invariant: the text is the value re-encoded compactly (object members in the order they
//! arrived), so decoding and encoding again gives the same JSON value. It is decoded by
//! transcoding from any serde `Deserializer`, without building a `serde_json::Value` tree.

use std::fmt;

use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Str;

/// A JSON value kept as interned compact text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson(Str);

impl RawJson {
    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses `text` (which must be JSON) into a `RawJson`.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let v = RawJson::deserialize(&mut de)?;
        de.end()?;
        Ok(v)
    }

    /// The value as a `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).expect("RawJson holds valid JSON")
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut buf = String::new();
        Transcode(&mut buf).deserialize(d)?;
        Ok(RawJson(Str::new(&buf)))
    }
}

/// Writes the JSON text of whatever it is fed into its buffer.
struct Transcode<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn push_json<T: Serialize + ?Sized, E: Error>(buf: &mut String, v: &T) -> Result<(), E> {
    // serde_json writes valid UTF-8.
    let text = serde_json::to_string(v).map_err(E::custom)?;
    buf.push_str(&text);
    Ok(())
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<(), E> {
        self.0.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<(), E> {
        self.0.push_str(&v.to_string());
        Ok(())
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<(), E> {
        self.0.push_str(&v.to_string());
        Ok(())
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<(), E> {
        push_json(self.0, &v)
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        push_json(self.0, v)
    }
    fn visit_unit<E: Error>(self) -> Result<(), E> {
        self.0.push_str("null");
        Ok(())
    }
    fn visit_none<E: Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push('[');
        let mut first = true;
        loop {
            let len = self.0.len();
            if !first {
                self.0.push(',');
            }
            if seq.next_element_seed(Transcode(self.0))?.is_none() {
                self.0.truncate(len);
                break;
            }
            first = false;
        }
        self.0.push(']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push('{');
        let mut first = true;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if !first {
                self.0.push(',');
            }
            first = false;
            push_json(self.0, &*key)?;
            self.0.push(':');
            map.next_value_seed(Transcode(self.0))?;
        }
        self.0.push('}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_value_and_member_order() {
        let text = r#" { "f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "z": [1, -2, 1.5, "a\"b", null, true, []], "a": {} } "#;
        let raw = RawJson::from_json(text).unwrap();
        assert_eq!(raw.as_str(), r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"z":[1,-2,1.5,"a\"b",null,true,[]],"a":{}}"#);
        assert_eq!(serde_json::to_string(&raw).unwrap(), raw.as_str());
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(raw.to_value(), v);
        // From a Value (a non-streaming deserializer) too.
        let again: RawJson = serde_json::from_value(v).unwrap();
        assert_eq!(again.to_value(), raw.to_value());
    }

    #[test]
    fn equal_values_share_one_allocation() {
        let a = RawJson::from_json(r#"{"x": [1, 2]}"#).unwrap();
        let b = RawJson::from_json(r#"{"x":[1,2]}"#).unwrap();
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_str().as_ptr(), b.as_str().as_ptr()));
        assert_ne!(a, RawJson::from_json(r#"{"x":[2,1]}"#).unwrap());
    }
}
