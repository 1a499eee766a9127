//! Rust types from CRD `openAPIV3Schema`s (structural schemas).
//!
//! The mapping, each rule decided by the schema alone:
//! - `x-kubernetes-int-or-string` → `IntOrString`;
//! - `string` → `String`, or an enum when the schema lists `enum` values: one variant per
//!   value plus `Other(String)`, so a value the schema did not list decodes (and encodes
//!   back unchanged) instead of failing the informer;
//! - `integer` → `i32` for `format: int32`, else `i64`; `number` → `serde_json::Number`
//!   (lossless: `1` stays `1`, `1.5` stays `1.5`); `boolean` → `bool`;
//! - `array` → `Vec<item>`, decoded to its exact length (serde grows a `Vec` by doubling
//!   while JSON gives no length up front; a cached object would keep the spare capacity);
//! - `object` with `properties` → a struct (with a flattened map of the remaining fields when
//!   `x-kubernetes-preserve-unknown-fields` is set); with `additionalProperties` only →
//!   `BTreeMap<String, value>`; with neither (open, embedded or empty) → `serde_json::Value`;
//! - no `type`: `properties` → as an object; anything else (`anyOf`/`oneOf` alternatives,
//!   preserve-unknown-fields) → `serde_json::Value`. In a structural schema `anyOf`, `oneOf`,
//!   `allOf` and `not` only add validation, so they never change the shape;
//! - a property is `Option` unless it is required and not `nullable`; `Option`s are skipped
//!   when `None`. `default`s are documented (the server applies them), not invented on decode.
//! - an optional struct below the resource's own fields is `Option<Box<T>>`: an absent
//!   sub-object then costs one pointer instead of the struct's whole size (most optional
//!   sub-objects of a CRD are absent from most objects). The resource's own `spec` and
//!   `status` stay inline.
//!
//! Structs decode through `informer_runtime::from_fields!` (`codegen::FromFields`: one
//! `match` on the index of each key), not serde's derived `Deserialize`, which costs `cargo
//! check` most of its time on these types. They derive `Serialize`; the resource's root type
//! writes its own.
//!
//! In the memory-lean layout (`Config::lean_type` with the custom resource's definition name,
//! `com.coreos.monitoring.v1.ServiceMonitor`), the same schema maps as the built-in lean types
//! do (see [`crate::lean`]), on `informer_runtime::lean`:
//! - every property is an `Option`, skipped when `None` (what was absent stays absent);
//! - `string` → `Str` (interned; enums stay enums); `array` → `Box<[item]>`;
//!   `additionalProperties` → `Map<value>`; open objects and untyped values → `RawJson`;
//!   `x-kubernetes-int-or-string` → the lean `IntOrString`;
//! - an object with properties → a struct referred to as `Shared<T>` (hash-consed: equal
//!   sub-objects anywhere in the cache are stored once), decoded through `from_fields!` as
//!   plain types are; an object that preserves unknown fields keeps the fields it does not
//!   name in a flattened `Map<RawJson>` and decodes through serde's derive;
//! - the root holds `LeanMeta` (`managedFields`, `labels`, `annotations` and
//!   `ownerReferences` kept lean beside the k8s-openapi `ObjectMeta`) and implements
//!   `LeanRoot`, so `lean_informer_for` serves it.
//!
//! CRD schemas cannot refer to other schemas, so types are trees: no recursion.
//! Invariant: each type's items are pushed in schema order, so output is stable. Structs,
//! their fields and types are built as syntax trees ([`crate::syntax`]), not parsed back from
//! tokens; the rarer items (roots, enums, impls) are quoted and parsed.

use std::collections::BTreeSet;
use std::path::Path;

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};
use serde_json::Value;

use crate::error::{Error, Result, pointer_segment};
use crate::naming::{UniqueNames, field_ident, field_name, type_part};
use crate::syntax::{self, doc_attr, global_type, list_attr, named_type, pub_field};

/// The serde crate generated types derive through (`#[serde(crate = …)]`).
pub(crate) const SERDE: &str = "::informer_runtime::reexports::serde";

/// What names a custom resource's root type: its group, version, kind, plural and scope.
#[derive(Clone, Copy)]
pub struct RootOf<'a> {
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The version, `v1` in `example.com/v1`.
    pub version: &'a str,
    /// The kind, which the type is named after.
    pub kind: &'a str,
    /// The resource's plural name, from the CRD.
    pub plural: &'a str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

