//! `pods-per-node`: runs the sample controller of `informer_gen_examples::pods_per_node`
//! against the cluster of the usual kubeconfig lookup ($KUBECONFIG, ~/.kube/config,
//! in-cluster) until SIGTERM or SIGINT.

use informer_gen_examples::pods_per_node::Controller;
use informer_runtime::reexports::kube_client::Config;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = informer_runtime::informer_client(Config::infer().await?)?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    Controller::new(client)?.run(shutdown).await?;
    Ok(())
}
