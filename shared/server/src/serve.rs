//! The HTTPS listener: rustls handshakes, HTTP/1.1 with keep-alive, time
//! limits for slow clients, and a graceful shutdown that closes idle
//! keep-alive connections so the API server does not reuse a dying pod's;
//! and the same TLS accepting as a stream of connections, for gRPC.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use portcullis_telemetry::error_chain;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// Time a client has to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits of one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to send the request headers (and, enforced by the router's
    /// timeout layer, the whole request).
    pub request_timeout: Duration,
    /// Time in-flight requests get after shutdown starts.
    pub shutdown_grace: Duration,
}

/// Serves `app` over TLS on `listener` until `shutdown`, then lets in-flight
/// requests finish (up to `limits.shutdown_grace`) and closes every
/// connection.
pub async fn serve_tls(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.request_timeout).keep_alive(true);
    while let Some((tcp, peer)) = accept(&listener, &shutdown).await {
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        let http = http.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let Some(tls) = handshake(&acceptor, tcp, peer).await else { return };
            let conn = http.serve_connection(TokioIo::new(tls), service);
            if let Err(err) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %error_chain(&err), "connection ended with an error");
            }
        });
    }
    drop(listener);
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
