//! Resources of an OpenAPI v2 or v3 document, read from its paths.
//!
//! Invariants: plural and scope come from the path templates
//! (`/api/v1/namespaces/{namespace}/pods/{name}`), the verbs from each operation's
//! `x-kubernetes-action`, the kind from `x-kubernetes-group-version-kind`; nothing is guessed
//! from a kind's name. Subresource paths (`…/{name}/status`) are ignored. Known upstream
//! quirks are fixed afterwards by [`crate::quirks`], not here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result, pointer_segment};
use crate::model::{ObjectType, Resource};

/// What the paths say about one resource before the quirk pass.
#[derive(Debug, Default)]
pub struct Found {
    /// group, version, kind (from the operations).
    pub gvk: Option<(String, String, String)>,
    /// Seen under `namespaces/{namespace}`.
    pub namespaced: bool,
    /// Actions, as `x-kubernetes-action` names them.
    pub actions: BTreeSet<String>,
    /// The list operation declares a `watch` query parameter.
    pub list_has_watch_param: bool,
    /// Definition name of the object from the get response.
    pub definition: Option<String>,
    definition_from_get: bool,
    /// … from the list response's items.
    pub list_definition: Option<String>,
    /// … from any other operation's response (create-only resources such as bindings).
    pub other_definition: Option<String>,
}

/// Which spec flavour, for `$ref` prefixes and response layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Swagger 2.0: `#/definitions/…`.
    V2,
    /// OpenAPI 3: `#/components/schemas/…`.
    V3,
}

const OPERATIONS: [&str; 6] = ["get", "put", "post", "delete", "patch", "head"];

/// Every resource of `doc` that has a kind; the quirk pass then turns them into [`Resource`]s.
pub fn scan(file: &Path, doc: &Value, flavor: Flavor) -> Result<BTreeMap<(String, String, String), Found>> {
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .ok_or_else(|| Error::new(file, "/paths", "an OpenAPI document without a `paths` object"))?;
    let mut found: BTreeMap<(String, String, String), Found> = BTreeMap::new();
    for (path, item) in paths {
        let Some(parsed) = parse_path(path) else { continue };
        let item = item
            .as_object()
            .ok_or_else(|| Error::new(file, format!("/paths/{}", pointer_segment(path)), "a path item must be an object"))?;
        let path_params = item.get("parameters");
        for op_name in OPERATIONS {
            let Some(op) = item.get(op_name) else { continue };
            let at = format!("/paths/{}/{op_name}", pointer_segment(path));
            let Some(action) = op.get("x-kubernetes-action").and_then(Value::as_str) else { continue };
            let Some(gvk) = op.get("x-kubernetes-group-version-kind") else { continue };
            let field = |k: &str| {
                gvk.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| Error::new(file, format!("{at}/x-kubernetes-group-version-kind"), format!("missing `{k}`")))
            };
            let (g, v, k) = (field("group")?, field("version")?, field("kind")?);
            if g != parsed.group || v != parsed.version {
                // Operations of another group (e.g. autoscaling/v1 Scale on a
                // subresource) are not this resource's.
                continue;
            }
            let entry = found.entry((parsed.group.clone(), parsed.version.clone(), parsed.plural.clone())).or_default();
            entry.namespaced |= parsed.namespaced;
            entry.gvk.get_or_insert((g, v, k));
            // kubectl's verb names: `watchlist` is a watch, `post` a create, `put` an update.
            let action = match action {
                "watchlist" => "watch",
                "post" => "create",
                "put" => "update",
                a => a,
            };
            entry.actions.insert(action.to_string());
            if action == "list" && has_param(doc, op.get("parameters"), "watch") | has_param(doc, path_params, "watch") {
                entry.list_has_watch_param = true;
            }
            let def = response_definition(doc, op, flavor);
            match (action, def) {
                ("get", Some(d)) => entry.definition = Some(d),
                ("list", Some(d)) if !entry.definition_from_get => {
                    entry.list_definition = Some(list_item_definition(doc, &d, flavor).unwrap_or(d));
                }
                (_, Some(d)) => {
                    entry.other_definition.get_or_insert(d);
                }
                _ => {}
            }
            entry.definition_from_get |= action == "get" && entry.definition.is_some();
        }
    }
    Ok(found)
}

