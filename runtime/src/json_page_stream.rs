//! A JSON list page decoded while its body arrives, a piece at a time, its items handed over
//! in parts as the pieces decode, so that a page's decode holds a few pieces of its bytes and
//! of its items, never the whole page.
//!
//! The bytes before the items array are read first, as `json_list_split` reads a page's
//! head, for the list metadata; the continue token is told then, before any item decodes.
//! The array's bytes are cut into pieces where that module cuts a page (a `},` followed by
//! the first item's opening, found at or past [`PieceBounds::piece_bytes`] into the bytes
//! not yet cut), and each piece is decoded as `[`, its bytes, `]` on tokio's blocking pool
//! while later bytes arrive.
//!
//! Invariants:
//! - Held by a page's decode: the bytes not yet cut (a piece, a chunk and an item, unless one
//!   item is longer than that), the pieces being decoded (each in a buffer of at most about
//!   twice its bytes) and the parts waiting to be taken (both bounded, see `page_parts`); no
//!   more of the body is read while the most pieces are being decoded. A piece decoded is
//!   handed over before the next bytes are read.
//! - The page's parts, gathered, are what `json_list::decode_list_then` gives for the whole
//!   body, and so is the error that ends them, but for where a page that is not JSON breaks
//!   (counted from the first byte not yet decoded). The head (resourceVersion and continue
//!   token) is returned as soon as it is read, before any item decodes.
//! - A page whose metadata does not come before its items array (as kube-apiserver writes
//!   them) is read whole and decoded by that decoder, as one part; the list metadata is the
//!   one before the items array.
//! - A piece that does not decode (a cut between two items is proved by its decode, see
//!   `json_list_split`; or an item is bad) and everything after it are read the slow way
//!   (the rest of the body read in first), which names the first bad item by its place in
//!   the page. Such a piece starts where an item starts: the array's start, or a cut the
//!   piece before it proved.
//! - `on_continue` is called once, before any item decodes, unless the page's bytes end or
//!   fail before its head is read, or the head does not read as a list's.
//! - Items keep wire order.

use bytes::Bytes;
use futures::StreamExt;
use memchr::memmem;
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::exact_json::VecSizing;
use crate::json_list::{self, RawListMeta};
use crate::json_list_split::{array_end_at_page_end, cut_finder, head_metadata, skip_whitespace};
use crate::lister_watcher::PageInParts;
use crate::page_parts::{Arrived, Chunks, InFlight, PageOut, PieceBounds, append_to_pending, read_on_own_task, read_whole};
use crate::parallel::{MIN_BYTES_PER_THREAD, joined};

