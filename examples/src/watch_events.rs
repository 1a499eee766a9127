//! The line format of the `watch` tool, shared with the client-go program of the
//! differential test (`tests/go/cmd/clientgo-events`): one JSON object per handler call.
//!
//! ```text
//! {"type":"ADDED","resource":"pods","key":"ns/name","resourceVersion":"12","initial":true}
//! {"type":"SYNCED"}
//! {"type":"UPDATED","resource":"pods","key":"ns/name","resourceVersion":"15"}
//! {"type":"DELETED","resource":"pods","key":"ns/name","resourceVersion":"15","tombstone":true}
//! ```
//! `initial` and `tombstone` appear only when true; `SYNCED` follows the initial events of
//! every resource.

use serde::{Deserialize, Serialize};

/// One line of output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLine {
    /// `ADDED`, `UPDATED`, `DELETED` or `SYNCED`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The resource as given on the command line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The object's resourceVersion (a tombstone's is the last one known).
    #[serde(default, rename = "resourceVersion", skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// An add from the initial list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub initial: bool,
    /// A delete the informer inferred on a relist (`DeletedFinalStateUnknown`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tombstone: bool,
}

impl EventLine {
    /// Parses one line.
    pub fn parse(line: &str) -> Result<EventLine, serde_json::Error> {
        serde_json::from_str(line)
    }
}
