//! The whole schema corpus (`../shared/schemas`, or `$INFORMER_GEN_SCHEMAS`): every CRD file
//! and both Kubernetes specs generate; the result compiles without warnings as one package;
//! and for every CRD version an object with every property set and one with only the
//! required ones round-trip JSON → Rust → JSON unchanged through the plain types, and in the
//! units of [`LEAN_UNITS`] (every unit with `INFORMER_GEN_CORPUS_LEAN=all`) through the
//! memory-lean layout too (every custom resource of the unit lean, in a package of its own).
//! Prints the pass rate per project and the generator's wall time over the whole corpus.
//! Skipped, saying so, when the corpus is absent.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use informer_gen::{Config, Layout, ObjectType, Resource};

/// Writes to stderr past the test harness's capture, so the pass rates and the skip notice
/// show in every `cargo test` run.
fn say(s: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(s.as_bytes());
}

/// The round-trip program of one unit: decodes each sample into its type, encodes it
/// back, and prints `PASS id` or `FAIL id reason`.
fn harness(ids: &str, arms: &str) -> String {
    format!(
        r#"use informer_runtime::reexports::{{serde, serde_json}};
fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(json: &serde_json::Value) -> Result<(), String> {{
    let typed: T = serde_json::from_value(json.clone()).map_err(|e| format!("decode: {{e}}"))?;
    let back = serde_json::to_value(&typed).map_err(|e| format!("encode: {{e}}"))?;
    if &back == json {{ Ok(()) }} else {{ Err(format!("differs: {{}}", first_difference(json, &back, String::new()))) }}
}}
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: String) -> String {{
    match (a, b) {{
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {{
            for (k, v) in x {{
                match y.get(k) {{
                    Some(w) if w == v => {{}}
                    Some(w) => return first_difference(v, w, format!("{{at}}/{{k}}")),
                    None => return format!("{{at}}/{{k}} lost"),
                }}
            }}
            for k in y.keys() {{ if !x.contains_key(k) {{ return format!("{{at}}/{{k}} added"); }} }}
            at
        }}
        (serde_json::Value::Array(x), serde_json::Value::Array(y)) if x.len() == y.len() => {{
            for (i, (v, w)) in x.iter().zip(y).enumerate() {{ if v != w {{ return first_difference(v, w, format!("{{at}}/{{i}}")); }} }}
            at
        }}
        _ => format!("{{at}}: {{a}} became {{b}}"),
    }}
}}
fn main() {{
    let dir = std::env::args().nth(1).expect("samples dir");
    let ids: &[usize] = &[{ids}];
    for &id in ids {{
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(format!("{{dir}}/{{id}}.json")).unwrap()).unwrap();
        let r: Result<(), String> = match id {{
{arms}            _ => unreachable!(),
        }};
        match r {{ Ok(()) => println!("PASS {{id}}"), Err(e) => println!("FAIL {{id}} {{e}}") }}
    }}
}}
"#
    )
}
use serde_json::{Map, Value, json};

/// The units whose custom resources also round-trip through the lean layout by default: the
/// smaller units of seven of the twelve projects, about a sixth of the lean code (building
/// every unit lean took ≈22 minutes in one run).
const LEAN_UNITS: &[&str] =
    &["argo_workflows_minimal", "cert_manager", "cilium_v2alpha1", "flux", "gateway_api_standard", "keda", "velero"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

/// The generator's configuration for `input` as the package `name` in `dir`, on this
/// workspace's runtime.
fn package_config(input: &Path, dir: &Path, name: &str) -> Config {
    let mut c = Config::new();
    c.input(input)
        .out_dir(dir)
        .layout(Layout::Package(name.to_string()))
        .runtime_path(root().join("runtime").display().to_string())
        .rerun_if_changed(false);
    c
}

fn corpus() -> Option<PathBuf> {
    let p = std::env::var_os("INFORMER_GEN_SCHEMAS").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/schemas"));
    p.join("crds").is_dir().then_some(p)
}

/// Directories that hold schema files directly, as (project, unit dir).
fn units(crds: &Path) -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        if entries.iter().any(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))) {
            out.push(dir.to_path_buf());
        }
        for e in entries.iter().filter(|p| p.is_dir()) {
            walk(e, out);
        }
    }
    let mut dirs = Vec::new();
    walk(crds, &mut dirs);
    dirs.into_iter()
        .map(|d| {
            let project = d.strip_prefix(crds).unwrap().components().next().unwrap().as_os_str().to_string_lossy().into_owned();
            (project, d)
        })
        .collect()
}

