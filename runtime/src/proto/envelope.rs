//! Kubernetes' protobuf envelopes: an object or list response is `k8s\0` followed by a
//! `runtime.Unknown` (type meta + the message's bytes); a watch stream is a sequence of
//! frames, each a 4-byte big-endian length and a `metav1.WatchEvent` whose object is again
//! an enveloped message.
//!
//! Invariants: nothing is decoded from an envelope whose magic or content encoding is not
//! the plain protobuf one; a list's items are decoded with the item table the caller gives,
//! its metadata with `ListMeta`'s numbers (1 = metadata, 2 = items in every Kubernetes list).

use kube_core::watch::Bookmark;
use kube_core::{Status, WatchEvent};
use serde::de::DeserializeOwned;

use super::ProtoError;
use super::de::MessageDeserializer;
use super::descriptor::{Field, Kind, Message};
use super::wire::Reader;
use crate::lister_watcher::ListPage;

/// The media type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

/// A `runtime.Unknown`: the object's type meta and its message's bytes.
struct Unknown<'a> {
    api_version: &'a str,
    kind: &'a str,
    raw: &'a [u8],
}

fn unknown(bytes: &[u8]) -> Result<Unknown<'_>, ProtoError> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| ProtoError::new("not a Kubernetes protobuf message (no k8s\\0 prefix)"))?;
    let mut out = Unknown { api_version: "", kind: "", raw: &[] };
    Reader::new(rest).for_each(|number, value| {
        match number {
            1 => Reader::new(value.bytes()?).for_each(|n, v| {
                match n {
                    1 => out.api_version = v.str()?,
                    2 => out.kind = v.str()?,
                    _ => {}
                }
                Ok(())
            })?,
            2 => out.raw = value.bytes()?,
            3 if !value.is_zero() => {
                return Err(ProtoError::new(format!("unsupported content encoding {:?}", String::from_utf8_lossy(value.bytes()?))));
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

/// Decodes one enveloped object of type `message` (as a GET or a watch event carries it).
pub fn decode_object<K: DeserializeOwned>(message: &'static Message, bytes: &[u8]) -> Result<K, ProtoError> {
    let u = unknown(bytes)?;
    K::deserialize(MessageDeserializer { message, bytes: u.raw, type_meta: Some((u.api_version, u.kind)) })
        .map_err(|e| e.within(message.name))
}

/// Decodes an enveloped list response whose items are `item` messages.
pub fn decode_list<K: DeserializeOwned>(item: &'static Message, bytes: &[u8]) -> Result<ListPage<K>, ProtoError> {
    let u = unknown(bytes)?;
    let mut page = ListPage { items: Vec::new(), resource_version: String::new(), continue_token: None };
    Reader::new(u.raw).for_each(|number, value| {
        match number {
            1 => Reader::new(value.bytes()?).for_each(|n, v| {
                match n {
                    2 => page.resource_version = v.str()?.to_owned(),
                    3 if !v.is_zero() => page.continue_token = Some(v.str()?.to_owned()),
                    _ => {}
                }
                Ok(())
            })?,
            2 => {
                let item = K::deserialize(MessageDeserializer { message: item, bytes: value.bytes()?, type_meta: None })
                    .map_err(|e| e.within(&format!("{}.items[{}]", u.kind, page.items.len())))?;
                page.items.push(item);
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(page)
}

/// Decodes one watch frame (without its length prefix) whose objects are `message`s.
pub fn decode_watch_event<K: DeserializeOwned>(message: &'static Message, frame: &[u8]) -> Result<WatchEvent<K>, ProtoError> {
    let (mut kind, mut object) = ("", &[][..]);
    Reader::new(frame).for_each(|number, value| {
        match number {
            1 => kind = value.str()?,
            2 => Reader::new(value.bytes()?).for_each(|n, v| {
                if n == 1 {
                    object = v.bytes()?;
                }
                Ok(())
            })?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(match kind {
        "ADDED" => WatchEvent::Added(decode_object(message, object)?),
        "MODIFIED" => WatchEvent::Modified(decode_object(message, object)?),
        "DELETED" => WatchEvent::Deleted(decode_object(message, object)?),
        "BOOKMARK" => WatchEvent::Bookmark(decode_object::<Bookmark>(message, object)?),
        "ERROR" => WatchEvent::Error(Box::new(decode_object::<Status>(&STATUS, object)?)),
        other => return Err(ProtoError::new(format!("unknown watch event type {other:?}"))),
    })
}

/// Splits a watch body into frames: each is a 4-byte big-endian length, then that many
/// bytes. Returns the first whole frame in `buf` and the bytes it took, or `None` when
/// `buf` holds only part of one.
pub(crate) fn split_frame(buf: &[u8]) -> Option<(&[u8], usize)> {
    let len = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    let frame = buf.get(4..4 + len)?;
    Some((frame, 4 + len))
}

const fn field(number: u32, name: &'static str, kind: Kind, omit_zero: bool) -> Field {
    Field { number, name, kind, repeated: false, omit_zero, inline: false }
}

/// `metav1.ListMeta`.
pub static LIST_META: Message = Message {
    name: "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta",
    fields: &[
        field(1, "selfLink", Kind::String, true),
        field(2, "resourceVersion", Kind::String, true),
        field(3, "continue", Kind::String, true),
        field(4, "remainingItemCount", Kind::Int64, false),
    ],
};

/// `metav1.StatusCause`.
pub static STATUS_CAUSE: Message = Message {
    name: "k8s.io.apimachinery.pkg.apis.meta.v1.StatusCause",
    fields: &[field(1, "reason", Kind::String, true), field(2, "message", Kind::String, true), field(3, "field", Kind::String, true)],
};

/// `metav1.StatusDetails`.
pub static STATUS_DETAILS: Message = Message {
    name: "k8s.io.apimachinery.pkg.apis.meta.v1.StatusDetails",
    fields: &[
        field(1, "name", Kind::String, true),
        field(2, "group", Kind::String, true),
        field(3, "kind", Kind::String, true),
        Field { number: 4, name: "causes", kind: Kind::Message(&STATUS_CAUSE), repeated: true, omit_zero: false, inline: false },
        field(5, "retryAfterSeconds", Kind::Int32, true),
        field(6, "uid", Kind::String, true),
    ],
};

/// `metav1.Status`, what a watch `ERROR` event carries.
pub static STATUS: Message = Message {
    name: "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
    fields: &[
        field(1, "metadata", Kind::Message(&LIST_META), false),
        field(2, "status", Kind::String, true),
        field(3, "message", Kind::String, true),
        field(4, "reason", Kind::String, true),
        field(5, "details", Kind::Message(&STATUS_DETAILS), false),
        field(6, "code", Kind::Int32, true),
    ],
};
