//! The memory-lean layout: Rust types emitted from OpenAPI definitions for the resources a
//! run caches leanly (`--lean <definition>`), built on `informer_runtime::lean`.
//!
//! The mapping, decided by the definitions alone:
//! - every property is an `Option`, skipped when `None` (what was absent stays absent);
//! - `string` → `Str` (interned); `Time`, `MicroTime` and `Quantity` too, kept as sent;
//! - `integer` → `i32` (`format: int32`) or `i64`; `number` → `serde_json::Number`;
//!   `boolean` → `bool`; `array` → `Box<[item]>`; `object` with `additionalProperties` →
//!   `Map<value>` (`InlineMap<value>` among a root's own fields); other free-form objects (`FieldsV1`, `RawExtension`, `JSON`) → `RawJson`;
//!   `IntOrString` → the runtime's lean `IntOrString`;
//! - a definition with properties → a struct, referred to as `Shared<T>` (hash-consed:
//!   equal sub-objects anywhere in the cache are stored once); recursion is fine since
//!   `Shared` is a pointer;
//! - a lean root (the resource's own definition) is not interned: it holds `LeanMeta` (the
//!   k8s-openapi `ObjectMeta`, so `kube::Resource` keeps working, with `managedFields`,
//!   `annotations` and `ownerReferences` kept lean), implements `kube_core::Resource`, writes `apiVersion`/`kind`, and converts
//!   losslessly to and from its k8s-openapi type through their shared JSON form.
//!
//! Layout: `lean::<path>::<Name>` mirrors k8s-openapi (`io.k8s.api.core.v1.Pod` →
//! `lean::api::core::v1::Pod`); types refer to each other by relative paths.
//! Invariant: definitions are emitted in name order, each once, so output is stable.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use serde_json::Value;

use crate::emit::ExternPaths;
use crate::error::{Error, Result, pointer_segment};
use crate::model::Resource;
use crate::naming::{UniqueNames, field_ident, field_name, ident, module_name};
use crate::output::ModuleTree;
use crate::types::{RootOf, SERDE, api_version_of, docs, lean_path, lean_root_impls, root_resource, root_serialize};

/// The only definition-name prefix the lean layout maps.
const PREFIX: &str = "io.k8s.";

/// One OpenAPI definition and where it was read.
#[derive(Debug, Clone)]
pub struct Definition {
    /// The file.
    pub file: PathBuf,
    /// JSON pointer of the schema in the file.
    pub pointer: String,
    /// The schema.
    pub schema: Value,
}

/// Every definition of the OpenAPI inputs, by name (the first file wins).
pub type Definitions = BTreeMap<String, Definition>;

/// Adds the definitions of one OpenAPI v2 or v3 document.
pub fn collect_definitions(file: &std::path::Path, doc: &Value, out: &mut Definitions) {
    let (base, defs) = match doc.get("definitions") {
        Some(d) => ("/definitions", Some(d)),
        None => ("/components/schemas", doc.get("components").and_then(|c| c.get("schemas"))),
    };
    for (name, schema) in defs.and_then(Value::as_object).into_iter().flatten() {
        out.entry(name.clone()).or_insert_with(|| Definition {
            file: file.to_path_buf(),
            pointer: format!("{base}/{}", pointer_segment(name)),
            schema: schema.clone(),
        });
    }
}

/// How a referenced definition is represented.
enum Special {
    Str,
    IntOrString,
    RawJson,
}

fn special(name: &str) -> Option<Special> {
    match name {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
        | "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
        | "io.k8s.apimachinery.pkg.api.resource.Quantity" => Some(Special::Str),
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Some(Special::IntOrString),
        "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
        | "io.k8s.apimachinery.pkg.runtime.RawExtension"
        | "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON" => Some(Special::RawJson),
        _ => None,
    }
}

/// The module segments and type name of definition `name` under `lean`.
fn location(name: &str) -> Option<(Vec<String>, String)> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut segs: Vec<String> = rest.split('.').map(module_name).collect();
    let last = rest.rsplit('.').next()?.to_string();
    segs.pop();
    Some((segs, last))
}

