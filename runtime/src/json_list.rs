//! JSON list responses read whole, decoded item by item, in contiguous parts, on several
//! threads when they are many bytes (see `crate::parallel`). A page from a server decodes
//! as it arrives (`crate::json_page_stream`) and comes here whole only when it is not laid
//! out as kube-apiserver lays it out; the rest of a page whose piece did not decode comes
//! here too ([`decode_rest`]). A part's items are copied into an array of
//! their own and read by one deserializer, so its buffer for strings with escapes is reused
//! from item to item instead of grown afresh for each; a part of a page cut without a scan
//! is copied a piece of at most [`MAX_PIECE_BYTES`] at a time through one buffer, so a
//! page's decode holds at most that much per thread beside the page.
//!
//! A page laid out as kube-apiserver lays it out is cut into parts without reading its items
//! first (`crate::json_list_split`: the cuts are guessed, and proved by the parts' decode).
//! Any other page, and any page whose split decode fails, is read the slow way: one scan
//! finds each item's text (borrowed from the response), then the texts are decoded in
//! parts; a failure there names the first bad item.
//!
//! Why not `kube_core::ObjectList`: it flattens its type meta, so serde first buffers the
//! whole page as generic content and decodes the items from that copy.
//!
//! Invariants: items keep wire order; an error names the first bad item (`items[i]`); a
//! `null` or missing `items` is an empty page, an empty `continue` is no continue token;
//! each item decodes as it would from its own JSON text (its type's own `Deserialize`); both
//! ways give the same page or the same error. Items' `Vec`s are sized as the caller's
//! [`VecSizing`] says (`crate::exact_json`).

use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::de::{DeserializeOwned, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::exact_json::{self, VecSizing};
use crate::json_list_split::split;
use crate::lister_watcher::ListPage;
use crate::parallel::{concat, in_parts, threads_for, threads_for_bytes, try_concat};

/// A list response with its items still as text.
#[derive(Deserialize)]
pub(crate) struct RawList<'a> {
    #[serde(default)]
    pub(crate) metadata: RawListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

/// What a page needs of `ListMeta`.
#[derive(Deserialize, Default)]
pub(crate) struct RawListMeta {
    #[serde(rename = "resourceVersion", default)]
    pub(crate) resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    pub(crate) continue_: Option<String>,
}

/// Decodes a JSON list response whose items are `K`s; the error says what and where.
#[cfg(test)]
pub(crate) fn decode_list<K: DeserializeOwned + Send + 'static>(bytes: &[u8]) -> Result<ListPage<K>, String> {
    decode_list_on(bytes, None, MAX_PIECE_BYTES, None, VecSizing::Exact, |_| {})
}

/// [`decode_list`], calling `on_continue` with the page's continue token (`None` on a
/// list's last page) once the page's metadata is read and before its items are decoded (if
/// the metadata does not read, it is not called). Inside a tokio
/// runtime, and on one of its blocking threads when the page is many bytes (as it must be
/// then), the parts of a page cut without a scan decode on the runtime's blocking pool.
pub(crate) fn decode_list_then<K: DeserializeOwned + Send + 'static>(bytes: &Bytes, sizing: VecSizing, on_continue: impl FnOnce(Option<&str>)) -> Result<ListPage<K>, String> {
    decode_list_on(bytes, None, MAX_PIECE_BYTES, Some(bytes), sizing, on_continue)
}

/// Most bytes of a page cut without a scan that one thread copies (and decodes) at once:
/// beside the page, its decode holds this much per thread and not a copy of the page.
/// Large enough that a piece's items share one buffer for escapes, small beside a page of
/// Pods (500 of ≈8 KB).
const MAX_PIECE_BYTES: usize = 256 << 10;

/// [`decode_list_then`] on `threads` threads, or on as many as its size calls for, copying
/// pieces of about `piece_bytes` at most (tests make them small); the parts go to tokio's
/// blocking pool only when the page's `Bytes` are given.
fn decode_list_on<K: DeserializeOwned + Send + 'static>(
    bytes: &[u8],
    threads: Option<usize>,
    piece_bytes: usize,
    pooled: Option<&Bytes>,
    sizing: VecSizing,
    on_continue: impl FnOnce(Option<&str>),
) -> Result<ListPage<K>, String> {
    let mut on_continue = Some(on_continue);
    let split_threads = threads.unwrap_or_else(|| threads_for_bytes(bytes.len()));
    if let Some(page) = decode_split(bytes, split_threads, piece_bytes, pooled, sizing, &mut on_continue) {
        return Ok(page);
    }
    decode_scanned(bytes, threads, sizing, on_continue)
}

