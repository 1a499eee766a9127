//! The `informer-gen` command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use informer_gen::{Config, Layout, load_resources};

/// mimalloc: a run is mostly the allocation and freeing of small syntax-tree nodes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "informer-gen",
    version,
    about = "Typed, shared Kubernetes informers and listers for Rust, from OpenAPI specs and CRDs",
    after_help = "Examples:
  informer-gen generate crds/ --out src/informers
  informer-gen generate swagger.json crds/cert-manager.yaml --out my-informers --package my-informers
  informer-gen generate crds/ --out my-informers --package my-informers --check
  informer-gen resources swagger.json --json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate informers, listers, factory accessors and CRD types.
    #[command(after_help = "Inputs are OpenAPI v2 (swagger.json) or v3 documents, or CRD YAML/JSON files;
directories are searched recursively for .json, .yaml and .yml files.")]
    Generate {
        /// Input files or directories.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Make the output directory a complete Cargo package with this name.
        #[arg(long)]
        package: Option<String>,
        /// The path dependency on informer-runtime in the package's Cargo.toml
        /// (default: the runtime of the checkout informer-gen was built from).
        #[arg(long)]
        runtime_path: Option<String>,
        /// Write nothing; exit 1 and list the files that would change.
        #[arg(long)]
        check: bool,
        /// Reuse an existing type: KEY=PATH, KEY a definition-name prefix or group/version/Kind.
        #[arg(long = "extern-path", value_name = "KEY=PATH")]
        extern_paths: Vec<String>,
        /// Cache this resource's objects in the memory-lean layout: an OpenAPI definition name
        /// such as io.k8s.api.core.v1.Pod, or a custom resource's (group reversed, version,
        /// kind) such as com.coreos.monitoring.v1.ServiceMonitor (repeatable).
        #[arg(long = "lean", value_name = "DEFINITION")]
        lean: Vec<String>,
        /// Emit no protobuf tables: every informer reads JSON.
        #[arg(long)]
        no_protobuf: bool,
    },
    /// List the resources found in the inputs.
    Resources {
        /// Input files or directories.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Print a JSON array of {group, version, kind, plural, namespaced, verbs, source}.
        #[arg(long)]
        json: bool,
    },
}

/// Writes to stdout; a closed pipe (`| head`) ends the output quietly instead of panicking.
fn out(s: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("informer-gen: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match cli.command {
        Command::Generate { inputs, out, package, runtime_path, check, extern_paths, lean, no_protobuf } => {
            let start = Instant::now();
            let mut cfg = Config::new();
            cfg.inputs(&inputs).out_dir(&out).rerun_if_changed(false);
            cfg.layout(match package {
                Some(name) => Layout::Package(name),
                None => Layout::ModuleTree,
            });
            if let Some(p) = runtime_path {
                cfg.runtime_path(p);
            }
            for e in &extern_paths {
                let (k, p) = e.split_once('=').ok_or_else(|| format!("--extern-path {e:?}: expected KEY=PATH"))?;
                cfg.extern_path(k, p);
            }
            for d in lean {
                cfg.lean_type(d);
            }
            cfg.protobuf(!no_protobuf);
            if check {
                let (r, differ) = cfg.check()?;
                if differ.is_empty() {
                    println!(
                        "up to date: {} files for {} resources in {} ({:.2?})",
                        r.files.len(),
                        r.resources.len(),
                        out.display(),
                        start.elapsed()
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                for p in &differ {
                    println!("{}", p.display());
                }
                eprintln!("informer-gen: {} files differ from what generation would write", differ.len());
                return Ok(ExitCode::from(1));
            }
            let (r, report) = cfg.generate()?;
            println!(
                "generated {} resources from {} input files: {} files written, {} unchanged, {} removed in {} ({:.2?})",
                r.resources.len(),
                r.input_files.len(),
                report.written.len(),
                report.unchanged,
                report.removed.len(),
                out.display(),
                start.elapsed()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Resources { inputs, json } => {
            let resources = load_resources(&inputs)?;
            if json {
                let arr: Vec<_> = resources
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "group": r.group, "version": r.version, "kind": r.kind, "plural": r.plural,
                            "namespaced": r.namespaced, "verbs": r.verbs, "source": r.source,
                        })
                    })
                    .collect();
                out(&format!("{}\n", serde_json::to_string_pretty(&arr)?));
            } else {
                for r in &resources {
                    let gv = if r.group.is_empty() { r.version.clone() } else { format!("{}/{}", r.group, r.version) };
                    let scope = if r.namespaced { "namespaced" } else { "cluster" };
                    let verbs: Vec<&str> = r.verbs.iter().map(String::as_str).collect();
                    out(&format!("{gv}\t{}\t{}\t{scope}\t{}\t{}\n", r.kind, r.plural, verbs.join(","), r.source.display()));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
