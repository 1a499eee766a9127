//! informer-gen: typed, shared informers and listers for Rust, generated from Kubernetes
//! OpenAPI v2/v3 specs and CustomResourceDefinitions, on top of `informer-runtime`.
//!
//! Use it from the `informer-gen` command line or from a `build.rs`:
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     informer_gen::Config::new()
//!         .input("crds/")
//!         .generate()?; // writes $OUT_DIR/informers.rs
//!     Ok(())
//! }
//! // src/lib.rs: pub mod informers { include!(concat!(env!("OUT_DIR"), "/informers.rs")); }
//! ```
//!
//! The pipeline: [`input`] reads and sorts documents, [`openapi`] + [`quirks`] and [`crd`]
//! turn them into [`Resource`]s, [`emit`] builds the module tree (CRD types from
//! [`types`], as syntax trees built through [`syntax`], per-resource code from the compiled
//! templates through [`template`]), and [`output`] renders it with prettyplease and writes
//! it only when the run succeeded.
//! Reading files and building and printing output files run on every core ([`parallel`]);
//! results are assembled in input and file order, so the output does not depend on it.
#![warn(missing_docs)]

pub mod crd;
pub mod emit;
pub mod error;
pub mod input;
pub mod lean;
pub mod model;
pub mod naming;
pub mod openapi;
pub mod output;
pub mod parallel;
pub mod protobuf;
pub mod quirks;
pub mod syntax;
pub mod template;
pub mod types;
pub mod yaml;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use emit::ExternPaths;
pub use error::{Error, Result};
pub use model::{ObjectType, Resource};
pub use output::WriteReport;

/// The runtime crate of the checkout this generator was built from (the default
/// `--runtime-path` of generated packages).
pub const DEFAULT_RUNTIME_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../runtime");

/// Every resource in `inputs` (files or directories), in input order then path order.
pub fn load_resources(inputs: &[PathBuf]) -> Result<Vec<Resource>> {
    resources_of(inputs, &input::collect_files(inputs)?, None)
}

/// Every resource in `files`, the files collected from `inputs`; also the OpenAPI
/// definitions into `defs` when given. Files are read and custom resource definitions
/// converted in parallel; OpenAPI documents are scanned afterwards, in file order.
fn resources_of(inputs: &[PathBuf], files: &[PathBuf], mut defs: Option<&mut lean::Definitions>) -> Result<Vec<Resource>> {
    if files.is_empty() {
        let shown = inputs.first().map(PathBuf::as_path).unwrap_or(Path::new("."));
        return Err(Error::new(shown, "", "no .json, .yaml or .yml files in the inputs"));
    }
    /// One document of a file, as far as it can be taken without the others.
    enum Read {
        Crd(Vec<Resource>),
        OpenApi(serde_json::Value),
    }
    let read = parallel::map(files, |file| -> Result<Vec<Read>> {
        input::read(file)?
            .into_iter()
            .map(|doc| match doc {
                input::Document::OpenApiV2(v) | input::Document::OpenApiV3(v) => Ok(Read::OpenApi(v)),
                input::Document::Crd(v, at) => crd::resources(file, v, &at).map(Read::Crd),
            })
            .collect()
    });
    let mut out = Vec::new();
    for (file, docs) in files.iter().zip(read) {
        for doc in docs? {
            match doc {
                Read::OpenApi(v) => {
                    let flavor = if v.get("swagger").is_some() { openapi::Flavor::V2 } else { openapi::Flavor::V3 };
                    if let Some(defs) = defs.as_deref_mut() {
                        lean::collect_definitions(file, &v, defs);
                    }
                    let mut found = openapi::scan(file, &v, flavor)?;
                    quirks::apply(&mut found);
                    out.extend(openapi::resources(file, found)?);
                }
                Read::Crd(resources) => out.extend(resources),
            }
        }
    }
    Ok(out)
}

/// How the output is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One file with every module inline, for `include!` (the `build.rs` default,
    /// `informers.rs`).
    SingleFile(String),
    /// A module tree: `mod.rs` at the root of the output directory.
    ModuleTree,
    /// A Cargo package: `Cargo.toml` and `src/lib.rs` with the module tree.
    Package(String),
}

/// The generator's configuration, in the style of `prost_build::Config`.
#[derive(Debug, Clone)]
pub struct Config {
    inputs: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
    runtime_path: String,
    externs: ExternPaths,
    layout: Layout,
    rerun_if_changed: bool,
    lean: BTreeSet<String>,
    protobuf: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

/// What [`Config::render`] produced, before anything is written.
#[derive(Debug)]
pub struct Rendered {
    /// The output directory.
    pub out_dir: PathBuf,
    /// Every file, by absolute path.
    pub files: BTreeMap<PathBuf, String>,
    /// The resources that got informers.
    pub resources: Vec<Resource>,
    /// The input files read.
    pub input_files: Vec<PathBuf>,
}

impl Config {
    /// Defaults for `build.rs`: output to `$OUT_DIR/informers.rs`, printing
    /// `cargo:rerun-if-changed` for every input.
    pub fn new() -> Self {
        Config {
            inputs: Vec::new(),
            out_dir: None,
            runtime_path: DEFAULT_RUNTIME_PATH.to_string(),
            externs: ExternPaths::default(),
            layout: Layout::SingleFile("informers.rs".into()),
            rerun_if_changed: true,
            lean: BTreeSet::new(),
            protobuf: true,
        }
    }

