//! The gRPC edge: authentication, the checks, signing, and the trust-bundle
//! stream. `tonic::Status` lives here only.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use portcullis_proto::certs::v1::certificates_server::Certificates;
use portcullis_proto::certs::v1::{IssueRequest, IssueResponse, TrustBundle, WatchTrustBundleRequest};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt as _};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};
use tracing::field::Empty;

use crate::ca::LocalCa;
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
}

impl Default for IssueMetrics {
    fn default() -> Self {
        Self {
            issued: Counter::default(),
            refused: Family::default(),
            duration: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 14)),
        }
    }
}

impl IssueMetrics {
    /// Registers them.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("certs_issued", "Certificates issued", self.issued.clone());
        registry.register("certs_refused", "Certificate requests refused, by reason", self.refused.clone());
        registry.register("certs_issue_duration_seconds", "Time to check and sign a request", self.duration.clone());
    }

    fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusalLabels { reason }).inc();
    }
}

/// The `Certificates` service.
#[derive(Debug)]
pub struct CertificatesService {
    config: Config,
    ca: Arc<LocalCa>,
    bundle: watch::Receiver<TrustBundle>,
    metrics: Arc<IssueMetrics>,
}

impl CertificatesService {
    /// A service signing with `ca` under `config`.
    pub fn new(
        config: Config,
        ca: Arc<LocalCa>,
        bundle: watch::Receiver<TrustBundle>,
        metrics: Arc<IssueMetrics>,
    ) -> Self {
        Self { config, ca, bundle, metrics }
    }

    /// The identity whose token file holds the request's bearer token.
    fn authenticate(&self, metadata: &MetadataMap) -> Result<String, Status> {
        let header = metadata
            .get("authorization")
            .ok_or_else(|| Status::unauthenticated("no bearer token: send `authorization: Bearer <token>`"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Status::unauthenticated("the authorization metadata is not `Bearer <token>`"))?;
        for client in &self.config.clients {
            let Some(file) = &client.token_file else { continue };
            // Read at each request: a rotated token file takes effect at once.
            match std::fs::read_to_string(file) {
                Ok(expected) if constant_time_eq(expected.trim().as_bytes(), token.as_bytes()) => {
                    return Ok(client.identity.clone());
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(file = %file.display(), error = %err, "cannot read a client's token file"),
            }
        }
        Err(Status::unauthenticated("the bearer token is not valid"))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unix(t: time::OffsetDateTime) -> i64 {
    t.unix_timestamp()
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
        let _entered = span.enter();
        let started = Instant::now();
        let identity =
            self.authenticate(request.metadata()).inspect_err(|_| self.metrics.refused("unauthenticated"))?;
        span.record("identity", identity.as_str());
        let client = self.config.client(&identity).ok_or_else(|| Status::internal("client vanished"))?;
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
        let leaf = self.ca.sign(&approved).map_err(|e| {
            tracing::error!(error = %e, "signing failed");
            Status::unavailable("the signer could not sign the certificate; retry later")
        })?;
        let (not_before, not_after) = (approved.params.not_before, approved.params.not_after);
        let renew_after = not_before + (not_after - not_before) * 2 / 3;
        self.metrics.issued.inc();
        self.metrics.duration.observe(started.elapsed().as_secs_f64());
        span.record("result", "issued");
        tracing::info!(%identity, lifetime_seconds = approved.lifetime.as_secs(), "certificate issued");
        Ok(Response::new(IssueResponse {
            certificate_chain_pem: leaf,
            trust_bundle: Some(self.bundle.borrow().clone()),
            not_after_unix: unix(not_after),
            renew_after_unix: unix(renew_after),
        }))
    }

    type WatchTrustBundleStream = Pin<Box<dyn Stream<Item = Result<TrustBundle, Status>> + Send>>;

    async fn watch_trust_bundle(
        &self,
        request: Request<WatchTrustBundleRequest>,
    ) -> Result<Response<Self::WatchTrustBundleStream>, Status> {
        self.authenticate(request.metadata())?;
        let stream = tokio_stream::wrappers::WatchStream::new(self.bundle.clone()).map(Ok);
        Ok(Response::new(Box::pin(stream)))
    }
}
