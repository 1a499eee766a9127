//! Reads input files and directories and sorts each document into OpenAPI v2, OpenAPI v3
//! or CRD. Invariant: files are visited in sorted path order, so output does not depend
//! on directory listing order.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// One parsed input document.
#[derive(Debug)]
pub enum Document {
    /// A Swagger 2.0 document.
    OpenApiV2(Value),
    /// An OpenAPI 3.x document.
    OpenApiV3(Value),
    /// One `apiextensions.k8s.io/v1` CustomResourceDefinition, with its JSON pointer in the file.
    Crd(Value, String),
}

/// Every schema file under `inputs` (files as given; directories searched recursively for
/// `.json`, `.yaml`, `.yml`), sorted and without duplicates.
pub fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| Error::new(input, "", format!("cannot read: {e}")))?;
        if meta.is_dir() {
            walk(input, &mut out)?;
        } else {
            out.push(input.clone());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::new(dir, "", format!("cannot list directory: {e}")))?;
    for entry in entries {
        let path = entry.map_err(|e| Error::new(dir, "", format!("cannot list directory: {e}")))?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("json" | "yaml" | "yml")) {
            out.push(path);
        }
    }
    Ok(())
}

/// The documents of one file.
pub fn read(file: &Path) -> Result<Vec<Document>> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::new(file, "", format!("cannot read: {e}")))?;
    let values = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(&text).map_err(|e| Error::new(file, "", format!("invalid JSON: {e}")))?]
    } else {
        crate::yaml::documents(&text).map_err(|e| Error::new(file, "", e))?
    };
    if values.is_empty() {
        return Err(Error::new(file, "", "no documents in file"));
    }
    let multi = values.len() > 1;
    let mut out = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        let base = if multi { format!("(document {i})") } else { String::new() };
        classify(file, v, base, &mut out)?;
    }
    Ok(out)
}

fn classify(file: &Path, mut v: Value, at: String, out: &mut Vec<Document>) -> Result<()> {
    if v.get("swagger").is_some() && v.get("paths").is_some() {
        out.push(Document::OpenApiV2(v));
        return Ok(());
    }
    if v.get("openapi").is_some() && v.get("paths").is_some() {
        out.push(Document::OpenApiV3(v));
        return Ok(());
    }
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    match (api_version, kind) {
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => out.push(Document::Crd(v, at)),
        (_, "CustomResourceDefinitionList" | "List") => {
            let Some(Value::Array(items)) = v.get_mut("items").map(Value::take) else {
                return Err(Error::new(file, format!("{at}/items"), "a list without items"));
            };
            for (i, item) in items.into_iter().enumerate() {
                classify(file, item, format!("{at}/items/{i}"), out)?;
            }
        }
        (av, "CustomResourceDefinition") => {
            return Err(Error::new(file, at, format!("CRDs of {av} are not supported; convert them to apiextensions.k8s.io/v1")));
        }
        _ => {
            return Err(Error::new(
                file,
                at,
                format!("neither an OpenAPI v2/v3 spec nor a CustomResourceDefinition (apiVersion {api_version:?}, kind {kind:?})"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_crds_gives_each_with_its_pointer_and_a_list_without_items_is_an_error() {
        let dir = std::env::temp_dir().join(format!("informer-gen-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let crd = |name: &str| format!("{{\"apiVersion\": \"apiextensions.k8s.io/v1\", \"kind\": \"CustomResourceDefinition\", \"metadata\": {{\"name\": \"{name}\"}}}}");
        let list = dir.join("list.json");
        std::fs::write(&list, format!("{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{}, {}]}}", crd("a"), crd("b"))).unwrap();
        let docs = read(&list).unwrap();
        let got: Vec<(String, String)> = docs
            .iter()
            .map(|d| match d {
                Document::Crd(v, at) => (v["metadata"]["name"].as_str().unwrap_or_default().to_string(), at.clone()),
                _ => (String::new(), String::new()),
            })
            .collect();
        assert_eq!(got, [("a".to_string(), "/items/0".to_string()), ("b".to_string(), "/items/1".to_string())]);
        let empty = dir.join("empty.json");
        std::fs::write(&empty, "{\"apiVersion\": \"v1\", \"kind\": \"List\"}").unwrap();
        let Err(e) = read(&empty) else { panic!("a list without items was read") };
        assert!(e.to_string().contains("/items") && e.to_string().contains("empty.json"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
