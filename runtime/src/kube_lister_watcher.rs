//! [`ListerWatcher`] over `kube_client::Api<K>`: kubeconfig, in-cluster config, TLS and
//! authentication all come from kube-client.
//!
//! Invariants: requests map one to one onto [`ListOptions`] / [`WatchOptions`]; a page
//! requested with a continue token never also sends a resourceVersion.

use std::fmt::Debug;
use std::marker::PhantomData;

use http_body_util::BodyExt;
use kube_client::client::Body;
use kube_client::{Api, Client};
use kube_core::params::{ListParams, WatchParams};
use kube_core::request::Error as BuildError;
use kube_core::{Request, Resource};
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::json_list;
use crate::lean::LeanPartialObjectMeta;
use crate::lister_watcher::{ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
use crate::proto::{self, Message};
use crate::watch_events::{accept_protobuf, api_error, is_protobuf, watch_events};

/// Lists and watches full objects through a `kube_client::Api<K>` (already scoped to a
/// namespace or to all namespaces).
#[derive(Clone)]
pub struct KubeListerWatcher<K> {
    target: Target,
    protobuf: Option<&'static Message>,
    resource: PhantomData<fn() -> K>,
}

impl<K: Resource> KubeListerWatcher<K> {
    /// Lists and watches what `api` addresses (its client, resource and namespace), in JSON.
    pub fn new(api: Api<K>) -> Self {
        KubeListerWatcher { target: Target::of(api), protobuf: None, resource: PhantomData }
    }

    /// Asks for protobuf and decodes it with `message`, the table of `K`'s kind (JSON
    /// responses are still read as JSON).
    pub fn with_protobuf(mut self, message: &'static Message) -> Self {
        self.protobuf = Some(message);
        self
    }
}

/// Lists and watches only the metadata of objects, through the API's
/// `PartialObjectMetadataList` content type, decoding each into a
/// [`LeanPartialObjectMeta<K>`].
#[derive(Clone)]
pub struct MetadataListerWatcher<K> {
    target: Target,
    resource: PhantomData<fn() -> K>,
}

impl<K: Resource> MetadataListerWatcher<K> {
    /// Lists and watches what `api` addresses (its client, resource and namespace).
    pub fn new(api: Api<K>) -> Self {
        MetadataListerWatcher { target: Target::of(api), resource: PhantomData }
    }
}

/// What an `Api` addresses: its client, and its resource's URL as a kube `Request` builder.
#[derive(Clone)]
struct Target {
    client: Client,
    request: Request,
}

impl Target {
    fn of<K: Resource>(api: Api<K>) -> Self {
        Target { request: Request::new(api.resource_url()), client: api.into_client() }
    }

    /// Sends a list request built by `self.request`; with `protobuf`, asks for protobuf (and
    /// reads JSON if the server answers with that).
    async fn list<T>(&self, req: Result<http::Request<Vec<u8>>, BuildError>, protobuf: Option<&'static Message>) -> Result<ListPage<T>, Error>
    where
        T: DeserializeOwned + Send,
    {
        let mut req = req.map_err(kube_client::Error::BuildRequest)?.map(Body::from);
        if protobuf.is_some() {
            accept_protobuf(&mut req);
        }
        req.extensions_mut().insert("list");
        let response = self.client.send(req).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(api_error(status, response).await);
        }
        let framed = protobuf.filter(|_| is_protobuf(response.headers()));
        let bytes = response.into_body().collect().await.map_err(Error::from)?.to_bytes();
        match framed {
            Some(message) => proto::decode_list(message, &bytes).map_err(|e| Error::Decode(e.to_string())),
            None => json_list::decode_list(&bytes).map_err(Error::Decode),
        }
    }

    /// Sends a watch request built by `self.request` (`name` tags it, as kube's `Api` does).
    async fn watch<T>(&self, req: Result<http::Request<Vec<u8>>, BuildError>, name: &'static str, protobuf: Option<&'static Message>) -> Result<WatchStream<T>, Error>
    where
        T: DeserializeOwned + Send + 'static,
    {
        watch_events(&self.client, req.map_err(kube_client::Error::BuildRequest)?, name, protobuf).await
    }
}

pub(crate) fn list_params(o: &ListOptions) -> ListParams {
    ListParams {
        label_selector: o.label_selector.clone(),
        field_selector: o.field_selector.clone(),
        limit: o.limit,
        continue_token: o.continue_token.clone(),
        version_match: if o.continue_token.is_some() { None } else { o.resource_version_match.clone() },
        resource_version: if o.continue_token.is_some() { None } else { o.resource_version.clone() },
        ..ListParams::default()
    }
}

pub(crate) fn watch_params(o: &WatchOptions) -> WatchParams {
    WatchParams {
        label_selector: o.label_selector.clone(),
        field_selector: o.field_selector.clone(),
        timeout: o.timeout_seconds,
        bookmarks: o.allow_watch_bookmarks || o.send_initial_events,
        send_initial_events: o.send_initial_events,
    }
}

impl<K> ListerWatcher<K> for KubeListerWatcher<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list(&self, opts: &ListOptions) -> Result<ListPage<K>, Error> {
        self.target.list(self.target.request.list(&list_params(opts)), self.protobuf).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<K>, Error> {
        self.target.watch(self.target.request.watch(&watch_params(opts), &opts.resource_version), "watch", self.protobuf).await
    }
}

impl<K> ListerWatcher<LeanPartialObjectMeta<K>> for MetadataListerWatcher<K>
where
    K: Resource + Send + Sync + 'static,
{
    async fn list(&self, opts: &ListOptions) -> Result<ListPage<LeanPartialObjectMeta<K>>, Error> {
        self.target.list(self.target.request.list_metadata(&list_params(opts)), None).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<LeanPartialObjectMeta<K>>, Error> {
        let req = self.target.request.watch_metadata(&watch_params(opts), &opts.resource_version);
        self.target.watch(req, "watch_metadata", None).await
    }
}
