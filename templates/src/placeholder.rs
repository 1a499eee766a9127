//! Stand-ins for the object types the generator substitutes for `Kind`.

/// A namespaced stand-in.
pub mod namespaced {
    /// The object type of a namespaced template.
    pub type Kind = ::informer_runtime::reexports::k8s_openapi::api::core::v1::ConfigMap;
}

/// A cluster-scoped stand-in.
pub mod cluster {
    /// The object type of a cluster-scoped template.
    pub type Kind = ::informer_runtime::reexports::k8s_openapi::api::core::v1::Namespace;
}
