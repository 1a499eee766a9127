//! Label selectors: the API's string form parsed into kube-core's [`Selector`], which does
//! the matching.
//!
//! kube-core has the selector model and its matching but no parser for the string form
//! (`app=web,tier in (a,b),!legacy`); this module is that parser and nothing more.
//!
//! Invariants: `parse(s)` accepts exactly the grammar of apimachinery's
//! `labels.Parse` for `=`, `==`, `!=`, `in`, `notin`, `key` and `!key`; an empty string
//! selects everything; whitespace around tokens is ignored.

pub use kube_core::{Expression, Selector, SelectorExt};

/// A selector string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {reason}")]
pub struct SelectorParseError {
    /// The selector given.
    pub selector: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a label selector in the API's string form.
pub fn parse_label_selector(s: &str) -> Result<Selector, SelectorParseError> {
    let err = |reason: String| SelectorParseError { selector: s.to_string(), reason };
    let mut exprs = Vec::new();
    for part in split_top_level(s).map_err(err)? {
        let part = part.trim();
        if part.is_empty() {
            if s.trim().is_empty() {
                continue;
            }
            return Err(err("empty requirement".into()));
        }
        exprs.push(parse_requirement(part).map_err(err)?);
    }
    let mut sel = Selector::default();
    sel.extend(exprs);
    Ok(sel)
}

fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'".into());
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn valid_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > 253 || !p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.') {
            return Err(format!("invalid key prefix {p:?}"));
        }
    }
    valid_name(name).map_err(|e| format!("invalid key {k:?}: {e}"))
}

fn valid_name(v: &str) -> Result<(), String> {
    if v.is_empty() || v.len() > 63 {
        return Err("must be 1-63 characters".into());
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
    let first = v.chars().next().unwrap_or('-');
    let last = v.chars().last().unwrap_or('-');
    if !v.chars().all(ok_char) || !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err("must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric".into());
    }
    Ok(())
}

fn valid_value(v: &str) -> Result<(), String> {
    if v.is_empty() { Ok(()) } else { valid_name(v).map_err(|e| format!("invalid value {v:?}: {e}")) }
}

fn parse_requirement(p: &str) -> Result<Expression, String> {
    if let Some(key) = p.strip_prefix('!') {
        let key = key.trim();
        valid_key(key)?;
        return Ok(Expression::DoesNotExist(key.to_string()));
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = p.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            valid_key(k)?;
            valid_value(v)?;
            return Ok(if neg {
                Expression::NotEqual(k.to_string(), v.to_string())
            } else {
                Expression::Equal(k.to_string(), v.to_string())
            });
        }
    }
    if let Some(open) = p.find('(') {
        let head = p[..open].trim();
        let rest = p[open + 1..].trim_end();
        let inner = rest.strip_suffix(')').ok_or_else(|| "missing ')'".to_string())?;
        let (key, op) = head.rsplit_once(char::is_whitespace).ok_or_else(|| format!("expected 'key in (...)' in {p:?}"))?;
        let key = key.trim();
        valid_key(key)?;
        let values = inner
            .split(',')
            .map(|v| {
                let v = v.trim();
                valid_value(v).map(|_| v.to_string())
            })
            .collect::<Result<std::collections::BTreeSet<_>, _>>()?;
        return match op.trim() {
            "in" => Ok(Expression::In(key.to_string(), values)),
            "notin" => Ok(Expression::NotIn(key.to_string(), values)),
            other => Err(format!("unknown operator {other:?}")),
        };
    }
    let key = p.trim();
    if key.contains(char::is_whitespace) {
        return Err(format!("unexpected whitespace in {p:?}"));
    }
    valid_key(key)?;
    Ok(Expression::Exists(key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_and_matches_all_operators() {
        let s = parse_label_selector("app=web, tier in (front, back),env!=prod,!legacy,team, x==y").unwrap();
        assert_eq!(s.to_string(), "app=web,tier in (back,front),env!=prod,!legacy,team,x=y");
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "front"), ("team", "a"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "front"), ("team", "a"), ("x", "y"), ("legacy", "1")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "mid"), ("team", "a"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "front"), ("team", "a"), ("x", "y"), ("env", "prod")])));
        let n = parse_label_selector("k notin (a,b)").unwrap();
        assert!(n.matches(&labels(&[])));
        assert!(!n.matches(&labels(&[("k", "a")])));
        let p = parse_label_selector("app.kubernetes.io/name=x").unwrap();
        assert!(p.matches(&labels(&[("app.kubernetes.io/name", "x")])));
    }

    #[test]
    fn empty_selects_everything() {
        assert!(parse_label_selector("").unwrap().selects_all());
        assert!(parse_label_selector("  ").unwrap().selects_all());
    }

    #[test]
    fn rejects_bad_input() {
        for bad in ["a=b,", "in (a", "k in a)", "k foo (a)", "=x", "a b", "-a=b", "a=-b"] {
            assert!(parse_label_selector(bad).is_err(), "{bad} should not parse");
        }
    }
}
