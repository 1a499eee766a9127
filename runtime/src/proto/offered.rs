//! A sub-message offered to a lean `Shared` value as its encoded bytes, so that one already
//! decoded from the same bytes is reused without decoding them again.
//!
//! Invariants: the protobuf deserializer offers a message only to a visitor that asked for
//! it under [`crate::lean::SHARED_TOKEN`], by setting this thread's offered message for the
//! duration of one `visit_borrowed_bytes` call; the visitor takes it (so a nested offer never
//! sees an outer one). Decoding the same bytes with the same message always gives the same
//! value, which is what makes reusing it by its bytes sound.

use std::cell::Cell;

use serde::Deserialize;

use super::ProtoError;
use super::de::MessageDeserializer;
use super::descriptor::Message;

thread_local! {
    static OFFERED: Cell<Option<&'static Message>> = const { Cell::new(None) };
}

/// Runs `visit` (a `visit_borrowed_bytes` call) with `message` offered to it.
pub(crate) fn offer<R>(message: &'static Message, visit: impl FnOnce() -> R) -> R {
    OFFERED.with(|o| o.set(Some(message)));
    let result = visit();
    OFFERED.with(|o| o.set(None));
    result
}

/// The message the bytes being visited encode, if a protobuf deserializer offered one.
pub(crate) fn take() -> Option<&'static Message> {
    OFFERED.with(Cell::take)
}

/// Decodes `bytes`, an encoded `message`, into a `T`.
pub(crate) fn decode<'de, T: Deserialize<'de>>(message: &'static Message, bytes: &'de [u8]) -> Result<T, ProtoError> {
    T::deserialize(MessageDeserializer { message, bytes, type_meta: None })
}
