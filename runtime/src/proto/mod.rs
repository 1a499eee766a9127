//! Kubernetes protobuf, decoded into the same types as JSON: client-go's default wire
//! format for built-in kinds, several times cheaper to decode than their JSON.
//!
//! - [`descriptor`]: the field tables (numbers, JSON names, kinds) the generator emits per
//!   built-in kind, from the Go types' struct tags.
//! - `wire`: the protobuf wire format.
//! - `de`: a serde `Deserializer` that presents a message as the JSON map it stands for,
//!   so k8s-openapi's and the lean layout's `Deserialize` implementations read it as is.
//! - [`envelope`]: the `k8s\0` + `runtime.Unknown` envelope, lists, watch frames.
//! - `timestamp`: times as the RFC 3339 text their JSON has.
//!
//! Invariant: decoding an object's protobuf gives the value decoding its JSON gives (tested
//! over objects the Kubernetes Go libraries encoded both ways).

mod de;
pub(crate) mod offered;
pub mod descriptor;
pub mod envelope;
mod timestamp;
pub(crate) mod wire;

use std::fmt;

pub use descriptor::{Field, Kind, Message};
pub use envelope::{CONTENT_TYPE, decode_list, decode_object, decode_watch_event, decode_watch_events};

/// An error decoding protobuf: what was wrong, and the field path where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoError {
    path: String,
    message: String,
}

impl ProtoError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ProtoError { path: String::new(), message: message.into() }
    }

    /// The same error, inside the field or message `name`.
    pub(crate) fn within(mut self, name: &str) -> Self {
        self.path = if self.path.is_empty() { name.to_owned() } else { format!("{name}.{}", self.path) };
        self
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

impl std::error::Error for ProtoError {}

impl serde::de::Error for ProtoError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ProtoError::new(msg.to_string())
    }
}
