//! The indexed store: indices stay exact through every kind of write.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::cm;
use informer_runtime::{IndexError, IndexFunc, Indexer, NAMESPACE_INDEX, ObjectKey, Upserted};
use k8s_openapi::api::core::v1::ConfigMap;

fn by_label(label: &'static str) -> IndexFunc<ConfigMap> {
    Arc::new(move |o: &ConfigMap| o.metadata.labels.as_ref().and_then(|l| l.get(label)).cloned().into_iter().collect())
}

fn by_data_keys() -> IndexFunc<ConfigMap> {
    Arc::new(|o: &ConfigMap| o.data.as_ref().map(|d| d.values().cloned().collect()).unwrap_or_default())
}

fn put(store: &Indexer<ConfigMap>, o: ConfigMap) {
    store.upsert(ObjectKey::of(&o).unwrap(), Arc::new(o));
}

fn names(v: Vec<Arc<ConfigMap>>) -> HashSet<String> {
    v.into_iter().map(|o| o.metadata.name.clone().unwrap()).collect()
}

fn set(items: &[&str]) -> HashSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn namespace_index_is_there_from_the_start() {
    let s = Indexer::new();
    put(&s, cm("a", "x", &[]));
    put(&s, cm("b", "y", &[]));
    put(&s, cm("a", "z", &[]));
    assert_eq!(names(s.by_index(NAMESPACE_INDEX, "a").unwrap()), set(&["x", "z"]));
    let mut values = s.list_index_values(NAMESPACE_INDEX);
    values.sort();
    assert_eq!(values, vec!["a", "b"]);
}

#[test]
fn add_indexers_on_a_populated_store_and_keep_them_exact() {
    let s = Indexer::new();
    put(&s, cm("ns", "a", &[("app", "web")]));
    put(&s, cm("ns", "b", &[("app", "db")]));
    s.add_indexers([("app".to_string(), by_label("app"))]).unwrap();
    assert_eq!(names(s.by_index("app", "web").unwrap()), set(&["a"]));

    // An update moves the object between values, and empty values disappear.
    put(&s, cm("ns", "a", &[("app", "db")]));
    assert!(s.by_index("app", "web").unwrap().is_empty());
    assert_eq!(names(s.by_index("app", "db").unwrap()), set(&["a", "b"]));
    assert_eq!(s.list_index_values("app"), vec!["db"]);

    // Removal.
    s.remove("ns/b");
    let keys: Vec<String> = s.index_keys("app", "db").unwrap().into_iter().map(|k| k.to_string()).collect();
    assert_eq!(keys, vec!["ns/a"]);

    // Replace rebuilds every index.
    let c = cm("other", "c", &[("app", "web")]);
    s.replace([(ObjectKey::of(&c).unwrap(), Arc::new(c))]);
    assert_eq!(s.len(), 1);
    assert!(s.by_index("app", "db").unwrap().is_empty());
    assert_eq!(names(s.by_index("app", "web").unwrap()), set(&["c"]));
    assert_eq!(s.list_index_values(NAMESPACE_INDEX), vec!["other"]);
}

#[test]
fn multi_valued_index_and_index_by_object() {
    let s = Indexer::new();
    s.add_indexers([("data".to_string(), by_data_keys())]).unwrap();
    let mut a = cm("ns", "a", &[]);
    a.data = Some([("x".to_string(), "red".to_string()), ("y".to_string(), "blue".to_string())].into());
    let mut b = cm("ns", "b", &[]);
    b.data = Some([("x".to_string(), "blue".to_string())].into());
    put(&s, a.clone());
    put(&s, b);
    assert_eq!(names(s.by_index("data", "blue").unwrap()), set(&["a", "b"]));
    assert_eq!(names(s.by_index("data", "red").unwrap()), set(&["a"]));
    assert_eq!(names(s.index("data", &a).unwrap()), set(&["a", "b"]));
}

