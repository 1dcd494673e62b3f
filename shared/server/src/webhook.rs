//! The webhook handler: owns the AdmissionReview protocol, the admission
//! span and the metrics, and hands the decision to a pure function.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequest as _, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use portcullis_admission::{Decision, DecodeError, Request, decode, encode};
use portcullis_telemetry::error_chain;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::capture::Capture;
use crate::metrics::{AdmissionMetrics, RequestLabels};

/// The largest AdmissionReview accepted. The API server's own request limit
/// is 3 MiB, so a larger review cannot come from it.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A webhook's decision logic, as the handler sees it.
pub trait Webhook: Send + Sync + 'static {
    /// Reads a review body. The default builds the objects whole; a webhook
    /// that reads few of their fields builds only those
    /// ([`portcullis_admission::decode_parts`]).
    fn decode(&self, body: &[u8]) -> Result<Request, DecodeError> {
        decode(body)
    }

    /// Decides on a decoded request. The decision itself does no I/O; a
    /// webhook whose decision can take long (the validator's CEL) runs it
    /// off the async runtime and returns a future that awaits it, so that
    /// the runtime's workers never block. The future runs inside the
    /// request's `admission` span.
    fn decision(self: Arc<Self>, req: Arc<Request>) -> impl Future<Output = Decision> + Send + 'static;

    /// A bounded name for the request's kind, used as a metric label.
    fn kind_label(&self, req: &Request) -> &'static str;
}

/// An error answered at the HTTP edge: a status and a message for the
/// client, as `{"error": "..."}`. Internals never go in the message.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, message: message.into() }
    }

    /// The 408 of a request not read and answered within `limit`.
    fn timed_out(limit: Duration) -> Self {
        let message = format!("the request was not read and answered within the request timeout ({limit:?})");
        Self { status: StatusCode::REQUEST_TIMEOUT, message }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        let status = rejection.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("request body larger than {MAX_BODY_BYTES} bytes")
        } else {
            rejection.body_text()
        };
        Self { status, message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(serde_json::json!({ "error": self.message }))).into_response()
    }
}

struct HandlerState<W> {
    webhook: Arc<W>,
    metrics: Arc<AdmissionMetrics>,
    capture: Option<Arc<Capture>>,
    request_timeout: Duration,
}

impl<W> Clone for HandlerState<W> {
    fn clone(&self) -> Self {
        Self {
            webhook: self.webhook.clone(),
            metrics: self.metrics.clone(),
            capture: self.capture.clone(),
            request_timeout: self.request_timeout,
        }
    }
}

/// A router serving `webhook` at `path` (POST), with the body limit and the
/// whole-request timeout (408: reading the body, deciding, answering)
/// applied.
pub fn router<W: Webhook>(
    path: &str,
    webhook: Arc<W>,
    metrics: Arc<AdmissionMetrics>,
    capture: Option<Arc<Capture>>,
    request_timeout: Duration,
) -> Router {
    Router::new()
        .route(path, post(handle::<W>))
        .with_state(HandlerState { webhook, metrics, capture, request_timeout })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// The request under its timeout. The timeout is tokio's, which polls the
/// work before its timer: a request whose body is in and whose decision is
/// ready (the injector's, always) is answered without the timer ever being
/// armed. Arming one per request (tower-http's `TimeoutLayer` polls its
/// timer first) took the runtime's timer lock and, with no earlier timer,
/// woke the I/O driver: about 1.5 µs of a request's CPU (docs/BENCHMARKS.md).
async fn handle<W: Webhook>(State(state): State<HandlerState<W>>, request: axum::extract::Request) -> Response {
    let limit = state.request_timeout;
    match tokio::time::timeout(limit, admit(state, request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(limit = ?limit, "an admission request was not answered within the request timeout");
            ApiError::timed_out(limit).into_response()
        }
    }
}

async fn admit<W: Webhook>(state: HandlerState<W>, request: axum::extract::Request) -> Response {
    let span = tracing::info_span!(
        "admission",
        otel.kind = "server",
        trace_id = Empty,
        span_id = Empty,
        uid = Empty,
        operation = Empty,
        kind = Empty,
        namespace = Empty,
        object_name = Empty,
        dry_run = Empty,
        allowed = Empty,
        applied = Empty,
        patch_operations = Empty,
        warnings = Empty,
    );
    let trace_id = portcullis_telemetry::continue_trace(&span, request.headers());
    let inside = span.clone();
    async move {
        let body = Bytes::from_request(request, &()).await;
        answer(state, body, inside, trace_id).await
    }
    .instrument(span)
    .await
}

async fn answer<W: Webhook>(
    state: HandlerState<W>,
    body: Result<Bytes, BytesRejection>,
    span: tracing::Span,
    trace_id: Option<String>,
) -> Response {
    let started = Instant::now();
    let metrics = &state.metrics;
    let invalid = |err: ApiError| {
        tracing::warn!(status = %err.status, error = %err.message, "refused an unreadable admission request");
        metrics
            .requests
            .get_or_create(&RequestLabels { operation: "unknown", kind: "unknown", result: "invalid" })
            .inc();
        err.into_response()
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return invalid(rejection.into()),
    };
    let req = match state.webhook.decode(&body) {
        Ok(req) => req,
        Err(err) => return invalid(ApiError::bad_request(error_chain(&err))),
    };
    if let Some(capture) = &state.capture {
        capture.offer(&req, &body, trace_id.as_deref());
    }
    let inner = &req.inner;
    let operation = portcullis_admission::operation_name(&inner.operation);
    tracing::record_all!(
        span,
        uid = inner.uid.as_str(),
        operation = operation,
        kind = inner.kind.kind.as_str(),
        namespace = inner.namespace.as_deref().unwrap_or_default(),
        object_name = inner.name.as_str(),
        dry_run = inner.dry_run,
    );

    let req = Arc::new(req);
    let decision = state.webhook.clone().decision(req.clone()).await;
    if !decision.applied.is_empty() {
        span.record("applied", decision.applied.join(",").as_str());
    }
    if !decision.warnings.is_empty() {
        span.record("warnings", decision.warnings.len() as i64);
    }
    let (response, operations) = decision.respond(&req);
    let result = match (response.allowed, operations, response.warnings.is_some()) {
        (false, _, _) => "denied",
        (true, 1.., _) => "patched",
        (true, 0, true) => "warned",
        (true, 0, false) => "allowed",
    };
    span.record("allowed", response.allowed);
    span.record("patch_operations", operations as i64);
    if !response.allowed {
        tracing::info!(message = %response.result.message, "denied");
    }
    let kind = state.webhook.kind_label(&req);
    metrics.requests.get_or_create(&RequestLabels { operation, kind, result }).inc();
    metrics.patch_operations.inc_by(operations as u64);
    let body = encode(response);
    metrics.duration.observe(started.elapsed().as_secs_f64());
    tracing::debug!(result, "answered");
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
