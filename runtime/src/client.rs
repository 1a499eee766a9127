//! A kube [`Client`] for informers: kube-client's own service stack over HTTP/1
//! connections whose read buffers stay small, with each watch on a connection of its own
//! that its response body drives.
//!
//! Every informer holds one HTTP/1 connection open for its watch, and hyper grows a
//! connection's read buffer up to ≈408 KiB while a list or a burst of events arrives,
//! then keeps that capacity for as long as the connection lives. Body chunks are slices of
//! that buffer, so each chunk still held (read ahead, or in a batch being decoded) also
//! keeps a whole buffer alive. [`informer_client`] caps the buffer at
//! [`HTTP1_READ_BUFFER_MAX`] instead. A watch body arrives in thousands of small chunks,
//! which hyper's pooled client hands over one per round between two tasks; a watch here
//! reads them in the task that polls its body (see `watch_connection`).
//!
//! Invariants:
//! - The stack is kube-client's for the same [`Config`]: the connector with its TLS
//!   settings (rustls) and connect / read / write timeouts, the base URI, the retry of
//!   server errors when `default_retry` is set, authentication, and the extra headers. It
//!   leaves out kube-client's `tracing` spans per request only.
//! - Watch requests (`watch=true`) go over connections of their own, made by the same
//!   connector and closed with their body; every other request over the pooled ones.
//! - A config with a proxy gets kube-client's own client unchanged ([`Client::try_from`]),
//!   with hyper's default read buffers.

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube_client::client::ConfigExt;
use kube_client::client::retry::RetryPolicy;
use kube_client::{Client, Config};
use tower::{BoxError, ServiceBuilder};
use tower::retry::RetryLayer;

use crate::watch_connection::WatchConnections;

/// The largest read buffer of an HTTP/1 connection of [`informer_client`], in bytes: what
/// each informer's watch connection keeps once a list has grown it. A connection reads at
/// most this much per system call, which measured no slower than 64 KiB or hyper's default
/// (≈408 KiB) on loopback, for lists of 100,000 objects and for watch events; 16 KiB was
/// 2–5% slower on such lists.
pub const HTTP1_READ_BUFFER_MAX: usize = 32 << 10;

/// A client for `config` whose HTTP/1 connections read into buffers of at most
/// [`HTTP1_READ_BUFFER_MAX`] bytes, each watch on a connection of its own that its
/// response body drives; otherwise the client [`Client::try_from`] builds.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let config = kube_client::Config::infer().await?;
/// let client = informer_runtime::informer_client(config)?;
/// let factory = informer_runtime::SharedInformerFactory::new(client);
/// # Ok(()) }
/// ```
pub fn informer_client(config: Config) -> Result<Client, kube_client::Error> {
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let tls = config.rustls_https_connector_with_connector(http)?;
    let mut connector = TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    builder.http1_max_buf_size(HTTP1_READ_BUFFER_MAX);
    let pooled = builder.build::<_, kube_client::client::Body>(connector.clone());
    let http = WatchConnections::new(connector, pooled, HTTP1_READ_BUFFER_MAX);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| RetryLayer::new(RetryPolicy::server_retry())))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A list of many read buffers' worth, served over a real socket: every object arrives
    /// whole, and the request carries the config's extra headers.
    #[tokio::test]
    async fn reads_a_body_many_times_its_read_buffer() {
        const N: usize = 3000;
        let value = "v".repeat(1000);
        let items: Vec<String> = (0..N)
            .map(|i| format!(r#"{{"metadata":{{"name":"cm-{i}","namespace":"default","resourceVersion":"{i}"}},"data":{{"k":"{value}{i}"}}}}"#))
            .collect();
        let body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#, items.join(","));
        assert!(body.len() > 40 * HTTP1_READ_BUFFER_MAX);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended before its headers did");
                head.extend_from_slice(&buf[..n]);
            }
            let response = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
            conn.write_all(response.as_bytes()).await.unwrap();
            // In pieces, so the client reads as the bytes come.
            for piece in body.as_bytes().chunks(100_000) {
                conn.write_all(piece).await.unwrap();
            }
            String::from_utf8(head).unwrap()
        });
        let mut config = Config::new(url.parse().unwrap());
        config.headers.push((http::HeaderName::from_static("x-informer-test"), http::HeaderValue::from_static("yes")));
        let client = informer_client(config).unwrap();
        let list = kube_client::Api::<ConfigMap>::all(client).list(&Default::default()).await.unwrap();
        let head = server.await.unwrap();
        assert!(head.starts_with("GET /api/v1/configmaps"), "{head}");
        assert!(head.to_ascii_lowercase().contains("x-informer-test: yes"), "{head}");
        assert_eq!(list.items.len(), N);
        for (i, cm) in list.items.iter().enumerate() {
            assert_eq!(cm.metadata.name.as_deref(), Some(format!("cm-{i}").as_str()));
            assert_eq!(cm.data.as_ref().unwrap()["k"], format!("{value}{i}"));
        }
    }
}
