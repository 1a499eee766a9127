//! [`ListerWatcher`] over `kube_client::Api<K>`: kubeconfig, in-cluster config, TLS and
//! authentication all come from kube-client.
//!
//! Invariants: requests map one to one onto [`ListOptions`] / [`WatchOptions`]; a page
//! requested with a continue token never also sends a resourceVersion. The page a list
//! response's continue token names is requested while that response decodes (see
//! `page_prefetch`), and answers the next `list` asking for it.

use std::fmt::Debug;
use std::marker::PhantomData;

use kube_client::{Api, Client};
use kube_core::params::{ListParams, WatchParams};
use kube_core::request::Error as BuildError;
use kube_core::{Request, Resource};
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::json_page_stream;
use crate::lean::LeanPartialObjectMeta;
use crate::lister_watcher::{ListOptions, ListPage, ListerWatcher, PageInParts, WatchOptions, WatchStream};
use crate::page_parts::{ListBytes, PieceBounds};
use crate::page_prefetch::{PrefetchSlot, READ_AHEAD};
use crate::proto::Message;
use crate::proto_page_stream;
use crate::exact_json::VecSizing;
use crate::watch_events::watch_events;

/// Lists and watches full objects through a `kube_client::Api<K>` (already scoped to a
/// namespace or to all namespaces).
#[derive(Clone)]
pub struct KubeListerWatcher<K> {
    target: Target,
    protobuf: Option<&'static Message>,
    sizing: VecSizing,
    resource: PhantomData<fn() -> K>,
}

impl<K: Resource> KubeListerWatcher<K> {
    /// Lists and watches what `api` addresses (its client, resource and namespace), in JSON;
    /// decoded objects' `Vec`s are allocated at their lengths ([`VecSizing::Exact`]).
    pub fn new(api: Api<K>) -> Self {
        KubeListerWatcher { target: Target::of(api), protobuf: None, sizing: VecSizing::Exact, resource: PhantomData }
    }

