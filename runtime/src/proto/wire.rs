//! The protobuf wire format: varints, keys, length-delimited values, skipping.
//!
//! Invariants: a [`Reader`] never reads past its slice; every error names what was cut
//! short or malformed, and the reader is not used after an error.

use super::ProtoError;

/// Wire type of a varint.
pub(crate) const VARINT: u8 = 0;
/// Wire type of a 64-bit value.
pub(crate) const FIXED64: u8 = 1;
/// Wire type of a length-delimited value.
pub(crate) const LEN: u8 = 2;
/// Wire type of a 32-bit value.
pub(crate) const FIXED32: u8 = 5;

/// One value as read off the wire.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width value (kept as its bits; no built-in kind uses one).
    Fixed(u64),
}

/// Reads a protobuf encoding front to back.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn varint(&mut self) -> Result<u64, ProtoError> {
        let (value, len) = front_varint(self.buf).ok_or_else(|| ProtoError::new("truncated or overlong varint"))?;
        self.buf = &self.buf[len..];
        Ok(value)
    }

    /// The varints left in a packed run being read (each ends at a byte without the
    /// continuation bit).
    pub(crate) fn varints_left(&self) -> usize {
        self.buf.iter().filter(|&&b| b < 0x80).count()
    }

    /// The next field's number and wire type.
    pub(crate) fn key(&mut self) -> Result<(u32, u8), ProtoError> {
        checked_key(self.varint()?)
    }

    /// The key of the next field without consuming it; `None` at the end and before a
    /// malformed key. It builds no error: every list and map read asks it past its last
    /// element, most often at the end of its message.
    pub(crate) fn peek_key(&self) -> Option<(u32, u8)> {
        front_varint(self.buf).and_then(|(key, _)| split_key(key))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if n > self.buf.len() {
            return Err(ProtoError::new(format!("value of {n} bytes cut short at {}", self.buf.len())));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The value of a field of wire type `wire_type`.
    pub(crate) fn value(&mut self, wire_type: u8) -> Result<Value<'a>, ProtoError> {
        match wire_type {
            VARINT => self.varint().map(Value::Varint),
            LEN => {
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| ProtoError::new("length out of range"))?;
                self.take(n).map(Value::Bytes)
            }
            FIXED64 => self.take(8).map(|b| Value::Fixed(u64::from_le_bytes(b.try_into().unwrap()))),
            FIXED32 => self.take(4).map(|b| Value::Fixed(u64::from(u32::from_le_bytes(b.try_into().unwrap())))),
            other => Err(ProtoError::new(format!("unsupported wire type {other}"))),
        }
    }

    /// Reads a whole message as `(number, value)` pairs, calling `f` for each.
    pub(crate) fn for_each(mut self, mut f: impl FnMut(u32, Value<'a>) -> Result<(), ProtoError>) -> Result<(), ProtoError> {
        while !self.is_empty() {
            let (number, wire_type) = self.key()?;
            let value = self.value(wire_type)?;
            f(number, value)?;
        }
        Ok(())
    }
}

/// The varint `buf` starts with and its length in bytes; `None` when `buf` ends within it
/// or it runs past ten bytes.
fn front_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A key's field number and wire type; `None` for a number past `u32`.
fn split_key(key: u64) -> Option<(u32, u8)> {
    Some((u32::try_from(key >> 3).ok()?, (key & 7) as u8))
}

/// As [`split_key`], with the error a key read off the wire fails with.
fn checked_key(key: u64) -> Result<(u32, u8), ProtoError> {
    split_key(key).ok_or_else(|| ProtoError::new("field number out of range"))
}

/// Where the field at the front of some bytes lies: its number and wire type, the bytes of
/// its key (and length, for a length-delimited field), and the bytes of its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FieldSpan {
    pub(crate) number: u32,
    pub(crate) wire_type: u8,
    pub(crate) header: usize,
    pub(crate) value: usize,
}

impl FieldSpan {
    /// Bytes of the whole field.
    pub(crate) fn len(&self) -> usize {
        self.header + self.value
    }
}

/// Where the field `buf` starts with lies, as far as its key and length tell (its value may
/// not have arrived); `Ok(None)` while `buf` ends within its key or length (or, for a varint
/// field, within its value).
pub(crate) fn field_span(buf: &[u8]) -> Result<Option<FieldSpan>, ProtoError> {
    /// The varint `buf` starts with and its length, `None` if `buf` ends within it.
    fn arrived_varint(buf: &[u8]) -> Result<Option<(u64, usize)>, ProtoError> {
        match front_varint(buf) {
            Some(varint) => Ok(Some(varint)),
            None if buf.len() < 10 => Ok(None),
            None => Err(ProtoError::new("truncated or overlong varint")),
        }
    }
    let Some((key, key_len)) = arrived_varint(buf)? else { return Ok(None) };
    let (number, wire_type) = checked_key(key)?;
    let rest = &buf[key_len..];
    let (header, value) = match wire_type {
        VARINT => match arrived_varint(rest)? {
            Some((_, n)) => (key_len, n),
            None => return Ok(None),
        },
        FIXED64 => (key_len, 8),
        FIXED32 => (key_len, 4),
        LEN => match arrived_varint(rest)? {
            Some((len, n)) => (key_len + n, usize::try_from(len).map_err(|_| ProtoError::new("length out of range"))?),
            None => return Ok(None),
        },
        other => return Err(ProtoError::new(format!("unsupported wire type {other}"))),
    };
    Ok(Some(FieldSpan { number, wire_type, header, value }))
}

