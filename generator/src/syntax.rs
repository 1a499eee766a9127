//! Syntax-tree nodes built directly, for the items emitted in bulk (CRD structs, their
//! fields, types and decode macro calls).
//!
//! Building `syn` nodes instead of quoting tokens that `output` would parse back spares the
//! parse, which took about half of a run's time over a CRD corpus of many large schemas.
//! Invariant: each builder yields the node `syn` parses from the tokens its doc shows, so
//! what prettyplease prints is the same either way; items that are rare (a resource's root
//! type, enums, impls) are still quoted and parsed ([`parse_items`]).

use std::path::Path;

use proc_macro2::{Ident, Span, TokenStream};

use crate::error::{Error, Result};

/// `#[doc = "text"]`.
pub fn doc_attr(text: &str) -> syn::Attribute {
    outer_attr(syn::Meta::NameValue(syn::MetaNameValue {
        path: ident_path("doc"),
        eq_token: Default::default(),
        value: str_expr(text),
    }))
}

/// `#[name(tokens)]`.
pub fn list_attr(name: &str, tokens: TokenStream) -> syn::Attribute {
    outer_attr(syn::Meta::List(syn::MetaList { path: ident_path(name), delimiter: syn::MacroDelimiter::Paren(Default::default()), tokens }))
}

fn outer_attr(meta: syn::Meta) -> syn::Attribute {
    syn::Attribute { pound_token: Default::default(), style: syn::AttrStyle::Outer, bracket_token: Default::default(), meta }
}

fn ident_path(name: &str) -> syn::Path {
    syn::Path::from(Ident::new(name, Span::call_site()))
}

/// `::a::b::C`, or `::a::b::C<args…>` when `args` is not empty.
pub fn global_type(segments: &[&str], args: impl IntoIterator<Item = syn::Type>) -> syn::Type {
    let mut path = global_path(segments);
    let args: syn::punctuated::Punctuated<syn::GenericArgument, syn::Token![,]> = args.into_iter().map(syn::GenericArgument::Type).collect();
    if !args.is_empty() {
        let last = path.segments.last_mut().expect("a path has segments");
        last.arguments = syn::PathArguments::AngleBracketed(syn::AngleBracketedGenericArguments {
            colon2_token: None,
            lt_token: Default::default(),
            args,
            gt_token: Default::default(),
        });
    }
    path_type(path)
}

/// `::a::b::c`.
pub fn global_path(segments: &[&str]) -> syn::Path {
    syn::Path {
        leading_colon: Some(Default::default()),
        segments: segments.iter().map(|s| syn::PathSegment::from(Ident::new(s, Span::call_site()))).collect(),
    }
}

/// `name`: a type named by one identifier (`bool`, `i64`, a generated struct).
pub fn named_type(name: Ident) -> syn::Type {
    path_type(syn::Path::from(name))
}

fn path_type(path: syn::Path) -> syn::Type {
    syn::Type::Path(syn::TypePath { qself: None, path })
}

/// `[elem]`.
pub fn slice_type(elem: syn::Type) -> syn::Type {
    syn::Type::Slice(syn::TypeSlice { bracket_token: Default::default(), elem: Box::new(elem) })
}

/// `attrs pub ident: ty` (a named field).
pub fn pub_field(attrs: Vec<syn::Attribute>, ident: Ident, ty: syn::Type) -> syn::Field {
    syn::Field {
        attrs,
        vis: syn::Visibility::Public(Default::default()),
        mutability: syn::FieldMutability::None,
        ident: Some(ident),
        colon_token: Some(Default::default()),
        ty,
    }
}

/// `attrs pub struct ident { fields, }`.
pub fn pub_struct(attrs: Vec<syn::Attribute>, ident: Ident, fields: Vec<syn::Field>) -> syn::Item {
    let mut named = syn::punctuated::Punctuated::new();
    for f in fields {
        named.push(f);
        named.push_punct(Default::default());
    }
    syn::Item::Struct(syn::ItemStruct {
        attrs,
        vis: syn::Visibility::Public(Default::default()),
        struct_token: Default::default(),
        ident,
        generics: Default::default(),
        fields: syn::Fields::Named(syn::FieldsNamed { brace_token: Default::default(), named }),
        semi_token: None,
    })
}

/// `path!(tokens);` (an item-position macro call).
pub fn macro_call(path: syn::Path, tokens: TokenStream) -> syn::Item {
    syn::Item::Macro(syn::ItemMacro {
        attrs: Vec::new(),
        ident: None,
        mac: syn::Macro { path, bang_token: Default::default(), delimiter: syn::MacroDelimiter::Paren(Default::default()), tokens },
        semi_token: Some(Default::default()),
    })
}

/// `mod name { inner_attrs items }`.
pub fn module(name: &str, inner_attrs: Vec<syn::Attribute>, items: Vec<syn::Item>) -> syn::Item {
    syn::Item::Mod(syn::ItemMod {
        attrs: inner_attrs,
        vis: syn::Visibility::Inherited,
        unsafety: None,
        mod_token: Default::default(),
        ident: Ident::new(name, Span::call_site()),
        content: Some((Default::default(), items)),
        semi: None,
    })
}

