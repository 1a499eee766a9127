//! JSON list responses decoded item by item: one scan finds each item's text (borrowed from
//! the response), then the items are decoded in contiguous parts, on several threads when
//! they are many bytes (see `crate::parallel`). A part's items are copied once into an
//! array of their own and read by one deserializer, so its buffer for strings with escapes
//! is reused from item to item instead of grown afresh for each.
//!
//! Why not `kube_core::ObjectList`: it flattens its type meta, so serde first buffers the
//! whole page as generic content and decodes the items from that copy.
//!
//! Invariants: items keep wire order; an error names the first bad item (`items[i]`); a
//! `null` or missing `items` is an empty page, an empty `continue` is no continue token;
//! each item decodes as it would from its own JSON text (its type's own `Deserialize`).

use std::fmt;

use serde::de::{DeserializeOwned, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer as _};
use serde_json::value::RawValue;

use crate::lister_watcher::ListPage;
use crate::parallel::{in_parts, threads_for, try_concat};

/// A list response with its items still as text.
#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

/// What a page needs of `ListMeta`.
#[derive(Deserialize, Default)]
struct RawListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_: Option<String>,
}

/// Decodes a JSON list response whose items are `K`s; the error says what and where.
#[cfg(test)]
pub(crate) fn decode_list<K: DeserializeOwned + Send>(bytes: &[u8]) -> Result<ListPage<K>, String> {
    decode_list_on(bytes, None, |_| {})
}

/// [`decode_list`], calling `on_continue` with the page's continue token (when it has one)
/// once the page is scanned and before its items are decoded.
pub(crate) fn decode_list_then<K: DeserializeOwned + Send>(bytes: &[u8], on_continue: impl FnOnce(&str)) -> Result<ListPage<K>, String> {
    decode_list_on(bytes, None, on_continue)
}

/// [`decode_list_then`] on `threads` threads, or on as many as its size calls for.
fn decode_list_on<K: DeserializeOwned + Send>(bytes: &[u8], threads: Option<usize>, on_continue: impl FnOnce(&str)) -> Result<ListPage<K>, String> {
    let list: RawList<'_> = serde_json::from_slice(bytes).map_err(|e| format!("list: {e}"))?;
    let continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
    if let Some(token) = &continue_token {
        on_continue(token);
    }
    let texts: Vec<&str> = list.items.unwrap_or_default().into_iter().map(RawValue::get).collect();
    let threads = threads.unwrap_or_else(|| threads_for(&texts));
    // Each part stops at its first bad item; parts come back in order, so the first error
    // met below is the page's first bad item.
    let parts = in_parts(&texts, threads, decode_items);
    Ok(ListPage {
        items: try_concat(parts)?,
        resource_version: list.metadata.resource_version.unwrap_or_default(),
        continue_token,
    })
}

/// The items whose texts are `texts` (consecutive items of a page, the first of them
/// `items[first]`), read as one JSON array; an error names the first bad item, with the
/// error that item gives on its own.
fn decode_items<K: DeserializeOwned>(first: usize, texts: &[&str]) -> Result<Vec<K>, String> {
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
    let read = (&mut serde_json::Deserializer::from_str(&array)).deserialize_seq(ItemsInto(&mut items));
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

/// Appends a sequence's elements to a Vec made ready for them.
struct ItemsInto<'v, K>(&'v mut Vec<K>);

impl<'de, K: DeserializeOwned> Visitor<'de> for ItemsInto<'_, K> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element()? {
            self.0.push(item);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn list(items: &[String], meta: &str) -> Vec<u8> {
        format!(r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{meta},"items":[{}]}}"#, items.join(",")).into_bytes()
    }

    fn config_map(i: usize) -> String {
        format!(r#"{{"metadata":{{"name":"cm-{i}","resourceVersion":"{i}"}},"data":{{"d":"{}"}}}}"#, "x".repeat(i % 50))
    }

    #[test]
    fn a_page_decodes_as_kube_s_object_list_does_on_any_number_of_threads() {
        let items: Vec<String> = (0..101).map(config_map).collect();
        let bytes = list(&items, r#"{"resourceVersion":"77","continue":"next"}"#);
        let kube: kube_core::ObjectList<ConfigMap> = serde_json::from_slice(&bytes).unwrap();
        for threads in [1, 2, 4] {
            let page: ListPage<ConfigMap> = decode_list_on(&bytes, Some(threads), |_| {}).unwrap();
            assert_eq!(page.items, kube.items, "{threads} threads");
            assert_eq!(page.resource_version, "77");
            assert_eq!(page.continue_token.as_deref(), Some("next"));
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
        let page: ListPage<serde_json::Value> = decode_list_on(&list(&items, "{}"), Some(1), |_| {}).unwrap();
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
        }
    }

    #[test]
    fn the_first_bad_item_is_named_and_a_bad_page_says_so() {
        let mut items: Vec<String> = (0..40).map(config_map).collect();
        items[25] = r#"{"metadata":{"name":7}}"#.into();
        items[35] = r#"{"metadata":{"name":8}}"#.into();
        for threads in [1, 4] {
            let err = decode_list_on::<ConfigMap>(&list(&items, "{}"), Some(threads), |_| {}).unwrap_err();
            assert!(err.starts_with("items[25]: "), "{threads} threads: {err}");
        }
        let err = decode_list::<ConfigMap>(br#"{"items":[{"metadata":{}}"#).unwrap_err();
        assert!(err.starts_with("list: "), "{err}");
    }
}
