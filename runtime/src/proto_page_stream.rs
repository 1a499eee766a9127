//! A protobuf list page decoded while its body arrives, a piece at a time, its items handed
//! over in parts as the pieces decode (see `page_parts`), so that a page's decode holds a
//! few pieces of its bytes and of its items, never the whole page.
//!
//! kube-apiserver writes a list as `k8s\0`, then a `runtime.Unknown` whose fields come in
//! number order: the type meta, then the list message's bytes (its `ListMeta` first, then
//! one length-delimited field per item), then the content encoding and type. The head (up
//! to the end of the `ListMeta`) is read first and gives the continue token. From there on,
//! every field's key and length are read as they arrive, and the fields are cut into pieces
//! of about [`PieceBounds::piece_bytes`] at field boundaries; each piece decodes on tokio's
//! blocking pool while later bytes arrive.
//!
//! Invariants:
//! - Held by a page's decode: the bytes not yet cut (a piece, a chunk and an item, unless one
//!   item is longer than that), the pieces being decoded and the parts waiting to be taken
//!   (both bounded, see `page_parts`); no more of the body is read while the most pieces
//!   are being decoded. A piece decoded is handed over before the next bytes are read.
//! - The page's parts, gathered, are the items `proto::decode_list_then` gives for the whole
//!   body; an item that does not decode ends them with the error that decoder gives (the
//!   first bad item, named by its place in the page). A page cut short, or whose envelope
//!   after its items names a content encoding, ends them with an error (after the items
//!   before it were handed over, where the whole-body decoder decodes none).
//! - A page laid out otherwise (no `ListMeta` first in the list message, or a head that does
//!   not read) is read whole and decoded by that decoder, as one part.
//! - `on_continue` is called once, before any item decodes, unless the page's bytes end or
//!   fail before its head is read, or the head does not read as a list's.
//! - Items keep wire order.

use futures::StreamExt;
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::lister_watcher::PageInParts;
use crate::page_parts::{Arrived, Chunks, InFlight, PageOut, PieceBounds, append_to_pending, read_on_own_task, read_whole};
use crate::parallel::MIN_BYTES_PER_THREAD;
use crate::proto::envelope::{self, MAGIC};
use crate::proto::wire::{self, FieldSpan, LEN, Reader};
use crate::proto::{Message, ProtoError};

/// Longest head (envelope up to the end of the `ListMeta`) waited for before the page is
/// read whole instead: it is a few hundred bytes.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// Decodes the protobuf list page whose body `chunks` yields, its items `item` messages, in
/// pieces within `bounds`, calling `on_continue` with its continue token (`None` on a list's
/// last page) as soon as the page's head is read; returns then, with the items to come in
/// parts.
pub(crate) async fn decode_page<K>(chunks: Chunks, item: &'static Message, bounds: PieceBounds, on_continue: impl FnOnce(Option<&str>) + Send + 'static) -> Result<PageInParts<K>, Error>
where
    K: DeserializeOwned + Send + 'static,
{
    read_on_own_task(move |mut out| async move {
        let read = read_page(chunks, item, bounds, on_continue, &mut out).await;
        out.finish(read).await;
    })
    .await
}

fn decode_error(e: ProtoError) -> Error {
    Error::Decode(e.to_string())
}

/// Reads the page, handing its head and parts to `out`.
async fn read_page<K>(mut chunks: Chunks, item: &'static Message, bounds: PieceBounds, on_continue: impl FnOnce(Option<&str>) + Send + 'static, out: &mut PageOut<K>) -> Result<(), Error>
where
    K: DeserializeOwned + Send + 'static,
{
    let mut pending = Vec::new();
    let read = loop {
        match head(&pending) {
            Head::Read(head) => break Some(head),
            Head::Other => break None,
            Head::NotYet => match chunks.next().await {
                Some(chunk) => pending.extend_from_slice(&chunk?),
                None => break None,
            },
        }
    };
    let Some(head) = read else {
        return read_whole(pending, chunks, out, move |bytes| envelope::decode_list_then(item, bytes, on_continue).map_err(decode_error)).await;
    };
    on_continue(head.continue_token.as_deref());
    out.head(head.resource_version, head.continue_token);
    pending.drain(..head.items_at);
    let pieces = Pieces { out, item, kind: head.kind.into(), cut_items: 0, in_flight: InFlight::new(), bounds };
    pieces.decode(pending, head.list_end - head.items_at, chunks).await
}

