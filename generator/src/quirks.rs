//! Fix-ups for known quirks of upstream specs, kept in this one pass so the readers stay
//! literal.
//!
//! 1. A list operation that declares the `watch` query parameter serves watches even when
//!    the spec has no `/watch/` path or `watch`/`watchlist` action for the resource (the
//!    deprecated `/watch/` paths are not published for every resource, and OpenAPI v3
//!    documents omit them): such a resource gets the `watch` verb.

use std::collections::BTreeMap;

use crate::openapi::Found;

/// Applies every fix-up in place.
pub fn apply(found: &mut BTreeMap<(String, String, String), Found>) {
    for f in found.values_mut() {
        if f.actions.contains("list") && f.list_has_watch_param {
            f.actions.insert("watch".into());
        }
    }
}
