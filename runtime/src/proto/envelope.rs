//! Kubernetes' protobuf envelopes: an object or list response is `k8s\0` followed by a
//! `runtime.Unknown` (type meta + the message's bytes); a watch stream is a sequence of
//! frames, each a 4-byte big-endian length and a `metav1.WatchEvent` whose object is again
//! an enveloped message.
//!
//! Invariants: nothing is decoded from an envelope whose magic or content encoding is not
//! the plain protobuf one; a list's items are decoded with the item table the caller gives,
//! its metadata with `ListMeta`'s numbers (1 = metadata, 2 = items in every Kubernetes list).
//! A list's items, and a batch of watch frames, may be decoded on several threads at once
//! (see `crate::parallel`); the page keeps the items in wire order, and an error names the
//! first item, in that order, that failed.

use kube_core::watch::Bookmark;
use kube_core::{Status, WatchEvent};
use serde::de::DeserializeOwned;

use super::ProtoError;
use super::de::MessageDeserializer;
use super::descriptor::{Field, Kind, Message};
use super::wire::{Reader, Value};
use crate::lister_watcher::ListPage;
use crate::parallel::{concat, in_parts, threads_for, try_concat};

/// The media type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

pub(crate) const MAGIC: &[u8] = b"k8s\0";

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
            1 => (out.api_version, out.kind) = type_meta(value.bytes()?)?,
            2 => out.raw = value.bytes()?,
            _ => other_unknown_field(number, value)?,
        }
        Ok(())
    })?;
    Ok(out)
}

/// The apiVersion and kind of a `runtime.TypeMeta`'s bytes.
pub(crate) fn type_meta(bytes: &[u8]) -> Result<(&str, &str), ProtoError> {
    let (mut api_version, mut kind) = ("", "");
    Reader::new(bytes).for_each(|n, v| {
        match n {
            1 => api_version = v.str()?,
            2 => kind = v.str()?,
            _ => {}
        }
        Ok(())
    })?;
    Ok((api_version, kind))
}

/// A field of a `runtime.Unknown` other than its type meta and raw bytes: a content
/// encoding (field 3) that is not the plain one is an error.
pub(crate) fn other_unknown_field(number: u32, value: Value<'_>) -> Result<(), ProtoError> {
    if number == 3 && !value.is_zero() {
        return Err(ProtoError::new(format!("unsupported content encoding {:?}", String::from_utf8_lossy(value.bytes()?))));
    }
    Ok(())
}

/// The resourceVersion and continue token of a `metav1.ListMeta`'s bytes.
pub(crate) fn list_meta(bytes: &[u8]) -> Result<(String, Option<String>), ProtoError> {
    let (mut resource_version, mut continue_token) = (String::new(), None);
    Reader::new(bytes).for_each(|n, v| {
        match n {
            2 => resource_version = v.str()?.to_owned(),
            3 if !v.is_zero() => continue_token = Some(v.str()?.to_owned()),
            _ => {}
        }
        Ok(())
    })?;
    Ok((resource_version, continue_token))
}

/// Decodes item `index` of a `kind` list (named so in an error).
fn decode_item<K: DeserializeOwned>(item: &'static Message, kind: &str, index: usize, bytes: &[u8]) -> Result<K, ProtoError> {
    K::deserialize(MessageDeserializer { message: item, bytes, type_meta: None }).map_err(|e| e.within(&format!("{kind}.items[{index}]")))
}

/// Decodes the items among `fields`, a run of whole fields of a `kind` list message whose
/// first item is the list's item `first`; its other fields are skipped.
pub(crate) fn decode_items<K: DeserializeOwned>(item: &'static Message, kind: &str, first: usize, fields: &[u8]) -> Result<Vec<K>, ProtoError> {
    let mut items = Vec::new();
    Reader::new(fields).for_each(|number, value| {
        if number == 2 {
            let index = first + items.len();
            items.push(decode_item(item, kind, index, value.bytes()?)?);
        }
        Ok(())
    })?;
    Ok(items)
}

