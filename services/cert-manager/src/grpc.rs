//! The gRPC edge: maps the API's requests to the issuer core
//! ([`crate::issuer`]) and its results and errors to responses and
//! `tonic::Status` (which lives here only), and serves the trust-bundle
//! stream.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use portcullis_proto::certs::v1::certificates_server::Certificates;
use portcullis_proto::certs::v1::{IssueRequest, IssueResponse, TrustBundle, WatchTrustBundleRequest};
use portcullis_telemetry::error_chain;
use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt as _};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::issuer::{AuthError, IssueError, Issuer, SignError};
use crate::metrics::IssueMetrics;

/// The `Certificates` service: the issuer core behind the gRPC API.
#[derive(Debug)]
pub struct CertificatesService {
    issuer: Issuer,
    bundle: watch::Receiver<TrustBundle>,
    metrics: Arc<IssueMetrics>,
}

impl CertificatesService {
    /// A service issuing with `issuer`, sending `bundle` as the trust bundle.
    pub fn new(issuer: Issuer, bundle: watch::Receiver<TrustBundle>, metrics: Arc<IssueMetrics>) -> Self {
        Self { issuer, bundle, metrics }
    }

    /// The caller's identity, from its bearer token (a missing or unusable
    /// one is rejected as an invalid token is).
    async fn authenticate(&self, metadata: &MetadataMap) -> Result<String, IssueError> {
        let token = bearer(metadata)
            .map_err(|status| IssueError::Unauthenticated(AuthError::Rejected(status.message().to_owned())))?;
        self.issuer.authenticate(&token).await
    }
}

/// The status a client gets for `err`: precise about what it asked for,
/// silent about internals. Every refusal and signer failure is logged
/// here, the internals with their full chain.
fn status(err: IssueError) -> Status {
    match err {
        IssueError::Unauthenticated(AuthError::Rejected(message)) => {
            tracing::warn!(reason = %message, "not authenticated");
            Status::unauthenticated(message)
        }
        IssueError::Unauthenticated(err @ AuthError::Unavailable(_)) => {
            tracing::error!(error = %error_chain(&err), "the token could not be checked");
            Status::unavailable("cannot check the token with the API server; retry later")
        }
        err @ IssueError::UnknownClient(_) => {
            tracing::warn!(reason = %err, "certificate request refused");
            Status::permission_denied(err.to_string())
        }
        IssueError::Refused(refusal) => {
            tracing::warn!(reason = %refusal, "certificate request refused");
            if refusal.is_permission() {
                Status::permission_denied(refusal.to_string())
            } else {
                Status::invalid_argument(refusal.to_string())
            }
        }
        IssueError::Signer(err @ SignError::Refused(_)) => {
            tracing::warn!(reason = %err, "the signer refused the certificate request");
            Status::failed_precondition(err.to_string())
        }
        IssueError::Signer(SignError::Unavailable(source)) => {
            tracing::warn!(error = %error_chain(&*source), "signing failed");
            Status::unavailable(format!("the certificate could not be signed: {source}"))
        }
        err @ IssueError::NotACertificate => {
            tracing::error!(error = %err, "signing failed");
            Status::internal(err.to_string())
        }
    }
}

/// The bearer token of a call's `authorization` metadata, or why there is none.
pub fn bearer(metadata: &MetadataMap) -> Result<String, Status> {
    let header = metadata
        .get("authorization")
        .ok_or_else(|| Status::unauthenticated("no bearer token: send `authorization: Bearer <token>`"))?;
    header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Status::unauthenticated("the authorization metadata is not `Bearer <token>`"))
}

#[tonic::async_trait]
impl Certificates for CertificatesService {
    async fn issue(&self, request: Request<IssueRequest>) -> Result<Response<IssueResponse>, Status> {
        let span = tracing::info_span!(
            "issue",
            otel.kind = "server",
            trace_id = Empty,
            span_id = Empty,
            identity = Empty,
            result = Empty
        );
        portcullis_telemetry::continue_trace(&span, &request.metadata().clone().into_headers());
        self.issue_in_span(request, &span).instrument(span.clone()).await
    }

    type WatchTrustBundleStream = Pin<Box<dyn Stream<Item = Result<TrustBundle, Status>> + Send>>;

    async fn watch_trust_bundle(
        &self,
        request: Request<WatchTrustBundleRequest>,
    ) -> Result<Response<Self::WatchTrustBundleStream>, Status> {
        self.authenticate(request.metadata()).await.map_err(status)?;
        let stream = tokio_stream::wrappers::WatchStream::new(self.bundle.clone()).map(Ok);
        Ok(Response::new(Box::pin(stream)))
    }
}

impl CertificatesService {
    async fn issue_in_span(
        &self,
        request: Request<IssueRequest>,
        span: &tracing::Span,
    ) -> Result<Response<IssueResponse>, Status> {
        let started = Instant::now();
        let refused = |err: IssueError| {
            self.metrics.refused(err.reason());
            span.record("result", err.reason());
            status(err)
        };
        let identity = self.authenticate(request.metadata()).await.map_err(refused)?;
        span.record("identity", identity.as_str());
        let request = request.into_inner();
        let issued = self.issuer.issue(&identity, &request.csr_pem, request.lifetime_seconds).await.map_err(refused)?;
        self.metrics.issued(started.elapsed());
        span.record("result", "issued");
        tracing::info!(%identity, lifetime_seconds = issued.lifetime.as_secs(), "certificate issued");
        Ok(Response::new(IssueResponse {
            certificate_chain_pem: issued.chain_pem,
            trust_bundle: Some(self.bundle.borrow().clone()),
            not_after_unix: issued.not_after,
            renew_after_unix: issued.renew_after,
        }))
    }
}