fn ref_name(schema: &Value) -> Option<&str> {
    let r = schema.get("$ref").or_else(|| {
        // OpenAPI v3 wraps property references: `allOf: [{$ref}]`.
        match schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
            Some([only]) => only.get("$ref"),
            _ => None,
        }
    })?;
    let r = r.as_str()?;
    r.strip_prefix("#/definitions/").or_else(|| r.strip_prefix("#/components/schemas/"))
}

fn has_properties(schema: &Value) -> bool {
    schema.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty())
}

/// A lean resource root: its definition and the resource it serves.
struct Root<'a> {
    resource: &'a Resource,
}

/// Emits the `lean` module for the resources whose definitions are in `lean`; returns it
/// and the Rust path (from the crate root of the generated tree) of each root type.
pub struct LeanGen<'a> {
    defs: &'a Definitions,
    externs: &'a ExternPaths,
    roots: BTreeMap<String, Root<'a>>,
    queued: BTreeSet<String>,
    queue: VecDeque<String>,
    modules: BTreeMap<Vec<String>, Vec<(String, TokenStream)>>,
}

impl<'a> LeanGen<'a> {
    /// A generator for the lean roots `lean` among `chosen`.
    pub fn new(defs: &'a Definitions, externs: &'a ExternPaths, lean: &BTreeSet<String>, chosen: &[&'a Resource]) -> Result<Self> {
        let mut roots = BTreeMap::new();
        for name in lean {
            let mut users = chosen.iter().filter(|r| matches!(&r.object, crate::model::ObjectType::Definition(d) if d == name));
            let Some(first) = users.next() else {
                return Err(Error::new(
                    std::path::Path::new("--lean"),
                    "",
                    format!(
                        "{name}: no resource with list and watch in the inputs has this definition as its object type \
                         (a custom resource's name is its group reversed, its version and kind: com.example.v1.Widget)"
                    ),
                ));
            };
            if let Some(other) = users.find(|r| (&r.group, &r.version, &r.kind) != (&first.group, &first.version, &first.kind)) {
                return Err(Error::new(
                    &other.source,
                    "/paths",
                    format!("{name} is the object type of both {} and {}; a lean root serves one kind", first.plural, other.plural),
                ));
            }
            if location(name).is_none() || !defs.contains_key(name) {
                return Err(Error::new(&first.source, "", format!("{name}: the lean layout needs an io.k8s. definition present in the inputs")));
            }
            roots.insert(name.clone(), Root { resource: first });
        }
        Ok(LeanGen { defs, externs, roots, queued: BTreeSet::new(), queue: VecDeque::new(), modules: BTreeMap::new() })
    }

    /// The path of a lean root from the generated tree's root (`lean::api::core::v1::Pod`).
    pub fn root_path(name: &str) -> Option<String> {
        let (segs, ty) = location(name)?;
        Some(format!("lean::{}::{ty}", segs.join("::")))
    }

    /// Emits every root and every definition they reach; returns the `lean` module tree
    /// (empty when there are no roots).
    pub fn emit(mut self) -> Result<Option<ModuleTree<'static>>> {
        if self.roots.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = self.roots.keys().cloned().collect();
        for n in names {
            self.enqueue(&n);
        }
        while let Some(name) = self.queue.pop_front() {
            self.definition(&name)?;
        }
        let mut tree = ModuleTree::new(
            "Memory-lean types of the cached resources (interned strings, shared sub-objects, raw managedFields), convertible to and from k8s-openapi.",
        );
        for (segs, mut items) in std::mem::take(&mut self.modules) {
            items.sort_by(|a, b| a.0.cmp(&b.0));
            let mut node = &mut tree;
            for (i, s) in segs.iter().enumerate() {
                node = node.children.entry(s.clone()).or_insert_with(|| ModuleTree::new(&format!("Lean types of `{}`.", segs[..=i].join("."))));
            }
            node.items.extend(items.into_iter().map(|(_, t)| t));
        }
        Ok(Some(tree))
    }

    fn enqueue(&mut self, name: &str) {
        if self.queued.insert(name.to_string()) {
            self.queue.push_back(name.to_string());
        }
    }