/// Longest head (the bytes before `"items"`) looked for before the page is read whole
/// instead: a list's metadata is a few hundred bytes.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// Decodes the JSON list page whose body `chunks` yields, in pieces within `bounds`, calling
/// `on_continue` with its continue token (`None` on a list's last page) as soon as the
/// page's head is read; returns then, with the items to come in parts (see `page_parts`).
/// The items' `Vec`s are sized as `sizing` says.
pub(crate) async fn decode_page<K>(chunks: Chunks, bounds: PieceBounds, sizing: VecSizing, on_continue: impl FnOnce(Option<&str>) + Send + 'static) -> Result<PageInParts<K>, Error>
where
    K: DeserializeOwned + Send + 'static,
{
    read_on_own_task(move |mut out| async move {
        let read = read_page(chunks, bounds, sizing, on_continue, &mut out).await;
        out.finish(read).await;
    })
    .await
}

/// Reads the page, handing its head and parts to `out`.
async fn read_page<K>(mut chunks: Chunks, bounds: PieceBounds, sizing: VecSizing, on_continue: impl FnOnce(Option<&str>) + Send + 'static, out: &mut PageOut<K>) -> Result<(), Error>
where
    K: DeserializeOwned + Send + 'static,
{
    let mut pending = Vec::new();
    // Where `"items"` is looked for next: before it, the bytes read hold none.
    let mut search_from = 0;
    let read = loop {
        match head(&pending, &mut search_from) {
            Head::Read(metadata, items_at) => break Some((metadata, items_at)),
            Head::Other => break None,
            Head::NotYet => match chunks.next().await {
                Some(chunk) => pending.extend_from_slice(&chunk?),
                None => break None,
            },
        }
    };
    let Some((metadata, items_at)) = read else {
        return read_whole(pending, chunks, out, move |bytes| json_list::decode_list_then(bytes, sizing, on_continue).map_err(Error::Decode)).await;
    };
    let continue_token = metadata.continue_.filter(|c| !c.is_empty());
    on_continue(continue_token.as_deref());
    out.head(metadata.resource_version.unwrap_or_default(), continue_token);
    // The items array's bytes from its `[` on.
    pending.drain(..items_at - 1);
    Pieces::new(out, bounds, sizing).decode(pending, chunks).await
}

/// What the bytes of a page read so far show of its head.
enum Head {
    /// The list metadata, and where the items array's bytes start (after its `[`).
    Read(RawListMeta, usize),
    /// More bytes are needed.
    NotYet,
    /// The page is not laid out as kube-apiserver lays it out: its metadata, then its items
    /// array.
    Other,
}

/// What `bytes` show of a page's head; `"items"` is looked for from `search_from` on, which
/// is moved past the bytes found without it.
fn head(bytes: &[u8], search_from: &mut usize) -> Head {
    const KEY: &[u8] = b"\"items\"";
    let Some(found) = memmem::find(&bytes[*search_from..], KEY) else {
        *search_from = bytes.len().saturating_sub(KEY.len() - 1);
        return if bytes.len() > MAX_HEAD_BYTES { Head::Other } else { Head::NotYet };
    };
    let key = *search_from + found;
    let colon = skip_whitespace(bytes, key + KEY.len());
    let open = match bytes.get(colon) {
        None => return Head::NotYet,
        Some(b':') => skip_whitespace(bytes, colon + 1),
        Some(_) => return Head::Other,
    };
    match bytes.get(open) {
        None => Head::NotYet,
        // The metadata must come first: its continue token is told before the items decode.
        Some(b'[') if memmem::find(&bytes[..key], b"\"metadata\"").is_some() => match head_metadata(&bytes[..key]) {
            Some(metadata) => Head::Read(metadata, open + 1),
            None => Head::Other,
        },
        Some(_) => Head::Other,
    }
}

/// The items array's pieces of one page, being decoded.
struct Pieces<'a, K> {
    /// Where the items of each piece decoded go, in order.
    out: &'a PageOut<K>,
    /// Items handed over so far.
    handed_over: usize,
    in_flight: InFlight<Decoded<K>>,
    bounds: PieceBounds,
    sizing: VecSizing,
}

/// What the body gave next, while pieces decoded.
enum Read {
    Chunk(Bytes),
    End,
    /// A piece did not decode: the bytes from it on (see [`Pieces::failed_from`]).
    Failed(Vec<u8>),
}

/// A piece's decode: its items when it read as one whole array, and its buffer.
struct Decoded<K> {
    items: Option<Vec<K>>,
    /// `[`, the piece's bytes, `]`.
    array: Vec<u8>,
}

impl<'a, K: DeserializeOwned + Send + 'static> Pieces<'a, K> {
    fn new(out: &'a PageOut<K>, bounds: PieceBounds, sizing: VecSizing) -> Self {
        Pieces { out, handed_over: 0, in_flight: InFlight::new(), bounds, sizing }
    }

    /// Decodes the items array whose bytes start with `pending` (from its `[` on) and go on
    /// in `chunks`. The bytes not yet cut are read into the buffer a piece is cut from (see
    /// [`InFlight::cut`]).
    async fn decode(mut self, mut pending: Vec<u8>, mut chunks: Chunks) -> Result<(), Error> {
        // Where the next cut is looked for, in `pending`.
        let mut search_from = self.bounds.piece_bytes();
        let mut cut_before: Option<memmem::Finder<'static>> = None;
        loop {
            if cut_before.is_none() {
                // `None` until the first item's opening has arrived: asked again.
                cut_before = cut_finder(&pending[1..]);
            }
            if let Some(finder) = &cut_before {
                while pending.len() >= search_from + finder.needle().len() {
                    let Some(found) = finder.find(&pending[search_from..]) else {
                        search_from = pending.len() + 1 - finder.needle().len();
                        break;
                    };
                    let comma = search_from + found + 1;
                    let piece = self.in_flight.cut(&mut pending, comma, b"]", b"[", comma + 1);
                    search_from = self.bounds.piece_bytes();
                    if let Some(failed) = self.start(piece).await? {
                        return self.decode_rest(after_cut(failed, &pending[1..]), chunks).await;
                    }
                }
            }
            match self.next_chunk(&mut chunks).await? {
                Read::Chunk(chunk) => append_to_pending(&mut pending, &chunk),
                Read::End => break,
                Read::Failed(failed) => return self.decode_rest(after_cut(failed, &pending[1..]), chunks).await,
            }
        }
        // The body has ended: what is left is the last items, `]` and the page's `}`.
        let Some(close) = array_end_at_page_end(&pending) else {
            let rest = match self.in_flight_failed().await? {
                Some(failed) => after_cut(failed, &pending[1..]),
                None => pending[1..].to_vec(),
            };
            return self.decode_rest(rest, chunks).await;
        };
        let tail = pending.split_off(close);
        if pending[1..].iter().any(|b| !b.is_ascii_whitespace()) {
            pending.push(b']');
            let inline = self.in_flight.is_empty() && pending.len() < MIN_BYTES_PER_THREAD;
            let failed = if inline { self.decode_here(pending).await } else { self.start(pending).await? };
            if let Some(mut failed) = failed {
                failed.extend_from_slice(&tail);
                return self.decode_rest(failed, chunks).await;
            }
        }
        match self.in_flight_failed().await? {
            Some(mut failed) => {
                failed.extend_from_slice(&tail);
                self.decode_rest(failed, chunks).await
            }
            None => Ok(()),
        }
    }

    /// Starts decoding `array` on the blocking pool, first waiting for the oldest piece
    /// when the most are being decoded; returns the bytes from the first piece that did not
    /// decode on (see [`Pieces::failed_from`]), if one did not.
    async fn start(&mut self, array: Vec<u8>) -> Result<Option<Vec<u8>>, Error> {
        while let Some(decoded) = self.in_flight.oldest_when_full(self.bounds.pieces_in_flight()).await {
            if let Some(failed) = self.done(decoded?).await {
                return Ok(Some(self.failed_from(failed, Some(array)).await?));
            }
        }
        let sizing = self.sizing;
        self.in_flight.start(move || decode_piece(array, sizing));
        Ok(None)
    }

    /// Decodes `array` on this thread, after the pieces before it.
    async fn decode_here(&mut self, array: Vec<u8>) -> Option<Vec<u8>> {
        let decoded = decode_piece(array, self.sizing);
        match decoded.items {
            Some(items) => {
                self.hand_over(items).await;
                None
            }
            None => Some(failed_bytes(&decoded.array)),
        }
    }

    async fn hand_over(&mut self, items: Vec<K>) {
        self.handed_over += items.len();
        self.out.part(items).await;
    }

    /// The body's next chunk; the pieces that finish decoding before it comes are handed
    /// over meanwhile, oldest first (so are those already decoded, first).
    async fn next_chunk(&mut self, chunks: &mut Chunks) -> Result<Read, Error> {
        loop {
            let decoded = match self.in_flight.next(chunks).await? {
                Arrived::Chunk(chunk) => return Ok(Read::Chunk(chunk)),
                Arrived::End => return Ok(Read::End),
                Arrived::Decoded(decoded) => decoded,
            };
            if let Some(failed) = self.done(decoded).await {
                return Ok(Read::Failed(self.failed_from(failed, None).await?));
            }
        }
    }

    /// Waits for the oldest piece being decoded: its items are handed over, or it is
    /// returned when it did not decode.
    async fn next_done(&mut self) -> Result<Option<Decoded<K>>, Error> {
        match self.in_flight.oldest().await {
            Some(decoded) => Ok(self.done(decoded?).await),
            None => Ok(None),
        }
    }

    /// Hands over the items of a piece decoded, or returns it when it did not decode.
    async fn done(&mut self, decoded: Decoded<K>) -> Option<Decoded<K>> {
        match decoded.items {
            Some(items) => {
                self.hand_over(items).await;
                self.in_flight.give_back(decoded.array);
                None
            }
            None => Some(decoded),
        }
    }

    /// Waits for every piece being decoded; the bytes from the first that did not decode
    /// on, if one did not.
    async fn in_flight_failed(&mut self) -> Result<Option<Vec<u8>>, Error> {
        while !self.in_flight.is_empty() {
            if let Some(failed) = self.next_done().await? {
                return Ok(Some(self.failed_from(failed, None).await?));
            }
        }
        Ok(None)
    }

    /// The bytes of the items array from the piece `failed` on: it, the pieces still being
    /// decoded after it, and `next` (a piece not yet started), joined by the commas their
    /// cuts took out.
    async fn failed_from(&mut self, failed: Decoded<K>, next: Option<Vec<u8>>) -> Result<Vec<u8>, Error> {
        let mut bytes = failed_bytes(&failed.array);
        while let Some(later) = self.in_flight.oldest().await {
            let later = later?;
            bytes.push(b',');
            bytes.extend_from_slice(&later.array[1..later.array.len() - 1]);
        }
        if let Some(next) = next {
            bytes.push(b',');
            bytes.extend_from_slice(&next[1..next.len() - 1]);
        }
        Ok(bytes)
    }

    /// The items not yet decoded, read the slow way: `array` holds the items array's bytes
    /// from the first of them on, and the rest of the body ends the page.
    async fn decode_rest(mut self, array: Vec<u8>, mut chunks: Chunks) -> Result<(), Error> {
        // `{"items":[` and the rest of the page's bytes make a list of the items not yet
        // decoded (closed by the page's own `]` and `}`).
        let mut rest = Vec::with_capacity(array.len() + 16);
        rest.extend_from_slice(b"{\"items\":[");
        rest.extend_from_slice(&array);
        drop(array);
        while let Some(chunk) = chunks.next().await {
            rest.extend_from_slice(&chunk?);
        }
        let first = self.handed_over;
        let sizing = self.sizing;
        let decode = move || json_list::decode_rest::<K>(&rest, first, sizing).map_err(Error::Decode);
        let items = joined(tokio::task::spawn_blocking(decode).await, "list page")??;
        self.hand_over(items).await;
        Ok(())
    }
}

