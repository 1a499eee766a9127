//! Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones.
//!
//! Invariants:
//! - A key is built from `metadata.namespace` and `metadata.name` only; an empty namespace
//!   is the same as no namespace (client-go's `MetaNamespaceKeyFunc`).
//! - A key hashes and compares exactly like its `&str` form, so maps keyed by
//!   [`ObjectKey`] can be queried with a plain `&str`.
//! - Cloning a key is a reference-count bump: the store, the indices and the queues share
//!   one allocation per key, and each holds one pointer to it (a [`ThinStr`]).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use kube_core::Resource;

use crate::thin_str::ThinStr;

/// Maps of the queues and key sets hash with foldhash: keys come from the API server, and
/// lookups by key are the hot path of every relist, where SipHash was most of the cost. (The
/// store's own map hashes keys with [`KeyHasher`](crate::key_hash::KeyHasher), which
/// namespace and name can be fed to unjoined.)
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// Sets, as [`FastMap`].
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A set of keys, hashed like the store's maps: what a relist saw, for
/// [`Queue::replace_finish`](crate::Queue::replace_finish).
pub type KeySet = FastSet<ObjectKey>;

/// The cache key of one object (`namespace/name` or `name`). Its text is shorter than 4 GiB
/// (building a longer one panics; a valid Kubernetes key is at most 317 bytes).
#[derive(Clone)]
pub struct ObjectKey(ThinStr);

impl ObjectKey {
    /// Builds the key of the object called `name` in `namespace` (`None` or `""` for
    /// cluster-scoped objects).
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        with_key_str(namespace, name, |key| ObjectKey(ThinStr::new(key)))
    }

    /// The key of `obj`, or `None` when the object carries no `metadata.name`.
    pub fn of<K: Resource>(obj: &K) -> Option<Self> {
        let meta = obj.meta();
        let name = meta.name.as_deref()?;
        Some(Self::new(meta.namespace.as_deref(), name))
    }

    /// Parses a key in its string form; the string is taken as is.
    pub fn from_string(key: impl AsRef<str>) -> Self {
        ObjectKey(ThinStr::new(key.as_ref()))
    }

    /// The key as a string slice.
    #[inline]
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The namespace part, `None` for a cluster-scoped key.
    pub fn namespace(&self) -> Option<&str> {
        self.as_str().split_once('/').map(|(ns, _)| ns)
    }

    /// The address of the key's one allocation: equal for clones of one key, different for
    /// two keys built separately even when their strings are equal.
    pub(crate) fn allocation(&self) -> *const u8 {
        self.0.allocation()
    }

    /// The name part.
    pub fn name(&self) -> &str {
        let key = self.as_str();
        match key.split_once('/') {
            Some((_, name)) => name,
            None => key,
        }
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        self.allocation() == other.allocation() || self.as_str() == other.as_str()
    }
}

impl Eq for ObjectKey {}

impl Hash for ObjectKey {
    /// As the key's `&str` hashes, so maps of keys can be queried with one.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        ObjectKey(ThinStr::new(s))
    }
}

/// Calls `f` with the key string of `name` in `namespace` (`namespace/name`, or `name` when
/// the namespace is `None` or empty), built on the stack when it is short — every valid
/// Kubernetes key is: namespace ≤ 63 bytes, name ≤ 253 — and on the heap otherwise.
pub(crate) fn with_key_str<R>(namespace: Option<&str>, name: &str, f: impl FnOnce(&str) -> R) -> R {
    let Some(ns) = namespace.filter(|ns| !ns.is_empty()) else { return f(name) };
    let len = ns.len() + 1 + name.len();
    let mut buf = [0u8; 320];
    if len > buf.len() {
        return f(&format!("{ns}/{name}"));
    }
    buf[..ns.len()].copy_from_slice(ns.as_bytes());
    buf[ns.len()] = b'/';
    buf[ns.len() + 1..len].copy_from_slice(name.as_bytes());
    // Two valid UTF-8 strings joined by an ASCII byte are valid UTF-8.
    f(std::str::from_utf8(&buf[..len]).expect("UTF-8 key"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn namespaced_and_cluster_keys() {
        let k = ObjectKey::new(Some("default"), "web");
        assert_eq!(k.as_str(), "default/web");
        assert_eq!(k.namespace(), Some("default"));
        assert_eq!(k.name(), "web");
        let c = ObjectKey::new(Some(""), "node-1");
        assert_eq!(c.as_str(), "node-1");
        assert_eq!(c.namespace(), None);
        assert_eq!(c.name(), "node-1");
    }

    #[test]
    fn lookup_by_str() {
        let mut m = HashMap::new();
        m.insert(ObjectKey::new(Some("a"), "b"), 1);
        assert_eq!(m.get("a/b"), Some(&1));
        assert_eq!(m.get(&ObjectKey::from_string("a/b")), Some(&1));
        assert_eq!(m.get("a/c"), None);
    }

    #[test]
    fn keys_compare_and_order_by_their_text() {
        assert_eq!(std::mem::size_of::<ObjectKey>(), 8);
        let a = ObjectKey::new(Some("default"), "web");
        let b = ObjectKey::from("default/web");
        assert!(a == b && a.allocation() != b.allocation());
        assert_ne!(a, ObjectKey::from("default/wec"));
        let mut keys = [ObjectKey::from("b"), ObjectKey::from("a/z"), ObjectKey::from("a"), ObjectKey::from("a/b")];
        keys.sort();
        assert_eq!(keys.iter().map(ObjectKey::as_str).collect::<Vec<_>>(), ["a", "a/b", "a/z", "b"]);
        assert_eq!(format!("{a} {a:?}"), "default/web \"default/web\"");
    }
}
