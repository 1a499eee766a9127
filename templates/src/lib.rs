//! The templates `informer-gen` fills in.
//!
//! Each template is a module of real Rust written against the placeholder types of
//! [`placeholder`], so the compiler checks every template on each build. The generator
//! reads these files (it embeds them with `include_str!`), removes the `use` of
//! `crate::placeholder`, and substitutes:
//! - the path `Kind` with the fully qualified object type;
//! - identifiers starting with `Kind` (`KindInformer`, `KindLister`, …) with the kind's name
//!   in their place;
//! - the identifier `kinds` with the resource's accessor name;
//! - the words `GROUP`, `VERSION`, `PLURAL` and `KIND` inside string literals (docs
//!   included) with the resource's group, version, plural and kind.
//!
//! Invariant: templates use only fully qualified paths (`::informer_runtime::…`,
//! `::std::…`), so the emitted code needs no `use` items.
#![warn(missing_docs)]

pub mod cluster_resource;
pub mod namespaced_resource;
pub mod placeholder;
