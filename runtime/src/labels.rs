//! An object's labels as listers read them, and label selectors matched against them.
//!
//! Most cached types keep labels where kube expects them (`meta().labels`, a
//! `BTreeMap`); lean roots keep them in [`LeanMeta::labels`](crate::lean::LeanMeta), a
//! compact map, and `meta().labels` is `None` there. An informer therefore reads labels
//! through its [`LabelsFn`] (by default [`meta_labels`]), and listers match selectors
//! against the [`Labels`] view it returns.
//!
//! Invariants: [`LabelMatcher::matches`] gives, for every selector and label set, the
//! answer kube-core's `SelectorExt::matches` gives on the same labels as a `BTreeMap`
//! (an empty selector matches everything; `!=` and `notin` match a missing key).

use std::collections::{BTreeMap, BTreeSet};

use kube_core::{Expression, Resource, Selector};

use crate::lean::{InlineMap, Str};

/// The labels of one object, wherever its type keeps them.
#[derive(Clone, Copy, Debug)]
pub enum Labels<'a> {
    /// No labels.
    None,
    /// k8s-openapi's `ObjectMeta::labels`.
    Map(&'a BTreeMap<String, String>),
    /// A lean root's labels.
    Lean(&'a InlineMap<Str>),
}

impl<'a> Labels<'a> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        match *self {
            Labels::None => None,
            Labels::Map(m) => m.get(key).map(String::as_str),
            Labels::Lean(m) => m.get(key).map(Str::as_str),
        }
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        match *self {
            Labels::None => 0,
            Labels::Map(m) => m.len(),
            Labels::Lean(m) => m.len(),
        }
    }

    /// No labels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The labels as a `BTreeMap` (a copy).
    pub fn to_btree_map(&self) -> BTreeMap<String, String> {
        match *self {
            Labels::None => BTreeMap::new(),
            Labels::Map(m) => m.clone(),
            Labels::Lean(m) => m.iter().map(|(k, v)| (k.to_owned(), v.as_str().to_owned())).collect(),
        }
    }
}

/// Reads the labels of a `K` (an informer's and its listers' way to them).
pub type LabelsFn<K> = for<'a> fn(&'a K) -> Labels<'a>;

/// The labels in `obj.meta().labels`: the [`LabelsFn`] of every type but lean roots.
pub fn meta_labels<K: Resource>(obj: &K) -> Labels<'_> {
    obj.meta().labels.as_ref().map_or(Labels::None, Labels::Map)
}

/// A label selector ready to be matched against many objects' [`Labels`] (kube-core's
/// `Selector` matches a `BTreeMap` only and does not lend its expressions out).
#[derive(Clone, Debug, Default)]
pub struct LabelMatcher {
    expressions: Vec<Expression>,
}

impl LabelMatcher {
    /// The matcher of `selector`.
    pub fn new(selector: &Selector) -> Self {
        if selector.selects_all() {
            return LabelMatcher::default();
        }
        LabelMatcher { expressions: selector.clone().into_iter().collect() }
    }

    /// True when the selector selects every object.
    pub fn selects_all(&self) -> bool {
        self.expressions.is_empty()
    }

    /// True when `labels` satisfy every expression of the selector.
    pub fn matches(&self, labels: Labels<'_>) -> bool {
        self.expressions.iter().all(|e| expression_matches(e, labels))
    }
}

fn expression_matches(e: &Expression, labels: Labels<'_>) -> bool {
    let in_set = |values: &BTreeSet<String>, v: &str| values.contains(v);
    match e {
        Expression::In(key, values) => labels.get(key).is_some_and(|v| in_set(values, v)),
        Expression::NotIn(key, values) => labels.get(key).is_none_or(|v| !in_set(values, v)),
        Expression::Exists(key) => labels.get(key).is_some(),
        Expression::DoesNotExist(key) => labels.get(key).is_none(),
        Expression::Equal(key, value) => labels.get(key) == Some(value.as_str()),
        Expression::NotEqual(key, value) => labels.get(key) != Some(value.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use kube_core::SelectorExt;

    use super::*;
    use crate::selector::parse_label_selector;

    fn both(pairs: &[(&str, &str)]) -> (BTreeMap<String, String>, InlineMap<Str>) {
        let btree = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lean = pairs.iter().map(|(k, v)| (Str::new(k), Str::new(v))).collect();
        (btree, lean)
    }

    #[test]
    fn agrees_with_kube_core_on_both_label_forms() {
        let selectors = [
            "",
            "app=web",
            "app==web",
            "app!=web",
            "app in (web,db)",
            "app notin (web,db)",
            "tier",
            "!tier",
            "app=web,tier in (front),!legacy",
            "app.kubernetes.io/name=x,team!=a",
        ];
        let label_sets: [&[(&str, &str)]; 7] = [
            &[],
            &[("app", "web")],
            &[("app", "db"), ("tier", "front")],
            &[("app", "web"), ("tier", "front")],
            &[("app", "web"), ("tier", "front"), ("legacy", "1")],
            &[("app", "api"), ("team", "a")],
            &[("app.kubernetes.io/name", "x"), ("team", "b")],
        ];
        let mut matched = 0;
        for s in selectors {
            let selector = parse_label_selector(s).unwrap();
            let matcher = LabelMatcher::new(&selector);
            for pairs in label_sets {
                let (btree, lean) = both(pairs);
                let want = selector.matches(&btree);
                assert_eq!(matcher.matches(Labels::Map(&btree)), want, "{s:?} on {pairs:?} (BTreeMap)");
                assert_eq!(matcher.matches(Labels::Lean(&lean)), want, "{s:?} on {pairs:?} (lean)");
                if pairs.is_empty() {
                    assert_eq!(matcher.matches(Labels::None), want, "{s:?} on no labels");
                }
                matched += usize::from(want);
            }
        }
        // The table exercises both answers.
        assert!(matched > 10 && matched < selectors.len() * label_sets.len());
    }

    #[test]
    fn views_read_the_same_labels() {
        let (btree, lean) = both(&[("app", "web"), ("team", "a")]);
        for view in [Labels::Map(&btree), Labels::Lean(&lean)] {
            assert_eq!(view.get("team"), Some("a"));
            assert_eq!(view.get("tier"), None);
            assert_eq!(view.len(), 2);
            assert_eq!(view.to_btree_map(), btree);
        }
        assert!(Labels::None.is_empty() && Labels::None.to_btree_map().is_empty());
    }
}
