//! Watch requests over HTTP/1 connections of their own, each driven by its response body.
//!
//! hyper's pooled client runs every connection on a task of its own, which hands a response
//! body over one chunk per poll through a one-slot channel: a chunk taken wakes the
//! connection's task, which then reads and sends the next. A watch body is thousands of
//! small chunks (an API server writes through a 2 KB buffer, so a WatchList of 100,000
//! ConfigMaps is ≈50,000 of them), and each cost a round between two tasks. Here a watch
//! request gets a connection of its own, and whoever polls the response body polls the
//! connection too, in the same call: the chunk after the one taken comes out of the
//! connection's read buffer at once, without a task in between.
//!
//! Invariants:
//! - Only requests whose query asks for a watch (`watch=true` or `watch=1`) take this path;
//!   every other request goes to the pooled client unchanged.
//! - The connection is made by the connector the pooled client uses (TLS, timeouts) and
//!   reads into buffers of at most the same size; the request goes out in origin form with
//!   a `Host` header, as the pooled client sends it.
//! - The connection lives exactly as long as the response: dropping the body (or the
//!   response future) closes it, and it is never reused for another request.
//! - Until the response head has arrived the response future drives the connection; from
//!   then on the body does, and it ends (or fails) when the connection does.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::header::{HOST, HeaderValue};
use http::uri::PathAndQuery;
use http::{Request, Response, Uri};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use kube_client::client::Body;
use tower::{BoxError, Service, ServiceExt};

/// Sends watch requests over connections of their own made by `connector`, and every other
/// request through `pooled`.
#[derive(Clone)]
pub(crate) struct WatchConnections<C, P> {
    connector: C,
    pooled: P,
    read_buffer_max: usize,
}

impl<C, P> WatchConnections<C, P> {
    /// Watches over connections from `connector` that read into at most `read_buffer_max`
    /// bytes at a time; everything else through `pooled`.
    pub(crate) fn new(connector: C, pooled: P, read_buffer_max: usize) -> Self {
        WatchConnections { connector, pooled, read_buffer_max }
    }
}

/// Whether `uri`'s query asks for a watch, as kube's requests and client-go's spell it.
fn is_watch(uri: &Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

impl<C, P> Service<Request<Body>> for WatchConnections<C, P>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Response: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
    P: Service<Request<Body>, Response = Response<Incoming>>,
    P::Error: Into<BoxError>,
    P::Future: Send + 'static,
{
    type Response = Response<ResponseBody<C::Response>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.pooled.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if is_watch(request.uri()) {
            Box::pin(over_own_connection(self.connector.clone(), request, self.read_buffer_max))
        } else {
            let response = self.pooled.call(request);
            Box::pin(async move { Ok(response.await.map_err(Into::into)?.map(Either::Left)) })
        }
    }
}

