//! Errors of the runtime.
//!
//! Invariants: every error that came from the API server keeps its HTTP code and reason,
//! so callers can tell a `410 Gone` (relist) from a `403` (back off) without parsing text.

use std::fmt;

/// A status returned by the API server for a failed request or in a watch `ERROR` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiStatus {
    /// HTTP status code (410 for Gone/Expired).
    pub code: u16,
    /// Machine-readable reason (`Expired`, `Gone`, `NotFound`, `Timeout`, ...).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Reasons of the causes in `details.causes`, if any.
    pub causes: Vec<String>,
}

impl From<&kube_core::Status> for ApiStatus {
    fn from(s: &kube_core::Status) -> Self {
        ApiStatus {
            code: s.code,
            reason: s.reason.clone(),
            message: s.message.clone(),
            causes: s
                .details
                .as_ref()
                .map(|d| d.causes.iter().map(|c| c.reason.clone()).collect())
                .unwrap_or_default(),
        }
    }
}

impl fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

/// An error of a list or watch call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with a failure status.
    #[error("API error: {0}")]
    Api(ApiStatus),
    /// The request never got an answer (connection refused or reset, TLS, timeout).
    #[error("transport error: {0}")]
    Transport(String),
    /// A response or event could not be decoded.
    #[error("decode error: {0}")]
    Decode(String),
    /// A watch stream ended in a way the protocol does not allow (for example a
    /// WatchList stream that closed before its `initial-events-end` bookmark).
    #[error("watch protocol error: {0}")]
    Protocol(String),
    /// An informer was started outside a tokio runtime.
    #[error("no tokio runtime: start informers from within a tokio runtime")]
    NoRuntime,
    /// A setting that must come before `start` was changed after it.
    #[error("the informer has already started")]
    AlreadyStarted,
    /// The informer, factory or queue was shut down.
    #[error("shut down")]
    ShutDown,
    /// `for_resource` was asked for a resource nobody registered.
    #[error("no informer found for {0}")]
    NoInformerForResource(crate::generic::Gvr),
}

impl Error {
    /// True for `410 Gone` / reason `Expired` or `Gone`: the requested resourceVersion is
    /// older than what the server keeps, so the client must relist.
    pub fn is_expired(&self) -> bool {
        matches!(self, Error::Api(s) if s.code == 410 || s.reason == "Expired" || s.reason == "Gone")
    }

    /// True when the server answered that the requested resourceVersion is newer than
    /// anything it has ("Too large resource version").
    pub fn is_too_large_resource_version(&self) -> bool {
        matches!(self, Error::Api(s) if s.causes.iter().any(|c| c == "ResourceVersionTooLarge")
            || (s.code == 504 && s.message.contains("Too large resource version")))
    }

    /// True when the server could not be reached at all, or asked the client to slow down.
    /// The reflector retries the watch after a backoff instead of relisting.
    pub fn is_retriable_watch_start(&self) -> bool {
        match self {
            Error::Transport(_) => true,
            Error::Api(s) => s.code == 429 || s.code == 503,
            _ => false,
        }
    }
}

impl From<kube_client::Error> for Error {
    fn from(e: kube_client::Error) -> Self {
        match e {
            kube_client::Error::Api(s) => Error::Api(ApiStatus::from(&*s)),
            kube_client::Error::SerdeError(e) => Error::Decode(e.to_string()),
            other => Error::Transport(other.to_string()),
        }
    }
}

/// The lister's error for a missing object, like client-go's `errors.NewNotFound`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{resource} \"{name}\" not found")]
pub struct NotFound {
    /// The resource (plural) the lister serves.
    pub resource: String,
    /// The name that was asked for.
    pub name: String,
}