/// Turns scanned paths into resources (after [`crate::quirks::apply`]).
pub fn resources(file: &Path, found: BTreeMap<(String, String, String), Found>) -> Result<Vec<Resource>> {
    let mut out = Vec::new();
    for ((group, version, plural), f) in found {
        let Some((_, _, kind)) = f.gvk else { continue };
        let definition = f.definition.or(f.list_definition).or(f.other_definition);
        let object = match definition {
            Some(d) => ObjectType::Definition(d),
            None if f.actions.contains("list") => {
                return Err(Error::new(
                    file,
                    "/paths",
                    format!("resource {plural} ({group}/{version} {kind}): no get or list response names its object schema"),
                ));
            }
            None => ObjectType::Unknown,
        };
        out.push(Resource {
            group,
            version,
            kind,
            plural,
            namespaced: f.namespaced,
            verbs: f.actions,
            source: file.to_path_buf(),
            object,
        });
    }
    Ok(out)
}

struct ParsedPath {
    group: String,
    version: String,
    namespaced: bool,
    plural: String,
}

/// `/api/v1[/watch][/namespaces/{namespace}]/PLURAL[/{name}]` or the `/apis/G/V` form;
/// `None` for subresources and anything else.
fn parse_path(path: &str) -> Option<ParsedPath> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, version, mut rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return None,
    };
    if rest.first() == Some(&"watch") {
        rest = &rest[1..];
    }
    let mut namespaced = false;
    if rest.len() >= 3 && rest[0] == "namespaces" && rest[1] == "{namespace}" {
        namespaced = true;
        rest = &rest[2..];
    }
    match rest {
        [plural] if !plural.starts_with('{') => {}
        [plural, name] if !plural.starts_with('{') && name.starts_with('{') => {}
        _ => return None,
    }
    Some(ParsedPath { group, version, namespaced, plural: rest[0].to_string() })
}

fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) if r.starts_with("#/") => doc.pointer(&r[1..]).unwrap_or(v),
        _ => v,
    }
}

fn has_param(doc: &Value, params: Option<&Value>, name: &str) -> bool {
    params
        .and_then(Value::as_array)
        .is_some_and(|ps| ps.iter().any(|p| resolve(doc, p).get("name").and_then(Value::as_str) == Some(name)))
}

fn definition_name(r: &str, flavor: Flavor) -> Option<String> {
    let prefix = match flavor {
        Flavor::V2 => "#/definitions/",
        Flavor::V3 => "#/components/schemas/",
    };
    r.strip_prefix(prefix).map(str::to_string)
}

fn response_definition(doc: &Value, op: &Value, flavor: Flavor) -> Option<String> {
    let responses = op.get("responses")?;
    let resp = resolve(doc, responses.get("200").or_else(|| responses.get("201"))?);
    let schema = match flavor {
        Flavor::V2 => resp.get("schema")?,
        Flavor::V3 => {
            let content = resp.get("content")?.as_object()?;
            content.get("application/json").or_else(|| content.values().next())?.get("schema")?
        }
    };
    definition_name(schema.get("$ref")?.as_str()?, flavor)
}

fn list_item_definition(doc: &Value, list_def: &str, flavor: Flavor) -> Option<String> {
    let schemas = match flavor {
        Flavor::V2 => doc.get("definitions")?,
        Flavor::V3 => doc.get("components")?.get("schemas")?,
    };
    let items = schemas.get(list_def)?.get("properties")?.get("items")?.get("items")?;
    let r = items.get("$ref").or_else(|| items.get("allOf")?.get(0)?.get("$ref"))?;
    definition_name(r.as_str()?, flavor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_give_plural_and_scope() {
        let p = parse_path("/api/v1/namespaces/{namespace}/pods/{name}").unwrap();
        assert_eq!((p.group.as_str(), p.version.as_str(), p.plural.as_str(), p.namespaced), ("", "v1", "pods", true));
        let p = parse_path("/apis/apps/v1/watch/deployments").unwrap();
        assert_eq!((p.group.as_str(), p.plural.as_str(), p.namespaced), ("apps", "deployments", false));
        let p = parse_path("/api/v1/namespaces/{name}").unwrap();
        assert_eq!((p.plural.as_str(), p.namespaced), ("namespaces", false));
        assert!(parse_path("/api/v1/namespaces/{namespace}/pods/{name}/status").is_none());
        assert!(parse_path("/api/v1/namespaces/{name}/status").is_none());
        assert!(parse_path("/apis/apps/").is_none());
        assert!(parse_path("/version/").is_none());
    }
}
