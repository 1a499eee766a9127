//! The memory-lean layout (`Config::lean_type`) on real objects: decoding and encoding
//! again gives the same JSON, conversions to and from k8s-openapi are lossless, equal
//! sub-objects and strings are stored once, and the generated lean informer serves them.

use std::sync::Arc;

use informer_gen_tests::lean_builtin::lean::api::core::v1::{ConfigMap, Container, Pod};
use informer_gen_tests::without_nulls;
use informer_runtime::lean::{Shared, Str};
use informer_runtime::reexports::k8s_openapi::api::core::v1 as k8s;
use informer_runtime::reexports::serde_json::{self, Value};

/// The path of the first difference between two JSON values, if any.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).find_map(|k| match (x.get(k), y.get(k)) {
            (Some(v), Some(w)) => first_difference(v, w, &format!("{at}/{k}")),
            _ => Some(format!("{at}/{k}: only on one side")),
        }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (v, w))| first_difference(v, w, &format!("{at}/{i}")))
        }
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}

fn assert_same_json(a: &Value, b: &Value, what: &str) {
    if let Some(d) = first_difference(a, b, "") {
        panic!("{what}: differs at {d}");
    }
}

fn fixture(name: &str) -> Vec<Value> {
    let path = format!("{}/fixtures/lean/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn pods_round_trip_through_the_lean_layout_and_k8s_openapi() {
    let pods = fixture("pods.json");
    assert_eq!(pods.len(), 3);
    for json in &pods {
        let text = serde_json::to_string(json).unwrap();
        let lean: Pod = serde_json::from_str(&text).unwrap();
        assert_same_json(&serde_json::to_value(&lean).unwrap(), &without_nulls(json), "lean → JSON");
        assert!(lean.metadata.managed_fields.as_ref().is_some_and(|m| m.len() == 2), "managedFields kept");
        assert!(lean.metadata.object_meta.managed_fields.is_none() && lean.metadata.object_meta.annotations.is_none());
        assert_eq!(lean.metadata.annotations.as_ref().unwrap().get("prometheus.io/port").map(|v| v.as_str()), Some("8080"));

        let k8s_pod: k8s::Pod = serde_json::from_str(&text).unwrap();
        let converted = lean.to_k8s().unwrap();
        assert_eq!(converted, k8s_pod, "lean → k8s-openapi equals decoding the JSON into k8s-openapi");
        let back = Pod::from_k8s(&k8s_pod).unwrap();
        assert_eq!(back, lean, "k8s-openapi → lean");
        assert_same_json(&serde_json::to_value(&k8s_pod).unwrap(), &serde_json::to_value(&back).unwrap(), "k8s-openapi and lean JSON");
    }
}

#[test]
fn config_maps_round_trip() {
    for json in fixture("configmaps.json") {
        let lean: ConfigMap = serde_json::from_value(json.clone()).unwrap();
        assert_same_json(&serde_json::to_value(&lean).unwrap(), &without_nulls(&json), "lean → JSON");
        let k8s_cm: k8s::ConfigMap = serde_json::from_value(json).unwrap();
        assert_eq!(lean.to_k8s().unwrap(), k8s_cm);
        let data = lean.data.as_ref().unwrap();
        let (first_key, first_value) = data.iter().next().unwrap();
        assert_eq!(data.get(first_key), Some(first_value));
        assert_eq!(k8s_cm.data.unwrap()[first_key], first_value.as_str());
    }
}

#[test]
fn equal_sub_objects_and_strings_are_stored_once() {
    let pods = fixture("pods.json");
    let a: Pod = serde_json::from_value(pods[0].clone()).unwrap();
    let b: Pod = serde_json::from_value(pods[0].clone()).unwrap();
    let c: Pod = serde_json::from_value(pods[1].clone()).unwrap();
    let spec = |p: &Pod| p.spec.clone().unwrap();
    // The same Pod decoded twice: one spec, one status, one copy of every container.
    assert!(Arc::ptr_eq(Shared::as_arc(&spec(&a)), Shared::as_arc(&spec(&b))));
    assert!(Arc::ptr_eq(Shared::as_arc(a.status.as_ref().unwrap()), Shared::as_arc(b.status.as_ref().unwrap())));
    // Different Pods share the parts that are equal and not the parts that differ.
    let containers = |p: &Pod| -> Vec<Shared<Container>> { spec(p).containers.as_deref().unwrap().to_vec() };
    for (x, y) in containers(&a).iter().zip(containers(&c).iter()) {
        assert_eq!(Arc::ptr_eq(Shared::as_arc(x), Shared::as_arc(y)), **x == **y);
        assert_eq!(serde_json::to_value(&**x).unwrap() == serde_json::to_value(&**y).unwrap(), x == y);
    }
    assert_ne!(a.metadata.uid, c.metadata.uid);
    let ns = |p: &Pod| Str::new(p.metadata.namespace.as_deref().unwrap());
    assert!(std::ptr::eq(ns(&a).as_ptr(), Str::new(pods[0]["metadata"]["namespace"].as_str().unwrap()).as_ptr()));
    let fields = |p: &Pod| p.metadata.managed_fields.as_ref().unwrap()[0].fields_v1.clone().unwrap();
    assert!(std::ptr::eq(fields(&a).as_str().as_ptr(), fields(&b).as_str().as_ptr()), "fieldsV1 text stored once");
}

#[test]
fn without_managed_fields_drops_them_from_the_json() {
    let json = fixture("pods.json").remove(0);
    let lean: Pod = serde_json::from_value(json.clone()).unwrap();
    let stripped = serde_json::to_value(lean.without_managed_fields()).unwrap();
    let mut expected = without_nulls(&json);
    expected["metadata"].as_object_mut().unwrap().remove("managedFields");
    assert_same_json(&stripped, &expected, "without managedFields");
}