/// Pieces a page of `bytes` is cut into for `threads` threads: the same number for each
/// thread, each of about `piece_bytes` at most (a piece runs on to the end of the item its
/// share ends in).
fn pieces_for(bytes: usize, threads: usize, piece_bytes: usize) -> usize {
    let threads = threads.max(1);
    threads * bytes.div_ceil(threads * piece_bytes.max(1)).max(1)
}

/// The page decoded in the parts [`split`] cuts it into, or `None` when it cannot be cut or
/// a piece does not read as a whole array of `K`s: the page is cut into pieces of about
/// `piece_bytes` at most, and each of `threads` threads decodes a run of consecutive
/// pieces. `on_continue` is called (and taken) once the page's metadata is read, before its
/// items are decoded.
fn decode_split<K: DeserializeOwned + Send + 'static>(
    bytes: &[u8],
    threads: usize,
    piece_bytes: usize,
    pooled: Option<&Bytes>,
    sizing: VecSizing,
    on_continue: &mut Option<impl FnOnce(Option<&str>)>,
) -> Option<ListPage<K>> {
    let page = split(bytes, pieces_for(bytes.len(), threads, piece_bytes))?;
    let continue_token = page.metadata.continue_.filter(|c| !c.is_empty());
    if let Some(call) = on_continue.take() {
        call(continue_token.as_deref());
    }
    let runtime = tokio::runtime::Handle::try_current().ok();
    let per_thread = page.parts.len().div_ceil(threads.max(1)).max(1);
    let runs: Vec<&[&[u8]]> = page.parts.chunks(per_thread).collect();
    let decoded = match (pooled, runtime) {
        (Some(owner), Some(runtime)) if runs.len() > 1 => on_blocking_pool(&runtime, owner, &runs, sizing),
        _ => in_parts(&runs, runs.len(), |_, runs| {
            runs.iter().try_fold(Vec::new(), |mut items, run| {
                items.extend(decode_pieces::<K, _>(run, sizing)?);
                Some(items)
            })
        }),
    };
    Some(ListPage {
        items: concat(decoded.into_iter().collect::<Option<Vec<_>>>()?),
        resource_version: page.metadata.resource_version.unwrap_or_default(),
        continue_token,
    })
}

/// `runs` of pieces (slices of `owner`) decoded, the first run on this thread and the others
/// on the runtime's blocking pool, in order: its threads outlive a page, so none is started
/// for one, and each keeps the strings it interned last. A run whose task has not started by
/// the time this thread is done with the ones before it is decoded here instead (so a pool
/// with no thread to spare, as with `max_blocking_threads(1)`, never leaves this thread
/// waiting for work that cannot start); this thread waits only for runs already being
/// decoded, so it must be a blocking thread. A run's slices of `owner` are held by whichever
/// thread takes the run and dropped once it is decoded, so a task that starts after this
/// thread took its run does not keep the page's buffer from being reused. A run whose task
/// was cancelled (the runtime shutting down) is `None`; a panic in one is raised here.
fn on_blocking_pool<K: DeserializeOwned + Send + 'static>(runtime: &tokio::runtime::Handle, owner: &Bytes, runs: &[&[&[u8]]], sizing: VecSizing) -> Vec<Option<Vec<K>>> {
    let helpers: Vec<_> = runs[1..]
        .iter()
        .map(|run| {
            let run: Vec<Bytes> = run.iter().map(|piece| owner.slice_ref(piece)).collect();
            let untaken = Arc::new(Mutex::new(Some(run)));
            let task = runtime.spawn_blocking({
                let untaken = untaken.clone();
                move || take(&untaken).map(|run| decode_pieces::<K, _>(&run, sizing))
            });
            (untaken, task)
        })
        .collect();
    let mut decoded = Vec::with_capacity(runs.len());
    decoded.push(decode_pieces(runs[0], sizing));
    for (untaken, task) in helpers {
        if let Some(run) = take(&untaken) {
            decoded.push(decode_pieces(&run, sizing));
            continue;
        }
        decoded.push(match futures::executor::block_on(task) {
            Ok(part) => part.flatten(),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        });
    }
    decoded
}