#[test]
fn index_errors() {
    let s: Indexer<ConfigMap> = Indexer::new();
    assert_eq!(s.by_index("nope", "x").unwrap_err(), IndexError::NoSuchIndex("nope".into()));
    assert_eq!(
        s.add_indexers([(NAMESPACE_INDEX.to_string(), by_label("x"))]).unwrap_err(),
        IndexError::Conflict(NAMESPACE_INDEX.into())
    );
    // A failed add_indexers changes nothing.
    assert!(s.add_indexers([("a".to_string(), by_label("a")), ("a".to_string(), by_label("a"))]).is_err());
    assert!(!s.index_names().contains(&"a".to_string()));
}

#[test]
fn upsert_unless_keeps_the_held_object_or_replaces_it_with_indices_exact() {
    let s = Indexer::new();
    s.add_indexers([("app".to_string(), by_label("app"))]).unwrap();
    let first = Arc::new(cm("ns", "a", &[("app", "x")]));
    assert!(matches!(s.upsert_unless("ns/a".into(), first.clone(), |_, _| true), Upserted::Added));
    // Kept: the held object stays everywhere, the given one is not stored.
    let ignored = Arc::new(cm("ns", "a", &[("app", "y")]));
    let Upserted::Kept(held) = s.upsert_unless("ns/a".into(), ignored.clone(), |held, new| {
        held.metadata.labels != new.metadata.labels
    }) else {
        panic!("kept")
    };
    assert!(Arc::ptr_eq(&held, &first) && Arc::ptr_eq(&s.get("ns/a").unwrap(), &first));
    assert_eq!(Arc::strong_count(&ignored), 1, "the store holds no reference to what it did not keep");
    assert_eq!(names(s.by_index("app", "x").unwrap()), set(&["a"]));
    assert!(s.by_index("app", "y").unwrap().is_empty());
    // Replaced: the new object is stored and indexed, the old one returned.
    let Upserted::Replaced(old) = s.upsert_unless("ns/a".into(), ignored.clone(), |_, _| false) else { panic!("replaced") };
    assert!(Arc::ptr_eq(&old, &first) && Arc::ptr_eq(&s.get("ns/a").unwrap(), &ignored));
    assert_eq!(names(s.by_index("app", "y").unwrap()), set(&["a"]));
    assert!(s.by_index("app", "x").unwrap().is_empty());
}

#[test]
fn objects_are_shared_not_copied() {
    let s = Indexer::new();
    let o = Arc::new(cm("ns", "a", &[]));
    s.upsert("ns/a".into(), o.clone());
    assert!(Arc::ptr_eq(&o, &s.get("ns/a").unwrap()));
    assert!(Arc::ptr_eq(&o, &s.by_index(NAMESPACE_INDEX, "ns").unwrap()[0]));
}

#[test]
fn the_store_lets_go_of_objects_it_no_longer_holds() {
    // The items map and each index set hold the object: after an update, a removal or a
    // replace, none of them keeps the object that left.
    let s = Indexer::new();
    s.add_indexers([("app".to_string(), by_label("app"))]).unwrap();
    let first = Arc::new(cm("ns", "a", &[("app", "web")]));
    s.upsert("ns/a".into(), first.clone());
    assert_eq!(Arc::strong_count(&first), 4, "the test, the items map, the namespace and app sets");
    let second = Arc::new(cm("ns", "a", &[("app", "web")]));
    s.upsert("ns/a".into(), second.clone());
    assert_eq!(Arc::strong_count(&first), 1, "an update under unchanged index values");
    let other = Arc::new(cm("ns", "b", &[("app", "db")]));
    s.upsert("ns/b".into(), other.clone());
    s.remove("ns/b");
    assert_eq!(Arc::strong_count(&other), 1, "a removal");
    s.replace([("ns/c".into(), Arc::new(cm("ns", "c", &[("app", "web")])))]);
    assert_eq!(Arc::strong_count(&second), 1, "a replace");
    assert_eq!(names(s.by_index("app", "web").unwrap()), set(&["c"]));
}

