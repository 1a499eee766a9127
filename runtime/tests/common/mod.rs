//! Helpers shared by the runtime's tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use informer_runtime::{DeletedObject, Event, EventHandler};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

/// A ConfigMap with labels.
pub fn cm(ns: &str, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(ns.to_string()),
            name: Some(name.to_string()),
            labels: (!labels.is_empty()).then(|| labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), name.to_string())])),
        ..Default::default()
    }
}

pub fn rv(o: &ConfigMap) -> String {
    o.metadata.resource_version.clone().unwrap_or_default()
}

pub fn key(o: &ConfigMap) -> String {
    format!("{}/{}", o.metadata.namespace.as_deref().unwrap_or(""), o.metadata.name.as_deref().unwrap_or(""))
}

/// One line per event: `ADD key rv initial`, `UPDATE key old->new`, `DELETE key rv [tombstone]`.
pub fn describe(e: &Event<ConfigMap>) -> String {
    match e {
        Event::Add { obj, is_in_initial_list } => format!("ADD {} {} {}", key(obj), rv(obj), is_in_initial_list),
        Event::Update { old, new } => format!("UPDATE {} {}->{}", key(new), rv(old), rv(new)),
        Event::Delete(DeletedObject::Object(o)) => format!("DELETE {} {}", key(o), rv(o)),
        Event::Delete(DeletedObject::Tombstone(t)) => format!("DELETE {} {} tombstone", t.key, rv(&t.obj)),
    }
}

/// A handler that records every event it gets.
#[derive(Clone, Default)]
pub struct Recorder {
    pub events: Arc<Mutex<Vec<String>>>,
    pub delay: Option<Duration>,
}

impl Recorder {
    pub fn lines(&self) -> Vec<String> {
        self.events.lock().clone()
    }
    pub fn count(&self, prefix: &str) -> usize {
        self.events.lock().iter().filter(|l| l.starts_with(prefix)).count()
    }
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_event(&mut self, e: &Event<ConfigMap>) {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        self.events.lock().push(describe(e));
    }
}

/// Polls `cond` every 10 ms until it holds; panics with `what` after `secs` seconds.
pub async fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