    /// Adds an input file or directory (searched recursively for `.json`/`.yaml`/`.yml`).
    pub fn input(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.inputs.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds several inputs.
    pub fn inputs<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Self {
        self.inputs.extend(paths.into_iter().map(|p| p.as_ref().to_path_buf()));
        self
    }

    /// The output directory (default: `$OUT_DIR`).
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The `path` dependency on `informer-runtime` written into generated packages.
    pub fn runtime_path(&mut self, path: impl Into<String>) -> &mut Self {
        self.runtime_path = path.into();
        self
    }

    /// Reuses an existing type instead of generating or mapping one: `key` is an OpenAPI
    /// definition-name prefix (`com.example.` → a Rust module path) or a custom resource's
    /// `group/version/Kind` (→ a Rust type path implementing `kube_core::Resource`).
    pub fn extern_path(&mut self, key: impl AsRef<str>, rust_path: impl AsRef<str>) -> &mut Self {
        self.externs.add(key.as_ref(), rust_path.as_ref());
        self
    }

    /// Caches the resource whose object type is OpenAPI definition `definition` in the
    /// memory-lean layout. A built-in kind (`io.k8s.api.core.v1.Pod`, see [`lean`]): its
    /// informer and listers hand out `lean::…` types, convertible to and from the k8s-openapi
    /// type. A custom resource, named as the API server names its definition — the group's
    /// labels reversed, then version and kind (`com.coreos.monitoring.v1.ServiceMonitor`, see
    /// [`crd::definition_name`]): its types are emitted lean in place of the plain ones (see
    /// [`types`]).
    pub fn lean_type(&mut self, definition: impl Into<String>) -> &mut Self {
        self.lean.insert(definition.into());
        self
    }

    /// Whether built-in kinds get protobuf tables, so their informers read protobuf (default:
    /// true, as client-go does; custom resources are always JSON).
    pub fn protobuf(&mut self, yes: bool) -> &mut Self {
        self.protobuf = yes;
        self
    }

    /// The output layout (default: one file, `informers.rs`).
    pub fn layout(&mut self, layout: Layout) -> &mut Self {
        self.layout = layout;
        self
    }

    /// Whether to print `cargo:rerun-if-changed` lines (default: true, for `build.rs`).
    pub fn rerun_if_changed(&mut self, yes: bool) -> &mut Self {
        self.rerun_if_changed = yes;
        self
    }

    fn resolved_out_dir(&self) -> Result<PathBuf> {
        match &self.out_dir {
            Some(d) => Ok(d.clone()),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| Error::new(Path::new("OUT_DIR"), "", "no out_dir set and OUT_DIR is not in the environment")),
        }
    }

    /// Reads the inputs and renders every output file in memory; writes nothing.
    pub fn render(&self) -> Result<Rendered> {
        let out_dir = self.resolved_out_dir()?;
        let input_files = input::collect_files(&self.inputs)?;
        let mut defs = lean::Definitions::new();
        let all = resources_of(&self.inputs, &input_files, (!self.lean.is_empty()).then_some(&mut defs))?;
        // By index, to move the chosen resources out of `all` once the tree that borrows them
        // is printed (a clone would copy every schema, on this thread).
        let order = emit::informer_resource_indices(&all);
        let chosen: Vec<&Resource> = order.iter().map(|&i| &all[i]).collect();
        let tree = emit::emit(&chosen, &self.externs, &self.lean, &defs, self.protobuf)?;
        let mut files = BTreeMap::new();
        match &self.layout {
            Layout::SingleFile(name) => {
                let path = out_dir.join(name);
                files.insert(path.clone(), tree.to_single_file(&path)?);
            }
            Layout::ModuleTree => tree.to_files(&out_dir, "mod.rs", &mut files)?,
            Layout::Package(name) => {
                tree.to_files(&out_dir.join("src"), "lib.rs", &mut files)?;
                files.insert(out_dir.join("Cargo.toml"), package_manifest(name, &self.runtime_path));
            }
        }
        drop(tree);
        let mut all: Vec<Option<Resource>> = all.into_iter().map(Some).collect();
        let resources = order.into_iter().filter_map(|i| all[i].take()).collect();
        Ok(Rendered { out_dir, files, resources, input_files })
    }

    fn print_rerun(&self, r: &Rendered) {
        if self.rerun_if_changed {
            for p in self.inputs.iter().chain(&r.input_files) {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }

    /// Renders and writes (only files whose bytes changed; stale generated files are
    /// removed in the tree and package layouts).
    pub fn generate(&self) -> Result<(Rendered, WriteReport)> {
        let r = self.render()?;
        let report = output::write(&r.out_dir, &r.files, !matches!(self.layout, Layout::SingleFile(_)))?;
        self.print_rerun(&r);
        Ok((r, report))
    }

    /// Renders and lists the files that differ from what is on disk (empty: up to date).
    pub fn check(&self) -> Result<(Rendered, Vec<PathBuf>)> {
        let r = self.render()?;
        let differ = output::check(&r.out_dir, &r.files, !matches!(self.layout, Layout::SingleFile(_)));
        Ok((r, differ))
    }
}

fn package_manifest(name: &str, runtime_path: &str) -> String {
    output::toml(&format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
path = "src/lib.rs"
# Descriptions from schemas are documentation, not examples.
doctest = false

[dependencies]
informer-runtime = {{ path = {runtime_path:?} }}
"#
    ))
}
