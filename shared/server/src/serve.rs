//! The HTTPS listener: rustls handshakes, HTTP/1.1 with keep-alive, time
//! limits for slow clients, and a shutdown that loses no request: first a
//! drain, in which every response says `Connection: close` so that clients
//! (the API server keeps its connections to a webhook pooled) stop using
//! this server's connections at a point they know of, then the close of
//! what is left; and the same TLS accepting as a stream of connections, for
//! gRPC.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use portcullis_telemetry::error_chain;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_http::set_header::SetResponseHeaderLayer;

/// Time a client has to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits of one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to send the request headers (and, enforced by the router's
    /// timeout layer, the whole request).
    pub request_timeout: Duration,
    /// After shutdown starts, the longest the listener goes on accepting and
    /// answering (each answer closing its connection) while clients still
    /// hold connections to it.
    pub drain: Duration,
    /// Time in-flight requests get once the drain is over.
    pub shutdown_grace: Duration,
}

/// Serves `app` over TLS on `listener` until `shutdown`; then drains: goes
/// on accepting and answering, every response with `Connection: close`,
/// until no connection is left or `limits.drain` has passed; then stops
/// accepting, closes idle connections and lets in-flight requests finish
/// (up to `limits.shutdown_grace`).
///
/// Why: an HTTP/1.1 server that closes an idle keep-alive connection races
/// the client's next request on it, and the API server does not retry a
/// webhook call (a POST) that met a closed connection: under
/// `failurePolicy: Ignore` the admission goes on without the webhook. A
/// client reads `Connection: close` in a response and does not reuse the
/// connection, so no request is ever sent on a connection this server is
/// closing, but for connections left idle through the whole drain.
pub async fn serve_tls(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let draining = shutdown.clone();
    let app = app.layer(SetResponseHeaderLayer::overriding(header::CONNECTION, move |_: &_| {
        draining.is_cancelled().then_some(HeaderValue::from_static("close"))
    }));
    let (connections, graceful) = (TaskTracker::new(), GracefulShutdown::new());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.request_timeout).keep_alive(true);
    let serve = |(tcp, peer): (tokio::net::TcpStream, std::net::SocketAddr)| {
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        let http = http.clone();
        let watcher = graceful.watcher();
        connections.spawn(async move {
            let Some(tls) = handshake(&acceptor, tcp, peer).await else { return };
            let conn = http.serve_connection(TokioIo::new(tls), service);
            if let Err(err) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %error_chain(&err), "connection ended with an error");
            }
        });
    };
    let stop_accepting = CancellationToken::new();
    let accepting = async {
        while let Some(conn) = accept(&listener, &stop_accepting).await {
            serve(conn);
        }
    };
    let drain = async {
        shutdown.cancelled().await;
        // Closing the tracker lets `wait` end once no connection is left;
        // connections accepted from now on are tracked all the same.
        connections.close();
        tracing::info!(connections = connections.len(), limit = ?limits.drain, "draining: every response closes its connection");
        let _ = tokio::time::timeout(limits.drain, connections.wait()).await;
        stop_accepting.cancel();
    };
    tokio::join!(accepting, drain);
    drop(listener);
    tracing::info!(connections = connections.len(), "drained; closing idle connections");
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("some requests did not finish within the shutdown grace period");
    }
}

/// The TLS connections accepted on `listener`, handshakes done concurrently
/// (each within the handshake timeout) so that one slow client holds up no
/// other: for servers, like tonic's, that take a stream of connections.
/// Ends at `shutdown`.
pub fn tls_connections(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shutdown: CancellationToken,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    let acceptor = TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Some((tcp, peer)) = accept(&listener, &shutdown).await {
            let (acceptor, sender) = (acceptor.clone(), sender.clone());
            tokio::spawn(async move {
                if let Some(tls) = handshake(&acceptor, tcp, peer).await {
                    let _ = sender.send(Ok(tls)).await;
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(receiver)
}

/// The next connection on `listener`, or `None` at `shutdown`. Accept
/// errors (out of file descriptors and the like) are waited out.
async fn accept(
    listener: &TcpListener,
    shutdown: &CancellationToken,
) -> Option<(tokio::net::TcpStream, std::net::SocketAddr)> {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => return Some(conn),
                Err(err) => {
                    tracing::warn!(error = %error_chain(&err), "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.cancelled() => return None,
        }
    }
}

/// The TLS handshake on `tcp`, within [`HANDSHAKE_TIMEOUT`]; `None` (logged
/// at debug) when it fails or times out.
async fn handshake(
    acceptor: &TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(err)) => {
            tracing::debug!(%peer, error = %error_chain(&err), "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}