/// Generates the types of one version module.
pub struct TypeGen<'a> {
    file: &'a Path,
    names: &'a mut UniqueNames,
    /// The memory-lean layout (module docs) instead of the plain one.
    lean: bool,
    /// The emitted items, in order.
    pub items: Vec<syn::Item>,
}

/// `#[derive(derives)]`, then `#[serde(crate = …)]`.
fn derive_attrs(derives: TokenStream) -> [syn::Attribute; 2] {
    [list_attr("derive", derives), list_attr("serde", quote!(crate = #SERDE))]
}

/// `#[doc]` attributes for a schema's description (and default), with code fences marked
/// as `text` so they never become doctests.
pub fn docs(schema: &Value) -> TokenStream {
    let attrs = doc_attrs(schema);
    quote!(#(#attrs)*)
}

/// The attributes of [`docs`], as syntax trees.
fn doc_attrs(schema: &Value) -> Vec<syn::Attribute> {
    let mut text = schema.get("description").and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(d) = schema.get("default") {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("Default (applied by the server): `{d}`."));
    }
    text_doc_attrs(&text)
}

/// `#[doc]` attributes for `text`.
pub fn doc_lines(text: &str) -> TokenStream {
    let attrs = text_doc_attrs(text);
    quote!(#(#attrs)*)
}

/// `#[doc]` attributes for `text`'s lines: trimmed (leading spaces would make indented code
/// blocks, which rustdoc runs as tests) except inside fences, which are marked as `text`.
fn text_doc_attrs(text: &str) -> Vec<syn::Attribute> {
    let mut lines = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            lines.push(if in_fence { "```".to_string() } else { "```text".to_string() });
            in_fence = !in_fence;
        } else if in_fence {
            lines.push(line.to_string());
        } else {
            // Leading spaces would make indented code blocks, which rustdoc runs as tests.
            lines.push(t.to_string());
        }
    }
    if in_fence {
        lines.push("```".into());
    }
    lines.into_iter().map(|l| doc_attr(&if l.is_empty() { l } else { format!(" {l}") })).collect()
}

/// The map of the fields a preserve-unknown-fields schema does not name; `flatten`: written
/// through the derived `Serialize` (the root type writes it itself).
fn extra_field(flatten: bool) -> syn::Field {
    let mut attrs = vec![doc_attr(" Fields the schema does not name (it preserves unknown fields).")];
    attrs.extend(flatten.then(|| list_attr("serde", quote!(flatten))));
    pub_field(attrs, format_ident!("extra"), global_type(&["std", "collections", "BTreeMap"], [string_type(), json_value_type()]))
}

/// `::std::string::String`.
fn string_type() -> syn::Type {
    global_type(&["std", "string", "String"], [])
}

/// `::informer_runtime::reexports::serde_json::Value`.
fn json_value_type() -> syn::Type {
    global_type(&["informer_runtime", "reexports", "serde_json", "Value"], [])
}

/// `::informer_runtime::lean::name`, or `…::name<args>`.
fn lean_type(name: &str, args: impl IntoIterator<Item = syn::Type>) -> syn::Type {
    global_type(&["informer_runtime", "lean", name], args)
}

/// `::std::option::Option<ty>`.
fn option_type(ty: syn::Type) -> syn::Type {
    global_type(&["std", "option", "Option"], [ty])
}

/// The runtime's memory-lean layout (`informer_runtime::lean`), as a path in generated code.
pub fn lean_path() -> TokenStream {
    quote!(::informer_runtime::lean)
}

/// The `apiVersion` of `group`/`version` (`v1` for the core group).
pub fn api_version_of(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
}

/// The `Serialize` impl of a resource's root type: `apiVersion`, `kind` and `metadata`, then
/// `fields` (statements that write the other entries to `map`).
pub fn root_serialize(ident: &proc_macro2::Ident, api_version: &str, kind: &str, fields: &[TokenStream]) -> TokenStream {
    quote! {
        impl ::informer_runtime::reexports::serde::Serialize for #ident {
            fn serialize<S: ::informer_runtime::reexports::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                use ::informer_runtime::reexports::serde::ser::SerializeMap as _;
                let mut map = serializer.serialize_map(::std::option::Option::None)?;
                map.serialize_entry("apiVersion", #api_version)?;
                map.serialize_entry("kind", #kind)?;
                map.serialize_entry("metadata", &self.metadata)?;
                #(#fields)*
                map.end()
            }
        }
    }
}

/// The `kube_core::Resource` impl of a resource's root type, whose `ObjectMeta` is `meta`
/// (`self.metadata`, or `self.metadata.object_meta` for a lean root).
pub fn root_resource(ident: &proc_macro2::Ident, of: &RootOf<'_>, meta: TokenStream) -> TokenStream {
    let RootOf { group, version, kind, plural, namespaced } = *of;
    let api_version = api_version_of(group, version);
    let scope = if namespaced {
        quote!(::informer_runtime::reexports::k8s_openapi::NamespaceResourceScope)
    } else {
        quote!(::informer_runtime::reexports::k8s_openapi::ClusterResourceScope)
    };
    let object_meta = quote!(::informer_runtime::reexports::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta);
    quote! {
        impl ::informer_runtime::reexports::kube_core::Resource for #ident {
            type DynamicType = ();
            type Scope = #scope;
            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#kind) }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#group) }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#version) }
            fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#api_version) }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#plural) }
            fn meta(&self) -> &#object_meta { &#meta }
            fn meta_mut(&mut self) -> &mut #object_meta { &mut #meta }
        }
    }
}

/// What every lean root has beside its fields: `without_managed_fields` and `LeanRoot`.
pub fn lean_root_impls(ident: &proc_macro2::Ident) -> TokenStream {
    let lean = lean_path();
    quote! {
        impl #ident {
            /// Drops `managedFields` (for `SharedIndexInformer::set_transform`).
            pub fn without_managed_fields(mut self) -> Self {
                self.metadata.strip_managed_fields();
                self
            }
        }

        impl #lean::LeanRoot for #ident {
            fn lean_meta(&self) -> &#lean::LeanMeta { &self.metadata }
            fn lean_meta_mut(&mut self) -> &mut #lean::LeanMeta { &mut self.metadata }
        }
    }
}

