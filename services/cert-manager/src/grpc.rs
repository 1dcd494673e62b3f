//! The gRPC edge: authentication, the checks, signing, and the trust-bundle
//! stream. `tonic::Status` lives here only.

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
use subtle::ConstantTimeEq as _;
use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt as _};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::authority::Authority;
use crate::checks::check;
use crate::config::Config;

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

/// How callers are authenticated and requests signed.
pub enum Backend {
    /// Token files and a local CA.
    Standalone {
        /// The CAs; the active one signs.
        authority: watch::Receiver<Arc<Authority>>,
    },
    /// TokenReview and CertificateSigningRequests.
    Kubernetes {
        /// The API client.
        client: kube::Client,
        /// The audience tokens must carry.
        audience: String,
        /// The CSRs' signerName.
        signer_name: String,
        /// How long to wait for a signature.
        timeout: std::time::Duration,
    },
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Standalone { .. } => f.write_str("Standalone"),
            Self::Kubernetes { signer_name, .. } => write!(f, "Kubernetes({signer_name})"),
        }
    }
}

/// The `Certificates` service.
#[derive(Debug)]
pub struct CertificatesService {
    config: Config,
    backend: Backend,
    bundle: watch::Receiver<TrustBundle>,
    metrics: Arc<IssueMetrics>,
}

impl CertificatesService {
    /// A service issuing through `backend` under `config`.
    pub fn new(
        config: Config,
        backend: Backend,
        bundle: watch::Receiver<TrustBundle>,
        metrics: Arc<IssueMetrics>,
    ) -> Self {
        Self { config, backend, bundle, metrics }
    }

    /// The caller's identity, from its bearer token.
    async fn authenticate(&self, metadata: &MetadataMap) -> Result<String, Status> {
        let token = bearer(metadata)?;
        let Backend::Kubernetes { client, audience, .. } = &self.backend else {
            return self.authenticate_file(&token);
        };
        match crate::kubernetes::review_token(client, &token, audience).await {
            Ok(Some(identity)) => Ok(identity),
            Ok(None) => Err(Status::unauthenticated(format!(
                "the token is not a valid ServiceAccount token for audience {audience} (expired, revoked or for another audience)"
            ))),
            Err(err) => {
                tracing::error!(error = %error_chain(&err), "TokenReview failed");
                Err(Status::unavailable("cannot check the token with the API server; retry later"))
            }
        }
    }

    /// The identity whose token file holds `token`.
    fn authenticate_file(&self, token: &str) -> Result<String, Status> {
        for client in &self.config.clients {
            let Some(file) = &client.token_file else { continue };
            // Read at each request: a rotated token file takes effect at once.
            match std::fs::read_to_string(file) {
                // In constant time: how much of a guess matched must not show.
                Ok(expected) if bool::from(expected.trim().as_bytes().ct_eq(token.as_bytes())) => {
                    return Ok(client.identity.clone());
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(file = %file.display(), error = %error_chain(&err), "cannot read a client's token file")
                }
            }
        }
        Err(Status::unauthenticated("the bearer token is not valid"))
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
        let identity =
            self.authenticate(request.metadata()).await.inspect_err(|_| self.metrics.refused("unauthenticated"))?;
        span.record("identity", identity.as_str());
        let client = self.config.client(&identity).ok_or_else(|| {
            self.metrics.refused("unknown_client");
            Status::permission_denied(format!(
                "{identity} is not a client of this cert-manager (see its CertManagerConfig)"
            ))
        })?;
        let request = request.into_inner();
        let approved = check(&request.csr_pem, client, request.lifetime_seconds, &self.config).map_err(|refusal| {
            self.metrics.refused(refusal.reason());
            span.record("result", refusal.reason());
            tracing::warn!(%identity, reason = %refusal, "certificate request refused");
            if refusal.is_permission() {
                Status::permission_denied(refusal.to_string())
            } else {
                Status::invalid_argument(refusal.to_string())
            }
        })?;
        let leaf = match &self.backend {
            Backend::Standalone { authority } => {
                let signer = authority.borrow().active.clone();
                signer
                    .sign(&approved)
                    .map_err(|e| Status::unavailable(format!("the certificate could not be signed: {e}")))
            }
            Backend::Kubernetes { client, signer_name, timeout, .. } => crate::kubernetes::issue_through_csr(
                client,
                signer_name,
                &request.csr_pem,
                &approved,
                &identity,
                *timeout,
            )
            .await
            .map_err(|e| match e {
                // The signer's verdict: asking again will not change it.
                e @ crate::kubernetes::KubeError::Refused { .. } => Status::failed_precondition(e.to_string()),
                e => Status::unavailable(format!("the certificate could not be signed: {e}")),
            }),
        }
        .inspect_err(|status| {
            self.metrics.refused("signer");
            span.record("result", "signer");
            tracing::error!(error = %status.message(), "signing failed");
        })?;
        // The signer has the last word on the lifetime: read it from the
        // certificate, not from what was asked.
        let (not_before, not_after) = crate::ca::validity(&leaf).ok_or_else(|| {
            self.metrics.refused("signer");
            Status::internal("the signer returned something that is not a certificate")
        })?;
        let renew_after = not_before + (not_after - not_before) * 2 / 3;
        self.metrics.issued.inc();
        self.metrics.duration.observe(started.elapsed().as_secs_f64());
        span.record("result", "issued");
        tracing::info!(%identity, lifetime_seconds = approved.lifetime.as_secs(), "certificate issued");
        Ok(Response::new(IssueResponse {
            certificate_chain_pem: leaf,
            trust_bundle: Some(self.bundle.borrow().clone()),
            not_after_unix: not_after,
            renew_after_unix: renew_after,
        }))
    }
}
