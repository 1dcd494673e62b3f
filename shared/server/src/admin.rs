//! The plain-HTTP admin listener: `/healthz`, `/readyz`, `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Answers whether the service can take traffic (certificate in hand,
/// configuration loaded).
pub type ReadyCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// `check` until it first answers true, then true for good. What must be
/// in memory before a replica first serves (namespaces, parameter
/// objects) is waited for once: a kind that a later reload adds is not,
/// so that a reload cannot take every replica out of service at once
/// (requests it concerns fail by their failure policy until it is listed,
/// as in the API server).
pub fn ready_once(check: impl Fn() -> bool + Send + Sync + 'static) -> ReadyCheck {
    let listed = std::sync::atomic::AtomicBool::new(false);
    Arc::new(move || {
        use std::sync::atomic::Ordering::Relaxed;
        if !listed.load(Relaxed) && check() {
            listed.store(true, Relaxed);
        }
        listed.load(Relaxed)
    })
}

#[derive(Clone)]
struct AdminState {
    ready: ReadyCheck,
    metrics: Arc<Metrics>,
}

/// The admin router.
pub fn router(ready: ReadyCheck, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AdminState { ready, metrics })
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    if (state.ready)() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: no serving certificate or configuration yet, or shutting down\n")
    }
}

async fn metrics_text(State(state): State<AdminState>) -> impl IntoResponse {
    match state.metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            text,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "cannot encode metrics\n".to_owned(),
        ),
    }
}

/// Serves the admin router on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await
}

/// Asks the admin listener at `addr` whether the service is ready: the
/// container healthcheck, for images without a shell or an HTTP client.
pub async fn probe(addr: std::net::SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n").await?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await?;
        Ok::<_, std::io::Error>(head.starts_with(b"HTTP/1.") && &head[9..12] == b"200")
    };
    matches!(tokio::time::timeout(std::time::Duration::from_secs(3), attempt).await, Ok(Ok(true)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn ready_once_stays_ready() {
        let listed = Arc::new(AtomicBool::new(false));
        let source = listed.clone();
        let ready = ready_once(move || source.load(Ordering::Relaxed));
        assert!(!ready(), "not yet listed");
        listed.store(true, Ordering::Relaxed);
        assert!(ready());
        listed.store(false, Ordering::Relaxed);
        assert!(ready(), "a kind added later does not take the replica out of service");
    }
}
