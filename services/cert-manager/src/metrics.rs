//! The cert-manager's metrics: issuance (issued, refused by reason, time
//! taken) and the CAs (the signing CA's expiry, the bundle's size and
//! generation).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

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

    /// One more request refused for `reason`.
    pub fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusalLabels { reason }).inc();
    }

    /// One more certificate issued, in `took`.
    pub fn issued(&self, took: std::time::Duration) {
        self.issued.inc();
        self.duration.observe(took.as_secs_f64());
    }
}
