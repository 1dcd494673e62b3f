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
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: no serving certificate or configuration yet\n")
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
