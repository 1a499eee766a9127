//! Instantiates the compiled templates of the `templates/` crate.
//!
//! Invariant: a template is parsed once per thread; instantiating it only clones and rewrites
//! the syntax tree (see `templates/src/lib.rs` for the substitution rules), so a template
//! that compiles in `templates/` yields code of the same shape for every resource.

use proc_macro2::{Ident, Span};
use syn::visit_mut::{self, VisitMut};

const NAMESPACED: &str = include_str!("../../templates/src/namespaced_resource.rs");
const CLUSTER: &str = include_str!("../../templates/src/cluster_resource.rs");

/// The parsed resource templates.
pub struct Templates {
    namespaced: syn::File,
    cluster: syn::File,
}

/// What one instantiation substitutes.
pub struct Substitution<'a> {
    /// The object type, fully qualified.
    pub object: syn::Type,
    /// The kind (prefix of the type names).
    pub kind: &'a str,
    /// The accessor name replacing `kinds`.
    pub accessor: &'a str,
    /// API group (`""` for core).
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Resource (plural).
    pub plural: &'a str,
    /// The object is a lean root: the factory's `informer_for` becomes `lean_informer_for`.
    pub lean: bool,
}

thread_local! {
    static TEMPLATES: Templates = Templates::load();
}

impl Templates {
    /// Runs `f` with this thread's templates, parsed on first use (syntax trees are not
    /// `Send`, so each thread that instantiates templates parses its own).
    pub fn with<R>(f: impl FnOnce(&Templates) -> R) -> R {
        TEMPLATES.with(f)
    }

    /// Parses the embedded templates.
    pub fn load() -> Self {
        // The templates are compiled by the workspace, so they always parse.
        Templates {
            namespaced: syn::parse_file(NAMESPACED).expect("templates/src/namespaced_resource.rs parses"),
            cluster: syn::parse_file(CLUSTER).expect("templates/src/cluster_resource.rs parses"),
        }
    }

    /// The items of the resource template for `s`.
    pub fn resource(&self, namespaced: bool, s: &Substitution<'_>) -> Vec<syn::Item> {
        let mut file = if namespaced { self.namespaced.clone() } else { self.cluster.clone() };
        file.attrs.clear();
        file.items.retain(|item| !matches!(item, syn::Item::Use(u) if is_placeholder_use(u)));
        Rewriter { s }.visit_file_mut(&mut file);
        file.items
    }
}

fn is_placeholder_use(u: &syn::ItemUse) -> bool {
    matches!(&u.tree, syn::UseTree::Path(p) if p.ident == "crate")
}

struct Rewriter<'s, 'a> {
    s: &'s Substitution<'a>,
}

impl VisitMut for Rewriter<'_, '_> {
    fn visit_type_mut(&mut self, ty: &mut syn::Type) {
        if let syn::Type::Path(p) = ty {
            if p.qself.is_none() && p.path.is_ident("Kind") {
                *ty = self.s.object.clone();
                return;
            }
        }
        visit_mut::visit_type_mut(self, ty);
    }

    fn visit_ident_mut(&mut self, id: &mut Ident) {
        let name = id.to_string();
        if name == "kinds" {
            *id = Ident::new(self.s.accessor, Span::call_site());
        } else if name == "informer_for" && self.s.lean {
            *id = Ident::new("lean_informer_for", Span::call_site());
        } else if let Some(rest) = name.strip_prefix("Kind").filter(|r| !r.is_empty()) {
            *id = Ident::new(&format!("{}{rest}", self.s.kind), Span::call_site());
        }
    }

    fn visit_lit_str_mut(&mut self, lit: &mut syn::LitStr) {
        let v = lit.value();
        let new = match v.as_str() {
            "GROUP" => self.s.group.to_string(),
            "VERSION" => self.s.version.to_string(),
            "PLURAL" => self.s.plural.to_string(),
            _ => {
                let group = if self.s.group.is_empty() { "core" } else { self.s.group };
                v.replace("GROUP", group).replace("VERSION", self.s.version).replace("PLURAL", &format!("`{}`", self.s.plural)).replace(
                    "KIND",
                    &format!("`{}`", self.s.kind),
                )
            }
        };
        *lit = syn::LitStr::new(&new, lit.span());
    }
}
