//! The validator as a webhook: the policies in force, the evaluation, and
//! what it records for operators.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use portcullis_admission::{Decision, Request};
use portcullis_cel::workers::Workers;
use portcullis_server::webhook::Webhook;
use portcullis_telemetry::error_chain;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::evaluate::{Cluster, Evaluation, Exempted, KnownNamespaces, Settings, decide, evaluate};
use crate::policy::{Action, PolicySet};
use portcullis_known::namespaces::wait_for_namespace;
use portcullis_known::params::{NoParams, ParamSource};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExceededLabels {
    policy: String,
    limit: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExemptedLabels {
    /// Both from the configuration: bounded sets.
    policy: String,
    exception: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    /// Policy names come from the configuration: a bounded set.
    policy: String,
    action: &'static str,
}

/// No namespace known (offline, or without API access): policies with a
/// `namespaceSelector`, or reading `namespaceObject` of a namespaced
/// object, follow their failure policy.
#[derive(Debug, Default)]
pub struct NoNamespaces;

impl KnownNamespaces for NoNamespaces {
    fn labels(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    fn object(&self, _: &str) -> Option<Arc<serde_json::Value>> {
        None
    }
}

/// The validating webhook.
pub struct Validator {
    policies: ArcSwap<PolicySet>,
    settings: Settings,
    namespaces: Arc<dyn KnownNamespaces>,
    params: Arc<dyn ParamSource>,
    workers: Workers,
    findings: Family<FindingLabels, Counter>,
    exceeded: Family<ExceededLabels, Counter>,
    exempted: Family<ExemptedLabels, Counter>,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Validator {
    /// A validator enforcing `policies`, evaluating webhook requests on
    /// `workers`.
    pub fn new(
        policies: PolicySet,
        settings: Settings,
        namespaces: Arc<dyn KnownNamespaces>,
        workers: Workers,
    ) -> Self {
        Self {
            policies: ArcSwap::from_pointee(policies),
            settings,
            namespaces,
            params: Arc::new(NoParams),
            workers,
            findings: Family::default(),
            exceeded: Family::default(),
            exempted: Family::default(),
        }
    }

    /// Reads parameter objects from `params` (none by default).
    pub fn with_params(mut self, params: Arc<dyn ParamSource>) -> Self {
        self.params = params;
        self
    }

    /// Puts `policies` in force for the next request.
    pub fn set_policies(&self, policies: PolicySet) {
        self.policies.store(Arc::new(policies));
    }

    /// Registers the validator's own metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("validator_findings", "Policy violations found, by policy and action", self.findings.clone());
        registry.register(
            "validator_cel_budget_exceeded",
            "CEL evaluations stopped by a cost or time limit, by policy and limit (per_call, policy, deadline)",
            self.exceeded.clone(),
        );
        registry.register(
            "validator_exceptions_applied",
            "Requests a PolicyException exempted from a policy, by policy and exception",
            self.exempted.clone(),
        );
        registry.register(
            "validator_cel_costly_waiting",
            "Costly CEL evaluations (past 20,000 units) waiting for their turn on the cores they may use",
            portcullis_cel::budget::costly_waiting(),
        );
    }

    fn cluster(&self) -> Cluster<'_> {
        Cluster { namespaces: self.namespaces.as_ref(), params: self.params.as_ref() }
    }

    /// The wall-clock bound of CEL for a request arriving now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.settings.cel_deadline
    }

    /// Evaluates `req` on the calling thread, CEL stopping at `deadline`,
    /// and returns the findings as well as the decision.
    pub fn review(&self, req: &Request, deadline: Instant) -> (Decision, Vec<crate::evaluate::Finding>) {
        // A whole `Arc`, not arc-swap's cheaper guard: guards are meant
        // to be short-lived, and an evaluation may run to its deadline.
        let Evaluation { findings, applied, exceeded, audit_annotations, exempted } =
            evaluate(&self.policies.load_full(), &self.settings, self.cluster(), req, deadline);
        for Exempted { policy, exception, reason } in exempted {
            // An event on the admission span: an exception is never silent.
            tracing::info!(%policy, %exception, %reason, "policy exception applied");
            self.exempted.get_or_create(&ExemptedLabels { policy, exception }).inc();
        }
        for (policy, limit) in exceeded {
            // An event on the admission span as well as a log line.
            tracing::warn!(%policy, limit = limit.as_str(), "CEL budget exceeded");
            self.exceeded.get_or_create(&ExceededLabels { policy, limit: limit.as_str() }).inc();
        }
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
        let mut decision = decide(&findings, applied);
        decision.audit_annotations = audit_annotations;
        (decision, findings)
    }
}

impl Webhook for Validator {
    fn decision(self: Arc<Self>, req: Arc<Request>) -> impl Future<Output = Decision> + Send + 'static {
        let span = tracing::Span::current();
        async move {
            if self.policies.load().reads_namespaces {
                wait_for_namespace(&*self.namespaces, &req).await;
            }
            // The deadline counts from arrival (or the end of the wait for
            // the namespace), time in the queue included.
            let deadline = self.deadline();
            let validator = self.clone();
            let job = move || span.in_scope(|| validator.review(&req, deadline).0);
            self.workers.run(job).await.unwrap_or_else(|err| {
                tracing::error!(error = %error_chain(&err), "policy evaluation failed");
                Decision::deny(500, "the validator failed to evaluate the request; see its log")
            })
        }
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
