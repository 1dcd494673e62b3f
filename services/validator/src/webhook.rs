//! The validator as a webhook: the policies in force, the evaluation, and
//! what it records for operators.

use std::collections::BTreeMap;
use std::sync::Arc;

use portcullis_admission::{Decision, Request};
use portcullis_server::Current;
use portcullis_server::webhook::Webhook;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::evaluate::{NamespaceLabels, Settings, decide, evaluate};
use crate::policy::{Action, PolicySet};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    /// Policy names come from the configuration: a bounded set.
    policy: String,
    action: &'static str,
}

/// No namespace labels known (offline, or without API access): policies
/// with a `namespaceSelector` follow their failure policy.
#[derive(Debug, Default)]
pub struct NoNamespaces;

impl NamespaceLabels for NoNamespaces {
    fn labels(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }
}

/// The validating webhook.
pub struct Validator {
    policies: Current<PolicySet>,
    settings: Settings,
    namespaces: Arc<dyn NamespaceLabels>,
    findings: Family<FindingLabels, Counter>,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Validator {
    /// A validator enforcing `policies`.
    pub fn new(policies: PolicySet, settings: Settings, namespaces: Arc<dyn NamespaceLabels>) -> Self {
        Self { policies: Current::new(policies), settings, namespaces, findings: Family::default() }
    }

    /// Puts `policies` in force for the next request.
    pub fn set_policies(&self, policies: PolicySet) {
        self.policies.set(policies);
    }

    /// Registers the validator's own metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("validator_findings", "Policy violations found, by policy and action", self.findings.clone());
    }

    /// Evaluates `req` and returns the findings as well as the decision.
    pub fn review(&self, req: &Request) -> (Decision, Vec<crate::evaluate::Finding>) {
        let (findings, applied) = evaluate(&self.policies.get(), &self.settings, self.namespaces.as_ref(), req);
        for f in &findings {
            self.findings.get_or_create(&FindingLabels { policy: f.policy.clone(), action: f.action.as_str() }).inc();
            // Events on the admission span: violations and audit findings
            // show up in the trace as well as in the logs.
            match f.action {
                Action::Audit => {
                    tracing::info!(policy = %f.policy, action = "audit", detail = %f.message, "policy finding")
                }
                _ => {
                    tracing::info!(policy = %f.policy, action = f.action.as_str(), detail = %f.message, "policy violation")
                }
            }
        }
        (decide(&findings, applied), findings)
    }
}

impl Webhook for Validator {
    fn decide(&self, req: &Request) -> Decision {
        self.review(req).0
    }

    fn kind_label(&self, req: &Request) -> &'static str {
        match req.kind().kind.as_str() {
            "Pod" => "Pod",
            "Deployment" => "Deployment",
            "StatefulSet" => "StatefulSet",
            "DaemonSet" => "DaemonSet",
            "ReplicaSet" => "ReplicaSet",
            "Job" => "Job",
            "CronJob" => "CronJob",
            "Service" => "Service",
            "Scale" => "Scale",
            "Namespace" => "Namespace",
            _ => "other",
        }
    }
}
