//! A JSON list page cut into parts that decode on several threads, found without scanning
//! its items first: the cuts are guessed from a few bytes and proved by the decode.
//!
//! The page's head (its bytes before the `"items"` key) is read alone, closed with
//! `"items":null}`, for the list metadata; the items array must be the page's last member.
//! A cut is a `,` followed by the first item's opening bytes (up to its second `:`, as in
//! `{"kind":"Pod","apiVersion":` or `{"metadata":{"name":`) found at or after an even share
//! of the array's bytes. Each part is decoded as `[`, its bytes, `]`, and must read as one
//! whole array with nothing after it.
//!
//! Invariant (why a wrong guess cannot give a wrong page): a part is the array's own bytes
//! from a true item start up to a cut, with the cut's `,` read as `]`. Where the JSON
//! grammar takes both `,` and `]` at one place, that place is inside a string (the part
//! then ends inside that string), after a value in a nested array (the part then ends with
//! structures left open), or between two items of the items array — the only case in which
//! the part reads as one whole array. So the parts all decode exactly when every cut lies
//! between two items and the array is valid JSON; if any part fails, the caller decodes the
//! page the slow way, which also names the first bad item. A wrong guess costs time only.

use memchr::memmem;

use crate::json_list::RawListMeta;

/// Longest opening of the first item used to find the others.
const MAX_ITEM_OPENING: usize = 64;

/// A page whose items array is cut into parts.
pub(crate) struct SplitPage<'a> {
    pub(crate) metadata: RawListMeta,
    /// The items array's bytes in consecutive parts, without the array's brackets and
    /// without the commas at the cuts; none is empty.
    pub(crate) parts: Vec<&'a [u8]>,
}

/// `bytes` cut into at most `parts` parts, or `None` when the page is not laid out as
/// kube-apiserver lays it out (items last, items an array, head valid) or no cut is found
/// though more than one part is asked for.
pub(crate) fn split(bytes: &[u8], parts: usize) -> Option<SplitPage<'_>> {
    let key = memmem::find(bytes, b"\"items\"")?;
    let metadata = head_metadata(&bytes[..key])?;
    let open = key + b"\"items\"".len();
    let open = skip_whitespace(bytes, open);
    if bytes.get(open) != Some(&b':') {
        return None;
    }
    let open = skip_whitespace(bytes, open + 1);
    if bytes.get(open) != Some(&b'[') {
        return None;
    }
    let close = array_end_at_page_end(bytes)?;
    if close <= open {
        return None;
    }
    let items = &bytes[open + 1..close];
    if items.iter().all(u8::is_ascii_whitespace) {
        return Some(SplitPage { metadata, parts: Vec::new() });
    }
    let cuts = cuts(items, parts);
    if parts > 1 && cuts.is_empty() {
        return None;
    }
    let mut split = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts {
        split.push(&items[start..cut]);
        start = cut + 1;
    }
    split.push(&items[start..]);
    Some(SplitPage { metadata, parts: split })
}

/// The list metadata of a page whose bytes before its `"items"` key are `head`, or `None`
/// when the head is not the start of a JSON object that may have an `items` member next.
pub(crate) fn head_metadata(head: &[u8]) -> Option<RawListMeta> {
    let mut closed = Vec::with_capacity(head.len() + 16);
    closed.extend_from_slice(head);
    closed.extend_from_slice(b"\"items\":null}");
    serde_json::from_slice::<crate::json_list::RawList<'_>>(&closed).ok().map(|list| list.metadata)
}

