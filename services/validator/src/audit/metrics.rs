//! The audit's metrics: violations by policy and namespace, and how long
//! and how recently the last full pass ran.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::results::{Results, Status};

#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ViolationLabels {
    /// Policy names come from the configuration, namespaces from the
    /// cluster: bounded sets.
    policy: String,
    namespace: String,
    result: &'static str,
}

/// The audit's series.
#[derive(Debug, Default)]
pub struct AuditMetrics {
    violations: Family<ViolationLabels, Gauge>,
    exported: std::sync::Mutex<BTreeSet<ViolationLabels>>,
    objects: Gauge,
    last_pass: Gauge,
    pass_duration: Gauge<f64, AtomicU64>,
    passes: Counter,
    report_writes: Family<WriteLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    outcome: &'static str,
}

impl AuditMetrics {
    /// Registers the series.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "validator_audit_violations",
            "Existing objects that break a policy, by policy, namespace and result (fail, warn, error)",
            self.violations.clone(),
        );
        registry.register("validator_audit_objects", "Existing objects the audit judges", self.objects.clone());
        registry.register(
            "validator_audit_last_pass_timestamp_seconds",
            "When the last full audit pass finished (Unix time)",
            self.last_pass.clone(),
        );
        registry.register(
            "validator_audit_pass_duration_seconds",
            "How long the last full audit pass took, listing included",
            self.pass_duration.clone(),
        );
        registry.register("validator_audit_passes", "Full audit passes finished", self.passes.clone());
        registry.register(
            "validator_audit_report_writes",
            "Report writes, by outcome (ok, error)",
            self.report_writes.clone(),
        );
    }

    /// A full pass finished after `seconds`.
    pub fn pass_finished(&self, seconds: f64, objects: usize) {
        self.pass_duration.set(seconds);
        self.last_pass.set(k8s_openapi::jiff::Timestamp::now().as_second());
        self.passes.inc();
        self.objects.set(i64::try_from(objects).unwrap_or(i64::MAX));
    }

    /// A report write succeeded or failed.
    pub fn report_written(&self, ok: bool) {
        self.report_writes.get_or_create(&WriteLabels { outcome: if ok { "ok" } else { "error" } }).inc();
    }

    /// Sets the violation gauges of `namespace` from `results`; series of
    /// policies that no longer fail there drop to zero.
    pub fn update(&self, results: &Results, namespace: &str) {
        let mut exported = self.exported.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for labels in exported.iter().filter(|l| l.namespace == namespace) {
            self.violations.get_or_create(labels).set(0);
        }
        for ((policy, status), count) in results.violations(namespace) {
            let result = match status {
                Status::Warn => "warn",
                Status::Error => "error",
                _ => "fail",
            };
            let labels = ViolationLabels { policy, namespace: namespace.to_owned(), result };
            self.violations.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
            exported.insert(labels);
        }
        self.objects.set(i64::try_from(results.objects()).unwrap_or(i64::MAX));
    }
}
