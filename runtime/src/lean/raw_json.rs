//! [`RawJson`]: any JSON value kept as its compact text, interned (for `FieldsV1`,
//! `RawExtension`, `JSON` and other free-form fields).
//!
//! Invariants: the text is the value re-encoded compactly (object members in the order they
//! arrived), so decoding and encoding again gives the same JSON value. Texts are interned in
//! a table of their own, which holds only such texts: a text found there is taken without
//! being parsed again. It is decoded by
//! transcoding from any serde `Deserializer`, without building a `serde_json::Value` tree;
//! a deserializer that holds the value as JSON text already (the protobuf decoder's raw
//! extensions and `FieldsV1`) hands the text over whole (see [`TOKEN`]), and text that is
//! already what transcoding would write is interned as it is.

use std::fmt;

use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::str::StrTable;
use super::{Str, TableStats};

static TEXTS: StrTable = StrTable::new();

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

    /// Counters of the table of texts.
    pub fn table_stats() -> TableStats {
        TEXTS.stats()
    }

    /// Sweeps the table of texts (see [`super::Table::sweep`]).
    pub fn sweep_table() -> usize {
        TEXTS.sweep()
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

/// The newtype-struct name under which [`RawJson`] asks for its value: a deserializer that
/// holds the value as JSON text may answer `visit_bytes` with that text; any other answer is
/// transcoded.
pub(crate) const TOKEN: &str = "$informer_runtime::RawJson";

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(TOKEN, RawJsonVisitor)
    }
}

struct RawJsonVisitor;