/// Every index, read through the store, against the same index computed from `list()`, and
/// the objects it hands out against the store's own.
fn assert_indices_exact(s: &Indexer<ConfigMap>, label_index: &str) {
    // Walks over every object go through the namespace index: each of the items map's
    // entries exactly once.
    let entries = s.entries();
    assert_eq!(entries.len(), s.len(), "entries against the items map");
    assert_eq!(entries.iter().map(|(k, _)| k.as_str()).collect::<HashSet<_>>().len(), s.len(), "each key once");
    for (k, o) in &entries {
        assert!(Arc::ptr_eq(o, &s.get(k.as_str()).unwrap()), "{k:?}");
    }
    assert_eq!(s.list_keys().len(), s.len());
    let objects = s.list();
    assert_eq!(objects.len(), s.len());
    for (index, f) in [
        (NAMESPACE_INDEX, Box::new(|o: &ConfigMap| vec![o.metadata.namespace.clone().unwrap_or_default()]) as Box<dyn Fn(&ConfigMap) -> Vec<String>>),
        (label_index, Box::new(|o: &ConfigMap| o.metadata.labels.as_ref().and_then(|l| l.get("app")).cloned().into_iter().collect())),
    ] {
        let mut want: std::collections::BTreeMap<String, HashSet<String>> = Default::default();
        for o in &objects {
            for v in f(o) {
                want.entry(v).or_default().insert(o.metadata.name.clone().unwrap());
            }
        }
        let mut values = s.list_index_values(index);
        values.sort();
        assert_eq!(values, want.keys().cloned().collect::<Vec<_>>(), "values of index {index}");
        for (v, names_want) in &want {
            assert_eq!(&names(s.by_index(index, v).unwrap()), names_want, "index {index} value {v}");
            assert_eq!(s.index_keys(index, v).unwrap().len(), names_want.len(), "keys of index {index} value {v}");
            // Each object an index hands out is the one the store holds under its key now, not
            // one an update replaced.
            s.for_each_in_index(index, v, |k, o| {
                assert!(Arc::ptr_eq(o, &s.get(k.as_str()).unwrap()), "index {index} value {v}: {k:?} is stale");
            })
            .unwrap();
        }
    }
}

#[test]
fn indices_stay_exact_through_random_writes_with_fresh_keys() {
    // Keys are built anew for every write (as the queues hand them over), an object may move
    // between namespaces under one key, and labels come and go: after every write each index
    // must equal the one computed from the objects.
    let s = Indexer::new();
    s.add_indexers([("app".to_string(), by_label("app"))]).unwrap();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for step in 0..3000 {
        let name = format!("o{}", next(40));
        let key = format!("k/{name}");
        match next(10) {
            0..=5 => {
                let ns = format!("ns{}", next(3));
                let app = ["web", "db", "cache"][next(3) as usize];
                let o = if next(4) == 0 { cm(&ns, &name, &[]) } else { cm(&ns, &name, &[("app", app)]) };
                s.upsert(ObjectKey::from_string(key.as_str()), Arc::new(o));
            }
            6..=8 => {
                s.remove(&key);
            }
            _ => {
                if step % 500 == 9 {
                    let kept: Vec<(ObjectKey, Arc<ConfigMap>)> =
                        s.entries().into_iter().filter(|_| next(2) == 0).map(|(k, o)| (ObjectKey::from_string(k.as_str()), o)).collect();
                    s.replace(kept);
                }
            }
        }
        assert_indices_exact(&s, "app");
    }
    assert!(!s.is_empty());
}

#[test]
fn index_names_include_the_namespace_index() {
    let s: Indexer<ConfigMap> = Indexer::new();
    assert_eq!(s.index_names(), vec![NAMESPACE_INDEX.to_string()]);
    s.add_indexers([("app".to_string(), by_label("app")), ("z".to_string(), by_label("z"))]).unwrap();
    assert_eq!(s.index_names(), vec!["app".to_string(), NAMESPACE_INDEX.to_string(), "z".to_string()]);
    let a = cm("ns", "a", &[]);
    put(&s, a.clone());
    put(&s, cm("ns", "b", &[]));
    put(&s, cm("other", "c", &[]));
    assert_eq!(names(s.index(NAMESPACE_INDEX, &a).unwrap()), set(&["a", "b"]));
}
