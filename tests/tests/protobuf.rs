//! Protobuf decoding against the Kubernetes Go libraries: every object of
//! `tests/fixtures/proto` was encoded by them both as JSON and as protobuf (see
//! `tests/go/cmd/proto-fixtures`); decoding either must give the same value, into
//! k8s-openapi's types and into the lean layout, with the tables the generator emitted.

use std::path::Path;

use informer_gen_tests::lean_builtin::lean::api::core::v1 as lean;
use informer_gen_tests::lean_builtin::protobuf as tables;
use informer_runtime::WatchEvent;
use informer_runtime::proto::{Message, decode_list, decode_object, decode_watch_event};
use informer_runtime::reexports::k8s_openapi::api::{apps, core, events};
use informer_runtime::reexports::serde::de::DeserializeOwned;
use serde_json::Value;

fn fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/proto"))
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// The fixture objects: kind, JSON, protobuf.
fn objects() -> Vec<(String, Value, Vec<u8>)> {
    let text = std::fs::read_to_string(fixtures().join("objects.json")).unwrap();
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    entries
        .into_iter()
        .map(|e| (e["kind"].as_str().unwrap().to_string(), e["json"].clone(), base64_decode(e["protobuf"].as_str().unwrap())))
        .collect()
}

/// Decodes `pb` with `message` and `json` with serde_json into `T`; they must be equal.
fn same<T: DeserializeOwned + PartialEq + std::fmt::Debug>(message: &'static Message, json: &Value, pb: &[u8]) -> T {
    let from_json: T = serde_json::from_value(json.clone()).unwrap();
    let from_pb: T = decode_object(message, pb).unwrap_or_else(|e| panic!("{}: {e}", message.name));
    assert_eq!(from_pb, from_json, "{}: protobuf and JSON decode differently", message.name);
    from_pb
}

#[test]
fn every_fixture_object_decodes_from_protobuf_as_from_json() {
    let objects = objects();
    assert_eq!(objects.len(), 8, "the fixture set");
    for (kind, json, pb) in &objects {
        match kind.as_str() {
            "Pod" => {
                same::<core::v1::Pod>(&tables::K8S_IO_API_CORE_V1_POD, json, pb);
                same::<lean::Pod>(&tables::K8S_IO_API_CORE_V1_POD, json, pb);
            }
            "ConfigMap" => {
                let cm = same::<core::v1::ConfigMap>(&tables::K8S_IO_API_CORE_V1_CONFIGMAP, json, pb);
                assert_eq!(cm.binary_data.unwrap()["bin"].0, [0, 1, 2, 0xff]);
                assert_eq!(cm.data.unwrap()["empty"], "", "an empty map value stays");
                same::<lean::ConfigMap>(&tables::K8S_IO_API_CORE_V1_CONFIGMAP, json, pb);
            }
            "Service" => drop(same::<core::v1::Service>(&tables::K8S_IO_API_CORE_V1_SERVICE, json, pb)),
            "Deployment" => {
                let d = same::<apps::v1::Deployment>(&tables::K8S_IO_API_APPS_V1_DEPLOYMENT, json, pb);
                // A pointer field set to zero stays set: replicas 0 is not "unset" (1).
                assert_eq!(d.spec.unwrap().replicas, Some(0));
            }
            "PersistentVolumeClaim" => {
                let c = same::<core::v1::PersistentVolumeClaim>(&tables::K8S_IO_API_CORE_V1_PERSISTENTVOLUMECLAIM, json, pb);
                assert_eq!(c.spec.unwrap().storage_class_name.as_deref(), Some(""), "an empty pointer string stays set");
            }
            "Secret" => drop(same::<core::v1::Secret>(&tables::K8S_IO_API_CORE_V1_SECRET, json, pb)),
            "Event" => {
                let e = same::<events::v1::Event>(&tables::K8S_IO_API_EVENTS_V1_EVENT, json, pb);
                assert_eq!(serde_json::to_value(&e.event_time).unwrap(), "2026-01-02T03:04:05.123456Z");
            }
            "ControllerRevision" => drop(same::<apps::v1::ControllerRevision>(&tables::K8S_IO_API_APPS_V1_CONTROLLERREVISION, json, pb)),
            other => panic!("no check for fixture kind {other}"),
        }
    }
}