/// A page's head: the list's kind, resourceVersion and continue token, where its items'
/// fields start and where the list message ends (in the body's bytes).
struct ListHead {
    kind: String,
    resource_version: String,
    continue_token: Option<String>,
    items_at: usize,
    list_end: usize,
}

/// What the bytes of a page read so far show of its head.
enum Head {
    Read(ListHead),
    /// More bytes are needed.
    NotYet,
    /// The page is not laid out as kube-apiserver lays it out, or is not a list.
    Other,
}

/// The field `bytes` start with at `at`, whole (`Ok(None)` while it has not all arrived).
fn whole_field(bytes: &[u8], at: usize) -> Result<Option<FieldSpan>, ProtoError> {
    Ok(wire::field_span(&bytes[at..])?.filter(|span| at + span.len() <= bytes.len()))
}

/// What `bytes` show of a page's head.
fn head(bytes: &[u8]) -> Head {
    let not_yet = if bytes.len() > MAX_HEAD_BYTES { Head::Other } else { Head::NotYet };
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) { Head::NotYet } else { Head::Other };
    }
    if !bytes.starts_with(MAGIC) {
        return Head::Other;
    }
    // The envelope's fields before the list message's bytes.
    let mut at = MAGIC.len();
    let mut kind = "";
    let (list_at, list_end) = loop {
        let span = match wire::field_span(&bytes[at..]) {
            Ok(Some(span)) => span,
            Ok(None) => return not_yet,
            Err(_) => return Head::Other,
        };
        match (span.number, span.wire_type) {
            (2, LEN) => break (at + span.header, at + span.len()),
            (1, LEN) => {
                let Some(value) = bytes.get(at + span.header..at + span.len()) else { return not_yet };
                match envelope::type_meta(value) {
                    Ok((_, k)) => kind = k,
                    Err(_) => return Head::Other,
                }
            }
            // A content encoding before the list, even the plain one, is not how the API
            // server writes it: the whole-body decoder judges it, as it does a type meta
            // that is not a message.
            (1 | 3, _) => return Head::Other,
            _ if at + span.len() > bytes.len() => return not_yet,
            _ => {}
        }
        at += span.len();
    };
    // The list message's first field: its ListMeta.
    let meta = match whole_field(&bytes[..list_end.min(bytes.len())], list_at) {
        Ok(Some(span)) if span.number == 1 && span.wire_type == LEN => span,
        Ok(Some(_)) | Err(_) => return Head::Other,
        Ok(None) if bytes.len() >= list_end => return Head::Other,
        Ok(None) => return not_yet,
    };
    let items_at = list_at + meta.len();
    match envelope::list_meta(&bytes[list_at + meta.header..items_at]) {
        Ok((resource_version, continue_token)) => Head::Read(ListHead { kind: kind.to_owned(), resource_version, continue_token, items_at, list_end }),
        Err(_) => Head::Other,
    }
}

/// A piece's decode: its items or the first bad item's error, and its buffer.
type Decoded<K> = (Result<Vec<K>, ProtoError>, Vec<u8>);

/// The list message's item fields of one page, being decoded in pieces.
struct Pieces<'a, K> {
    out: &'a PageOut<K>,
    item: &'static Message,
    /// The list's kind, to name a bad item.
    kind: std::sync::Arc<str>,
    /// Items in the pieces cut so far.
    cut_items: usize,
    in_flight: InFlight<Decoded<K>>,
    bounds: PieceBounds,
}

