//! Protobuf field tables for built-in kinds: which of the embedded tables
//! (`data/k8s-protobuf.json`, see `data/README.md`) a resource's kind reaches, emitted as
//! `informer_runtime::proto::Message` statics so its informer can read protobuf. The
//! tables' module imports `Field`, `Kind` and `Message` from the runtime: thousands of rows
//! read better without the full paths.
//!
//! Invariants: a kind gets a table only when every message it reaches is in the embedded
//! set and has only supported fields (anything else stays on JSON); statics are emitted
//! once each, in name order, and only for the messages some chosen kind reaches.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

/// One field row: number, JSON name, kind, flags (`r` repeated, `z` omit zero, `i` inline).
type Row = (u32, String, String, String);

const EMBEDDED: &str = include_str!("../data/k8s-protobuf.json");

/// The embedded tables, by full message name.
fn tables() -> &'static BTreeMap<String, Vec<Row>> {
    static TABLES: OnceLock<BTreeMap<String, Vec<Row>>> = OnceLock::new();
    TABLES.get_or_init(|| serde_json::from_str(EMBEDDED).expect("data/k8s-protobuf.json is valid (checked by a test)"))
}

/// The protobuf message name of an OpenAPI definition: `io.k8s.api.core.v1.Pod` →
/// `k8s.io.api.core.v1.Pod` (Go package path with dots, first two labels swapped back).
pub fn message_name(definition: &str) -> Option<String> {
    let mut labels = definition.splitn(3, '.');
    let (a, b, rest) = (labels.next()?, labels.next()?, labels.next()?);
    Some(format!("{b}.{a}.{rest}"))
}

/// The messages a kind reaches (itself included), or `None` when one is missing or has a
/// field protobuf decoding does not support.
pub fn reachable(root: &str) -> Option<BTreeSet<String>> {
    let tables = tables();
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        for (_, _, kind, _) in tables.get(&name)? {
            if let Some(message) = kind_target(kind)? {
                todo.push(message.to_string());
            }
        }
    }
    Some(seen)
}

/// The message a kind names (`Some(None)` for a scalar or special kind; `None` when unsupported).
fn kind_target(kind: &str) -> Option<Option<&str>> {
    let kind = kind.strip_prefix("map:").unwrap_or(kind);
    match kind {
        "bool" | "int32" | "int64" | "uint32" | "uint64" | "string" | "bytes" | "time" | "microtime" | "quantity" | "intorstring" | "rawjson" => Some(None),
        k if k.starts_with("k8s.io.") => Some(Some(k)),
        _ => None,
    }
}

/// The name of the static that holds `message`'s table.
pub fn static_ident(message: &str) -> Ident {
    format_ident!("{}", message.replace(['.', '-'], "_").to_uppercase())
}

/// The statics for `messages` (each one's fields referring to the others by name).
pub fn emit(messages: &BTreeSet<String>) -> TokenStream {
    let tables = tables();
    let mut out = quote! { use ::informer_runtime::proto::{Field, Kind, Message}; };
    for name in messages {
        let id = static_ident(name);
        let fields = tables[name].iter().map(|(number, json, kind, flags)| {
            let kind = kind_tokens(kind);
            let number = proc_macro2::Literal::u32_unsuffixed(*number);
            quote! { Field::new(#number, #json, #kind, #flags) }
        });
        let doc = format!(" `{name}`.");
        out.extend(quote! {
            #[doc = #doc]
            pub static #id: Message = Message {
                name: #name,
                fields: &[#(#fields),*],
            };
        });
    }
    out
}

fn kind_tokens(kind: &str) -> TokenStream {
    if let Some(value) = kind.strip_prefix("map:") {
        let value = kind_tokens(value);
        return quote! { Kind::Map(&#value) };
    }
    let variant = match kind {
        "bool" => "Bool",
        "int32" => "Int32",
        "int64" => "Int64",
        "uint32" => "UInt32",
        "uint64" => "UInt64",
        "string" => "String",
        "bytes" => "Bytes",
        "time" => "Time",
        "microtime" => "MicroTime",
        "quantity" => "Quantity",
        "intorstring" => "IntOrString",
        "rawjson" => "RawJson",
        message => {
            let id = static_ident(message);
            return quote! { Kind::Message(&#id) };
        }
    };
    let variant = format_ident!("{variant}");
    quote! { Kind::#variant }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_tables_parse_and_name_only_known_kinds() {
        let tables = tables();
        assert!(tables.len() > 1000, "{} messages", tables.len());
        for (name, rows) in tables {
            let mut numbers: Vec<u32> = rows.iter().map(|r| r.0).collect();
            numbers.dedup();
            assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{name}: fields sorted by number, unique");
            for (_, json, kind, _) in rows {
                if let Some(Some(target)) = kind_target(kind) {
                    assert!(tables.contains_key(target), "{name}.{json} names {target}, which has no table");
                }
            }
        }
    }

    #[test]
    fn kinds_reach_their_messages_and_unsupported_ones_get_no_table() {
        let pod = reachable(&message_name("io.k8s.api.core.v1.Pod").unwrap()).unwrap();
        for m in ["k8s.io.api.core.v1.Pod", "k8s.io.api.core.v1.Container", "k8s.io.api.core.v1.VolumeSource", "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"] {
            assert!(pod.contains(m), "{m}");
        }
        // TokenReview's user info holds a map of lists (`extra`), which decoding does not support.
        assert_eq!(reachable("k8s.io.api.authentication.v1.TokenReview"), None);
        // Not a type of client-go's scheme.
        assert_eq!(reachable("k8s.io.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"), None);
    }
}
