//! A serde `Deserializer` over protobuf bytes, driven by a [`Message`] table: each message
//! is presented as a map keyed by its fields' JSON names, so any type that deserializes
//! from the API server's JSON (k8s-openapi's, the lean layout's, kube's) decodes from its
//! protobuf unchanged, borrowing strings from the input.
//!
//! Invariants:
//! - A message's fields are presented in wire order; the occurrences of a repeated field
//!   (or map) that follow one another are one list (or map) — Go's encoder writes each
//!   field's occurrences together, in field-number order.
//! - An `inline` field's message contributes its fields to the enclosing map.
//! - `omit_zero` fields whose value is zero are not presented (their JSON has no key).
//! - Special kinds are presented as their JSON is: times as RFC 3339 strings (`null` when
//!   the message is empty), quantities as strings, int-or-strings as either, raw JSON through
//!   serde_json, bytes as base64.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;

use super::ProtoError;
use super::descriptor::{Field, Kind, Message};
use super::timestamp;
use super::wire::{Reader, Value};

/// Deserializes one message of type `message` from `bytes`; `type_meta`, when given, is
/// presented first as `apiVersion` and `kind` (they travel outside the message).
pub(crate) struct MessageDeserializer<'de> {
    pub(crate) message: &'static Message,
    pub(crate) bytes: &'de [u8],
    pub(crate) type_meta: Option<(&'de str, &'de str)>,
}

impl<'de> de::Deserializer<'de> for MessageDeserializer<'de> {
    type Error = ProtoError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_map(Fields::new(self.message, self.bytes, self.type_meta))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// Inline messages nest at most this deep (Kubernetes' go one deep: `Volume` → `VolumeSource`).
const MAX_INLINE_DEPTH: usize = 4;

/// One message being read: its reader, table and the index of the field expected next.
#[derive(Clone)]
struct Frame<'de> {
    reader: Reader<'de>,
    message: &'static Message,
    hint: usize,
}

/// The fields of a message (and of its inline messages) as a serde map.
struct Fields<'de> {
    frames: [Option<Frame<'de>>; MAX_INLINE_DEPTH],
    depth: usize,
    type_meta: Option<(&'de str, &'de str)>,
    pending: Pending<'de>,
}

enum Pending<'de> {
    None,
    Str(&'de str),
    Field(&'static Field, Value<'de>),
}

impl<'de> Fields<'de> {
    fn new(message: &'static Message, bytes: &'de [u8], type_meta: Option<(&'de str, &'de str)>) -> Self {
        let frame = Frame { reader: Reader::new(bytes), message, hint: 0 };
        Fields { frames: [Some(frame), None, None, None], depth: 1, type_meta, pending: Pending::None }
    }

    fn top(&mut self) -> &mut Frame<'de> {
        self.frames[self.depth - 1].as_mut().expect("frames below depth are set")
    }
}

impl<'de> MapAccess<'de> for Fields<'de> {
    type Error = ProtoError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ProtoError> {
        if let Some((api_version, kind)) = self.type_meta {
            let (key, value, rest) = if api_version.is_empty() { ("kind", kind, None) } else { ("apiVersion", api_version, Some(("", kind))) };
            self.type_meta = rest.filter(|(_, k)| !k.is_empty());
            if !value.is_empty() {
                self.pending = Pending::Str(value);
                return seed.deserialize(BorrowedStrDeserializer::new(key)).map(Some);
            }
        }
        loop {
            let frame = self.top();
            if frame.reader.is_empty() {
                if self.depth == 1 {
                    return Ok(None);
                }
                self.frames[self.depth - 1] = None;
                self.depth -= 1;
                continue;
            }
            let (number, wire_type) = frame.reader.key()?;
            let value = frame.reader.value(wire_type)?;
            let message = frame.message;
            let Some(field) = message.field(number, &mut frame.hint) else { continue };
            if field.inline {
                let Kind::Message(inner) = field.kind else {
                    return Err(ProtoError::new(format!("{}.{}: inline field is not a message", message.name, field.name)));
                };
                if self.depth == MAX_INLINE_DEPTH {
                    return Err(ProtoError::new(format!("{}.{}: inline messages nested too deep", message.name, field.name)));
                }
                let bytes = value.bytes().map_err(|e| e.within(field.name))?;
                self.frames[self.depth] = Some(Frame { reader: Reader::new(bytes), message: inner, hint: 0 });
                self.depth += 1;
                continue;
            }
            if field.omit_zero && !field.repeated && value.is_zero() {
                continue;
            }
            self.pending = Pending::Field(field, value);
            return seed.deserialize(BorrowedStrDeserializer::new(field.name)).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ProtoError> {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => Err(ProtoError::new("a value was asked for before its key")),
            Pending::Str(s) => seed.deserialize(BorrowedStrDeserializer::new(s)),
            Pending::Field(field, first) => {
                let reader = &mut self.top().reader;
                let result = if field.repeated {
                    seed.deserialize(Repeated { field, first: Some(first), packed: None, reader })
                } else if let Kind::Map(values) = field.kind {
                    seed.deserialize(Entries { field, values, first: Some(first), reader, value: None })
                } else {
                    seed.deserialize(ValueDeserializer { kind: &field.kind, value: first })
                };
                result.map_err(|e| e.within(field.name))
            }
        }
    }
}