impl<K: DeserializeOwned + Send + 'static> Pieces<'_, K> {
    /// Decodes the list message's fields whose `left` bytes start with `pending` and go on
    /// in `chunks`, then reads the envelope's fields after them. A piece is the front of the
    /// buffer the bytes not yet cut are read into; the bytes after it go to a spare buffer.
    async fn decode(mut self, mut pending: Vec<u8>, mut left: usize, mut chunks: Chunks) -> Result<(), Error> {
        // Bytes of `pending` framed into whole fields, and the items among them.
        let (mut framed, mut items) = (0, 0);
        loop {
            while framed < left.min(pending.len()) {
                let Some(span) = whole_field(&pending[..left.min(pending.len())], framed).map_err(decode_error)? else { break };
                if span.number == 2 {
                    items += 1;
                }
                framed += span.len();
                if framed >= self.bounds.piece_bytes() {
                    let piece = self.in_flight.cut(&mut pending, framed, &[], &[], framed);
                    left -= framed;
                    self.start(piece, items).await?;
                    (framed, items) = (0, 0);
                }
            }
            if framed == left {
                break;
            }
            match self.in_flight.next(&mut chunks).await? {
                Arrived::Chunk(chunk) => append_to_pending(&mut pending, &chunk),
                Arrived::End => return Err(decode_error(ProtoError::new(format!("list of {left} more bytes cut short at {}", pending.len())).within(&self.kind))),
                Arrived::Decoded(decoded) => self.done(decoded).await?,
            }
        }
        // The list's last fields; then the envelope's, read whole.
        let mut tail = pending.split_off(framed);
        if framed > 0 {
            if self.in_flight.is_empty() && framed < MIN_BYTES_PER_THREAD {
                let decoded = decode_piece(self.item, &self.kind, self.cut_items, pending);
                self.done(decoded).await?;
            } else {
                self.start(pending, items).await?;
            }
        }
        while let Some(chunk) = chunks.next().await {
            tail.extend_from_slice(&chunk?);
        }
        Reader::new(&tail).for_each(envelope::other_unknown_field).map_err(decode_error)?;
        while let Some(decoded) = self.in_flight.oldest().await {
            self.done(decoded?).await?;
        }
        Ok(())
    }

    /// Starts decoding `piece` (whole fields, `items` of them items) on the blocking pool,
    /// first waiting for the oldest piece when the most are being decoded.
    async fn start(&mut self, piece: Vec<u8>, items: usize) -> Result<(), Error> {
        while let Some(decoded) = self.in_flight.oldest_when_full(self.bounds.pieces_in_flight()).await {
            self.done(decoded?).await?;
        }
        let (item, kind, first) = (self.item, self.kind.clone(), self.cut_items);
        self.cut_items += items;
        self.in_flight.start(move || decode_piece(item, &kind, first, piece));
        Ok(())
    }

    /// Hands over a decoded piece's items, or fails with its error.
    async fn done(&mut self, (items, buffer): Decoded<K>) -> Result<(), Error> {
        let items = items.map_err(decode_error)?;
        self.out.part(items).await;
        self.in_flight.give_back(buffer);
        Ok(())
    }
}

