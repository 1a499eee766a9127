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
        let mut value = 0u64;
        for (i, &b) in self.buf.iter().enumerate().take(10) {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(ProtoError::new("truncated or overlong varint"))
    }

    /// The varints left in a packed run being read (each ends at a byte without the
    /// continuation bit).
    pub(crate) fn varints_left(&self) -> usize {
        self.buf.iter().filter(|&&b| b < 0x80).count()
    }

    /// The next field's number and wire type.
    pub(crate) fn key(&mut self) -> Result<(u32, u8), ProtoError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtoError::new("field number out of range"))?;
        Ok((number, (key & 7) as u8))
    }

    /// The key of the next field without consuming it.
    pub(crate) fn peek_key(&self) -> Option<(u32, u8)> {
        self.clone().key().ok()
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
    fn cut_short_input_is_an_error() {
        assert!(Reader::new(&[0x80]).varint().is_err());
        let mut r = Reader::new(&[0x12, 0x05, b'a']);
        r.key().unwrap();
        assert!(r.value(LEN).unwrap_err().to_string().contains("cut short"));
        assert!(Reader::new(&[0x0b]).clone().for_each(|_, _| Ok(())).is_err());
    }
}
