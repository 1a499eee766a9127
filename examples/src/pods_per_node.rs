//! A sample controller: in every namespace with scheduled Pods it keeps one ConfigMap,
//! [`CONFIG_MAP_NAME`], whose data maps each node to the sorted, comma-separated names of
//! that namespace's Pods on it, and it updates the ConfigMap as Pods come, move and go.
//!
//! It reads only from the generated listers (`factory.core().v1().pods()` and
//! `.configmaps()`) and is driven only by their handlers; it writes through `kube::Api`.
//!
//! Invariants:
//! - Handlers only enqueue a namespace; the queue holds each namespace at most once, so a
//!   burst of Pod events costs one reconcile.
//! - [`Controller::reconcile`] is idempotent: it compares the desired data with the cached
//!   ConfigMap and writes only when they differ. Updates carry the cached resourceVersion, so
//!   a write from a stale cache fails with 409 Conflict and the namespace is retried.
//! - Nothing is reconciled before both caches have synced.
//! - A namespace whose Pods are all gone (or unscheduled, or terminating) loses its ConfigMap.
//! - The controller repairs drift: a changed or deleted ConfigMap is reconciled back.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use informer_gen_sample::InformerFactoryExt;
use informer_gen_sample::core::v1::configmaps::ConfigMapLister;
use informer_gen_sample::core::v1::pods::PodLister;
use informer_runtime::reexports::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use informer_runtime::reexports::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use informer_runtime::reexports::kube_client::api::{DeleteParams, PostParams};
use informer_runtime::reexports::kube_client::{Api, Client};
use informer_runtime::{Event, EventHandler, FactoryOptions, Selector, SharedInformerFactory};
use tokio::sync::mpsc;

/// The name of the ConfigMap the controller keeps in each namespace.
pub const CONFIG_MAP_NAME: &str = "pods-per-node";
/// The label marking the ConfigMaps this controller owns.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "pods-per-node");

/// A queue of namespaces to reconcile, each at most once.
#[derive(Clone)]
struct NamespaceQueue {
    queued: Arc<parking_lot::Mutex<HashSet<String>>>,
    tx: mpsc::UnboundedSender<String>,
}

impl NamespaceQueue {
    fn new() -> (Self, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (NamespaceQueue { queued: Arc::new(parking_lot::Mutex::new(HashSet::new())), tx }, rx)
    }

    fn add(&self, ns: &str) {
        if self.queued.lock().insert(ns.to_string()) {
            let _ = self.tx.send(ns.to_string());
        }
    }

    /// Marks `ns` as taken off the queue: events from now on enqueue it again.
    fn done(&self, ns: &str) {
        self.queued.lock().remove(ns);
    }
}

struct PodEvents(NamespaceQueue);

impl EventHandler<Pod> for PodEvents {
    fn on_event(&mut self, event: &Event<Pod>) {
        let pod = event.object();
        if let Some(ns) = pod.metadata.namespace.as_deref() {
            self.0.add(ns);
        }
    }
}

struct ConfigMapEvents(NamespaceQueue);

impl EventHandler<ConfigMap> for ConfigMapEvents {
    fn on_event(&mut self, event: &Event<ConfigMap>) {
        let cm = event.object();
        if cm.metadata.name.as_deref() == Some(CONFIG_MAP_NAME) {
            if let Some(ns) = cm.metadata.namespace.as_deref() {
                self.0.add(ns);
            }
        }
    }
}

/// Node name → sorted, comma-separated Pod names, for the scheduled, non-terminating Pods.
pub fn desired_data(pods: &[Arc<Pod>]) -> BTreeMap<String, String> {
    let mut by_node: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for pod in pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty());
        if let (Some(node), None, Some(name)) = (node, &pod.metadata.deletion_timestamp, pod.metadata.name.as_deref()) {
            by_node.entry(node.to_string()).or_default().push(name);
        }
    }
    by_node
        .into_iter()
        .map(|(node, mut names)| {
            names.sort_unstable();
            (node, names.join(","))
        })
        .collect()
}