/// Takes the next occurrence of `field` from `reader` if it comes next.
fn next_occurrence<'de>(reader: &mut Reader<'de>, field: &Field) -> Result<Option<Value<'de>>, ProtoError> {
    match reader.peek_key() {
        Some((number, wire_type)) if number == field.number => {
            reader.key()?;
            reader.value(wire_type).map(Some)
        }
        _ => Ok(None),
    }
}

/// How many occurrences of `field` follow one another from `reader` on, without consuming
/// them; each packed run of varints counts its varints when `packed` is set. Malformed
/// input counts what reads before it (the decode then reports the error).
fn occurrences_ahead(reader: &Reader<'_>, field: &Field, packed: bool) -> usize {
    let mut ahead = reader.clone();
    let mut n = 0;
    while let Ok(Some(value)) = next_occurrence(&mut ahead, field) {
        n += match value {
            Value::Bytes(b) if packed => Reader::new(b).varints_left(),
            _ => 1,
        };
    }
    n
}

/// A repeated field's consecutive occurrences (or one packed run of varints) as a sequence.
struct Repeated<'a, 'de> {
    field: &'static Field,
    first: Option<Value<'de>>,
    packed: Option<Reader<'de>>,
    reader: &'a mut Reader<'de>,
}

impl Repeated<'_, '_> {
    fn is_varint_kind(&self) -> bool {
        matches!(self.field.kind, Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::UInt32 | Kind::UInt64)
    }
}

impl<'de> de::Deserializer<'de> for Repeated<'_, 'de> {
    type Error = ProtoError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_seq(self)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> SeqAccess<'de> for Repeated<'_, 'de> {
    type Error = ProtoError;

    /// The exact number of elements left, so a `Vec` is allocated once at its length.
    fn size_hint(&self) -> Option<usize> {
        let packed = self.is_varint_kind();
        let first = match self.first {
            Some(Value::Bytes(b)) if packed => Reader::new(b).varints_left(),
            Some(_) => 1,
            None => 0,
        };
        let run = self.packed.as_ref().map_or(0, |r| r.varints_left());
        Some(first + run + occurrences_ahead(self.reader, self.field, packed))
    }

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, ProtoError> {
        let value = loop {
            if let Some(packed) = &mut self.packed {
                if !packed.is_empty() {
                    break Value::Varint(packed.varint()?);
                }
                self.packed = None;
            }
            let next = match self.first.take() {
                Some(first) => first,
                None => match next_occurrence(self.reader, self.field)? {
                    Some(v) => v,
                    None => return Ok(None),
                },
            };
            match next {
                Value::Bytes(b) if self.is_varint_kind() => self.packed = Some(Reader::new(b)),
                other => break other,
            }
        };
        seed.deserialize(ValueDeserializer { kind: &self.field.kind, value }).map(Some)
    }
}

/// A map field's consecutive entries (`{1: key, 2: value}`) as a serde map.
struct Entries<'a, 'de> {
    field: &'static Field,
    values: &'static Kind,
    first: Option<Value<'de>>,
    reader: &'a mut Reader<'de>,
    value: Option<Value<'de>>,
}

impl<'de> de::Deserializer<'de> for Entries<'_, 'de> {
    type Error = ProtoError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_map(self)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, ProtoError> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = ProtoError;