/// Decodes one enveloped object of type `message` (as a GET or a watch event carries it).
pub fn decode_object<K: DeserializeOwned>(message: &'static Message, bytes: &[u8]) -> Result<K, ProtoError> {
    let u = unknown(bytes)?;
    K::deserialize(MessageDeserializer { message, bytes: u.raw, type_meta: Some((u.api_version, u.kind)) })
        .map_err(|e| e.within(message.name))
}

/// Decodes an enveloped list response whose items are `item` messages. A page of many
/// items is decoded on several threads (see the module's invariants).
pub fn decode_list<K: DeserializeOwned + Send>(item: &'static Message, bytes: &[u8]) -> Result<ListPage<K>, ProtoError> {
    decode_list_on(item, bytes, None, |_| {})
}

/// [`decode_list`], calling `on_continue` with the page's continue token (`None` on a
/// list's last page) once the page is scanned and before its items are decoded (if the
/// scan fails, it is not called).
pub(crate) fn decode_list_then<K: DeserializeOwned + Send>(
    item: &'static Message,
    bytes: &[u8],
    on_continue: impl FnOnce(Option<&str>),
) -> Result<ListPage<K>, ProtoError> {
    decode_list_on(item, bytes, None, on_continue)
}

/// [`decode_list_then`] on `threads` threads, or on as many as its size calls for.
fn decode_list_on<K: DeserializeOwned + Send>(
    item: &'static Message,
    bytes: &[u8],
    threads: Option<usize>,
    on_continue: impl FnOnce(Option<&str>),
) -> Result<ListPage<K>, ProtoError> {
    let u = unknown(bytes)?;
    let mut page = ListPage { items: Vec::new(), resource_version: String::new(), continue_token: None };
    let mut encoded: Vec<&[u8]> = Vec::new();
    Reader::new(u.raw).for_each(|number, value| {
        match number {
            1 => (page.resource_version, page.continue_token) = list_meta(value.bytes()?)?,
            2 => encoded.push(value.bytes()?),
            _ => {}
        }
        Ok(())
    })?;
    on_continue(page.continue_token.as_deref());
    let threads = threads.unwrap_or_else(|| threads_for(&encoded));
    // Each part stops at its first bad item; parts come back in order, so the first error
    // met below is the first bad item of the page.
    let parts = in_parts(&encoded, threads, |first, items| -> Result<Vec<K>, ProtoError> {
        let mut out = Vec::with_capacity(items.len());
        for (i, bytes) in items.iter().enumerate() {
            out.push(decode_item(item, u.kind, first + i, bytes)?);
        }
        Ok(out)
    });
    page.items = try_concat(parts)?;
    Ok(page)
}