fn module_of(unit: &Path, base: &Path) -> String {
    let rel = unit.strip_prefix(base).unwrap().to_string_lossy().into_owned();
    informer_gen::naming::module_name(&rel.replace('/', "_"))
}

/// A value for `schema`: every property (`full`) or only the required ones.
fn sample(schema: &Value, full: bool, depth: usize) -> Value {
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        return json!("25%");
    }
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => match schema.get("enum").and_then(Value::as_array).and_then(|e| e.iter().find(|v| v.is_string())) {
            Some(v) => v.clone(),
            None if schema.get("format").and_then(Value::as_str) == Some("date-time") => json!("2026-01-02T03:04:05Z"),
            None => json!("x"),
        },
        Some("integer") => json!(7),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => match schema.get("items") {
            Some(items) if depth < 40 => json!([sample(items, full, depth + 1)]),
            _ => json!([]),
        },
        _ => {
            let props = schema.get("properties").and_then(Value::as_object);
            if let Some(props) = props.filter(|p| !p.is_empty()) {
                let required: Vec<&str> = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
                let mut m = Map::new();
                for (k, v) in props {
                    if full || required.contains(&k.as_str()) {
                        m.insert(k.clone(), sample(v, full, depth + 1));
                    }
                }
                if preserve && full {
                    m.insert("fieldTheSchemaDoesNotName".into(), json!({"kept": [1, "two"]}));
                }
                Value::Object(m)
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                json!({"someKey": sample(ap, full, depth + 1)})
            } else {
                json!({"open": {"shape": [1, "two", null]}})
            }
        }
    }
}

fn root_sample(r: &Resource, schema: &Value, full: bool) -> Value {
    let mut v = sample(schema, full, 0);
    let obj = v.as_object_mut().expect("resource schemas are objects");
    obj.remove("metadata");
    obj.insert("apiVersion".into(), json!(format!("{}/{}", r.group, r.version)));
    obj.insert("kind".into(), json!(r.kind));
    let mut meta = json!({"name": "sample", "labels": {"app": "corpus"}});
    if r.namespaced {
        meta["namespace"] = json!("default");
    }
    obj.insert("metadata".into(), meta);
    v
}

#[derive(Default)]
struct Tally {
    files: usize,
    files_ok: usize,
    round_trips: usize,
    round_trips_ok: usize,
    lean_round_trips: usize,
    lean_round_trips_ok: usize,
}