    /// How objects decoded from JSON size their `Vec`s. [`VecSizing::Exact`] (the default)
    /// scans each text once first, so that serde's `Vec`s keep no slack (≈10% of a
    /// k8s-openapi Pod's heap, for ≈2% more decoding time); [`VecSizing::Grown`] suits types
    /// that size their collections themselves (the lean types box their slices at their
    /// lengths) or ignore size hints (`serde_json::Value`). Protobuf sizes them exactly.
    pub fn with_sizing(mut self, sizing: VecSizing) -> Self {
        self.sizing = sizing;
        self
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

/// Builds a list request (of full objects or of metadata) from a `Request` and its params.
type BuildList = fn(&Request, &ListParams) -> Result<http::Request<Vec<u8>>, BuildError>;

/// What an `Api` addresses: its client, and its resource's URL as a kube `Request` builder;
/// the next list page, when one is being fetched ahead; and the bytes the list in progress
/// has delivered. A clone starts with no page fetched ahead and no list in progress.
struct Target {
    client: Client,
    request: Request,
    next_page: PrefetchSlot,
    list_bytes: ListBytes,
}

impl Clone for Target {
    fn clone(&self) -> Self {
        Target { client: self.client.clone(), request: self.request.clone(), next_page: self.next_page.clone(), list_bytes: ListBytes::default() }
    }
}

impl Target {
    fn of<K: Resource>(api: Api<K>) -> Self {
        Target { request: Request::new(api.resource_url()), client: api.into_client(), next_page: PrefetchSlot::default(), list_bytes: ListBytes::default() }
    }

    /// Lists the page `opts` asks for, with a request made by `build`; with `protobuf`,
    /// asks for protobuf (and reads JSON if the server answers with that). The next page's
    /// request is sent as soon as this page's continue token is read, before its items
    /// are decoded. A page (JSON or protobuf) decodes as its body arrives, in pieces on
    /// blocking threads, and is returned at its head, its items handed over in parts as the
    /// pieces decode. A request without a continue token starts a new list, whose pages'
    /// bounds (see `page_parts`) grow with the bytes its pages deliver.
    async fn list<T>(&self, opts: &ListOptions, build: BuildList, protobuf: Option<&'static Message>, sizing: VecSizing) -> Result<PageInParts<T>, Error>
    where
        T: DeserializeOwned + Send + 'static,
    {
        let request = build(&self.request, &list_params(opts)).map_err(kube_client::Error::BuildRequest)?;
        if opts.continue_token.is_none() {
            self.list_bytes.restart();
        }
        let response = self.next_page.send(&self.client, request, protobuf).await?;
        let (client, builder, starter) = (self.client.clone(), self.request.clone(), self.next_page.starter());
        let delivered = self.list_bytes.clone();
        let next_opts = opts.clone();
        let fetch_next = move |token: Option<&str>| {
            let Some(token) = token else { return };
            let next = ListOptions { continue_token: Some(token.to_owned()), ..next_opts };
            // A request that does not build is not fetched ahead; asked for, it fails then.
            if let Ok(request) = build(&builder, &list_params(&next)) {
                starter.start(&client, request, protobuf, READ_AHEAD.limit(delivered.get()));
            }
        };
        let chunks = self.list_bytes.counted(response.body.into_chunks());
        let bounds = PieceBounds::of_list(self.list_bytes.clone());
        match response.protobuf {
            Some(message) => proto_page_stream::decode_page(chunks, message, bounds, fetch_next).await,
            None => json_page_stream::decode_page(chunks, bounds, sizing, fetch_next).await,
        }
    }

    /// Sends a watch request built by `self.request` (`name` tags it, as kube's `Api` does).
    async fn watch<T>(&self, req: Result<http::Request<Vec<u8>>, BuildError>, name: &'static str, protobuf: Option<&'static Message>, sizing: VecSizing) -> Result<WatchStream<T>, Error>
    where
        T: DeserializeOwned + Send + 'static,
    {
        watch_events(&self.client, req.map_err(kube_client::Error::BuildRequest)?, name, protobuf, sizing).await
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
        self.target.list(opts, Request::list, self.protobuf, self.sizing).await?.gathered().await
    }

    async fn list_in_parts(&self, opts: &ListOptions) -> Result<PageInParts<K>, Error> {
        self.target.list(opts, Request::list, self.protobuf, self.sizing).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<K>, Error> {
        self.target.watch(self.target.request.watch(&watch_params(opts), &opts.resource_version), "watch", self.protobuf, self.sizing).await
    }
}

impl<K> ListerWatcher<LeanPartialObjectMeta<K>> for MetadataListerWatcher<K>
where
    K: Resource + Send + Sync + 'static,
{
    async fn list(&self, opts: &ListOptions) -> Result<ListPage<LeanPartialObjectMeta<K>>, Error> {
        self.target.list(opts, Request::list_metadata, None, VecSizing::Grown).await?.gathered().await
    }

    async fn list_in_parts(&self, opts: &ListOptions) -> Result<PageInParts<LeanPartialObjectMeta<K>>, Error> {
        self.target.list(opts, Request::list_metadata, None, VecSizing::Grown).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchStream<LeanPartialObjectMeta<K>>, Error> {
        let req = self.target.request.watch_metadata(&watch_params(opts), &opts.resource_version);
        self.target.watch(req, "watch_metadata", None, VecSizing::Grown).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_client::client::Body;

    use super::*;
    use crate::parallel::MIN_BYTES_PER_THREAD;

    /// A server of three pages of one ConfigMap each (tokens `p2`, `p3`; the second page
    /// large enough to decode on a blocking thread) that records the continue token of
    /// every request it gets; a request for page `gone` answers 410.
    fn paged_server() -> (Client, Arc<Mutex<Vec<String>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let service = tower::service_fn(move |req: http::Request<Body>| {
            let query = req.uri().query().unwrap_or("").to_string();
            let token = query.split('&').find_map(|kv| kv.strip_prefix("continue=")).unwrap_or("").to_string();
            seen.lock().unwrap().push(token.clone());
            async move {
                let (status, body) = match token.as_str() {
                    "gone" => (410, r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old"}"#.to_string()),
                    t => {
                        let (name, next) = match t {
                            "" => ("a", "p2"),
                            "p2" => ("b", "p3"),
                            _ => ("c", ""),
                        };
                        let data = if name == "b" { "x".repeat(MIN_BYTES_PER_THREAD) } else { String::new() };
                        (200, format!(r#"{{"metadata":{{"resourceVersion":"9","continue":"{next}"}},"items":[{{"metadata":{{"name":"{name}"}},"data":{{"d":"{data}"}}}}]}}"#))
                    }
                };
                Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(Body::from(body.into_bytes())).unwrap())
            }
        });
        (Client::new(service, "default"), asked)
    }

    /// A server whose lists and watches hold one Pod of three containers.
    fn pod_server() -> Client {
        let pod = r#"{"metadata":{"name":"p","namespace":"n","resourceVersion":"5"},"spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}}"#;
        let service = tower::service_fn(move |req: http::Request<Body>| {
            let watch = req.uri().query().unwrap_or("").contains("watch=true");
            async move {
                let body = if watch {
                    format!("{{\"type\":\"ADDED\",\"object\":{pod}}}\n")
                } else {
                    format!(r#"{{"metadata":{{"resourceVersion":"5"}},"items":[{pod}]}}"#)
                };
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::from(body.into_bytes())))
            }
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn listed_and_watched_objects_vecs_are_sized_as_asked() {
        use k8s_openapi::api::core::v1::Pod;
        use futures::StreamExt as _;
        let containers = |pod: &Pod| {
            let containers = &pod.spec.as_ref().unwrap().containers;
            (containers.len(), containers.capacity())
        };
        for (sizing, capacity) in [(VecSizing::Exact, 3), (VecSizing::Grown, 4)] {
            let lw = KubeListerWatcher::new(Api::<Pod>::all(pod_server())).with_sizing(sizing);
            let listed = lw.list(&ListOptions::default()).await.unwrap();
            assert_eq!(containers(&listed.items[0]), (3, capacity), "{sizing:?}");
            let mut watched = lw.watch(&WatchOptions::default()).await.unwrap();
            let Some(Ok(kube_core::WatchEvent::Added(pod))) = watched.next().await else { panic!("an added Pod") };
            assert_eq!(containers(&pod), (3, capacity), "{sizing:?}");
        }
    }

    async fn requests_for(asked: &Mutex<Vec<String>>, token: &str, count: usize) {
        for _ in 0..200 {
            if asked.lock().unwrap().iter().filter(|t| *t == token).count() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("no {count} requests for {token:?}: {:?}", asked.lock().unwrap());
    }

    fn page(token: Option<&str>) -> ListOptions {
        ListOptions { limit: Some(1), continue_token: token.map(str::to_owned), ..Default::default() }
    }

    fn names(page: &ListPage<ConfigMap>) -> Vec<&str> {
        page.items.iter().filter_map(|c| c.metadata.name.as_deref()).collect()
    }

    #[tokio::test]
    async fn a_lists_pages_count_the_bytes_it_delivered_and_a_new_list_starts_again() {
        let (client, _) = paged_server();
        let lw = KubeListerWatcher::new(Api::<ConfigMap>::all(client));
        let body = |name: &str, next: &str, data: &str| format!(r#"{{"metadata":{{"resourceVersion":"9","continue":"{next}"}},"items":[{{"metadata":{{"name":"{name}"}},"data":{{"d":"{data}"}}}}]}}"#).len();
        let (first, second) = (body("a", "p2", ""), body("b", "p3", &"x".repeat(MIN_BYTES_PER_THREAD)));
        lw.list(&page(None)).await.unwrap();
        assert_eq!(lw.target.list_bytes.get(), first);
        lw.list(&page(Some("p2"))).await.unwrap();
        assert_eq!(lw.target.list_bytes.get(), first + second, "a next page adds to its list");
        lw.list(&page(None)).await.unwrap();
        assert_eq!(lw.target.list_bytes.get(), first, "a list without a token starts again");
        assert_eq!(lw.clone().target.list_bytes.get(), 0, "a clone has no list in progress");
    }

    #[tokio::test]
    async fn the_next_page_is_requested_while_this_one_decodes_and_answers_the_next_list() {
        let (client, asked) = paged_server();
        let lw = KubeListerWatcher::new(Api::<ConfigMap>::all(client));
        let first = lw.list(&page(None)).await.unwrap();
        assert_eq!((names(&first), first.continue_token.as_deref()), (vec!["a"], Some("p2")));
        // Requested before anyone asked for it.
        requests_for(&asked, "p2", 1).await;
        let second = lw.list(&page(Some("p2"))).await.unwrap();
        assert_eq!((names(&second), second.continue_token.as_deref()), (vec!["b"], Some("p3")));
        let third = lw.list(&page(Some("p3"))).await.unwrap();
        assert_eq!((names(&third), third.continue_token.as_deref()), (vec!["c"], None));
        assert_eq!(*asked.lock().unwrap(), ["", "p2", "p3"], "each page requested once, in order, nothing after the last");

        // Another request in between: the page fetched ahead is not used for it, and the
        // page it was for is requested again when asked for.
        let (client, asked) = paged_server();
        let lw = KubeListerWatcher::new(Api::<ConfigMap>::all(client));
        lw.list(&page(None)).await.unwrap();
        requests_for(&asked, "p2", 1).await;
        let again = lw.list(&page(None)).await.unwrap();
        assert_eq!(names(&again), ["a"]);
        requests_for(&asked, "p2", 2).await;
        // A clone starts without the fetch ahead: it sends its own request.
        let from_clone = lw.clone().list(&page(Some("p2"))).await.unwrap();
        assert_eq!(names(&from_clone), ["b"]);
        requests_for(&asked, "p2", 3).await;
        let unpaged = lw.list(&ListOptions::default()).await.unwrap();
        assert_eq!(names(&unpaged), ["a"]);
        assert_eq!(asked.lock().unwrap().iter().filter(|t| t.is_empty()).count(), 3, "the list without a limit is its own request");
    }

    #[tokio::test]
    async fn a_page_fetched_ahead_answers_with_its_own_error() {
        let (client, asked) = paged_server();
        let service_client = client.clone();
        let lw = KubeListerWatcher::new(Api::<ConfigMap>::all(client));
        // A first page whose token is "gone": served by a list of its own below.
        lw.target.next_page.starter().start(&service_client, Request::list(&lw.target.request, &list_params(&page(Some("gone")))).unwrap(), None, READ_AHEAD.ceiling);
        let err = lw.list(&page(Some("gone"))).await.unwrap_err();
        assert!(err.is_expired(), "{err}");
        assert_eq!(*asked.lock().unwrap(), ["gone"], "answered by the fetch ahead, not sent twice");
    }
}