impl<'de> Visitor<'de> for RawJsonVisitor {
    type Value = RawJson;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<RawJson, D::Error> {
        transcoded(|t| t.deserialize(d))
    }
    /// JSON text, from a deserializer that holds it as such.
    fn visit_bytes<E: Error>(self, text: &[u8]) -> Result<RawJson, E> {
        if let Ok(held) = Str::try_intern_in(&TEXTS, text, |t| as_transcoded(t).ok_or(())) {
            return Ok(RawJson(held));
        }
        let mut json = serde_json::Deserializer::from_slice(text);
        let raw = transcoded(|t| t.deserialize(&mut json)).map_err(E::custom)?;
        json.end().map_err(E::custom)?;
        Ok(raw)
    }
    // Deserializers that present a newtype struct as its content.
    fn visit_bool<E: Error>(self, v: bool) -> Result<RawJson, E> {
        transcoded(|t| t.visit_bool(v))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<RawJson, E> {
        transcoded(|t| t.visit_i64(v))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<RawJson, E> {
        transcoded(|t| t.visit_u64(v))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<RawJson, E> {
        transcoded(|t| t.visit_f64(v))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<RawJson, E> {
        transcoded(|t| t.visit_str(v))
    }
    fn visit_unit<E: Error>(self) -> Result<RawJson, E> {
        transcoded(|t| t.visit_unit())
    }
    fn visit_none<E: Error>(self) -> Result<RawJson, E> {
        transcoded(|t| t.visit_none())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawJson, D::Error> {
        transcoded(|t| t.visit_some(d))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawJson, A::Error> {
        transcoded(|t| t.visit_seq(seq))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawJson, A::Error> {
        transcoded(|t| t.visit_map(map))
    }
}

/// The interned text `fill` transcodes.
fn transcoded<E: Error>(fill: impl FnOnce(Transcode<'_>) -> Result<(), E>) -> Result<RawJson, E> {
    let mut buf = Vec::new();
    fill(Transcode(&mut buf))?;
    let text = std::str::from_utf8(&buf).map_err(E::custom)?;
    Ok(RawJson(Str::intern_in(&TEXTS, text)))
}

/// `text` when it is valid JSON and byte for byte what transcoding it would write: no
/// whitespace between tokens, integers only (short enough to stay integers, no `-0`), and no
/// string escapes that serde_json writes otherwise (`\u…`, `\/`). `None` means: transcode
/// it (which also reports what is wrong with it). One pass, no allocation.
fn as_transcoded(text: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(text).ok()?;
    let end = compact_value(text.as_bytes(), 0, 0)?;
    (end == text.len()).then_some(text)
}

/// Containers nest at most this deep in text taken as it is (below serde_json's limit of 128).
const MAX_DEPTH: usize = 100;

/// The end of the compact JSON value starting at `at`.
fn compact_value(b: &[u8], at: usize, depth: usize) -> Option<usize> {
    match *b.get(at)? {
        b'"' => compact_string(b, at),
        b'{' | b'[' if depth == MAX_DEPTH => None,
        b'{' => {
            let mut i = at + 1;
            if b.get(i) == Some(&b'}') {
                return Some(i + 1);
            }
            loop {
                i = compact_string(b, i)?;
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i = compact_value(b, i + 1, depth + 1)?;
                match b.get(i)? {
                    b',' => i += 1,
                    b'}' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b'[' => {
            let mut i = at + 1;
            if b.get(i) == Some(&b']') {
                return Some(i + 1);
            }
            loop {
                i = compact_value(b, i, depth + 1)?;
                match b.get(i)? {
                    b',' => i += 1,
                    b']' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b't' => literal(b, at, b"true"),
        b'f' => literal(b, at, b"false"),
        b'n' => literal(b, at, b"null"),
        b'-' | b'0'..=b'9' => compact_integer(b, at),
        _ => None,
    }
}

fn literal(b: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    b[at..].starts_with(word).then_some(at + word.len())
}

/// The end of the string starting at `at` (a `"`), if serde_json would write it the same.
fn compact_string(b: &[u8], at: usize) -> Option<usize> {
    if b.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        let special = b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        i += special;
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' if matches!(b.get(i + 1), Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't')) => i += 2,
            _ => return None,
        }
    }
}

/// The end of the integer starting at `at`, if it is one serde_json keeps as an integer and
/// writes the same (at most 18 digits, no `-0`, no fraction or exponent).
fn compact_integer(b: &[u8], at: usize) -> Option<usize> {
    let start = if b[at] == b'-' { at + 1 } else { at };
    let digits = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
    let end = start + digits;
    let leading_zero = b.get(start) == Some(&b'0');
    if digits == 0 || digits > 18 || (leading_zero && (digits > 1 || start > at)) {
        return None;
    }
    if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some(end)
}

/// Writes the JSON text of whatever it is fed into its buffer.
struct Transcode<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn push_json<T: Serialize + ?Sized, E: Error>(buf: &mut Vec<u8>, v: &T) -> Result<(), E> {
    serde_json::to_writer(buf, v).map_err(E::custom)
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<(), E> {
        push_json(self.0, &v)
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<(), E> {
        push_json(self.0, &v)
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<(), E> {
        push_json(self.0, &v)
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        push_json(self.0, v)
    }
    fn visit_unit<E: Error>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_none<E: Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let len = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Transcode(self.0))?.is_none() {
                self.0.truncate(len);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push(b'{');
        let mut first = true;
        loop {
            let len = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if map.next_key_seed(TranscodeKey(self.0))?.is_none() {
                self.0.truncate(len);
                break;
            }
            self.0.push(b':');
            map.next_value_seed(Transcode(self.0))?;
            first = false;
        }
        self.0.push(b'}');
        Ok(())
    }
}

/// Writes an object's key, which must be a string, as JSON text to the buffer it holds,
/// without an owned copy of it (serde reads a `Cow<str>` as a `String`).
struct TranscodeKey<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for TranscodeKey<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for TranscodeKey<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        push_json(self.0, v)
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
    fn json_text_handed_over_whole_equals_its_transcoding() {
        let texts = [
            r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{}}}"#,
            r#"[1,-2,true,false,null,"e","a\"b\\c\n\t",{},[]]"#,
            r#"{"x": 1}"#,
            r#"[1.5,1e3,1E3,-0,12345678901234567890123]"#,
            r#"["\u003c\u2028","\/"]"#,
            r#""plain""#,
            r#"-7"#,
        ];
        for text in texts {
            let whole = RawJsonVisitor.visit_bytes::<serde_json::Error>(text.as_bytes()).unwrap();
            assert_eq!(whole, RawJson::from_json(text).unwrap(), "{text}");
        }
        // Only text already in transcoded form is taken as it is.
        assert!(as_transcoded(texts[0].as_bytes()).is_some());
        assert!(as_transcoded(texts[1].as_bytes()).is_some());
        assert!(texts[2..5].iter().all(|t| as_transcoded(t.as_bytes()).is_none()));
        for bad in [&b"{"[..], b"{\"a\":}", b"\xff", b"", b"[1]x", b"[1,]", b"{\"a\":1,}", b"[01]", b"-", b"tru", b"\"a\x01\"", b"{1:2}", b"[\"a\"\"b\"]"] {
            assert!(as_transcoded(bad).is_none());
            assert!(RawJsonVisitor.visit_bytes::<serde_json::Error>(bad).is_err());
        }
    }

    #[test]
    fn text_taken_as_it_is_is_exactly_what_transcoding_writes() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let too_deep = format!("[{deep}]");
        let texts = [
            r#"{"a":{"b":[1,2,{"c":null}],"d":true},"e":"x\"y","f":-12,"g":0,"h":-1}"#,
            r#"{"":{},"k:{\"name\":\"c\"}":{".":{}}}"#,
            r#"[-0]"#,
            r#"[00]"#,
            r#"[123456789012345678]"#,
            r#"[-123456789012345678]"#,
            r#"{"a" :1}"#,
            r#"[1e5]"#,
            r#""\/""#,
            "\"é\u{7f}\"",
            &deep,
            &too_deep,
        ];
        for text in texts {
            let taken = as_transcoded(text.as_bytes());
            let transcoded = RawJson::from_json(text).ok();
            if let Some(taken) = taken {
                assert_eq!(Some(taken), transcoded.as_ref().map(RawJson::as_str), "{text}");
            }
            assert_eq!(taken.is_some(), transcoded.as_ref().is_some_and(|t| t.as_str() == text) && text != too_deep, "{text}");
        }
        // Longer integers are transcoded even where that would not change them.
        assert!(as_transcoded(b"[1234567890123456789]").is_none());
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