/// What one reconcile did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The ConfigMap already matched.
    Unchanged,
    /// The ConfigMap was created.
    Created,
    /// The ConfigMap was updated.
    Updated,
    /// The ConfigMap was deleted (no Pods left).
    Deleted,
}

/// The controller: generated listers for reads, a client for writes.
pub struct Controller {
    factory: SharedInformerFactory,
    pods: PodLister,
    config_maps: ConfigMapLister,
    client: Client,
    queue: NamespaceQueue,
    rx: mpsc::UnboundedReceiver<String>,
}

impl Controller {
    /// Sets up the informers (all namespaces) and handlers; nothing runs before [`run`](Self::run).
    pub fn new(client: Client) -> Result<Self, informer_runtime::Error> {
        let factory = informer_gen_sample::new_factory(client.clone(), FactoryOptions::default());
        let (queue, rx) = NamespaceQueue::new();
        let pods = factory.core().v1().pods();
        let config_maps = factory.core().v1().configmaps();
        pods.informer()?.add_event_handler(PodEvents(queue.clone()))?;
        config_maps.informer()?.add_event_handler(ConfigMapEvents(queue.clone()))?;
        Ok(Controller { pods: pods.lister()?, config_maps: config_maps.lister()?, factory, client, queue, rx })
    }

    /// Brings the namespace's ConfigMap in line with its Pods, as the caches see them.
    pub async fn reconcile(&self, ns: &str) -> Result<Outcome, informer_runtime::reexports::kube_client::Error> {
        let desired = desired_data(&self.pods.pods(ns).list(&Selector::default()));
        let current = self.config_maps.configmaps(ns).get(CONFIG_MAP_NAME).ok();
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        match current {
            None if desired.is_empty() => Ok(Outcome::Unchanged),
            Some(cm) if desired.is_empty() => {
                let precondition = informer_runtime::reexports::kube_client::api::Preconditions { resource_version: cm.metadata.resource_version.clone(), uid: None };
                api.delete(CONFIG_MAP_NAME, &DeleteParams { preconditions: Some(precondition), ..Default::default() }).await?;
                Ok(Outcome::Deleted)
            }
            Some(cm) if cm.data.as_ref() == Some(&desired) => Ok(Outcome::Unchanged),
            Some(cm) => {
                let mut next = (*cm).clone();
                next.data = Some(desired);
                api.replace(CONFIG_MAP_NAME, &PostParams::default(), &next).await?;
                Ok(Outcome::Updated)
            }
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(CONFIG_MAP_NAME.into()),
                        namespace: Some(ns.into()),
                        labels: Some([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into()),
                        ..Default::default()
                    },
                    data: Some(desired),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await?;
                Ok(Outcome::Created)
            }
        }
    }

    /// Starts the informers, waits for their caches, then reconciles enqueued namespaces until
    /// `shutdown` completes; stops the informers before returning.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), informer_runtime::Error> {
        self.factory.start()?;
        let synced = self.factory.wait_for_cache_sync().await;
        if synced.values().any(|ok| !ok) {
            self.factory.shutdown().await;
            return Err(informer_runtime::Error::Transport(format!("caches never synced: {synced:?}")));
        }
        tracing::info!("caches synced; reconciling");
        tokio::pin!(shutdown);
        loop {
            let ns = tokio::select! {
                _ = &mut shutdown => break,
                ns = self.rx.recv() => match ns { Some(ns) => ns, None => break },
            };
            self.queue.done(&ns);
            match self.reconcile(&ns).await {
                Ok(outcome) => tracing::debug!(namespace = %ns, ?outcome, "reconciled"),
                Err(e) => {
                    // Conflicts (stale cache) and transient errors: try again shortly.
                    tracing::info!(namespace = %ns, error = %e, "reconcile failed; retrying");
                    let queue = self.queue.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        queue.add(&ns);
                    });
                }
            }
        }
        self.factory.shutdown().await;
        Ok(())
    }
}