    /// The exact number of entries left (Go writes a map's entries one after another).
    fn size_hint(&self) -> Option<usize> {
        Some(usize::from(self.first.is_some()) + occurrences_ahead(self.reader, self.field, false))
    }

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ProtoError> {
        let entry = match self.first.take() {
            Some(first) => first,
            None => match next_occurrence(self.reader, self.field)? {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        let (mut key, mut value) = (&[][..], None);
        Reader::new(entry.bytes()?).for_each(|number, v| {
            match number {
                1 => key = v.bytes()?,
                2 => value = Some(v),
                _ => {}
            }
            Ok(())
        })?;
        // An absent value is the zero value of its kind.
        self.value = Some(value.unwrap_or(if kind_is_varint(self.values) { Value::Varint(0) } else { Value::Bytes(&[]) }));
        seed.deserialize(ValueDeserializer { kind: &Kind::String, value: Value::Bytes(key) }).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ProtoError> {
        let value = self.value.take().ok_or_else(|| ProtoError::new("a map value was asked for before its key"))?;
        seed.deserialize(ValueDeserializer { kind: self.values, value })
    }
}

fn kind_is_varint(kind: &Kind) -> bool {
    matches!(kind, Kind::Bool | Kind::Int32 | Kind::Int64 | Kind::UInt32 | Kind::UInt64)
}

/// One value of a known kind.
struct ValueDeserializer<'de> {
    kind: &'static Kind,
    value: Value<'de>,
}

impl<'de> ValueDeserializer<'de> {
    /// Whether this value is JSON's `null`: an empty time or raw extension.
    fn is_null(&self) -> bool {
        matches!(self.kind, Kind::Time | Kind::MicroTime | Kind::RawJson) && self.value.is_zero()
    }

    /// The fields of a small special message (`Timestamp`, `Quantity`, …) by number.
    fn subfields<const N: usize>(&self) -> Result<[Option<Value<'de>>; N], ProtoError> {
        let mut out = [None; N];
        Reader::new(self.value.bytes()?).for_each(|number, v| {
            if let Some(slot) = (number as usize).checked_sub(1).and_then(|i| out.get_mut(i)) {
                *slot = Some(v);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The JSON text inside a `RawExtension` or `FieldsV1` (field 1); empty when it is not set.
    fn raw_json_bytes(&self) -> Result<&'de [u8], ProtoError> {
        let [raw] = self.subfields::<1>()?;
        Ok(raw.map(Value::bytes).transpose()?.unwrap_or(&[]))
    }
}

impl<'de> de::Deserializer<'de> for ValueDeserializer<'de> {
    type Error = ProtoError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        if self.is_null() {
            return visitor.visit_unit();
        }
        match self.kind {
            Kind::Bool => visitor.visit_bool(self.value.varint()? != 0),
            Kind::Int32 => visitor.visit_i32(self.value.varint()? as i32),
            Kind::Int64 => visitor.visit_i64(self.value.varint()? as i64),
            Kind::UInt32 | Kind::UInt64 => visitor.visit_u64(self.value.varint()?),
            Kind::String => visitor.visit_borrowed_str(self.value.str()?),
            Kind::Bytes => visitor.visit_string(base64_encode(self.value.bytes()?)),
            Kind::Time | Kind::MicroTime => {
                let [seconds, nanos] = self.subfields::<2>()?;
                let seconds = seconds.map(Value::varint).transpose()?.unwrap_or(0) as i64;
                let nanos = nanos.map(Value::varint).transpose()?.unwrap_or(0) as u32;
                let text = match self.kind {
                    Kind::Time => timestamp::rfc3339_seconds(seconds),
                    _ => timestamp::rfc3339_micros(seconds, nanos),
                };
                visitor.visit_str(text.as_str())
            }
            Kind::Quantity => {
                let [text] = self.subfields::<1>()?;
                visitor.visit_borrowed_str(text.map(Value::str).transpose()?.unwrap_or(""))
            }
            Kind::IntOrString => {
                let [ty, int, text] = self.subfields::<3>()?;
                if ty.map(Value::varint).transpose()?.unwrap_or(0) == 1 {
                    visitor.visit_borrowed_str(text.map(Value::str).transpose()?.unwrap_or(""))
                } else {
                    visitor.visit_i32(int.map(Value::varint).transpose()?.unwrap_or(0) as i32)
                }
            }
            Kind::RawJson => {
                let raw = self.raw_json_bytes()?;
                if raw.is_empty() {
                    return visitor.visit_unit();
                }
                let mut json = serde_json::Deserializer::from_slice(raw);
                let value = de::Deserializer::deserialize_any(&mut json, visitor).map_err(de::Error::custom)?;
                json.end().map_err(de::Error::custom)?;
                Ok(value)
            }
            Kind::Message(message) => visitor.visit_map(Fields::new(message, self.value.bytes()?, None)),
            Kind::Map(_) => Err(ProtoError::new("a map inside a list is not supported")),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProtoError> {
        if self.is_null() { visitor.visit_none() } else { visitor.visit_some(self) }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, ProtoError> {
        if name == crate::lean::RAW_JSON_TOKEN && matches!(self.kind, Kind::RawJson) {
            // The lean layout's `RawJson` takes the JSON text as it is.
            return match self.raw_json_bytes()? {
                [] => visitor.visit_unit(),
                raw => visitor.visit_borrowed_bytes(raw),
            };
        }
        if let (crate::lean::SHARED_TOKEN, Kind::Message(message)) = (name, self.kind) {
            // The lean layout's `Shared` reuses a value decoded from the same bytes before.
            let bytes = self.value.bytes()?;
            return super::offered::offer(message, || visitor.visit_borrowed_bytes(bytes));
        }
        if name == crate::lean::STR_TOKEN && matches!(self.kind, Kind::String) {
            // The lean layout's `Str` checks the text only when it is not interned yet.
            return visitor.visit_borrowed_bytes(self.value.bytes()?);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(self, name: &'static str, variants: &'static [&'static str], visitor: V) -> Result<V::Value, ProtoError> {
        match self.kind {
            Kind::String => visitor.visit_enum(self.value.str()?.into_deserializer()),
            _ => self.deserialize_any(visitor).map_err(|e| ProtoError::new(format!("{name} (one of {variants:?}): {e}"))),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// Standard base64 with padding, as Go's `encoding/json` writes `[]byte`.
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16) | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8) | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn base64_matches_go() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(&[0, 1, 2, 0xff]), "AAEC/w==");
        assert_eq!(base64_encode(b"hunter2"), "aHVudGVyMg==");
        assert_eq!(base64_encode(b"abc"), "YWJj");
    }

    /// A sequence or map: the size hint it was given, and how many elements it had.
    #[derive(Debug, PartialEq)]
    struct Hinted(Option<usize>, usize);

    impl<'de> serde::Deserialize<'de> for Hinted {
        fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Hinted;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a sequence or map")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Hinted, A::Error> {
                    let hint = seq.size_hint();
                    let mut n = 0;
                    while seq.next_element::<de::IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Hinted(hint, n))
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Hinted, A::Error> {
                    let hint = map.size_hint();
                    let mut n = 0;
                    while map.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {
                        n += 1;
                    }
                    Ok(Hinted(hint, n))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Lists {
        names: Hinted,
        ports: Hinted,
        labels: Hinted,
        after: String,
        sizes: Hinted,
    }

    static LISTS: Message = Message {
        name: "Lists",
        fields: &[
            Field::new(1, "names", Kind::String, "r"),
            Field::new(2, "ports", Kind::Int32, "r"),
            Field::new(3, "labels", Kind::Map(&Kind::String), ""),
            Field::new(4, "after", Kind::String, ""),
            Field::new(5, "sizes", Kind::Int64, "r"),
        ],
    };

    #[test]
    fn lists_and_maps_tell_their_exact_length_up_front() {
        let bytes = [
            &[0x0a, 1, b'a', 0x0a, 2, b'b', b'b', 0x0a, 3, b'c', b'c', b'c'][..],
            // 80, 300, 8080 packed in one run.
            &[0x12, 5, 0x50, 0xac, 0x02, 0x90, 0x3f],
            &[0x1a, 8, 0x0a, 2, b'k', b'1', 0x12, 2, b'v', b'1', 0x1a, 8, 0x0a, 2, b'k', b'2', 0x12, 2, b'v', b'2'],
            &[0x22, 1, b'x'],
            // 1, 2 unpacked.
            &[0x28, 1, 0x28, 2],
        ]
        .concat();
        let lists = Lists::deserialize(MessageDeserializer { message: &LISTS, bytes: &bytes, type_meta: None }).unwrap();
        assert_eq!(
            lists,
            Lists { names: Hinted(Some(3), 3), ports: Hinted(Some(3), 3), labels: Hinted(Some(2), 2), after: "x".into(), sizes: Hinted(Some(2), 2) }
        );
    }

    /// [`Lists`] without its owned string, so that decoding it allocates nothing itself.
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Tail {
        names: Option<Hinted>,
        labels: Option<Hinted>,
        sizes: Option<Hinted>,
    }

    #[test]
    fn lists_and_maps_read_to_the_end_of_their_message_allocate_nothing() {
        let map = [0x1a, 8, 0x0a, 2, b'k', b'1', 0x12, 2, b'v', b'1', 0x1a, 8, 0x0a, 2, b'k', b'2', 0x12, 2, b'v', b'2'];
        let cases: [(&[u8], Tail); 3] = [
            (&map, Tail { names: None, labels: Some(Hinted(Some(2), 2)), sizes: None }),
            (&[0x0a, 1, b'a', 0x0a, 1, b'b'], Tail { names: Some(Hinted(Some(2), 2)), labels: None, sizes: None }),
            (&[0x28, 1, 0x28, 2], Tail { names: None, labels: None, sizes: Some(Hinted(Some(2), 2)) }),
        ];
        for (bytes, want) in cases {
            let (tail, allocations) = crate::alloc_count::allocations_of(|| {
                Tail::deserialize(MessageDeserializer { message: &LISTS, bytes, type_meta: None }).unwrap()
            });
            assert_eq!(tail, want);
            assert_eq!(allocations, 0, "{want:?}");
        }
    }
}