/// Decodes the items among a piece's fields, the first of them the list's item `first`.
fn decode_piece<K: DeserializeOwned>(item: &'static Message, kind: &str, first: usize, piece: Vec<u8>) -> Decoded<K> {
    (envelope::decode_items(item, kind, first, &piece), piece)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::lister_watcher::ListPage;
    use crate::page_parts::PIECE_BYTES;
    use crate::proto::{Field, Kind};

    static THING: Message = Message {
        name: "Thing",
        fields: &[
            Field { number: 1, name: "name", kind: Kind::String, repeated: false, omit_zero: true, inline: false },
            Field { number: 2, name: "n", kind: Kind::Int64, repeated: false, omit_zero: true, inline: false },
        ],
    };

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Thing {
        name: String,
        #[serde(default)]
        n: i64,
    }

    fn varint(mut n: usize, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    fn len_field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![number << 3 | 2];
        varint(bytes.len(), &mut out);
        out.extend_from_slice(bytes);
        out
    }

    /// An enveloped list of things named by `names` (as bytes: a name may be bad UTF-8),
    /// with `meta` as its ListMeta's bytes, `before` the envelope's raw field and `after` it.
    fn list_with(names: &[Vec<u8>], meta: Option<&[u8]>, before: &[u8], after: &[u8]) -> Vec<u8> {
        let mut raw = meta.map(|m| len_field(1, m)).unwrap_or_default();
        for (i, name) in names.iter().enumerate() {
            raw.extend(len_field(2, &[len_field(1, name), vec![2 << 3, (i % 100) as u8]].concat()));
        }
        let type_meta = [len_field(1, b"v1"), len_field(2, b"ThingList")].concat();
        [MAGIC, &len_field(1, &type_meta), before, &len_field(2, &raw), after].concat()
    }

    fn meta(token: &str) -> Vec<u8> {
        [len_field(2, b"7"), if token.is_empty() { Vec::new() } else { len_field(3, token.as_bytes()) }].concat()
    }

    fn list(names: &[Vec<u8>]) -> Vec<u8> {
        list_with(names, Some(&meta("more")), &[], &len_field(4, b"application/vnd.kubernetes.protobuf"))
    }

    fn chunks_of(bytes: &[u8], chunk: usize) -> Chunks {
        let chunks: Vec<Result<Bytes, Error>> = bytes.chunks(chunk.max(1)).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        futures::stream::iter(chunks).boxed()
    }

    type Outcome = Result<(Vec<Thing>, String, Option<String>), String>;

    async fn streamed(bytes: &[u8], chunk: usize, piece_bytes: usize) -> (Outcome, Vec<Option<String>>) {
        let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let tell = told.clone();
        let page = async {
            let page: PageInParts<Thing> = decode_page(chunks_of(bytes, chunk), &THING, PieceBounds::fixed(piece_bytes), move |token| tell.lock().unwrap().push(token.map(str::to_string))).await?;
            page.gathered().await
        };
        let page = page.await.map(|p: ListPage<Thing>| (p.items, p.resource_version, p.continue_token)).map_err(|e| e.to_string());
        let told = told.lock().unwrap().clone();
        (page, told)
    }

    fn whole(bytes: &[u8]) -> Outcome {
        envelope::decode_list::<Thing>(&THING, bytes).map(|p| (p.items, p.resource_version, p.continue_token)).map_err(|e| decode_error(e).to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_streamed_in_any_chunks_and_pieces_is_the_page_or_error_the_whole_body_gives() {
        let names: Vec<Vec<u8>> = (0..150).map(|i| format!("thing-{i}").into_bytes()).collect();
        // Names long enough that an item's length takes two varint bytes.
        let long: Vec<Vec<u8>> = (0..40).map(|i| format!("{i}-{}", "x".repeat(200)).into_bytes()).collect();
        let mut bad = names.clone();
        bad[70] = b"\xff".to_vec();
        bad[120] = b"\xff".to_vec();
        let mut last_bad = names.clone();
        last_bad[149] = b"\xff".to_vec();
        let plain_encoding = len_field(4, b"application/vnd.kubernetes.protobuf");
        let mut pages: Vec<(Vec<u8>, bool)> = vec![(list(&names), true), (list(&long), true), (list(&bad), true), (list(&last_bad), true)];
        for (other, streamed) in [
            // The last page of a list; an empty page.
            (list_with(&names, Some(&meta("")), &[], &plain_encoding), true),
            (list_with(&[], Some(&meta("more")), &[], &[]), true),
            // Laid out otherwise: read whole.
            (list_with(&names, None, &[], &[]), false),
            (list_with(&names, Some(&meta("more")), &len_field(3, b""), &[]), false),
            (list_with(&names, Some(&meta("more")), &len_field(3, b"gzip"), &[]), false),
            (b"{\"kind\":\"ThingList\"}".to_vec(), false),
            (Vec::new(), false),
        ] {
            pages.push((other, streamed));
        }
        for (n, (bytes, streams)) in pages.iter().enumerate() {
            let expected = whole(bytes);
            for chunk in [1, 13, 4096, bytes.len()] {
                for piece_bytes in [1, 300, 2000, PIECE_BYTES.ceiling] {
                    let (page, told) = streamed(bytes, chunk, piece_bytes).await;
                    let case = format!("page {n}, chunks of {chunk}, pieces of {piece_bytes}");
                    assert_eq!(page, expected, "{case}");
                    if *streams {
                        assert_eq!(told.len(), 1, "{case}: {told:?}");
                    }
                }
            }
        }
        // The bad item named is the first, by its place in the page.
        let (page, _) = streamed(&pages[2].0, 13, 300).await;
        assert!(page.unwrap_err().contains("ThingList.items[70]"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_cut_short_or_with_an_encoding_after_its_items_fails_after_the_items_before() {
        let names: Vec<Vec<u8>> = (0..150).map(|i| format!("thing-{i}").into_bytes()).collect();
        let bytes = list(&names);
        for cut in [bytes.len() / 2, bytes.len() - 40] {
            for piece_bytes in [300, PIECE_BYTES.ceiling] {
                let (page, _) = streamed(&bytes[..cut], 13, piece_bytes).await;
                assert!(page.as_ref().is_err_and(|e| e.contains("cut short")), "cut at {cut}, pieces of {piece_bytes}: {page:?}");
                assert!(whole(&bytes[..cut]).is_err());
            }
        }
        let gzip = list_with(&names, Some(&meta("more")), &[], &len_field(3, b"gzip"));
        let (page, _) = streamed(&gzip, 13, 300).await;
        assert_eq!(page, whole(&gzip));
        assert!(page.unwrap_err().contains("unsupported content encoding"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_head_is_returned_before_the_items_arrive_and_parts_are_handed_over_as_they_decode() {
        let names: Vec<Vec<u8>> = (0..400).map(|i| format!("thing-{i}").into_bytes()).collect();
        let bytes = list(&names);
        let Head::Read(head) = head(&bytes) else { panic!("a head") };
        let half = head.items_at + (head.list_end - head.items_at) / 2;
        let (body, chunks) = futures::channel::mpsc::unbounded::<Result<Bytes, Error>>();
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[..head.items_at]))).unwrap();
        let mut page = decode_page::<Thing>(chunks.boxed(), &THING, PieceBounds::fixed(300), |_| {}).await.unwrap();
        assert_eq!((page.resource_version.as_str(), page.continue_token.as_deref()), ("7", Some("more")));
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[head.items_at..half]))).unwrap();
        // Every item of the first half but the bytes not yet cut (a piece and an item).
        let item_bytes = (head.list_end - head.items_at) / names.len() + 1;
        let must = (half - head.items_at - 300 - item_bytes) / item_bytes;
        assert!(must > 150, "{must}");
        let mut got = Vec::new();
        while got.len() < must {
            let part = tokio::time::timeout(std::time::Duration::from_secs(5), page.next_part()).await.expect("a part before the rest of the body");
            got.extend(part.unwrap().unwrap().into_iter().map(|t| t.name));
        }
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[half..]))).unwrap();
        drop(body);
        while let Some(part) = page.next_part().await {
            got.extend(part.unwrap().into_iter().map(|t| t.name));
        }
        assert_eq!(got, (0..400).map(|i| format!("thing-{i}")).collect::<Vec<_>>());
    }
}