#[test]
fn fixture_tables_cover_only_what_the_fixtures_check() {
    // Guards the fixture set against a silent shrink: these kinds' objects carry the edge
    // cases (inline VolumeSource, int-or-string both ways, quantities, empty times, bytes,
    // micro times, raw JSON).
    let kinds: Vec<String> = objects().into_iter().map(|o| o.0).collect();
    for k in ["Pod", "ConfigMap", "Service", "Deployment", "PersistentVolumeClaim", "Secret", "Event", "ControllerRevision"] {
        assert!(kinds.iter().any(|x| x == k), "{k}");
    }
}

#[test]
fn a_protobuf_list_decodes_its_items_and_paging() {
    let bytes = std::fs::read(fixtures().join("pod-list.pb")).unwrap();
    let page = decode_list::<lean::Pod>(&tables::K8S_IO_API_CORE_V1_POD, &bytes).unwrap();
    assert_eq!(page.resource_version, "123");
    assert_eq!(page.continue_token.as_deref(), Some("next-page"));
    let (_, json, _) = objects().into_iter().find(|o| o.0 == "Pod").unwrap();
    let mut expected: lean::Pod = serde_json::from_value(json).unwrap();
    // List items carry no type meta, in JSON as in protobuf.
    let first = &page.items[0];
    assert_eq!(page.items.len(), 1);
    expected.metadata = first.metadata.clone();
    assert_eq!(first.metadata.name.as_deref(), Some("app-0-0000000000-00000"));
    assert_eq!(first.spec, expected.spec);
    assert_eq!(first.status, expected.status);
}

#[test]
fn sub_messages_decoded_before_from_the_same_bytes_are_reused() {
    use informer_runtime::lean::{Interned, Shared};
    let (_, json, pb) = objects().into_iter().find(|o| o.0 == "Pod").unwrap();
    let first: lean::Pod = decode_object(&tables::K8S_IO_API_CORE_V1_POD, &pb).unwrap();
    let reused_before = lean::PodSpec::table().stats().reused_encodings;
    let again: lean::Pod = decode_object(&tables::K8S_IO_API_CORE_V1_POD, &pb).unwrap();
    // The whole spec was reused (so its containers were not even looked at).
    assert!(lean::PodSpec::table().stats().reused_encodings > reused_before, "the spec of the second decode was reused");
    assert_eq!(again, first);
    assert!(std::sync::Arc::ptr_eq(Shared::as_arc(again.spec.as_ref().unwrap()), Shared::as_arc(first.spec.as_ref().unwrap())));
    // What is reused is what decoding gives: the same as from JSON.
    assert_eq!(again, serde_json::from_value::<lean::Pod>(json).unwrap());
}

#[test]
fn a_protobuf_watch_stream_decodes_each_event_type() {
    let bytes = std::fs::read(fixtures().join("pod-watch.pb")).unwrap();
    let mut events = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        events.push(decode_watch_event::<lean::Pod>(&tables::K8S_IO_API_CORE_V1_POD, &rest[4..4 + len]).unwrap());
        rest = &rest[4 + len..];
    }
    assert_eq!(events.len(), 4);
    assert!(matches!(&events[0], WatchEvent::Added(p) if p.metadata.resource_version.as_deref() == Some("1000")));
    assert!(matches!(&events[1], WatchEvent::Modified(p) if p.metadata.resource_version.as_deref() == Some("201")));
    match &events[2] {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.metadata.resource_version, "200");
            assert_eq!(b.metadata.annotations.get("k8s.io/initial-events-end").map(String::as_str), Some("true"));
        }
        other => panic!("{other:?}"),
    }
    match &events[3] {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert!(status.message.contains("too old resource version"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_protobuf_is_an_error_naming_where() {
    let (_, _, pb) = objects().into_iter().find(|o| o.0 == "Pod").unwrap();
    let err = decode_object::<core::v1::Pod>(&tables::K8S_IO_API_CORE_V1_POD, &pb[..pb.len() - 100]).unwrap_err();
    assert!(err.to_string().contains("cut short"), "{err}");
    let err = decode_object::<core::v1::Pod>(&tables::K8S_IO_API_CORE_V1_POD, b"{\"kind\":\"Pod\"}").unwrap_err();
    assert!(err.to_string().contains("k8s\\0"), "{err}");
    // A string field holding bytes that are not UTF-8, deep inside: the path names it.
    let mut broken = pb.clone();
    let at = broken.windows(5).position(|w| w == b"nginx").or_else(|| broken.windows(3).position(|w| w == b"app")).unwrap();
    broken[at] = 0xff;
    let err = decode_object::<core::v1::Pod>(&tables::K8S_IO_API_CORE_V1_POD, &broken).unwrap_err();
    assert!(err.to_string().contains("not UTF-8") && err.to_string().contains("k8s.io.api.core.v1.Pod"), "{err}");
}
