//! How names in the inputs become Rust names. The rule (also in the README):
//!
//! - **Group modules and accessors**: the core group (`""`) is `core`. A group in the
//!   `k8s.io` domain is its first label (`rbac.authorization.k8s.io` → `rbac`,
//!   `flowcontrol.apiserver.k8s.io` → `flowcontrol`), as in client-go. Every other group is
//!   its full name with `.` and `-` as `_` (`cert-manager.io` → `cert_manager_io`). When
//!   two groups of one run would get the same name, both use their full name, and if
//!   those still collide, the later one in sorted order gets `_2`, `_3`, ….
//! - **Version modules**: the version as is (`v1`, `v1beta1`).
//! - **Resource modules and accessors**: the plural with `-` as `_` (`networkpolicies`).
//! - **Types**: the kind for the object (`Certificate`); nested CRD types join the parent's
//!   name and the property's name in PascalCase (`CertificateSpecPrivateKey`), array items
//!   and map values keep their property's name. A name already taken in the version module
//!   gets `2`, `3`, … appended. `Informers` is reserved for the accessor type.
//! - **Fields**: snake_case of the JSON name with a `serde(rename)` when they differ;
//!   names that would collide within one struct get `_2`, `_3`, ….
//! - **Keywords**: module and method names that are Rust keywords get a trailing `_`
//!   (`type_`); fields use raw identifiers (`r#type`).

use std::collections::{BTreeMap, BTreeSet};

use heck::{ToPascalCase, ToSnakeCase};
use proc_macro2::{Ident, Span};

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn", "for",
    "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self",
    "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box",
    "do", "final", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// True for Rust keywords (strict, reserved and edition 2024).
pub fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

/// `s` reduced to `[A-Za-z0-9_]`, not starting with a digit, never empty.
fn sanitize(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out == "_" {
        out = "field".into();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A snake_case name for a module or method; keywords get a trailing `_`.
pub fn module_name(s: &str) -> String {
    let n = sanitize(&s.replace(['-', '.'], "_").to_lowercase());
    if is_keyword(&n) { format!("{n}_") } else { n }
}

/// The identifier for a module or method name made by [`module_name`].
pub fn ident(s: &str) -> Ident {
    Ident::new(s, Span::call_site())
}

/// A field identifier for JSON property `name` (raw identifier for keywords), as a string.
pub fn field_name(name: &str) -> String {
    let snake = name.to_snake_case();
    let n = sanitize(if snake.is_empty() { name } else { &snake });
    if is_keyword(&n) {
        if matches!(n.as_str(), "self" | "Self" | "super" | "crate") { format!("{n}_") } else { format!("r#{n}") }
    } else {
        n
    }
}

/// An identifier made by [`field_name`].
pub fn field_ident(s: &str) -> Ident {
    match s.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, Span::call_site()),
        None => Ident::new(s, Span::call_site()),
    }
}

/// A PascalCase type name part for `s`.
pub fn type_part(s: &str) -> String {
    let p = s.to_pascal_case();
    let p = if p.is_empty() { "Field".to_string() } else { sanitize(&p) };
    if p.starts_with('_') { format!("T{p}") } else { p }
}

/// The module name of every group, following the rule in this module's docs.
pub fn group_modules<'a>(groups: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let groups: BTreeSet<&str> = groups.into_iter().collect();
    let short = |g: &str| -> String {
        if g.is_empty() {
            "core".into()
        } else if g == "k8s.io" || g.ends_with(".k8s.io") {
            module_name(g.split('.').next().unwrap_or(g))
        } else {
            module_name(g)
        }
    };
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for g in &groups {
        *count.entry(short(g)).or_default() += 1;
        if !g.is_empty() && module_name(g) != short(g) {
            // A short name must not equal another group's full name either.
            *count.entry(module_name(g)).or_default() += 0;
        }
    }
    let full_names: BTreeSet<String> = groups.iter().filter(|g| !g.is_empty()).map(|g| module_name(g)).collect();
    let mut taken = BTreeSet::new();
    let mut out = BTreeMap::new();
    for g in &groups {
        let s = short(g);
        let clash = count[&s] > 1 || (s != module_name(g) && full_names.contains(&s));
        let mut name = if clash { module_name(g) } else { s };
        if name == "core" && !g.is_empty() {
            name = module_name(g);
        }
        let base = name.clone();
        let mut i = 2;
        while !taken.insert(name.clone()) {
            name = format!("{base}_{i}");
            i += 1;
        }
        out.insert(g.to_string(), name);
    }
    out
}

/// Hands out names unique within one scope, appending `suffix_fmt(i)` for i = 2, 3, ….
#[derive(Debug, Default)]
pub struct UniqueNames {
    taken: BTreeSet<String>,
}

impl UniqueNames {
    /// Reserves `name` (used by the caller).
    pub fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }
    /// `base`, or `base{sep}{i}` for the first free i ≥ 2.
    pub fn take(&mut self, base: &str, sep: &str) -> String {
        let mut name = base.to_string();
        let mut i = 2;
        while !self.taken.insert(name.clone()) {
            name = format!("{base}{sep}{i}");
            i += 1;
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_follow_the_rule() {
        let m = group_modules(["", "apps", "rbac.authorization.k8s.io", "cert-manager.io", "policy", "policy.networking.k8s.io", "gateway.networking.k8s.io", "a-b.io", "a.b.io"]);
        assert_eq!(m[""], "core");
        assert_eq!(m["apps"], "apps");
        assert_eq!(m["rbac.authorization.k8s.io"], "rbac");
        assert_eq!(m["cert-manager.io"], "cert_manager_io");
        assert_eq!(m["policy"], "policy");
        assert_eq!(m["policy.networking.k8s.io"], "policy_networking_k8s_io");
        assert_eq!(m["gateway.networking.k8s.io"], "gateway");
        assert_eq!(m["a-b.io"], "a_b_io");
        assert_eq!(m["a.b.io"], "a_b_io_2");
    }

    #[test]
    fn keywords_and_odd_names_are_escaped() {
        assert_eq!(module_name("type"), "type_");
        assert_eq!(field_name("type"), "r#type");
        assert_eq!(field_name("self"), "self_");
        assert_eq!(field_name("$ref"), "r#ref");
        assert_eq!(field_name("x-kubernetes-foo"), "x_kubernetes_foo");
        assert_eq!(field_name("3d"), "_3d");
        assert_eq!(type_part("=") , "Field");
    }
}
