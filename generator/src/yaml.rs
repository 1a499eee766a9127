//! YAML 1.2 documents → `serde_json::Value`, through yaml-rust2 (a YAML 1.2 reader: a bare
//! `=` is a string, `yes`/`on` are strings, not booleans).
//!
//! Invariant: map keys become strings (scalar keys are printed); integers that fit `i64`
//! stay integers; everything else that is not a valid JSON value is an error, never a panic.

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// Every document of `text`, in order (empty documents are skipped).
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("invalid YAML: {e}"))?;
    let mut out = Vec::with_capacity(docs.len());
    for (i, d) in docs.into_iter().enumerate() {
        let v = to_json(d).map_err(|e| format!("YAML document {i}: {e}"))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn to_json(y: Yaml) -> Result<Value, String> {
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::Number(i.into()),
        Yaml::Real(s) => {
            let f: f64 = parse_real(&s).ok_or_else(|| format!("bad number {s:?}"))?;
            Number::from_f64(f).map(Value::Number).ok_or_else(|| format!("number {s:?} has no JSON form"))?
        }
        Yaml::String(s) => Value::String(s),
        Yaml::Array(a) => Value::Array(a.into_iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Hash(h) => {
            let mut m = Map::with_capacity(h.len());
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) => s,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Real(s) => s,
                    Yaml::Null => "null".into(),
                    other => return Err(format!("unsupported map key {other:?}")),
                };
                m.insert(key, to_json(v)?);
            }
            Value::Object(m)
        }
        Yaml::Alias(_) => return Err("unresolved alias".into()),
        Yaml::BadValue => return Err("bad value".into()),
    })
}

fn parse_real(s: &str) -> Option<f64> {
    match s.trim_start_matches('+') {
        ".inf" | ".Inf" | ".INF" => Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yaml_1_2_scalars_and_several_documents() {
        let docs = documents("a: =\nb: yes\nc: 1\nd: 1.5\n---\n---\nx: [on, null]\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0], serde_json::json!({"a": "=", "b": "yes", "c": 1, "d": 1.5}));
        assert_eq!(docs[1], serde_json::json!({"x": ["on", null]}));
    }

    #[test]
    fn broken_yaml_is_an_error() {
        assert!(documents("a: [1, 2\n").is_err());
    }
}