impl<'a> Value<'a> {
    pub(crate) fn bytes(self) -> Result<&'a [u8], ProtoError> {
        match self {
            Value::Bytes(b) => Ok(b),
            _ => Err(ProtoError::new("expected a length-delimited value")),
        }
    }

    pub(crate) fn varint(self) -> Result<u64, ProtoError> {
        match self {
            Value::Varint(v) => Ok(v),
            _ => Err(ProtoError::new("expected a varint")),
        }
    }

    pub(crate) fn str(self) -> Result<&'a str, ProtoError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| ProtoError::new("string is not UTF-8"))
    }

    /// Zero as protobuf writes a Go zero value: 0, or no bytes.
    pub(crate) fn is_zero(self) -> bool {
        match self {
            Value::Varint(v) | Value::Fixed(v) => v == 0,
            Value::Bytes(b) => b.is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_keys_and_values() {
        // field 1 varint 300, field 2 "hi", field 3 fixed32 7
        let buf = [0x08, 0xac, 0x02, 0x12, 0x02, b'h', b'i', 0x1d, 7, 0, 0, 0];
        let mut r = Reader::new(&buf);
        assert_eq!(r.key().unwrap(), (1, VARINT));
        assert_eq!(r.value(VARINT).unwrap().varint().unwrap(), 300);
        assert_eq!(r.peek_key(), Some((2, LEN)));
        assert_eq!(r.key().unwrap(), (2, LEN));
        assert_eq!(r.value(LEN).unwrap().str().unwrap(), "hi");
        assert_eq!(r.key().unwrap(), (3, FIXED32));
        assert!(matches!(r.value(FIXED32).unwrap(), Value::Fixed(7)));
        assert!(r.is_empty());
    }

    #[test]
    fn a_field_spans_its_key_length_and_value_and_is_not_yet_known_while_they_are_cut_short() {
        // field 1 varint 300, field 2 of 200 bytes (a two-byte length), field 3 fixed32
        let buf = [0x08, 0xac, 0x02, 0x12, 0xc8, 0x01, b'h'];
        assert_eq!(field_span(&buf).unwrap(), Some(FieldSpan { number: 1, wire_type: VARINT, header: 1, value: 2 }));
        assert_eq!(field_span(&buf[3..]).unwrap(), Some(FieldSpan { number: 2, wire_type: LEN, header: 3, value: 200 }));
        assert_eq!(field_span(&[0x1d]).unwrap(), Some(FieldSpan { number: 3, wire_type: FIXED32, header: 1, value: 4 }));
        for cut in [&buf[..0], &buf[..1], &buf[..2], &buf[3..4], &buf[3..5]] {
            assert_eq!(field_span(cut).unwrap(), None, "{cut:?}");
        }
        assert!(field_span(&[0x0b]).is_err(), "wire type 3");
        assert!(field_span(&[0x80; 10]).is_err(), "overlong key");
    }

    #[test]
    fn peeking_past_the_end_or_at_a_malformed_key_finds_none_and_allocates_nothing() {
        let ((), allocations) = crate::alloc_count::allocations_of(|| {
            assert_eq!(Reader::new(&[]).peek_key(), None, "end");
            assert_eq!(Reader::new(&[0x80]).peek_key(), None, "cut short");
            assert_eq!(Reader::new(&[0x80; 11]).peek_key(), None, "overlong");
            // A number past u32: key 2^35 (field 2^32, wire type 0).
            assert_eq!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).peek_key(), None, "number out of range");
            assert_eq!(Reader::new(&[0x12, 0x00]).peek_key(), Some((2, LEN)));
        });
        assert_eq!(allocations, 0);
        // Read, not peeked, the same keys are errors.
        assert!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).key().unwrap_err().to_string().contains("out of range"));
        assert!(Reader::new(&[0x80; 11]).key().unwrap_err().to_string().contains("overlong"));
    }

    #[test]
    fn cut_short_input_is_an_error() {
        assert!(Reader::new(&[0x80]).varint().is_err());
        let mut r = Reader::new(&[0x12, 0x05, b'a']);
        r.key().unwrap();
        assert!(r.value(LEN).unwrap_err().to_string().contains("cut short"));
        assert!(Reader::new(&[0x0b]).clone().for_each(|_, _| Ok(())).is_err());
    }
}
