//! Transforms: functions run once on each object after it is decoded and before it is
//! queued and stored (client-go's `TransformFunc`).
//!
//! Invariants: a transform runs exactly once per object received from the server, on the
//! reflector's task, before any handler or lister can see the object.

use std::sync::Arc;

use kube_core::Resource;

/// A transform of objects of type `K`.
pub type TransformFn<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// A transform that drops `metadata.managedFields`, usually the largest part of an object
/// and rarely read by controllers.
pub fn strip_managed_fields<K: Resource>() -> TransformFn<K> {
    Arc::new(|mut obj: K| {
        obj.meta_mut().managed_fields = None;
        obj
    })
}

/// Runs `first`, then `second`.
pub fn chain<K: 'static>(first: TransformFn<K>, second: TransformFn<K>) -> TransformFn<K> {
    Arc::new(move |obj| second(first(obj)))
}