/// `pat => body,` (a match arm).
pub fn arm(pat: syn::Pat, body: syn::Expr) -> syn::Arm {
    syn::Arm { attrs: Vec::new(), pat, guard: None, fat_arrow_token: Default::default(), body: Box::new(body), comma: Some(Default::default()) }
}

/// `Self::variant`.
pub fn self_path(variant: &Ident) -> syn::Path {
    syn::Path { leading_colon: None, segments: [syn::PathSegment::from(Ident::new("Self", Span::call_site())), syn::PathSegment::from(variant.clone())].into_iter().collect() }
}

/// `path` as a pattern.
pub fn path_pat(path: syn::Path) -> syn::Pat {
    syn::Pat::Path(syn::ExprPath { attrs: Vec::new(), qself: None, path })
}

/// `path` as an expression.
pub fn path_expr(path: syn::Path) -> syn::Expr {
    syn::Expr::Path(syn::ExprPath { attrs: Vec::new(), qself: None, path })
}

/// `"text"` as a pattern.
pub fn str_pat(text: &str) -> syn::Pat {
    syn::Pat::Lit(str_lit(text))
}

/// `"text"` as an expression.
pub fn str_expr(text: &str) -> syn::Expr {
    syn::Expr::Lit(str_lit(text))
}

fn str_lit(text: &str) -> syn::ExprLit {
    syn::ExprLit { attrs: Vec::new(), lit: syn::Lit::Str(syn::LitStr::new(text, Span::call_site())) }
}

/// `func(args…)`.
pub fn call(func: syn::Path, args: Vec<syn::Expr>) -> syn::Expr {
    syn::Expr::Call(syn::ExprCall { attrs: Vec::new(), func: Box::new(path_expr(func)), paren_token: Default::default(), args: args.into_iter().collect() })
}

/// The items of generated `tokens`; an error names `file` (generated code that does not
/// parse is a bug of ours, reported instead of a panic).
pub fn parse_items(file: &Path, tokens: TokenStream) -> Result<Vec<syn::Item>> {
    parse_file(file, tokens).map(|f| f.items)
}

/// [`parse_items`], keeping the inner attributes (`#![doc]`) the tokens start with.
pub fn parse_file(file: &Path, tokens: TokenStream) -> Result<syn::File> {
    syn::parse2::<syn::File>(tokens).map_err(|e| Error::new(file, "", format!("internal error: generated code does not parse: {e}")))
}

#[cfg(test)]
mod tests {
    use quote::{ToTokens, quote};

    use super::*;

    /// Each builder's node prints as the parse of the tokens its doc shows.
    #[test]
    fn built_nodes_print_as_their_parsed_tokens() {
        let field = pub_field(
            vec![doc_attr(" A \"quoted\" doc."), list_attr("serde", quote!(rename = "x", skip_serializing_if = "f"))],
            Ident::new_raw("type", Span::call_site()),
            global_type(&["std", "option", "Option"], [global_type(&["std", "boxed", "Box"], [slice_type(named_type(Ident::new("i64", Span::call_site())))])]),
        );
        let built = vec![
            pub_struct(vec![doc_attr(" S."), list_attr("derive", quote!(::std::clone::Clone))], Ident::new("S", Span::call_site()), vec![field]),
            macro_call(global_path(&["informer_runtime", "from_fields"]), quote!(S, [(0, "type", r#type, option)])),
            module("placeholder", Vec::new(), vec![pub_struct(Vec::new(), Ident::new("E", Span::call_site()), Vec::new())]),
        ];
        let parsed = parse_items(
            Path::new("t.rs"),
            quote! {
                #[doc = " S."]
                #[derive(::std::clone::Clone)]
                pub struct S {
                    #[doc = " A \"quoted\" doc."]
                    #[serde(rename = "x", skip_serializing_if = "f")]
                    pub r#type: ::std::option::Option<::std::boxed::Box<[i64]>>,
                }
                ::informer_runtime::from_fields!(S, [(0, "type", r#type, option)]);
                mod placeholder { pub struct E {} }
            },
        )
        .unwrap();
        let print = |items: Vec<syn::Item>| prettyplease::unparse(&syn::File { shebang: None, attrs: Vec::new(), items });
        let tokens = |items: &[syn::Item]| items.iter().map(|i| i.to_token_stream().to_string()).collect::<Vec<_>>();
        assert_eq!(tokens(&built), tokens(&parsed));
        assert_eq!(print(built), print(parsed));
    }

    #[test]
    fn tokens_that_do_not_parse_are_an_error_naming_the_file() {
        let Err(e) = parse_items(Path::new("gen.rs"), quote!(pub struct {})) else { panic!("parsed") };
        let e = e.to_string();
        assert!(e.contains("gen.rs") && e.contains("does not parse"), "{e}");
    }
}