/// The run of pieces in `untaken`, if no thread took it yet.
fn take(untaken: &Mutex<Option<Vec<Bytes>>>) -> Option<Vec<Bytes>> {
    untaken.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The items of `pieces` (each consecutive items of an array with the commas between
/// them), or `None` unless, for each piece, `[`, the piece, `]` reads as one whole array of
/// `K`s. The pieces are copied one after the other into one buffer.
fn decode_pieces<K: DeserializeOwned, P: AsRef<[u8]>>(pieces: &[P], sizing: VecSizing) -> Option<Vec<K>> {
    let longest = pieces.iter().map(|p| p.as_ref().len()).max().unwrap_or(0);
    let mut array = Vec::with_capacity(longest + 2);
    let mut items = Vec::new();
    for piece in pieces {
        array.clear();
        array.push(b'[');
        array.extend_from_slice(piece.as_ref());
        array.push(b']');
        if !decode_array(&array, &mut items, sizing) {
            return None;
        }
    }
    Some(items)
}

/// The page read the slow way: one scan for every item's text, then the texts decoded in
/// parts; `on_continue`, if still there, is called between the two.
fn decode_scanned<K: DeserializeOwned + Send>(bytes: &[u8], threads: Option<usize>, sizing: VecSizing, on_continue: Option<impl FnOnce(Option<&str>)>) -> Result<ListPage<K>, String> {
    decode_scanned_from(bytes, 0, threads, sizing, on_continue)
}

/// The items of a list response whose first item is the page's `items[first]` (the rest of
/// a page whose earlier items are already decoded, behind `{"items":[`), read the slow way:
/// an error names the first bad item by its place in the page.
pub(crate) fn decode_rest<K: DeserializeOwned + Send>(bytes: &[u8], first: usize, sizing: VecSizing) -> Result<Vec<K>, String> {
    decode_scanned_from(bytes, first, None, sizing, None::<fn(Option<&str>)>).map(|page| page.items)
}

/// [`decode_scanned`] of a list whose first item is the page's `items[first]`.
fn decode_scanned_from<K: DeserializeOwned + Send>(
    bytes: &[u8],
    first: usize,
    threads: Option<usize>,
    sizing: VecSizing,
    on_continue: Option<impl FnOnce(Option<&str>)>,
) -> Result<ListPage<K>, String> {
    let list: RawList<'_> = serde_json::from_slice(bytes).map_err(|e| format!("list: {e}"))?;
    let continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
    if let Some(call) = on_continue {
        call(continue_token.as_deref());
    }
    let texts: Vec<&str> = list.items.unwrap_or_default().into_iter().map(RawValue::get).collect();
    let threads = threads.unwrap_or_else(|| threads_for(&texts));
    // Each part stops at its first bad item; parts come back in order, so the first error
    // met below is the page's first bad item.
    let parts = in_parts(&texts, threads, |part, texts| decode_items(first + part, texts, sizing));
    Ok(ListPage {
        items: try_concat(parts)?,
        resource_version: list.metadata.resource_version.unwrap_or_default(),
        continue_token,
    })
}

/// The items whose texts are `texts` (consecutive items of a page, the first of them
/// `items[first]`), read as one JSON array; an error names the first bad item, with the
/// error that item gives on its own.
fn decode_items<K: DeserializeOwned>(first: usize, texts: &[&str], sizing: VecSizing) -> Result<Vec<K>, String> {
    let mut array = String::with_capacity(texts.iter().map(|t| t.len() + 1).sum::<usize>() + 1);
    array.push('[');
    for (i, text) in texts.iter().enumerate() {
        if i > 0 {
            array.push(',');
        }
        array.push_str(text);
    }
    array.push(']');
    let mut items = Vec::with_capacity(texts.len());
    let read = exact_json::deserialize_seq(&mut serde_json::Deserializer::from_str(&array), array.as_bytes(), sizing, ItemsInto(&mut items));
    // The array holds exactly the texts, so a read that ends well read them all.
    if read.is_err() {
        // The items from the one the array stopped at on are decoded on their own: the
        // first bad one is named with its own error, and an item that decodes alone but
        // not inside the array (one level of nesting deeper) is not lost.
        for (i, text) in texts.iter().enumerate().skip(items.len()) {
            items.push(serde_json::from_str(text).map_err(|e| format!("items[{}]: {e}", first + i))?);
        }
    }
    Ok(items)
}

/// Appends the items of `array` (a whole JSON array of `K`s with nothing after it) to
/// `items`, their `Vec`s sized as `sizing` says; `false` when it does not read as one
/// (`items` may then hold some of them).
pub(crate) fn decode_array<K: DeserializeOwned>(array: &[u8], items: &mut Vec<K>, sizing: VecSizing) -> bool {
    let mut read = serde_json::Deserializer::from_slice(array);
    exact_json::deserialize_seq(&mut read, array, sizing, ItemsInto(items)).is_ok() && read.end().is_ok()
}

/// Appends a sequence's elements to a Vec made ready for them.
struct ItemsInto<'v, K>(&'v mut Vec<K>);

impl<'de, K: DeserializeOwned> Visitor<'de> for ItemsInto<'_, K> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.reserve(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            self.0.push(item);
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    pub(crate) fn list(items: &[String], meta: &str) -> Vec<u8> {
        format!(r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{meta},"items":[{}]}}"#, items.join(",")).into_bytes()
    }

    pub(crate) fn config_map(i: usize) -> String {
        format!(r#"{{"metadata":{{"name":"cm-{i}","resourceVersion":"{i}"}},"data":{{"d":"{}"}}}}"#, "x".repeat(i % 50))
    }

    #[test]
    fn a_page_decodes_as_kube_s_object_list_does_on_any_number_of_threads() {
        let items: Vec<String> = (0..101).map(config_map).collect();
        let bytes = list(&items, r#"{"resourceVersion":"77","continue":"next"}"#);
        let kube: kube_core::ObjectList<ConfigMap> = serde_json::from_slice(&bytes).unwrap();
        for threads in [1, 2, 4] {
            for piece_bytes in [MAX_PIECE_BYTES, 500, 1] {
                let page: ListPage<ConfigMap> = decode_list_on(&bytes, Some(threads), piece_bytes, None, VecSizing::Exact, |_| {}).unwrap();
                assert_eq!(page.items, kube.items, "{threads} threads, pieces of {piece_bytes}");
                assert_eq!(page.resource_version, "77");
                assert_eq!(page.continue_token.as_deref(), Some("next"));
            }
        }
    }

    #[test]
    fn an_item_as_deep_as_decodes_alone_is_kept_though_the_array_adds_a_level() {
        // The deepest nesting serde_json reads alone: one level more fails, and so does
        // this one inside an array.
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        let levels = (1..400).take_while(|&l| serde_json::from_str::<serde_json::Value>(&deep(l)).is_ok()).last().unwrap();
        assert!(serde_json::from_str::<Vec<serde_json::Value>>(&format!("[{}]", deep(levels))).is_err());
        let items = vec!["1".to_string(), deep(levels), "3".to_string()];
        let page: ListPage<serde_json::Value> = decode_list_on(&list(&items, "{}"), Some(1), MAX_PIECE_BYTES, None, VecSizing::Exact, |_| {}).unwrap();
        let expected: Vec<serde_json::Value> = items.iter().map(|i| serde_json::from_str(i).unwrap()).collect();
        assert_eq!(page.items, expected);
    }

    #[test]
    fn null_or_missing_items_are_an_empty_page_and_an_empty_continue_none() {
        for bytes in [&br#"{"metadata":{"resourceVersion":"5","continue":""},"items":null}"#[..], br#"{"metadata":{"resourceVersion":"5"}}"#] {
            let page: ListPage<ConfigMap> = decode_list(bytes).unwrap();
            assert!(page.items.is_empty());
            assert_eq!(page.resource_version, "5");
            assert_eq!(page.continue_token, None);
            // A last page is told as one: no token.
            let mut told = Vec::new();
            decode_list_on::<ConfigMap>(bytes, Some(1), MAX_PIECE_BYTES, None, VecSizing::Exact, |token| told.push(token.map(str::to_string))).unwrap();
            assert_eq!(told, [None]);
        }
    }

    /// What a decode gave, comparable: the items as JSON values, the version, the token.
    type Outcome = Result<(Vec<serde_json::Value>, String, Option<String>), String>;

    fn outcome(page: Result<ListPage<serde_json::Value>, String>) -> Outcome {
        page.map(|p| (p.items, p.resource_version, p.continue_token))
    }

    #[test]
    fn a_page_cut_without_a_scan_and_a_scanned_page_give_the_same_page_or_error() {
        let item = |i: usize, inner: &str| format!(r#"{{"metadata":{{"name":"n{i}"}},"spec":{inner}}}"#);
        // Nested objects that open as the items do: a cut guessed among them is wrong.
        let nested = format!("[{}]", (0..60).map(|i| format!(r#"{{"a":{i}}},{{"metadata":{{"name":"inner"}}}}"#)).collect::<Vec<_>>().join(","));
        let plain: Vec<String> = (0..30).map(|i| item(i, r#""s\"\n""#)).collect();
        let with_nested: Vec<String> = (0..30).map(|i| item(i, if i == 0 { "1" } else { &nested })).collect();
        let mut bad_item = plain.clone();
        bad_item[20] = r#"{"metadata":{"name":"x"},"spec":[1,}"#.into();
        let mut two_bad = plain.clone();
        two_bad[21] = r#"{"metadata":{"name":"x"}"#.into();
        two_bad[22] = r#"{"metadata":{"name":"y"}},"#.into();
        let meta = r#"{"resourceVersion":"4","continue":"more"}"#;
        let mut pages: Vec<Vec<u8>> = [&plain, &with_nested, &bad_item, &two_bad].iter().map(|items| list(items, meta)).collect();
        let mut not_utf8 = list(&plain, meta);
        let at = not_utf8.len() / 2;
        not_utf8[at] = 0xff;
        pages.push(not_utf8);
        pages.push(format!(r#"{{"metadata":{meta},"items":[{}],"metadata":{{}}}}"#, plain.join(",")).into_bytes());
        pages.push(format!(r#"{{"metadata":{meta},"items":[{}],"x":[1]}}"#, plain.join(",")).into_bytes());
        pages.push(format!(r#"{{"metadata":{meta},"items":[{}]}}}}"#, plain.join(",")).into_bytes());
        for (n, bytes) in pages.iter().enumerate() {
            let scanned = outcome(decode_scanned(bytes, Some(2), VecSizing::Exact, None::<fn(Option<&str>)>));
            for (threads, piece_bytes) in [(1, MAX_PIECE_BYTES), (2, MAX_PIECE_BYTES), (3, MAX_PIECE_BYTES), (1, 300), (2, 300), (3, 1000)] {
                let mut called = Vec::new();
                let page = outcome(decode_list_on(bytes, Some(threads), piece_bytes, None, VecSizing::Exact, |token| called.push(token.map(str::to_string))));
                assert_eq!(page, scanned, "page {n}, {threads} threads, pieces of {piece_bytes}");
                if page.is_ok() {
                    assert_eq!(called, [Some("more".to_string())], "page {n}, {threads} threads, pieces of {piece_bytes}");
                }
            }
        }
        // The cut is taken where no scan would put it (inside the second item), and the
        // page still comes out whole.
        let nested_page = list(&with_nested, meta);
        let cut = split(&nested_page, 2).expect("laid out as the apiserver does");
        assert!(cut.parts[0].len() > with_nested[0].len() + 1 + with_nested[1].len() / 2);
        assert!(!with_nested.iter().any(|i| cut.parts[0].ends_with(i.as_bytes())), "the guessed cut is not between items");
        assert!(decode_split::<serde_json::Value>(&nested_page, 2, MAX_PIECE_BYTES, None, VecSizing::Exact, &mut None::<fn(Option<&str>)>).is_none());
        assert!(decode_split::<serde_json::Value>(&pages[0], 2, MAX_PIECE_BYTES, None, VecSizing::Exact, &mut None::<fn(Option<&str>)>).is_some(), "a plain page is cut");
        // Broken JSON inside an item breaks the page, as the scan reads it.
        assert!(outcome(decode_list_on(&pages[2], Some(2), MAX_PIECE_BYTES, None, VecSizing::Exact, |_| {})).unwrap_err().starts_with("list: "));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parts_decoded_on_the_blocking_pool_give_the_page_a_scan_gives() {
        // Pages of several parts, one with a wrong guess among them, decoded as the
        // lister-watcher does: on a blocking thread, from the response's `Bytes`.
        let nested = format!("[{}]", (0..2000).map(|i| format!(r#"{{"a":{i}}},{{"metadata":{{"name":"inner"}}}}"#)).collect::<Vec<_>>().join(","));
        let plain: Vec<String> = (0..2000).map(config_map).collect();
        let with_nested: Vec<String> = (0..4).map(|i| format!(r#"{{"metadata":{{"name":"n{i}"}},"spec":{}}}"#, if i == 0 { "1" } else { &nested })).collect();
        let mut bad: Vec<String> = plain.clone();
        bad[1500] = r#"{"metadata":{"name":7}}"#.into();
        for items in [plain, with_nested, bad] {
            let bytes = Bytes::from(list(&items, r#"{"resourceVersion":"8","continue":"c"}"#));
            assert!(threads_for_bytes(bytes.len()) == 1 || split(&bytes, 2).is_some());
            let expected = outcome(decode_scanned(&bytes, None, VecSizing::Exact, None::<fn(Option<&str>)>));
            let again = bytes.clone();
            // Either sizing gives the same page.
            let pooled = tokio::task::spawn_blocking(move || outcome(decode_list_then(&bytes, VecSizing::Grown, |_| {}))).await.unwrap();
            assert_eq!(pooled, expected);
            // Several pieces to each thread.
            let in_pieces = tokio::task::spawn_blocking(move || outcome(decode_list_on(&again, Some(2), 4096, Some(&again), VecSizing::Exact, |_| {}))).await.unwrap();
            assert_eq!(in_pieces, expected);
        }
    }

    #[test]
    fn a_page_is_cut_into_pieces_of_about_the_piece_size_the_same_number_to_each_thread() {
        let items: Vec<String> = (0..2000).map(config_map).collect();
        let bytes = list(&items, "{}");
        let longest_item = items.iter().map(String::len).max().unwrap();
        for (threads, piece_bytes) in [(1, MAX_PIECE_BYTES), (2, MAX_PIECE_BYTES), (1, 4096), (2, 4096), (2, 50_000), (4, 1000)] {
            let pieces = pieces_for(bytes.len(), threads, piece_bytes);
            assert_eq!(pieces % threads, 0);
            assert!(pieces >= bytes.len() / piece_bytes, "{threads} threads, pieces of {piece_bytes}");
            let parts = split(&bytes, pieces).unwrap().parts;
            assert_eq!(parts.len(), pieces);
            let longest = parts.iter().map(|p| p.len()).max().unwrap();
            assert!(longest <= piece_bytes + longest_item + 1, "{threads} threads, pieces of {piece_bytes}: one of {longest} bytes");
        }
    }

    #[test]
    fn a_pool_with_no_thread_to_spare_does_not_leave_the_page_waiting_nor_holding_the_page() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).max_blocking_threads(1).build().unwrap();
        let items: Vec<String> = (0..2000).map(config_map).collect();
        let kube: kube_core::ObjectList<ConfigMap> = serde_json::from_slice(&list(&items, "{}")).unwrap();
        let owner = Bytes::from(list(&items, "{}"));
        // On the only blocking thread: the second run's task cannot start until this one
        // ends, so this thread decodes it; then nothing else holds the page's bytes (the
        // task, not started yet, holds none), so its buffer can be reused.
        let (decoded, unique): (Vec<Option<Vec<ConfigMap>>>, bool) = runtime
            .block_on(runtime.spawn_blocking(move || {
                let parts = split(&owner, 4).expect("laid out as the apiserver does").parts;
                assert_eq!(parts.len(), 4);
                let decoded = on_blocking_pool(&tokio::runtime::Handle::current(), &owner, &[&parts[..2], &parts[2..]], VecSizing::Exact);
                (decoded, owner.try_into_mut().is_ok())
            }))
            .unwrap();
        assert_eq!(concat(decoded.into_iter().map(Option::unwrap).collect()), kube.items);
        assert!(unique, "a run's task that has not started still holds the page");
    }

    #[test]
    fn the_first_bad_item_is_named_and_a_bad_page_says_so() {
        let mut items: Vec<String> = (0..40).map(config_map).collect();
        items[25] = r#"{"metadata":{"name":7}}"#.into();
        items[35] = r#"{"metadata":{"name":8}}"#.into();
        for threads in [1, 4] {
            let err = decode_list_on::<ConfigMap>(&list(&items, "{}"), Some(threads), MAX_PIECE_BYTES, None, VecSizing::Exact, |_| {}).unwrap_err();
            assert!(err.starts_with("items[25]: "), "{threads} threads: {err}");
        }
        let err = decode_list::<ConfigMap>(br#"{"items":[{"metadata":{}}"#).unwrap_err();
        assert!(err.starts_with("list: "), "{err}");
    }
}
