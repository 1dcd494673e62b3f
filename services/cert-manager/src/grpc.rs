//! The gRPC edge: maps the API's requests to the issuer core
//! ([`crate::issuer`]) and its results and errors to responses and
//! `tonic::Status` (which lives here only); the trust-bundle stream; the
//! metrics of issuance.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use portcullis_proto::certs::v1::certificates_server::Certificates;
use portcullis_proto::certs::v1::{IssueRequest, IssueResponse, TrustBundle, WatchTrustBundleRequest};
use portcullis_telemetry::error_chain;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt as _};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::issuer::{AuthError, IssueError, Issuer, SignError};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    reason: &'static str,
}

/// The cert-manager's metrics.
#[derive(Debug)]
pub struct IssueMetrics {
    issued: Counter,
    refused: Family<RefusalLabels, Counter>,
    duration: Histogram,
    /// The signing CA's notAfter, Unix seconds.
    pub ca_expiry: Gauge,
    /// How many CAs the trust bundle holds (2 during a rotation).
    pub bundle_cas: Gauge,
    /// The trust bundle's generation.
    pub bundle_generation: Gauge,
}

impl Default for IssueMetrics {
    fn default() -> Self {
        Self {
            issued: Counter::default(),
            refused: Family::default(),
            duration: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 14)),
            ca_expiry: Gauge::default(),
            bundle_cas: Gauge::default(),
            bundle_generation: Gauge::default(),
        }
    }
}

impl IssueMetrics {
    /// Registers them.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("certs_issued", "Certificates issued", self.issued.clone());
        registry.register("certs_refused", "Certificate requests refused, by reason", self.refused.clone());
        registry.register("certs_issue_duration_seconds", "Time to check and sign a request", self.duration.clone());
        registry.register(
            "ca_expiry_timestamp_seconds",
            "notAfter of the signing CA, Unix seconds (alert on time() - this)",
            self.ca_expiry.clone(),
        );
        registry.register(
            "ca_bundle_certificates",
            "CAs in the trust bundle: 1, or 2 while a rotation is under way (alert when it stays 2 past maxLifetimeSeconds)",
            self.bundle_cas.clone(),
        );
        registry.register(
            "ca_bundle_generation",
            "Generation of the trust bundle; each rotation step adds one",
            self.bundle_generation.clone(),
        );
    }

    fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusalLabels { reason }).inc();
    }
}

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

    /// The caller's identity, from its bearer token.
    async fn authenticate(&self, metadata: &MetadataMap) -> Result<String, Status> {
        let token = bearer(metadata)?;
        self.issuer.authenticate(&token).await.map_err(status)
    }
}

/// The status a client gets for `err`: precise about what it asked for,
/// silent about internals (those are logged).
fn status(err: IssueError) -> Status {
    match err {
        IssueError::Unauthenticated(AuthError::Rejected(message)) => Status::unauthenticated(message),
        IssueError::Unauthenticated(err @ AuthError::Unavailable(_)) => {
            tracing::error!(error = %error_chain(&err), "the token could not be checked");
            Status::unavailable("cannot check the token with the API server; retry later")
        }
        err @ IssueError::UnknownClient(_) => Status::permission_denied(err.to_string()),
        IssueError::Refused(refusal) if refusal.is_permission() => Status::permission_denied(refusal.to_string()),
        IssueError::Refused(refusal) => Status::invalid_argument(refusal.to_string()),
        IssueError::Signer(err @ SignError::Refused(_)) => Status::failed_precondition(err.to_string()),
        IssueError::Signer(SignError::Unavailable(source)) => {
            tracing::error!(error = %error_chain(&*source), "signing failed");
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
        self.authenticate(request.metadata()).await?;
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
            if let IssueError::Refused(refusal) = &err {
                tracing::warn!(reason = %refusal, "certificate request refused");
            }
            status(err)
        };
        let token = bearer(request.metadata()).inspect_err(|_| self.metrics.refused("unauthenticated"))?;
        let identity = self.issuer.authenticate(&token).await.map_err(refused)?;
        span.record("identity", identity.as_str());
        let request = request.into_inner();
        let issued = self.issuer.issue(&identity, &request.csr_pem, request.lifetime_seconds).await.map_err(refused)?;
        self.metrics.issued.inc();
        self.metrics.duration.observe(started.elapsed().as_secs_f64());
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
