//! Field tables of protobuf messages, as the generator emits them for built-in kinds.
//!
//! Invariants: a [`Message`]'s fields are sorted by number, numbers unique; `name` is the
//! field's JSON name, so decoding presents protobuf fields under the names the types'
//! serde implementations read from JSON.

/// One protobuf message: its full name (`k8s.io.api.core.v1.Pod`) and its fields.
#[derive(Debug)]
pub struct Message {
    /// Full name: the Go package path with dots, then the type name.
    pub name: &'static str,
    /// Fields, sorted by number.
    pub fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub struct Field {
    /// Field number.
    pub number: u32,
    /// JSON name.
    pub name: &'static str,
    /// What a value of this field is.
    pub kind: Kind,
    /// A list: each element is its own occurrence of the field (or one packed run).
    pub repeated: bool,
    /// Left out of JSON when zero (a non-pointer `omitempty` scalar in Go, which protobuf
    /// always writes): a zero value is skipped so the object equals its JSON decoding.
    pub omit_zero: bool,
    /// The message's fields are the parent's own in JSON (Go's `json:",inline"`).
    pub inline: bool,
}

/// The kind of a field's value.
#[derive(Debug)]
pub enum Kind {
    /// `bool`.
    Bool,
    /// `int32` (varint).
    Int32,
    /// `int64` (varint).
    Int64,
    /// `uint32` (varint).
    UInt32,
    /// `uint64` (varint).
    UInt64,
    /// A UTF-8 string.
    String,
    /// Bytes, base64 in JSON.
    Bytes,
    /// `metav1.Time`: RFC 3339 to the second; an empty message is `null`.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds; an empty message is `null`.
    MicroTime,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1`: raw JSON bytes.
    RawJson,
    /// A nested message.
    Message(&'static Message),
    /// A map with string keys (repeated entries `{1: key, 2: value}`), values of this kind.
    Map(&'static Kind),
}

impl Field {
    /// A field from the row the generator writes: `flags` holds `r` for
    /// [`repeated`](Self::repeated), `z` for [`omit_zero`](Self::omit_zero) and `i` for
    /// [`inline`](Self::inline).
    pub const fn new(number: u32, name: &'static str, kind: Kind, flags: &str) -> Field {
        let flags = flags.as_bytes();
        let (mut repeated, mut omit_zero, mut inline) = (false, false, false);
        let mut i = 0;
        while i < flags.len() {
            match flags[i] {
                b'r' => repeated = true,
                b'z' => omit_zero = true,
                b'i' => inline = true,
                _ => {}
            }
            i += 1;
        }
        Field { number, name, kind, repeated, omit_zero, inline }
    }
}

impl Message {
    /// The field numbered `number`; `hint` is the index to try first (fields usually
    /// arrive in order), updated to the found index.
    pub(crate) fn field(&self, number: u32, hint: &mut usize) -> Option<&'static Field> {
        let fields = self.fields;
        let at = match fields.get(*hint) {
            Some(f) if f.number == number => *hint,
            _ => fields.binary_search_by_key(&number, |f| f.number).ok()?,
        };
        *hint = at + 1;
        Some(&fields[at])
    }
}
