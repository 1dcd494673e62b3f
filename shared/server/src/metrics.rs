//! Prometheus metrics: one registry per process, in which each service
//! registers only the series it updates.
//!
//! Label values are bounded: operations are the four admission operations,
//! kinds are the few a service chooses to name ("other" for the rest),
//! results a fixed set. No object or namespace name is ever a label.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of `portcullis_admission_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`, or `unknown` for an
    /// unreadable request.
    pub operation: &'static str,
    /// The object kind as the service names it (bounded set).
    pub kind: &'static str,
    /// `allowed`, `patched`, `denied`, `warned` or `invalid`.
    pub result: &'static str,
}

/// Labels of the reload counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `success` or `failure`.
    pub result: &'static str,
}

/// The metrics registry of one process, with the series every service
/// has: configuration reloads and the serving certificate's expiry. Each
/// service registers its own series in it (`extra`), and only those.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Configuration reloads.
    pub config_reloads: Family<ReloadLabels, Counter>,
    /// notAfter of the certificate being served, Unix seconds (0 before
    /// the first one).
    pub serving_certificate_expiry: Gauge,
}

impl Metrics {
    /// Creates the process's registry; `extra` registers the service's own
    /// series.
    pub fn new(extra: impl FnOnce(&mut Registry)) -> Self {
        let mut registry = Registry::with_prefix("portcullis");
        let config_reloads = Family::<ReloadLabels, Counter>::default();
        registry.register("config_reloads", "Configuration reloads by result", config_reloads.clone());
        let serving_certificate_expiry = Gauge::default();
        registry.register(
            "serving_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate, Unix seconds (alert on time() - this)",
            serving_certificate_expiry.clone(),
        );
        extra(&mut registry);
        Self { registry, config_reloads, serving_certificate_expiry }
    }

    /// Counts a configuration reload.
    pub fn config_reloaded(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.config_reloads.get_or_create(&ReloadLabels { result }).inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// The series of the admission handler, registered by the webhooks only.
#[derive(Debug, Clone)]
pub struct AdmissionMetrics {
    /// Admission requests answered.
    pub requests: Family<RequestLabels, Counter>,
    /// Time from a complete request body to the encoded response.
    pub duration: Histogram,
    /// JSON Patch operations returned.
    pub patch_operations: Counter,
}

impl Default for AdmissionMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            // 50µs .. ~0.8s: admission decisions are fast; the tail is what matters.
            duration: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.00005, 2.0, 15)),
            patch_operations: Counter::default(),
        }
    }
}

impl AdmissionMetrics {
    /// Registers the series in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("admission_requests", "Admission requests answered", self.requests.clone());
        registry.register(
            "admission_duration_seconds",
            "Time to decode, decide and encode one admission request",
            self.duration.clone(),
        );
        registry.register(
            "admission_patch_operations",
            "JSON Patch operations returned",
            self.patch_operations.clone(),
        );
    }
}

/// A webhook process's metrics: its registry and the admission series in it.
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    /// The registry `/metrics` exposes.
    pub process: Arc<Metrics>,
    /// The handler's series.
    pub admission: Arc<AdmissionMetrics>,
}

impl WebhookMetrics {
    /// The registry with the admission series and the service's own
    /// (`extra`).
    pub fn new(extra: impl FnOnce(&mut Registry)) -> Self {
        let admission = Arc::new(AdmissionMetrics::default());
        let process = Arc::new(Metrics::new(|registry| {
            admission.register(registry);
            extra(registry);
        }));
        Self { process, admission }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_counters_with_bounded_labels() {
        let metrics = WebhookMetrics::new(|_| {});
        let admission = &metrics.admission;
        admission.requests.get_or_create(&RequestLabels { operation: "CREATE", kind: "Pod", result: "patched" }).inc();
        metrics.process.config_reloaded(false);
        let text = metrics.process.encode().expect("encode");
        assert!(
            text.contains(r#"portcullis_admission_requests_total{operation="CREATE",kind="Pod",result="patched"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"portcullis_config_reloads_total{result="failure"} 1"#), "{text}");
    }

    #[test]
    fn a_service_without_a_webhook_exports_no_admission_series() {
        let text = Metrics::new(|_| {}).encode().expect("encode");
        assert!(!text.contains("admission"), "{text}");
        assert!(text.contains("portcullis_serving_certificate_expiry_timestamp_seconds"), "{text}");
    }
}