/// Decodes watch frames (each without its length prefix) whose objects are `message`s, in
/// order, one result per frame; many bytes of frames are decoded on several threads.
pub fn decode_watch_events<K, F>(message: &'static Message, frames: &[F]) -> Vec<Result<WatchEvent<K>, ProtoError>>
where
    K: DeserializeOwned + Send,
    F: AsRef<[u8]> + Sync,
{
    decode_watch_events_on(message, frames, threads_for(frames))
}

/// [`decode_watch_events`] on `threads` threads.
fn decode_watch_events_on<K, F>(message: &'static Message, frames: &[F], threads: usize) -> Vec<Result<WatchEvent<K>, ProtoError>>
where
    K: DeserializeOwned + Send,
    F: AsRef<[u8]> + Sync,
{
    let parts = in_parts(frames, threads, |_, frames| {
        frames.iter().map(|frame| decode_watch_event(message, frame.as_ref())).collect::<Vec<_>>()
    });
    concat(parts)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A length-delimited field (lengths below 128 only: one varint byte).
    fn len_field(number: u8, bytes: &[u8]) -> Vec<u8> {
        assert!(bytes.len() < 128 && number < 16);
        [&[number << 3 | 2, bytes.len() as u8][..], bytes].concat()
    }

    static THING: Message = Message { name: "Thing", fields: &[field(1, "name", Kind::String, true), field(2, "n", Kind::Int64, true)] };

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Thing {
        name: String,
        #[serde(default)]
        n: i64,
    }

    /// An enveloped list of things named by `names` (as bytes, so a name may be bad UTF-8).
    fn list(names: &[Vec<u8>]) -> Vec<u8> {
        let mut raw = len_field(1, &len_field(2, b"7"));
        for (i, name) in names.iter().enumerate() {
            raw.extend(len_field(2, &[len_field(1, name), vec![2 << 3, (i % 100) as u8]].concat()));
        }
        let type_meta = [len_field(1, b"v1"), len_field(2, b"ThingList")].concat();
        let mut unknown = len_field(1, &type_meta);
        // The list is longer than one varint byte can say.
        unknown.push(2 << 3 | 2);
        let mut n = raw.len();
        while n >= 0x80 {
            unknown.push((n as u8) | 0x80);
            n >>= 7;
        }
        unknown.push(n as u8);
        unknown.extend(raw);
        [MAGIC, &unknown].concat()
    }

    #[test]
    fn a_page_decoded_on_several_threads_keeps_its_order_and_names_the_first_bad_item() {
        let names: Vec<Vec<u8>> = (0..197).map(|i| format!("thing-{i}").into_bytes()).collect();
        let bytes = list(&names);
        let mut told = Vec::new();
        let alone: ListPage<Thing> = decode_list_on(&THING, &bytes, Some(1), |token| told.push(token.map(str::to_string))).unwrap();
        assert_eq!(told, std::slice::from_ref(&alone.continue_token), "told once, of the page's token or of its absence");
        let shared: ListPage<Thing> = decode_list_on(&THING, &bytes, Some(4), |_| {}).unwrap();
        assert_eq!(alone.resource_version, "7");
        assert_eq!(alone.items.len(), names.len());
        assert_eq!(alone.items[100], Thing { name: "thing-100".into(), n: 0 });
        assert_eq!(alone.items[names.len() - 1], Thing { name: format!("thing-{}", names.len() - 1), n: (names.len() - 1) as i64 % 100 });
        assert_eq!(shared.items, alone.items);
        assert_eq!(shared.resource_version, alone.resource_version);
        // Two bad items in different threads' parts: the first one is named.
        let mut bad = names.clone();
        bad[129] = b"\xff".to_vec();
        bad[192] = b"\xff".to_vec();
        for threads in [1, 4] {
            let err = decode_list_on::<Thing>(&THING, &list(&bad), Some(threads), |_| {}).unwrap_err().to_string();
            assert!(err.contains("ThingList.items[129]"), "{threads} threads: {err}");
        }
    }

    /// A watch frame (without its length prefix) of a `kind` event whose object is a thing.
    fn frame(kind: &str, name: &[u8]) -> Vec<u8> {
        let object = [MAGIC, &[len_field(1, &[len_field(1, b"v1"), len_field(2, b"Thing")].concat()), len_field(2, &len_field(1, name))].concat()].concat();
        [len_field(1, kind.as_bytes()), len_field(2, &len_field(1, &object))].concat()
    }

    #[test]
    fn watch_frames_decoded_on_several_threads_give_one_result_each_in_order() {
        let mut frames: Vec<Vec<u8>> = (0..37).map(|i| frame(if i % 2 == 0 { "ADDED" } else { "MODIFIED" }, format!("thing-{i}").as_bytes())).collect();
        frames[20] = frame("ADDED", b"\xff");
        frames[30] = frame("TOUCHED", b"thing-30");
        for threads in [1, 2, 4] {
            let events: Vec<Result<WatchEvent<Thing>, ProtoError>> = decode_watch_events_on(&THING, &frames, threads);
            assert_eq!(events.len(), frames.len(), "{threads} threads");
            for (i, event) in events.iter().enumerate() {
                match (i, event) {
                    (20, Err(e)) => assert!(e.to_string().contains("Thing"), "{e}"),
                    (30, Err(e)) => assert!(e.to_string().contains("TOUCHED"), "{e}"),
                    (i, Ok(WatchEvent::Added(t))) if i % 2 == 0 => assert_eq!(t.name, format!("thing-{i}")),
                    (i, Ok(WatchEvent::Modified(t))) if i % 2 == 1 => assert_eq!(t.name, format!("thing-{i}")),
                    (i, other) => panic!("{threads} threads, frame {i}: {other:?}"),
                }
            }
        }
    }
}
