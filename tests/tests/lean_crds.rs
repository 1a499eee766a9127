//! Custom resources in the memory-lean layout (`Config::lean_type` with the resource's
//! definition name) on real objects: decoding and encoding again gives the same JSON as the
//! plain generated types, equal sub-objects and strings are stored once, and listers select
//! on the labels `LeanMeta` keeps apart.

use std::sync::Arc;

use informer_gen_tests::crds::monitoring_coreos_com::v1 as plain;
use informer_gen_tests::lean_crds::monitoring_coreos_com::v1::{ServiceMonitor, ServiceMonitorSpecEndpoints};
use informer_gen_tests::without_nulls;
use informer_runtime::lean::{Shared, Str};
use informer_runtime::reexports::serde_json::{self, Value};

fn service_monitors() -> Vec<Value> {
    let path = format!("{}/fixtures/lean/servicemonitors.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn service_monitors_round_trip_through_the_lean_layout_and_the_plain_types() {
    let objects = service_monitors();
    assert_eq!(objects.len(), 3);
    for json in &objects {
        let lean: ServiceMonitor = serde_json::from_value(json.clone()).unwrap();
        let lean_json = serde_json::to_value(&lean).unwrap();
        assert_eq!(lean_json, without_nulls(json), "lean → JSON");
        // managedFields, labels and annotations are kept apart, lean.
        assert!(lean.metadata.object_meta.managed_fields.is_none() && lean.metadata.object_meta.labels.is_none());
        assert_eq!(lean.metadata.managed_fields.as_ref().map(|m| m.len()), Some(json["metadata"]["managedFields"].as_array().unwrap().len()));
        assert_eq!(lean.metadata.labels.as_ref().unwrap().get("release").map(|v| v.as_str()), Some("prometheus"));

        // The plain generated type reads the same JSON and writes the same JSON back.
        let typed: plain::ServiceMonitor = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&typed).unwrap(), lean_json, "plain and lean JSON");
        let back: ServiceMonitor = serde_json::from_value(serde_json::to_value(&typed).unwrap()).unwrap();
        assert_eq!(back, lean, "plain → lean through JSON");
    }
}

#[test]
fn equal_sub_objects_of_custom_resources_are_stored_once() {
    let objects = service_monitors();
    let a: ServiceMonitor = serde_json::from_value(objects[0].clone()).unwrap();
    let b: ServiceMonitor = serde_json::from_value(objects[0].clone()).unwrap();
    let c: ServiceMonitor = serde_json::from_value(objects[1].clone()).unwrap();
    let spec = |m: &ServiceMonitor| m.spec.clone().unwrap();
    // The same object decoded twice: one spec.
    assert!(Arc::ptr_eq(Shared::as_arc(&spec(&a)), Shared::as_arc(&spec(&b))));
    // Two objects: their specs differ, so they are two; within them, equal endpoint parts are
    // one allocation and different ones are not.
    assert!(!Arc::ptr_eq(Shared::as_arc(&spec(&a)), Shared::as_arc(&spec(&c))));
    let first_endpoint = |m: &ServiceMonitor| spec(m).endpoints.as_deref().unwrap()[0].clone();
    let (ea, ec) = (first_endpoint(&a), first_endpoint(&c));
    let relabelings = |e: &Shared<ServiceMonitorSpecEndpoints>| e.relabelings.as_deref().unwrap().to_vec();
    let (ra, rc) = (relabelings(&ea), relabelings(&ec));
    assert_eq!(objects[0]["spec"]["endpoints"][0]["relabelings"], objects[1]["spec"]["endpoints"][0]["relabelings"]);
    assert!(!ra.is_empty() && ra.iter().zip(&rc).all(|(x, y)| Arc::ptr_eq(Shared::as_arc(x), Shared::as_arc(y))));
    assert_ne!(objects[0]["spec"]["endpoints"][0]["authorization"], objects[1]["spec"]["endpoints"][0]["authorization"]);
    assert!(!Arc::ptr_eq(Shared::as_arc(ea.authorization.as_ref().unwrap()), Shared::as_arc(ec.authorization.as_ref().unwrap())));
    // Strings are interned: equal text, one allocation.
    let interval = |e: &Shared<ServiceMonitorSpecEndpoints>| e.interval.clone().unwrap();
    let (ia, ic): (Str, Str) = (interval(&ea), interval(&ec));
    assert_eq!(ia.as_str(), "30s");
    assert!(std::ptr::eq(ia.as_str().as_ptr(), ic.as_str().as_ptr()));
}

#[test]
fn without_managed_fields_drops_them_from_a_custom_resource() {
    let json = service_monitors().remove(0);
    let lean: ServiceMonitor = serde_json::from_value(json.clone()).unwrap();
    let stripped = serde_json::to_value(lean.without_managed_fields()).unwrap();
    let mut expected = without_nulls(&json);
    expected["metadata"].as_object_mut().unwrap().remove("managedFields");
    assert_eq!(stripped, expected);
}