    fn definition(&mut self, name: &str) -> Result<()> {
        let def = &self.defs[name];
        let (segs, ty) = location(name).expect("only io.k8s. definitions are queued");
        let schema = &def.schema;
        let is_root = self.roots.contains_key(name);
        let props = schema.get("properties").and_then(Value::as_object).into_iter().flatten();
        let required: BTreeSet<&str> = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut fields = Vec::new();
        let mut ser = Vec::new();
        let mut field_names = UniqueNames::default();
        for (pname, pschema) in props {
            if is_root && matches!(pname.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let ptr = format!("{}/properties/{}", def.pointer, pointer_segment(pname));
            let fty = self.field_type(pschema, &segs, &def.file, &ptr, name)?;
            let fname = field_names.take(&field_name(pname), "_");
            let fid = field_ident(&fname);
            let doc = docs(pschema);
            let req = if required.contains(pname.as_str()) { " Required by the schema." } else { "" };
            fields.push(quote! {
                #doc
                #[doc = #req]
                #[serde(rename = #pname, default, skip_serializing_if = "::std::option::Option::is_none")]
                pub #fid: ::std::option::Option<#fty>,
            });
            ser.push(quote! { if let ::std::option::Option::Some(v) = &self.#fid { map.serialize_entry(#pname, v)?; } });
        }
        let doc = docs(schema);
        let tid = format_ident!("{}", ty);
        let lean = lean_path();
        let tokens = if let Some(root) = self.roots.get(name) {
            self.root_items(name, &tid, &doc, &fields, &ser, root.resource, &def.file)?
        } else {
            quote! {
                #doc
                #[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::std::cmp::Eq, ::std::hash::Hash,
                    ::informer_runtime::reexports::serde::Serialize, ::informer_runtime::reexports::serde::Deserialize)]
                #[serde(crate = #SERDE)]
                pub struct #tid {
                    #(#fields)*
                }

                impl #lean::Interned for #tid {
                    fn table() -> &'static #lean::InternTable<Self> {
                        static TABLE: #lean::InternTable<#tid> = #lean::InternTable::new();
                        &TABLE
                    }
                }
            }
        };
        self.modules.entry(segs).or_default().push((ty, tokens));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn root_items(&self, name: &str, tid: &proc_macro2::Ident, doc: &TokenStream, fields: &[TokenStream], ser: &[TokenStream], r: &Resource, file: &std::path::Path) -> Result<TokenStream> {
        let k8s = self.externs.definition(name).ok_or_else(|| Error::new(file, "", format!("{name}: no k8s-openapi type to convert to")))?;
        let k8s: syn::Type = syn::parse_str(&k8s).map_err(|e| Error::new(file, "", format!("extern path {k8s:?}: {e}")))?;
        let of = RootOf { group: &r.group, version: &r.version, kind: &r.kind, plural: &r.plural, namespaced: r.namespaced };
        let (kind, plural) = (of.kind, of.plural);
        let api_version = api_version_of(of.group, of.version);
        let serialize = root_serialize(tid, &api_version, kind, ser);
        let lean_impls = lean_root_impls(tid);
        let resource = root_resource(tid, &of, quote!(self.metadata.object_meta));
        let lean = lean_path();
        let what = format!(" Lean `{kind}` ({api_version}, resource `{plural}`): the same JSON as [`{}`], held in less memory.", quote!(#k8s).to_string().replace(' ', ""));
        Ok(quote! {
            #doc
            ///
            #[doc = #what]
            #[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::informer_runtime::reexports::serde::Deserialize)]
            #[serde(crate = #SERDE)]
            pub struct #tid {
                /// Standard object metadata (`labels`, `annotations`, `managedFields` and
                /// `ownerReferences` in `LeanMeta`'s own fields, lean: `meta().labels` is `None`).
                #[serde(default)]
                pub metadata: #lean::LeanMeta,
                #(#fields)*
            }

            impl #tid {
                /// The k8s-openapi form of this object (lossless).
                pub fn to_k8s(&self) -> ::std::result::Result<#k8s, ::informer_runtime::reexports::serde_json::Error> {
                    #lean::convert(self)
                }

                /// The lean form of a k8s-openapi object (lossless).
                pub fn from_k8s(object: &#k8s) -> ::std::result::Result<Self, ::informer_runtime::reexports::serde_json::Error> {
                    #lean::convert(object)
                }
            }

            #lean_impls

            #serialize

            #resource

            impl ::std::convert::TryFrom<&#tid> for #k8s {
                type Error = ::informer_runtime::reexports::serde_json::Error;
                fn try_from(object: &#tid) -> ::std::result::Result<Self, Self::Error> {
                    object.to_k8s()
                }
            }

            impl ::std::convert::TryFrom<&#k8s> for #tid {
                type Error = ::informer_runtime::reexports::serde_json::Error;
                fn try_from(object: &#k8s) -> ::std::result::Result<Self, Self::Error> {
                    #tid::from_k8s(object)
                }
            }
        })
    }

    /// The lean Rust type of a property schema, from a module at `from`.
    fn field_type(&mut self, schema: &Value, from: &[String], file: &std::path::Path, ptr: &str, owner: &str) -> Result<TokenStream> {
        let lean = lean_path();
        if let Some(name) = ref_name(schema) {
            return self.ref_type(name, from, file, ptr, owner);
        }
        let ty = schema.get("type").and_then(Value::as_str);
        Ok(match ty {
            Some("string") => quote!(#lean::Str),
            Some("integer") => {
                if schema.get("format").and_then(Value::as_str) == Some("int32") {
                    quote!(i32)
                } else {
                    quote!(i64)
                }
            }
            Some("number") => quote!(::informer_runtime::reexports::serde_json::Number),
            Some("boolean") => quote!(bool),
            Some("array") => {
                let item = match schema.get("items") {
                    Some(items) if items.is_object() => self.field_type(items, from, file, &format!("{ptr}/items"), owner)?,
                    _ => quote!(#lean::RawJson),
                };
                quote!(::std::boxed::Box<[#item]>)
            }
            Some("object") | None if has_properties(schema) => {
                return Err(Error::new(file, ptr, "an inline object with properties; the lean layout expects named definitions here"));
            }
            Some("object") => match schema.get("additionalProperties") {
                Some(ap) if ap.is_object() => {
                    let v = self.field_type(ap, from, file, &format!("{ptr}/additionalProperties"), owner)?;
                    // A root's own maps are decoded anew with every event: one or two
                    // entries held in place cost no allocation there. Nested maps sit in
                    // interned sub-objects, where the smaller boxed form is kept.
                    if self.roots.contains_key(owner) { quote!(#lean::InlineMap<#v>) } else { quote!(#lean::Map<#v>) }
                }
                _ => quote!(#lean::RawJson),
            },
            None => quote!(#lean::RawJson),
            Some(other) => return Err(Error::new(file, format!("{ptr}/type"), format!("unsupported type {other:?}"))),
        })
    }

    fn ref_type(&mut self, name: &str, from: &[String], file: &std::path::Path, ptr: &str, owner: &str) -> Result<TokenStream> {
        let lean = lean_path();
        match special(name) {
            Some(Special::Str) => return Ok(quote!(#lean::Str)),
            Some(Special::IntOrString) => return Ok(quote!(#lean::IntOrString)),
            Some(Special::RawJson) => return Ok(quote!(#lean::RawJson)),
            None => {}
        }
        let Some(def) = self.defs.get(name) else {
            return Err(Error::new(file, ptr, format!("$ref to {name}, which the inputs do not define")));
        };
        if !has_properties(&def.schema) {
            // An alias of a simple type (or a free-form object): its own mapping, inline.
            let schema = def.schema.clone();
            let at = def.pointer.clone();
            let f = def.file.clone();
            return self.field_type(&schema, from, &f, &at, owner);
        }
        if self.roots.contains_key(name) {
            return Err(Error::new(file, ptr, format!("{owner} refers to {name}, a lean root; roots are not shared sub-objects")));
        }
        let Some((segs, ty)) = location(name) else {
            return Err(Error::new(file, ptr, format!("$ref to {name}: the lean layout maps only io.k8s. definitions")));
        };
        self.enqueue(name);
        let ups = from.iter().map(|_| quote!(super));
        let down = segs.iter().map(|s| ident(s));
        let tid = format_ident!("{}", ty);
        Ok(quote!(#lean::Shared<#(#ups::)* #(#down::)* #tid>))
    }
}
