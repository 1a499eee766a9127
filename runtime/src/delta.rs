//! Deltas: the changes a reflector feeds into a queue, and the tombstones of relists.
//!
//! Invariants:
//! - A [`Delta`] always carries the object it is about: the new state for
//!   `Added`/`Updated`/`Replaced`/`Sync`, and the last state known for `Deleted`.
//! - A `Deleted` delta carries a [`DeletedFinalStateUnknown`] tombstone exactly when the
//!   deletion was inferred from a relist (the watch never reported it), so its object may
//!   be stale.

use std::sync::Arc;

use crate::key::ObjectKey;

/// What kind of change a [`Delta`] is (client-go's `DeltaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// Seen by a watch `ADDED` event.
    Added,
    /// Seen by a watch `MODIFIED` event.
    Updated,
    /// Seen by a watch `DELETED` event, or inferred from a relist (then a tombstone).
    Deleted,
    /// Seen in a (re)list.
    Replaced,
    /// A periodic resync of an object already in the store.
    Sync,
}

/// The last known state of an object whose deletion was inferred from a relist rather
/// than observed (client-go's `DeletedFinalStateUnknown`).
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The object's key.
    pub key: ObjectKey,
    /// The last state the cache had; the object may have changed before it was deleted.
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        DeletedFinalStateUnknown { key: self.key.clone(), obj: self.obj.clone() }
    }
}

/// The object of a deletion: seen by a watch, or a tombstone.
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// Reported by the server's watch; this is the object's final state.
    Object(Arc<K>),
    /// Inferred from a relist; the final state is unknown.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            DeletedObject::Object(o) => DeletedObject::Object(o.clone()),
            DeletedObject::Tombstone(t) => DeletedObject::Tombstone(t.clone()),
        }
    }
}

impl<K> DeletedObject<K> {
    /// The object, final or last known.
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeletedObject::Object(o) => o,
            DeletedObject::Tombstone(t) => &t.obj,
        }
    }

    /// True when this deletion was inferred from a relist.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, DeletedObject::Tombstone(_))
    }
}

/// One change to one object.
#[derive(Debug)]
pub struct Delta<K> {
    /// The kind of change.
    pub kind: DeltaType,
    /// The object's key.
    pub key: ObjectKey,
    /// The object: new state, or for deletions the final or last known state.
    pub object: DeltaObject<K>,
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Delta { kind: self.kind, key: self.key.clone(), object: self.object.clone() }
    }
}

/// The object of a [`Delta`]: a live object, or (only for `Deleted`) a tombstone.
#[derive(Debug)]
pub enum DeltaObject<K> {
    /// The object.
    Object(Arc<K>),
    /// A tombstone from a relist.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeltaObject<K> {
    fn clone(&self) -> Self {
        match self {
            DeltaObject::Object(o) => DeltaObject::Object(o.clone()),
            DeltaObject::Tombstone(t) => DeltaObject::Tombstone(t.clone()),
        }
    }
}

impl<K> DeltaObject<K> {
    /// The object, or the tombstone's last known object.
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeltaObject::Object(o) => o,
            DeltaObject::Tombstone(t) => &t.obj,
        }
    }

    /// The object, or the tombstone's last known object, taken out.
    pub fn into_object(self) -> Arc<K> {
        match self {
            DeltaObject::Object(o) => o,
            DeltaObject::Tombstone(t) => t.obj,
        }
    }
}

impl<K> Delta<K> {
    pub(crate) fn new(kind: DeltaType, key: ObjectKey, obj: Arc<K>) -> Self {
        Delta { kind, key, object: DeltaObject::Object(obj) }
    }

    pub(crate) fn tombstone(key: ObjectKey, obj: Arc<K>) -> Self {
        Delta {
            kind: DeltaType::Deleted,
            key: key.clone(),
            object: DeltaObject::Tombstone(DeletedFinalStateUnknown { key, obj }),
        }
    }

    /// True when this is a deletion inferred from a relist.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.object, DeltaObject::Tombstone(_))
    }
}