/// Where the page's last member's array ends: the `]` before the page's closing `}`.
pub(crate) fn array_end_at_page_end(bytes: &[u8]) -> Option<usize> {
    let mut end = bytes.len();
    while end > 0 && bytes[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    if end == 0 || bytes[end - 1] != b'}' {
        return None;
    }
    end -= 1;
    while end > 0 && bytes[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    (end > 0 && bytes[end - 1] == b']').then_some(end - 1)
}

pub(crate) fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Positions (in `items`, increasing) of the commas guessed to end the first `parts - 1`
/// parts: each the first `}` `,` and item opening at or after its share of the bytes.
fn cuts(items: &[u8], parts: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    if parts < 2 {
        return cuts;
    }
    let Some(finder) = cut_finder(items) else {
        return cuts;
    };
    for part in 1..parts {
        let from = (items.len() / parts * part).max(cuts.last().map_or(0, |&c| c + 1));
        match finder.find(&items[from..]) {
            Some(found) => cuts.push(from + found + 1),
            None => break,
        }
    }
    cuts
}

/// What a cut is found by: `},` and the first item's opening (the comma is the cut), or
/// `None` when the items' bytes show no plain opening (yet).
pub(crate) fn cut_finder(items: &[u8]) -> Option<memmem::Finder<'static>> {
    let opening = item_opening(items)?;
    let mut pattern = Vec::with_capacity(opening.len() + 2);
    pattern.extend_from_slice(b"},");
    pattern.extend_from_slice(opening);
    Some(memmem::Finder::new(&pattern).into_owned())
}

/// The first item's bytes up to and with its second `:` (its first key and the next one, or
/// its first key and its first member's key), if they are short and plain.
fn item_opening(items: &[u8]) -> Option<&[u8]> {
    let start = skip_whitespace(items, 0);
    if items.get(start) != Some(&b'{') {
        return None;
    }
    let window = &items[start..items.len().min(start + MAX_ITEM_OPENING)];
    let mut colons = 0;
    for (i, &b) in window.iter().enumerate() {
        match b {
            b'\\' => return None,
            b':' => {
                colons += 1;
                if colons == 2 {
                    return Some(&window[..=i]);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(items: &[&str]) -> Vec<u8> {
        format!(r#"{{"kind":"L","metadata":{{"resourceVersion":"9","continue":"c"}},"items":[{}]}}"#, items.join(",")).into_bytes()
    }

    const ITEM: &str = r#"{"kind":"K","apiVersion":"v1","metadata":{"name":"a"}}"#;

    #[test]
    fn cuts_fall_on_commas_before_an_item_opening_and_parts_rejoin_to_the_array() {
        let items: Vec<String> = (0..40).map(|i| ITEM.replace("\"a\"", &format!("\"n{i}\""))).collect();
        let items: Vec<&str> = items.iter().map(String::as_str).collect();
        let bytes = page(&items);
        for parts in 1..6 {
            let split = split(&bytes, parts).expect("laid out as the apiserver does");
            assert_eq!(split.parts.len(), parts);
            assert_eq!(split.metadata.resource_version.as_deref(), Some("9"));
            assert_eq!(split.metadata.continue_.as_deref(), Some("c"));
            assert_eq!(split.parts.join(&b","[..]), items.join(",").into_bytes(), "{parts} parts");
            assert!(split.parts.iter().all(|p| p.starts_with(b"{\"kind\":\"K\"") && p.ends_with(b"}")));
        }
    }

    #[test]
    fn pages_laid_out_otherwise_are_not_split() {
        let many = [ITEM; 8].join(",");
        for bytes in [
            format!(r#"{{"items":[{many}],"metadata":{{}}}}"#),
            r#"{"metadata":{},"items":null}"#.to_string(),
            r#"{"metadata":{},"items":{"a":[1]}}"#.to_string(),
            format!(r#"{{"metadata":{{}},"x":"items","items":[{many}]}}"#),
            format!(r#"{{"metadata":{{"resourceVersion":1}},"items":[{many}]}}"#),
            format!(r#"{{"metadata":{{}},"items":[{many}]"#),
            // One item only: nothing to cut at.
            format!(r#"{{"metadata":{{}},"items":[{ITEM}]}}"#),
        ] {
            assert!(split(bytes.as_bytes(), 2).is_none(), "{bytes}");
        }
        let empty = split(br#"{"metadata":{"resourceVersion":"3"},"items":[ ]}"#, 2).unwrap();
        assert!(empty.parts.is_empty());
        // One part needs no cut.
        assert_eq!(split(format!(r#"{{"items":[{ITEM}]}}"#).as_bytes(), 1).unwrap().parts, vec![ITEM.as_bytes()]);
    }
}