/// Turns `request` into origin form with a `Host` header; returns the URI to connect to.
fn origin_form(request: &mut Request<Body>) -> Result<Uri, BoxError> {
    let uri = request.uri().clone();
    let authority = uri.authority().ok_or_else(|| format!("watch request without a host: {uri}"))?;
    if !request.headers().contains_key(HOST) {
        let host = match authority.port() {
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_owned(),
        };
        request.headers_mut().insert(HOST, HeaderValue::from_str(&host)?);
    }
    *request.uri_mut() = Uri::from(uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/")));
    Ok(uri)
}

/// Sends `request` over a new connection and returns its response once the head has come;
/// the body then drives the connection.
async fn over_own_connection<C>(connector: C, mut request: Request<Body>, read_buffer_max: usize) -> Result<Response<ResponseBody<C::Response>>, BoxError>
where
    C: Service<Uri>,
    C::Response: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    C::Error: Into<BoxError>,
{
    let uri = origin_form(&mut request)?;
    let io = connector.oneshot(uri).await.map_err(Into::into)?;
    let mut builder = http1::Builder::new();
    builder.max_buf_size(read_buffer_max);
    let (mut sender, connection) = builder.handshake::<_, Body>(io).await?;
    let mut connection = Some(connection);
    let head = {
        let mut response = pin!(sender.send_request(request));
        poll_fn(|cx| {
            if let Poll::Ready(head) = response.as_mut().poll(cx) {
                return Poll::Ready(head);
            }
            if let Some(conn) = connection.as_mut() {
                if let Poll::Ready(ended) = Pin::new(conn).poll(cx) {
                    connection = None;
                    ended?;
                }
            }
            // The connection has read what it could: the response has its head by now or
            // waits for more (the connection's socket wakes this task); a connection that
            // ended without one fails the response.
            response.as_mut().poll(cx)
        })
        .await?
    };
    Ok(head.map(|body| Either::Right(Box::new(ConnectionBody { body, connection, _sender: sender }))))
}

/// A response body: from the pooled client (left), or from a connection of its own that it
/// drives (right; boxed, as a connection's state is many times the size of a pooled body).
pub(crate) type ResponseBody<T> = Either<Incoming, Box<ConnectionBody<T>>>;

/// A body that polls its own connection whenever it has no frame ready.
pub(crate) struct ConnectionBody<T: hyper::rt::Read + hyper::rt::Write> {
    body: Incoming,
    /// `None` once the connection has ended (its future must not be polled again).
    connection: Option<http1::Connection<T, Body>>,
    /// Kept so that the connection does not close as idle while the body is read.
    _sender: http1::SendRequest<Body>,
}

impl<T> HttpBody for ConnectionBody<T>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        loop {
            if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
                return Poll::Ready(frame);
            }
            let Some(connection) = this.connection.as_mut() else {
                // An ended connection has dropped the body's sender: the body's next poll
                // gives its end or error, and its waker is registered meanwhile.
                return Poll::Pending;
            };
            match Pin::new(connection).poll(cx) {
                Poll::Ready(ended) => {
                    this.connection = None;
                    if let Err(e) = ended {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                // The connection waits on its socket or on room for the next chunk: either
                // it has just handed one over, or both wakers are registered.
                Poll::Pending => return Pin::new(&mut this.body).poll_frame(cx),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::informer_client;

    /// Reads one request head from `conn`; `None` when the peer closed the connection.
    async fn request_head(conn: &mut TcpStream) -> Option<String> {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if conn.read(&mut byte).await.unwrap() == 0 {
                assert!(head.is_empty(), "the request ended within its head");
                return None;
            }
            head.push(byte[0]);
        }
        Some(String::from_utf8(head).unwrap())
    }

    fn get(path: &str) -> Request<Vec<u8>> {
        Request::get(path).body(Vec::new()).unwrap()
    }

    async fn body_text(response: Response<Body>) -> String {
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[test]
    fn watch_requests_are_told_apart_by_their_query() {
        for (uri, watch) in [
            ("http://h/api/v1/pods?watch=true", true),
            ("http://h/api/v1/pods?limit=5&watch=1&sendInitialEvents=true", true),
            ("http://h/api/v1/pods?watch=false", false),
            ("http://h/api/v1/pods?limit=500", false),
            ("http://h/api/v1/watch", false),
            ("http://h/api/v1/pods?nowatch=true", false),
        ] {
            assert_eq!(is_watch(&uri.parse().unwrap()), watch, "{uri}");
        }
    }

    /// Lists share one pooled connection; a watch gets a connection of its own, in origin
    /// form with a `Host` header, and its thousands of small chunks arrive whole and in order.
    #[tokio::test]
    async fn a_watch_has_a_connection_of_its_own_and_reads_every_chunk() {
        const EVENTS: usize = 5000;
        let line = |i: usize| format!("{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"cm-{i}\"}}}}}}\n");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut pooled, _) = listener.accept().await.unwrap();
            let mut heads = Vec::new();
            for _ in 0..2 {
                heads.push(request_head(&mut pooled).await.unwrap());
                pooled.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlist").await.unwrap();
            }
            let (mut own, _) = listener.accept().await.unwrap();
            heads.push(request_head(&mut own).await.unwrap());
            own.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").await.unwrap();
            for i in 0..EVENTS {
                let line = line(i);
                own.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).await.unwrap();
            }
            own.write_all(b"0\r\n\r\n").await.unwrap();
            heads
        });
        let client = informer_client(kube_client::Config::new(format!("http://{addr}").parse().unwrap())).unwrap();
        for _ in 0..2 {
            assert_eq!(body_text(client.send(get("/api/v1/configmaps?limit=500").map(Body::from)).await.unwrap()).await, "list");
        }
        let watch = client.send(get("/api/v1/configmaps?watch=true&sendInitialEvents=true").map(Body::from)).await.unwrap();
        let mut frames = 0;
        let mut text = Vec::new();
        let mut body = watch.into_body();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                frames += 1;
                text.extend_from_slice(&data);
            }
        }
        assert_eq!(String::from_utf8(text).unwrap(), (0..EVENTS).map(line).collect::<String>());
        assert!(frames > 1, "the body came in pieces");
        let heads = server.await.unwrap();
        assert!(heads[0].starts_with("GET /api/v1/configmaps?limit=500 HTTP/1.1\r\n"), "{}", heads[0]);
        assert!(heads[2].starts_with("GET /api/v1/configmaps?watch=true&sendInitialEvents=true HTTP/1.1\r\n"), "{}", heads[2]);
        assert!(heads[2].to_ascii_lowercase().contains(&format!("\r\nhost: {addr}\r\n")), "{}", heads[2]);
    }

    /// Dropping a watch's body closes its connection, while the server is still sending.
    #[tokio::test]
    async fn dropping_the_body_closes_its_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            request_head(&mut conn).await.unwrap();
            conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\n\r\n").await.unwrap();
            // The client sends nothing more: the next read sees the connection closed.
            tokio::time::timeout(Duration::from_secs(10), request_head(&mut conn)).await.expect("the connection was left open")
        });
        let client = informer_client(kube_client::Config::new(format!("http://{addr}").parse().unwrap())).unwrap();
        let response = client.send(get("/api/v1/pods?watch=1").map(Body::from)).await.unwrap();
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"ab\n");
        drop(body);
        assert_eq!(server.await.unwrap(), None);
    }

    /// A watch whose connection closes before a response fails; so does one cut short
    /// within its chunked body.
    #[tokio::test]
    async fn connections_that_end_early_fail_the_watch() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            request_head(&mut conn).await.unwrap();
            drop(conn);
            let (mut conn, _) = listener.accept().await.unwrap();
            request_head(&mut conn).await.unwrap();
            conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\n\r\n5\r\nab").await.unwrap();
        });
        let client = informer_client(kube_client::Config::new(format!("http://{addr}").parse().unwrap())).unwrap();
        assert!(client.send(get("/api/v1/pods?watch=1").map(Body::from)).await.is_err());
        let mut body = client.send(get("/api/v1/pods?watch=1").map(Body::from)).await.unwrap().into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"ab\n");
        server.await.unwrap();
        let mut failed = false;
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "a body cut short ended as if whole");
    }
}
