//! In a cluster, the policies and exceptions are the `portcullis.dev`
//! resources, watched (`--watch-resources`): each object compiled on its
//! own, with the same code as files, and the set rebuilt from the compiled
//! objects after every change ([`portcullis_resources`]).

use std::sync::Arc;

use kube::api::Api;
use portcullis_resources::{Catalog, Refusal, Remark, WatchedKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cli::PolicyArgs;
use crate::exception::Exception;
use crate::policy::{Policy, PolicySet};
use crate::resources::{NamespacedValidatorPolicy, PolicyException, ValidatorPolicy};
use portcullis_known::params::{KindRemark, ParamKind, ParamSource as _, Scope, WatchedParams};

/// The reason of a namespaced policy reaching beyond its namespace.
const OUT_OF_NAMESPACE: &str = "OutOfNamespace";

/// The watched policies and exceptions.
#[derive(Debug, Clone)]
pub struct Catalogs {
    policies: Arc<Catalog<ValidatorPolicy, Policy>>,
    namespaced: Arc<Catalog<NamespacedValidatorPolicy, Policy>>,
    exceptions: Arc<Catalog<PolicyException, Exception>>,
    changed: Arc<Notify>,
}

impl Catalogs {
    /// Starts the three watches, until `shutdown`.
    pub fn watch(client: &kube::Client, args: &PolicyArgs, shutdown: &CancellationToken) -> Self {
        let changed = Arc::new(Notify::new());
        let cost_limit = args.cel_cost_limit;
        let allowed = args.exception_namespaces();
        let policies = Catalog::new("ValidatorPolicy", "validatorpolicies");
        policies.watch(
            Api::all(client.clone()),
            Arc::new(move |p: &ValidatorPolicy| p.compile(cost_limit)),
            |p| p.status.clone(),
            changed.clone(),
            shutdown.clone(),
        );
        let namespaced = Catalog::new("NamespacedValidatorPolicy", "namespacedvalidatorpolicies");
        namespaced.watch(
            Api::all(client.clone()),
            Arc::new(move |p: &NamespacedValidatorPolicy| p.compile(cost_limit)),
            |p| p.status.clone(),
            changed.clone(),
            shutdown.clone(),
        );
        let exceptions = Catalog::new("PolicyException", "policyexceptions");
        exceptions.watch(
            Api::all(client.clone()),
            Arc::new(move |e: &PolicyException| -> Result<Exception, Refusal> { e.compile(&allowed) }),
            |e| e.status.clone(),
            changed.clone(),
            shutdown.clone(),
        );
        Self { policies, namespaced, exceptions, changed }
    }

    /// The kinds, for the replica report and the status writer.
    pub fn kinds(&self) -> Vec<Arc<dyn WatchedKind>> {
        vec![self.policies.clone(), self.namespaced.clone(), self.exceptions.clone()]
    }

    /// Woken after every change.
    pub fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    /// The set in force: every object's last good compilation, cluster
    /// policies first, each kind in name order; and what the policies'
    /// status must say of their `paramKind`, when `params` are watched:
    /// not served by the API (in force, failing by the failure policy), not
    /// yet listed (not yet judged as it will be: not reported in force), or
    /// cluster-scoped for a namespaced policy (left out: it would read
    /// beyond its namespace).
    ///
    /// For the webhook, the policies the API server enforces itself (pushed
    /// down, [`crate::pushdown`]) are left out; the audit judges them all.
    pub fn set(&self, params: Option<&WatchedParams>, reader: Reader) -> (PolicySet, Vec<Remark>) {
        let delegated = match reader {
            Reader::Webhook => self.policies.delegated(),
            Reader::Audit => Default::default(),
        };
        if !delegated.is_empty() {
            let names: Vec<&str> = delegated.iter().map(|k| k.name.as_str()).collect();
            tracing::info!(policies = ?names, "enforced by the API server itself: left to it");
        }
        let cluster = self
            .policies
            .in_force()
            .into_iter()
            .filter(|(key, _)| !delegated.contains(key))
            .map(|(key, p)| (self.policies.kind(), key, p));
        let namespaced = self.namespaced.in_force().into_iter().map(|(key, p)| (self.namespaced.kind(), key, p));
        let mut remarks = Vec::new();
        let mut policies = Vec::new();
        for (kind, key, policy) in cluster.chain(namespaced) {
            let remark = match (params, &policy.params) {
                (Some(watched), Some(spec)) => param_remark(watched, &spec.kind, policy.namespace.is_some()),
                _ => None,
            };
            match remark {
                Some((refusal, in_force)) => {
                    if in_force || refusal.reason != OUT_OF_NAMESPACE {
                        policies.push(policy);
                    }
                    remarks.push(Remark { kind, key, refusal, in_force });
                }
                None => policies.push(policy),
            }
        }
        let exceptions = self.exceptions.in_force().into_iter().map(|(_, e)| e);
        (PolicySet::assemble(policies, exceptions.collect()), remarks)
    }
}

/// Who reads the set: the webhook, which leaves the pushed-down policies
/// to the API server, or the audit, which judges them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The admission webhook.
    Webhook,
    /// The audit of stored objects.
    Audit,
}

/// What a policy's status must say of its `paramKind`, and whether the
/// policy counts as in force meanwhile.
fn param_remark(params: &WatchedParams, kind: &ParamKind, namespaced: bool) -> Option<(Refusal, bool)> {
    if let Some(remark) = params.remark(kind) {
        let message = match &remark {
            KindRemark::Unknown(why) => format!(
                "spec.paramKind {kind} is not served by the API server ({why}); requests it judges fail by its \
                 failure policy until it is"
            ),
            KindRemark::Pending => format!("waiting for the objects of spec.paramKind {kind} to be listed"),
        };
        return Some((Refusal::new(remark.reason(), message), remark.in_force()));
    }
    if namespaced && matches!(params.scope(kind), Ok(Scope::Cluster)) {
        let message = format!(
            "spec.paramKind {kind} is cluster-scoped: a NamespacedValidatorPolicy reads parameters of its own \
             namespace only"
        );
        return Some((Refusal::new(OUT_OF_NAMESPACE, message), false));
    }
    None
}
