//! `watch`: prints every event of the given resources as one JSON line (see
//! `informer_gen_examples::watch_events`) and, on SIGTERM or SIGINT, writes the final cache
//! (key → resourceVersion) to `--dump` and exits 0.
//!
//! ```text
//! cargo run -p informer-gen-examples --bin watch -- pods deployments.apps certificates.cert-manager.io
//! ```
//! Resources are `plural` (core group) or `plural.group`, resolved through discovery, so any
//! CRD works; every informer is a dynamic one over `DynamicObject`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use informer_gen_examples::watch_events::EventLine;
use informer_runtime::reexports::kube_client::api::DynamicObject;
use informer_runtime::reexports::kube_client::config::{KubeConfigOptions, Kubeconfig};
use informer_runtime::reexports::kube_client::discovery::Discovery;
use informer_runtime::reexports::kube_client::{Client, Config};
use informer_runtime::reexports::kube_core::Resource;
use informer_runtime::{Event, EventHandler, FactoryOptions, ObjectKey, SharedIndexInformer, SharedInformerFactory};

#[derive(Parser)]
#[command(about = "Print the events of Kubernetes resources as JSON lines", after_help = "Examples:\n  watch pods\n  watch --namespace kube-system pods deployments.apps\n  watch --dump /tmp/cache.json certificates.cert-manager.io")]
struct Args {
    /// kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// kubeconfig context (default: the current one)
    #[arg(long)]
    context: Option<String>,
    /// Watch only this namespace (default: all)
    #[arg(long)]
    namespace: Option<String>,
    /// On SIGTERM/SIGINT, write the final cache here as one JSON object
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Resources: `pods`, `deployments.apps`, a CRD's `plural.group`
    #[arg(required = true)]
    resources: Vec<String>,
}

/// Prints each event as a JSON line.
struct Printer {
    resource: String,
}

/// The cache key (`namespace/name` or `name`) and resourceVersion of `obj`.
fn key_rv(obj: &DynamicObject) -> (String, String) {
    let key = ObjectKey::of(obj).map(|k| k.as_str().to_string()).unwrap_or_default();
    (key, obj.meta().resource_version.clone().unwrap_or_default())
}

fn print(line: &EventLine) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

impl EventHandler<DynamicObject> for Printer {
    fn on_event(&mut self, event: &Event<DynamicObject>) {
        let (kind, initial, tombstone) = match event {
            Event::Add { is_in_initial_list, .. } => ("ADDED", *is_in_initial_list, false),
            Event::Update { .. } => ("UPDATED", false, false),
            Event::Delete(d) => ("DELETED", false, d.is_tombstone()),
        };
        let (key, resource_version) = key_rv(event.object());
        print(&EventLine { kind: kind.into(), resource: self.resource.clone(), key, resource_version, initial, tombstone });
    }
}

async fn client(args: &Args) -> Result<Client, Box<dyn std::error::Error>> {
    let options = KubeConfigOptions { context: args.context.clone(), ..Default::default() };
    let config = match &args.kubeconfig {
        Some(path) => Config::from_custom_kubeconfig(Kubeconfig::read_from(path)?, &options).await?,
        None if args.context.is_some() => Config::from_kubeconfig(&options).await?,
        None => Config::infer().await?,
    };
    Ok(informer_runtime::informer_client(config)?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let client = client(&args).await?;
    let factory = SharedInformerFactory::with_options(client.clone(), FactoryOptions { namespace: args.namespace.clone(), ..Default::default() });

    let discovery = Discovery::new(client).run().await?;
    let mut informers: Vec<(String, SharedIndexInformer<DynamicObject>)> = Vec::new();
    let mut registrations = Vec::new();
    for arg in &args.resources {
        let (plural, group) = arg.split_once('.').unwrap_or((arg.as_str(), ""));
        let found = discovery
            .get(group)
            .and_then(|g| g.recommended_resources().into_iter().find(|(ar, _)| ar.plural == plural))
            .ok_or_else(|| format!("resource {arg:?} is not served by this cluster"))?;
        let (ar, caps) = found;
        let informer = factory.dynamic_informer(&ar, caps.scope)?;
        registrations.push(informer.add_event_handler(Printer { resource: arg.clone() })?);
        informers.push((arg.clone(), informer));
    }
    factory.start()?;
    let synced = factory.wait_for_cache_sync().await;
    if let Some((name, _)) = synced.iter().find(|(_, ok)| !**ok) {
        return Err(format!("informer {name} never synced").into());
    }
    for registration in &registrations {
        registration.wait_for_sync().await;
    }
    print(&EventLine { kind: "SYNCED".into(), resource: String::new(), key: String::new(), resource_version: String::new(), initial: false, tombstone: false });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    if let Some(path) = &args.dump {
        let several = informers.len() > 1;
        let mut cache = BTreeMap::new();
        for (name, informer) in &informers {
            for obj in informer.lister().list_all() {
                let (key, rv) = key_rv(&obj);
                cache.insert(if several { format!("{name}:{key}") } else { key }, rv);
            }
        }
        std::fs::write(path, serde_json::to_vec(&cache)?)?;
    }
    factory.shutdown().await;
    Ok(())
}