/// The `FromFields` and `Deserialize` impls of a struct with `fields` (after `metadata`
/// for a resource's root type; `extra`: it keeps unknown fields in its `extra` map), through
/// the runtime's `from_fields!`: a line per field where a derive would emit a visitor.
fn from_fields(ident: &proc_macro2::Ident, fields: &[Field], metadata: bool, extra: bool) -> syn::Item {
    let mut entries = Vec::new();
    if metadata {
        entries.push(quote!((0, "metadata", metadata, default)));
    }
    for f in fields {
        let i = Literal::usize_unsuffixed(entries.len());
        let (pname, fid) = (f.pname.as_str(), &f.ident);
        let how = match f.slot {
            Slot::Option => quote!(option),
            Slot::OptionVec => quote!(option_vec),
            Slot::Required => quote!(required),
            Slot::RequiredVec => quote!(required_vec),
        };
        entries.push(quote!((#i, #pname, #fid, #how)));
    }
    let extra = extra.then(|| quote!(extra,));
    syntax::macro_call(syntax::global_path(&["informer_runtime", "from_fields"]), quote!(#ident, #extra [#(#entries),*]))
}

fn ty_of(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

impl<'a> TypeGen<'a> {
    /// A generator for `file`, naming types through `names` (shared by the version module);
    /// `lean`: in the memory-lean layout.
    pub fn new(file: &'a Path, names: &'a mut UniqueNames, lean: bool) -> Self {
        TypeGen { file, names, lean, items: Vec::new() }
    }

    fn err(&self, ptr: &str, msg: impl Into<String>) -> Error {
        Error::new(self.file, ptr, msg)
    }

    /// The root type of a custom resource: `kind` with `metadata`, the schema's other
    /// properties, `kube_core::Resource`, and a `Serialize` that writes `apiVersion` and `kind`.
    pub fn root(&mut self, resource: &RootOf<'_>, schema: &Value, ptr: &str) -> Result<()> {
        let RootOf { group, version, kind, plural, .. } = *resource;
        if !schema.is_object() {
            return Err(self.err(ptr, "the schema must be an object"));
        }
        if let Some(t) = ty_of(schema) {
            if t != "object" {
                return Err(self.err(&format!("{ptr}/type"), format!("a resource's schema must have type object, not {t:?}")));
            }
        }
        let name = kind.to_string();
        self.names.reserve(&name);
        let ident = format_ident!("{}", name);
        let props = schema.get("properties").and_then(Value::as_object);
        let required = required_set(schema);
        let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
        // A lean root that keeps unknown fields decodes through serde's derive (a flattened
        // map), so its fields carry serde attributes; every other root writes its own impls.
        let derived = self.lean && preserve;
        let mut fields = Vec::new();
        let mut ser = Vec::new();
        let mut field_names = UniqueNames::default();
        for n in ["metadata", "api_version", "kind", "extra"] {
            field_names.reserve(n);
        }
        if let Some(props) = props {
            for (pname, pschema) in props {
                if matches!(pname.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let pptr = format!("{ptr}/properties/{}", pointer_segment(pname));
                let f = self.field(&name, pname, pschema, required.contains(pname.as_str()), &pptr, &mut field_names, derived)?;
                let fid = &f.ident;
                ser.push(if f.optional {
                    quote! { if let ::std::option::Option::Some(v) = &self.#fid { map.serialize_entry(#pname, v)?; } }
                } else {
                    quote! { map.serialize_entry(#pname, &self.#fid)?; }
                });
                fields.push(f);
            }
        }
        let decode = (!derived).then(|| from_fields(&ident, &fields, true, preserve));
        let mut fields: Vec<syn::Field> = fields.into_iter().map(|f| f.field).collect();
        if preserve {
            fields.push(if self.lean { self.lean_extra_field() } else { extra_field(false) });
            let entries = if self.lean { quote!(self.extra.iter()) } else { quote!(&self.extra) };
            ser.push(quote! {
                for (k, v) in #entries {
                    if k != "apiVersion" && k != "kind" {
                        map.serialize_entry(k, v)?;
                    }
                }
            });
        }
        let doc = docs(schema);
        let api_version = api_version_of(group, version);
        let (what, struct_head, metadata, meta, lean_impls) = if self.lean {
            let lean = lean_path();
            (
                format!(" Lean `{kind}` objects ({api_version}, resource `{plural}`): interned strings, shared sub-objects."),
                if derived {
                    quote! {
                        #[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::informer_runtime::reexports::serde::Deserialize)]
                        #[serde(crate = #SERDE)]
                    }
                } else {
                    quote!(#[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq)])
                },
                {
                    let default = derived.then(|| quote!(#[serde(default)]));
                    quote! {
                        /// Standard object metadata (`labels`, `annotations`, `managedFields` and
                        /// `ownerReferences` in `LeanMeta`'s own fields, lean: `meta().labels` is `None`).
                        #default
                        pub metadata: #lean::LeanMeta,
                    }
                },
                quote!(self.metadata.object_meta),
                lean_root_impls(&ident),
            )
        } else {
            (
                format!(" `{kind}` objects ({api_version}, resource `{plural}`)."),
                quote!(#[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq)]),
                quote! {
                    /// Standard object metadata.
                    pub metadata: ::informer_runtime::reexports::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                },
                quote!(self.metadata),
                TokenStream::new(),
            )
        };
        let serialize = root_serialize(&ident, &api_version, kind, &ser);
        let resource = root_resource(&ident, resource, meta);
        let items = syntax::parse_items(self.file, quote! {
            #doc
            ///
            #[doc = #what]
            #struct_head
            pub struct #ident {
                #metadata
                #(#fields,)*
            }

            #serialize

            #decode

            #lean_impls

            #resource
        })?;
        self.items.extend(items);
        Ok(())
    }

    /// The lean map of the fields a preserve-unknown-fields schema does not name.
    fn lean_extra_field(&self) -> syn::Field {
        pub_field(
            vec![doc_attr(" Fields the schema does not name (it preserves unknown fields), as sent."), list_attr("serde", quote!(flatten))],
            format_ident!("extra"),
            lean_type("Map", [lean_type("RawJson", [])]),
        )
    }

    /// One property of a struct; `nested`: the struct derives serde impls, so its fields carry
    /// serde attributes (a nested struct, or a lean root that keeps unknown fields; other roots
    /// write their own impls), and in the plain layout an optional struct-typed field is boxed.
    #[allow(clippy::too_many_arguments)]
    fn field(&mut self, parent: &str, pname: &str, pschema: &Value, required: bool, ptr: &str, field_names: &mut UniqueNames, nested: bool) -> Result<Field> {
        if !pschema.is_object() {
            return Err(self.err(ptr, "a property schema must be an object"));
        }
        let hint = format!("{parent}{}", type_part(pname));
        let ty = self.type_of(pschema, &hint, ptr)?;
        let fname = field_names.take(&field_name(pname), "_");
        let ident = field_ident(&fname);
        let mut attrs = doc_attrs(pschema);
        let rename = if fname.trim_start_matches("r#") == pname { None } else { Some(quote!(rename = #pname,)) };
        if self.lean {
            // Every lean property is an `Option`: what was absent stays absent.
            attrs.extend(required.then(|| doc_attr(" Required by the schema.")));
            attrs.extend(nested.then(|| list_attr("serde", quote!(#rename default, skip_serializing_if = "::std::option::Option::is_none"))));
            let field = pub_field(attrs, ident.clone(), option_type(ty));
            return Ok(Field { ident, field, optional: true, pname: pname.to_string(), slot: Slot::Option });
        }
        let optional = !required || flag(pschema, "nullable");
        // What `type_of` maps to a `Vec` (decoded to its exact length) or to a struct.
        let shape = if flag(pschema, "x-kubernetes-int-or-string") { None } else { ty_of(pschema) };
        let is_vec = shape == Some("array");
        let has_props = pschema.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
        let is_struct = has_props && matches!(shape, Some("object") | None);
        // A required but nullable field is an `Option` too: `None` when `null` or absent.
        let slot = match (optional, is_vec) {
            (true, false) => Slot::Option,
            (true, true) => Slot::OptionVec,
            (false, false) => Slot::Required,
            (false, true) => Slot::RequiredVec,
        };
        let serde = |serde: TokenStream| (nested && !serde.is_empty()).then(|| list_attr("serde", serde));
        let ty = if optional && required {
            // Required but nullable: always written, `null` when `None`.
            attrs.extend(serde(quote!(#rename)));
            option_type(ty)
        } else if optional {
            let ty = if nested && is_struct { global_type(&["std", "boxed", "Box"], [ty]) } else { ty };
            attrs.extend(serde(quote!(#rename skip_serializing_if = "::std::option::Option::is_none")));
            option_type(ty)
        } else {
            attrs.extend(serde(quote!(#rename)));
            ty
        };
        let field = pub_field(attrs, ident.clone(), ty);
        Ok(Field { ident, field, optional: optional && !required, pname: pname.to_string(), slot })
    }

    /// The Rust type of `schema`, emitting named types it needs (named from `hint`).
    pub fn type_of(&mut self, schema: &Value, hint: &str, ptr: &str) -> Result<syn::Type> {
        if let Some(r) = schema.get("$ref") {
            return Err(self.err(&format!("{ptr}/$ref"), format!("$ref {r} is not allowed in a CRD schema")));
        }
        let lean = self.lean;
        if flag(schema, "x-kubernetes-int-or-string") {
            return Ok(if lean {
                lean_type("IntOrString", [])
            } else {
                global_type(&["informer_runtime", "reexports", "k8s_openapi", "apimachinery", "pkg", "util", "intstr", "IntOrString"], [])
            });
        }
        let value = || if lean { lean_type("RawJson", []) } else { json_value_type() };
        let string = if lean { lean_type("Str", []) } else { string_type() };
        let has_props = schema.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
        match ty_of(schema) {
            Some("string") => match schema.get("enum").and_then(Value::as_array) {
                Some(values) if !values.is_empty() && values.iter().all(|v| v.is_string() || v.is_null()) => {
                    let values: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
                    if values.is_empty() { Ok(string) } else { self.string_enum(schema, hint, &values) }
                }
                _ => Ok(string),
            },
            Some("integer") => {
                let int = if schema.get("format").and_then(Value::as_str) == Some("int32") { "i32" } else { "i64" };
                Ok(named_type(format_ident!("{int}")))
            }
            Some("number") => Ok(global_type(&["informer_runtime", "reexports", "serde_json", "Number"], [])),
            Some("boolean") => Ok(named_type(format_ident!("bool"))),
            Some("array") => {
                let item = match schema.get("items") {
                    Some(items) if items.is_object() => self.type_of(items, hint, &format!("{ptr}/items"))?,
                    Some(_) => return Err(self.err(&format!("{ptr}/items"), "tuple-typed arrays are not supported")),
                    None => value(),
                };
                Ok(if lean { global_type(&["std", "boxed", "Box"], [syntax::slice_type(item)]) } else { global_type(&["std", "vec", "Vec"], [item]) })
            }
            Some("object") | None if has_props => self.object(schema, hint, ptr),
            Some("object") => match schema.get("additionalProperties") {
                Some(ap) if ap.is_object() && !flag(schema, "x-kubernetes-preserve-unknown-fields") => {
                    let v = self.type_of(ap, &format!("{hint}Value"), &format!("{ptr}/additionalProperties"))?;
                    Ok(if lean { lean_type("Map", [v]) } else { global_type(&["std", "collections", "BTreeMap"], [string_type(), v]) })
                }
                _ => Ok(value()),
            },
            None => Ok(value()),
            Some(other) => Err(self.err(&format!("{ptr}/type"), format!("unsupported type {other:?}"))),
        }
    }

    fn object(&mut self, schema: &Value, hint: &str, ptr: &str) -> Result<syn::Type> {
        let name = self.names.take(hint, "");
        let ident = format_ident!("{}", name);
        let required = required_set(schema);
        let mut field_names = UniqueNames::default();
        let mut fields = Vec::new();
        let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
        if preserve {
            field_names.reserve("extra");
        }
        let props = schema.get("properties").and_then(Value::as_object).into_iter().flatten();
        for (pname, pschema) in props {
            let pptr = format!("{ptr}/properties/{}", pointer_segment(pname));
            fields.push(self.field(&name, pname, pschema, required.contains(pname.as_str()), &pptr, &mut field_names, true)?);
        }
        let mut attrs = doc_attrs(schema);
        if self.lean {
            let lean = lean_path();
            // Decoded through `from_fields!`, or serde's derive when unknown fields are kept (in
            // a flattened map).
            let (decode, deserialize) = if preserve {
                (None, quote!(, ::informer_runtime::reexports::serde::Deserialize))
            } else {
                (Some(from_fields(&ident, &fields, false, false)), TokenStream::new())
            };
            let mut fields: Vec<syn::Field> = fields.into_iter().map(|f| f.field).collect();
            if preserve {
                fields.push(self.lean_extra_field());
            }
            attrs.extend(derive_attrs(quote!(
                ::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::std::cmp::Eq, ::std::hash::Hash,
                ::informer_runtime::reexports::serde::Serialize #deserialize
            )));
            self.items.push(syntax::pub_struct(attrs, ident.clone(), fields));
            self.items.extend(decode);
            let interned = syntax::parse_items(self.file, quote! {
                impl #lean::Interned for #ident {
                    fn table() -> &'static #lean::InternTable<Self> {
                        static TABLE: #lean::InternTable<#ident> = #lean::InternTable::new();
                        &TABLE
                    }
                }
            })?;
            self.items.extend(interned);
            return Ok(lean_type("Shared", [named_type(ident)]));
        }
        let decode = from_fields(&ident, &fields, false, preserve);
        let mut fields: Vec<syn::Field> = fields.into_iter().map(|f| f.field).collect();
        if preserve {
            fields.push(extra_field(true));
        }
        attrs.extend(derive_attrs(quote!(
            ::std::clone::Clone,
            ::std::fmt::Debug,
            ::std::cmp::PartialEq,
            ::informer_runtime::reexports::serde::Serialize
        )));
        self.items.push(syntax::pub_struct(attrs, ident.clone(), fields));
        self.items.push(decode);
        Ok(named_type(ident))
    }

    fn string_enum(&mut self, schema: &Value, hint: &str, values: &[&str]) -> Result<syn::Type> {
        let name = self.names.take(hint, "");
        let ident = format_ident!("{}", name);
        let mut variants = UniqueNames::default();
        let mut seen = BTreeSet::new();
        let mut arms = Vec::new();
        for (i, v) in values.iter().enumerate() {
            if !seen.insert(*v) {
                continue;
            }
            let base = type_part(v);
            let base = if base == "Field" { format!("Value{i}") } else { base };
            arms.push((variants.take(&base, ""), *v));
        }
        let other = variants.take("Other", "");
        let other = format_ident!("{}", other);
        let arms: Vec<(proc_macro2::Ident, &str)> = arms.into_iter().map(|(n, v)| (format_ident!("{}", n), v)).collect();
        let items = string_enum_items(doc_attrs(schema), &ident, &other, &arms);
        self.items.extend(items);
        Ok(named_type(ident))
    }
}

/// The placeholder names of the string enum template: the enum's, and its other value's.
const ENUM: &str = "__Enum";
const OTHER: &str = "__Other";

/// The items of the placeholder string enum, without values: the fixed part of every
/// string enum, parsed once per thread.
fn string_enum_template() -> Vec<syn::Item> {
    let (ident, other) = (format_ident!("{ENUM}"), format_ident!("{OTHER}"));
    let tokens = quote! {
        #[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::std::cmp::Eq, ::std::hash::Hash, ::std::cmp::PartialOrd, ::std::cmp::Ord)]
        pub enum #ident {
            /// A value the schema does not list (kept as sent).
            #other(::std::string::String),
        }

        impl #ident {
            /// The value as sent on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    Self::#other(s) => s,
                }
            }

            fn known(s: &str) -> ::std::option::Option<Self> {
                match s {
                    _ => ::std::option::Option::None,
                }
            }
        }

        impl ::std::convert::From<&str> for #ident {
            fn from(s: &str) -> Self {
                Self::known(s).unwrap_or_else(|| Self::#other(::std::string::String::from(s)))
            }
        }

        impl ::informer_runtime::reexports::serde::Serialize for #ident {
            fn serialize<S: ::informer_runtime::reexports::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::informer_runtime::reexports::serde::Deserialize<'de> for #ident {
            fn deserialize<D: ::informer_runtime::reexports::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                ::informer_runtime::codegen::deserialize_str_enum(deserializer, Self::known, Self::#other)
            }
        }
    };
    syn::parse2::<syn::File>(tokens).expect("the string enum template parses").items
}

thread_local! {
    static STRING_ENUM: Vec<syn::Item> = string_enum_template();
}

/// A string enum `ident` documented by `docs`: a variant per `(variant, value)` of `arms`,
/// then `other(String)`; `as_str`, `known`, `From<&str>`, `Serialize` and `Deserialize`.
/// The template's clone with its names replaced and the arms put in, as it would parse from
/// the same code written out.
fn string_enum_items(docs: Vec<syn::Attribute>, ident: &proc_macro2::Ident, other: &proc_macro2::Ident, arms: &[(proc_macro2::Ident, &str)]) -> Vec<syn::Item> {
    let mut items = STRING_ENUM.with(Clone::clone);
    let mut names = Renamer { ident, other };
    for item in &mut items {
        syn::visit_mut::VisitMut::visit_item_mut(&mut names, item);
    }
    // The template's shape is fixed above: an enum, then an impl of `as_str` and `known`.
    let [syn::Item::Enum(e), syn::Item::Impl(fns), ..] = &mut items[..] else { unreachable!("the string enum template starts with its enum and its fns") };
    e.attrs.splice(0..0, docs);
    let mut variants: syn::punctuated::Punctuated<syn::Variant, syn::Token![,]> = arms
        .iter()
        .map(|(vid, value)| syn::Variant { attrs: vec![doc_attr(&format!(" `{value}`"))], ident: vid.clone(), fields: syn::Fields::Unit, discriminant: None })
        .collect();
    variants.push_punct(Default::default());
    variants.extend(std::mem::take(&mut e.variants).into_pairs());
    e.variants = variants;
    let mut matches = fns.items.iter_mut().filter_map(|f| match f {
        syn::ImplItem::Fn(f) => match f.block.stmts.first_mut() {
            Some(syn::Stmt::Expr(syn::Expr::Match(m), None)) => Some(m),
            _ => None,
        },
        _ => None,
    });
    let (Some(as_str), Some(known)) = (matches.next(), matches.next()) else { unreachable!("as_str and known are one match each") };
    as_str.arms.splice(0..0, arms.iter().map(|(vid, value)| syntax::arm(syntax::path_pat(syntax::self_path(vid)), syntax::str_expr(value))));
    let some = syntax::global_path(&["std", "option", "Option", "Some"]);
    known.arms.splice(
        0..0,
        arms.iter().map(|(vid, value)| syntax::arm(syntax::str_pat(value), syntax::call(some.clone(), vec![syntax::path_expr(syntax::self_path(vid))]))),
    );
    items
}

/// Replaces the template's placeholder names.
struct Renamer<'a> {
    ident: &'a proc_macro2::Ident,
    other: &'a proc_macro2::Ident,
}

impl syn::visit_mut::VisitMut for Renamer<'_> {
    fn visit_ident_mut(&mut self, id: &mut proc_macro2::Ident) {
        if id == ENUM {
            *id = self.ident.clone();
        } else if id == OTHER {
            *id = self.other.clone();
        }
    }
}

struct Field {
    ident: proc_macro2::Ident,
    field: syn::Field,
    optional: bool,
    /// The name on the wire.
    pname: String,
    slot: Slot,
}

/// How a field is decoded into its slot (an `Option` until the struct is built).
#[derive(Clone, Copy)]
enum Slot {
    /// An `Option` field: the slot is the field.
    Option,
    /// An `Option<Vec<_>>` field, decoded to its exact length.
    OptionVec,
    /// A required field: missing is an error.
    Required,
    /// A required `Vec`, decoded to its exact length.
    RequiredVec,
}

fn required_set(schema: &Value) -> BTreeSet<&str> {
    schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A string enum built from the template prints as the same enum written out and parsed.
    #[test]
    fn string_enum_items_print_as_the_enum_written_out() {
        let (ident, other) = (format_ident!("Mode"), format_ident!("Other"));
        let arms = [(format_ident!("Fast"), "fast"), (format_ident!("Quote"), "a \"b\"")];
        let built = string_enum_items(vec![doc_attr(" How.")], &ident, &other, &arms);
        let written = quote! {
            #[doc = " How."]
            #[derive(::std::clone::Clone, ::std::fmt::Debug, ::std::cmp::PartialEq, ::std::cmp::Eq, ::std::hash::Hash, ::std::cmp::PartialOrd, ::std::cmp::Ord)]
            pub enum Mode {
                #[doc = " `fast`"]
                Fast,
                #[doc = " `a \"b\"`"]
                Quote,
                /// A value the schema does not list (kept as sent).
                Other(::std::string::String),
            }
            impl Mode {
                /// The value as sent on the wire.
                pub fn as_str(&self) -> &str {
                    match self {
                        Self::Fast => "fast",
                        Self::Quote => "a \"b\"",
                        Self::Other(s) => s,
                    }
                }
                fn known(s: &str) -> ::std::option::Option<Self> {
                    match s {
                        "fast" => ::std::option::Option::Some(Self::Fast),
                        "a \"b\"" => ::std::option::Option::Some(Self::Quote),
                        _ => ::std::option::Option::None,
                    }
                }
            }
            impl ::std::convert::From<&str> for Mode {
                fn from(s: &str) -> Self {
                    Self::known(s).unwrap_or_else(|| Self::Other(::std::string::String::from(s)))
                }
            }
            impl ::informer_runtime::reexports::serde::Serialize for Mode {
                fn serialize<S: ::informer_runtime::reexports::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                    serializer.serialize_str(self.as_str())
                }
            }
            impl<'de> ::informer_runtime::reexports::serde::Deserialize<'de> for Mode {
                fn deserialize<D: ::informer_runtime::reexports::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                    ::informer_runtime::codegen::deserialize_str_enum(deserializer, Self::known, Self::Other)
                }
            }
        };
        let parsed = syntax::parse_items(Path::new("t.rs"), written).unwrap_or_default();
        assert_eq!(parsed.len(), 5);
        let print = |items: Vec<syn::Item>| prettyplease::unparse(&syn::File { shebang: None, attrs: Vec::new(), items });
        let text = print(built);
        assert_eq!(text, print(parsed));
        assert!(text.contains("Self::Quote => \"a \\\"b\\\"\","), "{text}");
    }
}