fn decode_piece<K: DeserializeOwned>(array: Vec<u8>, sizing: VecSizing) -> Decoded<K> {
    let mut items = Vec::new();
    let read = json_list::decode_array(&array, &mut items, sizing);
    Decoded { items: read.then_some(items), array }
}

/// `failed` (bytes of the items array up to a cut), the comma the cut took out, and
/// `pending` (the bytes after it).
fn after_cut(mut failed: Vec<u8>, pending: &[u8]) -> Vec<u8> {
    failed.push(b',');
    failed.extend_from_slice(pending);
    failed
}

/// The piece's bytes in `[`, piece, `]`.
fn failed_bytes(array: &[u8]) -> Vec<u8> {
    array[1..array.len() - 1].to_vec()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use serde::Deserialize;

    use super::*;
    use crate::json_list::tests::{config_map, list};
    use crate::lister_watcher::ListPage;
    use crate::page_parts::{PIECE_BYTES, max_pieces_in_flight};

    /// `bytes` as a body of `chunk`-byte chunks.
    fn chunks_of(bytes: &[u8], chunk: usize) -> Chunks {
        let chunks: Vec<Result<Bytes, Error>> = bytes.chunks(chunk.max(1)).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        futures::stream::iter(chunks).boxed()
    }

    type Outcome = Result<(Vec<serde_json::Value>, String, Option<String>), String>;

    /// The page decoded as its body arrives, its parts gathered.
    async fn gathered<K: DeserializeOwned + Send + 'static>(chunks: Chunks, piece_bytes: usize, on_continue: impl FnOnce(Option<&str>) + Send + 'static) -> Result<ListPage<K>, Error> {
        decode_page(chunks, PieceBounds::fixed(piece_bytes), VecSizing::Exact, on_continue).await?.gathered().await
    }

    /// The page decoded as its body arrives, and the tokens `on_continue` was told.
    async fn streamed(bytes: &[u8], chunk: usize, piece_bytes: usize) -> (Outcome, Vec<Option<String>>) {
        let told = Arc::new(Mutex::new(Vec::new()));
        let tell = told.clone();
        let page = gathered(chunks_of(bytes, chunk), piece_bytes, move |token| tell.lock().unwrap().push(token.map(str::to_string))).await;
        let page = page.map(|p| (p.items, p.resource_version, p.continue_token)).map_err(|e| e.to_string());
        let told = told.lock().unwrap().clone();
        (page, told)
    }

    fn summary(page: &Outcome) -> String {
        match page {
            Ok((items, rv, token)) => format!("{} items, resourceVersion {rv:?}, continue {token:?}", items.len()),
            Err(e) => e.clone(),
        }
    }

    /// What the whole-page decoder gives.
    fn whole(bytes: &[u8]) -> Outcome {
        json_list::decode_list(bytes).map(|p| (p.items, p.resource_version, p.continue_token)).map_err(|e| Error::Decode(e).to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_streamed_in_any_chunks_and_pieces_is_the_page_or_error_the_whole_body_gives() {
        let item = |i: usize, inner: &str| format!(r#"{{"metadata":{{"name":"n{i}"}},"spec":{inner}}}"#);
        // Nested objects that open as the items do: cuts guessed among them are wrong.
        let nested = format!("[{}]", (0..20).map(|i| format!(r#"{{"a":{i}}},{{"metadata":{{"name":"inner"}}}}"#)).collect::<Vec<_>>().join(","));
        let plain: Vec<String> = (0..30).map(|i| item(i, r#""s\"\n""#)).collect();
        let with_nested: Vec<String> = (0..30).map(|i| item(i, if i % 7 == 0 { "1" } else { &nested })).collect();
        let config_maps: Vec<String> = (0..120).map(config_map).collect();
        let mut bad_item = config_maps.clone();
        bad_item[70] = r#"{"metadata":{"name":7}}"#.into();
        bad_item[100] = r#"{"metadata":{"name":8}}"#.into();
        let mut last_bad = config_maps.clone();
        last_bad[119] = r#"{"data":[]}"#.into();
        let mut two_bad = plain.clone();
        two_bad[21] = r#"{"metadata":{"name":"x"}"#.into();
        two_bad[22] = r#"{"metadata":{"name":"y"}},"#.into();
        let meta = r#"{"resourceVersion":"4","continue":"more"}"#;
        let mut pages: Vec<Vec<u8>> = [&plain, &with_nested, &config_maps, &bad_item, &last_bad, &two_bad].iter().map(|items| list(items, meta)).collect();
        let mut not_utf8 = list(&plain, meta);
        let at = not_utf8.len() / 2;
        not_utf8[at] = 0xff;
        pages.push(not_utf8);
        let joined = config_maps.join(",");
        for other in [
            // Laid out otherwise: read whole.
            format!(r#"{{"items":[{joined}],"metadata":{meta}}}"#),
            format!(r#"{{"metadata":{meta},"items":null}}"#),
            format!(r#"{{"metadata":{meta}}}"#),
            // Members after the items, a page cut short, one brace too many, spaces.
            format!(r#"{{"metadata":{meta},"items":[{joined}],"x":[1]}}"#),
            format!(r#"{{"metadata":{meta},"items":[{joined}"#),
            format!(r#"{{"metadata":{meta},"items":[{joined}]}}}}"#),
            format!("{{ \"metadata\" : {meta} , \"items\" : [ {} ] }}\n", config_maps.join(" , ")),
            format!(r#"{{"metadata":{meta},"items":[]}}"#),
            format!(r#"{{"metadata":{meta},"items":[ ]}}"#),
            String::new(),
        ] {
            pages.push(other.into_bytes());
        }
        for (n, bytes) in pages.iter().enumerate() {
            let expected = whole(bytes);
            for chunk in [1, 13, 4096, bytes.len()] {
                for piece_bytes in [1, 300, 2000, PIECE_BYTES.ceiling] {
                    let (page, told) = streamed(bytes, chunk, piece_bytes).await;
                    let case = format!("page {n}, chunks of {chunk}, pieces of {piece_bytes}");
                    match &expected {
                        // A page that is not JSON says so; where, it counts from the first
                        // byte not yet decoded.
                        Err(e) if e.contains("list: ") => assert!(page.as_ref().is_err_and(|p| p.contains("list: ")), "{case}: {page:?}"),
                        _ => assert!(page == expected, "{case}: {}", summary(&page)),
                    }
                    if page.is_ok() {
                        assert_eq!(told, [Some("more".to_string())], "{case}");
                    }
                }
            }
        }
        // Read as ConfigMaps, the bad item named is the first, by its place in the page,
        // however the page was cut.
        for (bytes, first_bad) in [(&pages[3], "items[70]: "), (&pages[4], "items[119]: ")] {
            for chunk in [13, bytes.len()] {
                for piece_bytes in [1, 300, 2000, PIECE_BYTES.ceiling] {
                    let page = gathered::<k8s_openapi::api::core::v1::ConfigMap>(chunks_of(bytes, chunk), piece_bytes, |_| {}).await;
                    let err = page.unwrap_err().to_string();
                    assert!(err.contains(first_bad), "chunks of {chunk}, pieces of {piece_bytes}: {err}");
                }
            }
        }
    }

    /// Bytes of the body handed out so far, by [`counted`].
    static PULLED: AtomicUsize = AtomicUsize::new(0);

    fn counted(bytes: &[u8], chunk: usize) -> Chunks {
        chunks_of(bytes, chunk).inspect(|c| _ = PULLED.fetch_add(c.as_ref().map_or(0, Bytes::len), Ordering::SeqCst)).boxed()
    }

    /// An item that notes how many of the body's bytes had been handed out when it decoded.
    #[derive(Deserialize)]
    struct Seen {
        metadata: SeenMeta,
        #[serde(skip, default = "pulled_now")]
        pulled: usize,
    }

    #[derive(Deserialize)]
    struct SeenMeta {
        name: String,
    }

    fn pulled_now() -> usize {
        PULLED.load(Ordering::SeqCst)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn items_decode_while_the_body_arrives_a_few_pieces_behind_it() {
        let items: Vec<String> = (0..2000).map(config_map).collect();
        let bytes = list(&items, r#"{"resourceVersion":"4"}"#);
        let (chunk, piece_bytes) = (512, 2048);
        let page = gathered::<Seen>(counted(&bytes, chunk), piece_bytes, |_| {}).await.unwrap();
        assert_eq!(page.items.len(), items.len());
        let longest = items.iter().map(String::len).max().unwrap();
        // Ahead of an item's decode: the pieces being decoded with it, the bytes not yet
        // cut (a piece and an item), a chunk.
        let bound = (max_pieces_in_flight() + 1) * (piece_bytes + longest + 1) + chunk;
        let mut end = bytes.len() - items.iter().map(|i| i.len() + 1).sum::<usize>() - 2;
        for (i, (item, text)) in page.items.iter().zip(&items).enumerate() {
            end += text.len() + 1;
            assert_eq!(item.metadata.name, format!("cm-{i}"));
            assert!(item.pulled >= end - 1, "item {i} decoded before its bytes came");
            assert!(item.pulled <= end + bound, "item {i} (ends at byte {end}) decoded after {} bytes of {}", item.pulled, bytes.len());
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_head_is_returned_before_the_items_arrive_and_parts_are_handed_over_as_they_decode() {
        let items: Vec<String> = (0..400).map(config_map).collect();
        let bytes = list(&items, r#"{"resourceVersion":"4","continue":"c"}"#);
        let items_at = memmem::find(&bytes, b"[").unwrap() + 1;
        let half = items_at + items[..200].iter().map(|i| i.len() + 1).sum::<usize>();
        let (body, chunks) = futures::channel::mpsc::unbounded::<Result<Bytes, Error>>();
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[..items_at]))).unwrap();
        let mut page = decode_page::<k8s_openapi::api::core::v1::ConfigMap>(chunks.boxed(), PieceBounds::fixed(2000), VecSizing::Exact, |_| {}).await.unwrap();
        assert_eq!((page.resource_version.as_str(), page.continue_token.as_deref()), ("4", Some("c")));
        // Half the items' bytes: every item of them but the bytes not yet cut (a piece and an
        // item) is handed over while the rest has not come.
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[items_at..half]))).unwrap();
        let longest = items.iter().map(String::len).max().unwrap();
        let mut end = items_at;
        let must = items.iter().take_while(|i| {
            end += i.len() + 1;
            end + 2000 + longest + 1 < half
        });
        let must = must.count();
        assert!(must > 150, "{must}");
        let mut names = Vec::new();
        while names.len() < must {
            let part = tokio::time::timeout(std::time::Duration::from_secs(5), page.next_part()).await.expect("a part before the rest of the body");
            names.extend(part.unwrap().unwrap().into_iter().map(|c| c.metadata.name.unwrap()));
        }
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[half..]))).unwrap();
        drop(body);
        while let Some(part) = page.next_part().await {
            names.extend(part.unwrap().into_iter().map(|c| c.metadata.name.unwrap()));
        }
        assert_eq!(names, (0..400).map(|i| format!("cm-{i}")).collect::<Vec<_>>());

        // A page dropped mid-body stops reading it.
        let (body, chunks) = futures::channel::mpsc::unbounded::<Result<Bytes, Error>>();
        body.unbounded_send(Ok(Bytes::copy_from_slice(&bytes[..half]))).unwrap();
        let page = decode_page::<serde_json::Value>(chunks.boxed(), PieceBounds::fixed(2000), VecSizing::Grown, |_| {}).await.unwrap();
        assert!(!body.is_closed());
        drop(page);
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !body.is_closed() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the page's decode is cancelled");
    }

    #[tokio::test]
    async fn a_body_that_fails_fails_the_page_and_before_its_head_tells_no_token() {
        let items: Vec<String> = (0..50).map(config_map).collect();
        let bytes = list(&items, r#"{"resourceVersion":"4","continue":"c"}"#);
        for cut in [10, bytes.len() / 2, bytes.len() - 1] {
            let chunks: Vec<Result<Bytes, Error>> = vec![Ok(Bytes::copy_from_slice(&bytes[..cut])), Err(Error::Decode("connection reset".into()))];
            let told = Arc::new(Mutex::new(0));
            let tell = told.clone();
            let page = gathered::<serde_json::Value>(futures::stream::iter(chunks).boxed(), 300, move |_| *tell.lock().unwrap() += 1).await;
            assert!(page.unwrap_err().to_string().contains("connection reset"), "cut at {cut}");
            assert_eq!(*told.lock().unwrap(), usize::from(cut > 10), "cut at {cut}");
        }
    }
}
