//! Programs built on informer-gen: [`watch_events`] (the `watch` tool's event format) and
//! [`pods_per_node`], a sample controller driven only by generated listers and handlers.

pub mod pods_per_node;
pub mod watch_events;