#[test]
fn corpus_generates_compiles_and_round_trips() {
    let Some(schemas) = corpus() else {
        say("SKIPPED corpus test: no schema corpus at ../shared/schemas and INFORMER_GEN_SCHEMAS is not set\n");
        return;
    };
    let crds = schemas.join("crds");
    let pkg = root().join("target/informer-gen-corpus");
    let _ = std::fs::remove_dir_all(pkg.join("samples"));
    std::fs::create_dir_all(pkg.join("samples")).unwrap();
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();

    // 1. Every file alone generates (pass rate per project).
    let started = Instant::now();
    for (project, unit) in units(&crds) {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&unit).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        files.sort();
        for f in files {
            let t = tally.entry(project.clone()).or_default();
            t.files += 1;
            let mut c = Config::new();
            c.input(&f).out_dir(pkg.join("scratch")).layout(Layout::ModuleTree).rerun_if_changed(false);
            match c.render() {
                Ok(_) => t.files_ok += 1,
                Err(e) => failures.push(format!("generate {}: {e}", f.display())),
            }
        }
    }
    for (name, input) in [("openapi-v2", schemas.join("openapi/v2")), ("openapi-v3", schemas.join("openapi/v3"))] {
        let t = tally.entry(name.into()).or_default();
        t.files += std::fs::read_dir(&input).unwrap().count();
        let mut c = Config::new();
        c.input(&input).out_dir(pkg.join("scratch")).layout(Layout::ModuleTree).rerun_if_changed(false);
        match c.render() {
            Ok(_) => t.files_ok = t.files,
            Err(e) => failures.push(format!("generate {}: {e}", input.display())),
        }
    }
    let per_file = started.elapsed();

    // 2. One package per unit (crates of a few MB each keep rustc's memory in bounds),
    //    each with a round-trip harness, in one workspace.
    let mut cases = Vec::new();
    let mut members = Vec::new();
    let all_units: Vec<(String, PathBuf)> = units(&crds)
        .into_iter()
        .chain([("openapi-v2".to_string(), schemas.join("openapi/v2")), ("openapi-v3".to_string(), schemas.join("openapi/v3"))])
        .collect();
    let all_lean = std::env::var("INFORMER_GEN_CORPUS_LEAN").is_ok_and(|v| v == "all");
    let started = Instant::now();
    for (project, unit) in &all_units {
        let m = if project.starts_with("openapi") { informer_gen::naming::module_name(project) } else { module_of(unit, &crds) };
        let name = format!("corpus-{}", m.replace('_', "-"));
        let dir = pkg.join(&m);
        let (r, _) = match package_config(unit, &dir, &name).generate() {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("generate unit {}: {e}", unit.display()));
                continue;
            }
        };
        members.push(m.clone());
        let crds: Vec<&Resource> = r.resources.iter().filter(|res| matches!(res.object, ObjectType::Crd { .. })).collect();
        if crds.is_empty() {
            // Built-in kinds only (k8s-openapi types): nothing to round-trip.
            let _ = std::fs::remove_file(dir.join("src/main.rs"));
            continue;
        }
        // The same unit with every custom resource lean, in a package of its own.
        let lean = if all_lean || LEAN_UNITS.contains(&m.as_str()) {
            let (lean_m, lean_name) = (format!("{m}_lean"), format!("{name}-lean"));
            let mut c = package_config(unit, &pkg.join(&lean_m), &lean_name);
            for res in &crds {
                c.lean_type(informer_gen::crd::definition_name(&res.group, &res.version, &res.kind));
            }
            match c.generate() {
                Ok(_) => {
                    members.push(lean_m.clone());
                    Some((lean_m, lean_name))
                }
                Err(e) => {
                    failures.push(format!("generate unit {} lean: {e}", unit.display()));
                    None
                }
            }
        } else {
            None
        };
        let packages: Vec<(&String, &String)> = [(&m, &name)].into_iter().chain(lean.as_ref().map(|(m, n)| (m, n))).collect();
        let groups = informer_gen::naming::group_modules(r.resources.iter().map(|r| r.group.as_str()));
        let mut arms = vec![String::new(); packages.len()];
        let mut ids = Vec::new();
        for res in &crds {
            let ObjectType::Crd { schema, .. } = &res.object else { unreachable!("filtered above") };
            let path = format!("{}::{}::{}", groups[&res.group], informer_gen::naming::module_name(&res.version), res.kind);
            for full in [true, false] {
                let id = cases.len();
                let file = pkg.join("samples").join(format!("{id}.json"));
                std::fs::write(&file, serde_json::to_vec(&root_sample(res, schema, full)).unwrap()).unwrap();
                for (arms, (_, krate)) in arms.iter_mut().zip(&packages) {
                    writeln!(arms, "            {id} => rt::<{}::{path}>(&json),", krate.replace('-', "_")).unwrap();
                }
                let what = format!("{project} {}/{}/{} {}", res.group, res.version, res.kind, if full { "full" } else { "required-only" });
                cases.push((project.clone(), what, lean.is_some()));
                ids.push(id.to_string());
            }
        }
        for ((member, _), arms) in packages.iter().zip(&arms) {
            let main_rs = pkg.join(member).join("src/main.rs");
            if std::fs::read_to_string(&main_rs).ok() != Some(harness(&ids.join(", "), arms)) {
                std::fs::write(&main_rs, harness(&ids.join(", "), arms)).unwrap();
            }
        }
    }
    let whole_run = started.elapsed();
    say(&format!("generator over the whole corpus ({} units): {:.2?} file by file, {:.2?} as units\n", all_units.len(), per_file, whole_run));
    let members_toml: Vec<String> = members.iter().map(|m| format!("{m:?}")).collect();
    std::fs::write(
        pkg.join("Cargo.toml"),
        format!(
            "[workspace]\nresolver = \"3\"\nmembers = [{}]\n\n[profile.dev]\ndebug = false\nincremental = false\n\n[profile.dev.package.\"*\"]\ndebug = false\n",
            members_toml.join(", ")
        ),
    )
    .unwrap();
    std::fs::copy(root().join("Cargo.lock"), pkg.join("Cargo.lock")).unwrap();

    // 3. Compile (its own target dir: the outer cargo holds the workspace's) and run.
    let target = pkg.join("target");
    let started = Instant::now();
    let build = Command::new(env!("CARGO"))
        .args(["build", "--offline", "--workspace", "--message-format", "short", "--manifest-path"])
        .arg(pkg.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&build.stderr);
    say(&format!("cargo build of the corpus packages: {:.2?}\n", started.elapsed()));
    assert!(build.status.success(), "the corpus packages do not compile:\n{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning") && l.contains("src/")).collect();
    assert!(warnings.is_empty(), "warnings in generated code:\n{}", warnings.join("\n"));
    for m in members.iter().filter(|m| pkg.join(m).join("src/main.rs").exists()) {
        let bin = target.join("debug").join(format!("corpus-{}", m.replace('_', "-")));
        let lean = m.ends_with("_lean");
        let run = Command::new(&bin).arg(pkg.join("samples")).output().unwrap();
        assert!(run.status.success(), "{}: {}", bin.display(), String::from_utf8_lossy(&run.stderr));
        for line in String::from_utf8_lossy(&run.stdout).lines() {
            let mut parts = line.splitn(3, ' ');
            let (status, id) = (parts.next().unwrap(), parts.next().unwrap().parse::<usize>().unwrap());
            let (project, what, _) = &cases[id];
            let t = tally.get_mut(project).unwrap();
            let (all, ok) = if lean { (&mut t.lean_round_trips, &mut t.lean_round_trips_ok) } else { (&mut t.round_trips, &mut t.round_trips_ok) };
            *all += 1;
            if status == "PASS" {
                *ok += 1;
            } else {
                failures.push(format!("round trip {what}{}: {}", if lean { " (lean)" } else { "" }, parts.next().unwrap_or("")));
            }
        }
    }

    let mut table = String::from("\n| project | files generated | round trips | round trips, lean |\n|---|---|---|---|\n");
    let count = |ok: usize, all: usize| if all == 0 { "n/a".to_string() } else { format!("{ok}/{all}") };
    for (p, t) in &tally {
        let (rt, lean) = (count(t.round_trips_ok, t.round_trips), count(t.lean_round_trips_ok, t.lean_round_trips));
        writeln!(table, "| {p} | {}/{} | {rt} | {lean} |", t.files_ok, t.files).unwrap();
    }
    say(&table);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(cases.len() > 300, "too few round-trip cases ({}): the corpus was not read", cases.len());
    let lean_runs: usize = tally.values().map(|t| t.lean_round_trips).sum();
    let lean_cases = cases.iter().filter(|c| c.2).count();
    assert!(lean_cases > 50 && lean_runs == lean_cases, "{lean_runs} lean round trips of {lean_cases} lean cases");
}
