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
use crate::params::ParamKind;
use crate::policy::{Policy, PolicySet};
use crate::resources::{NamespacedValidatorPolicy, PolicyException, ValidatorPolicy};

/// The reason of a policy whose `paramKind` the API does not serve.
pub const UNKNOWN_PARAM_KIND: &str = "UnknownParamKind";

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
    /// policies first, each kind in name order; and the policies whose
    /// `paramKind` the API does not serve (`unknown` says why), which are
    /// in force but fail by their failure policy.
    pub fn set(&self, unknown: impl Fn(&ParamKind) -> Option<String>) -> (PolicySet, Vec<Remark>) {
        let cluster = self.policies.in_force().into_iter().map(|(key, p)| (self.policies.kind(), key, p));
        let namespaced = self.namespaced.in_force().into_iter().map(|(key, p)| (self.namespaced.kind(), key, p));
        let mut remarks = Vec::new();
        let mut policies = Vec::new();
        for (kind, key, policy) in cluster.chain(namespaced) {
            if let Some(params) = &policy.params
                && let Some(why) = unknown(&params.kind)
            {
                let message = format!(
                    "spec.paramKind {} is not served by the API server ({why}); requests it judges \
                    fail by its failure policy until it is",
                    params.kind
                );
                remarks.push(Remark { kind, key, refusal: Refusal::new(UNKNOWN_PARAM_KIND, message), in_force: true });
            }
            policies.push(policy);
        }
        let exceptions = self.exceptions.in_force().into_iter().map(|(_, e)| e);
        (PolicySet::assemble(policies, exceptions.collect()), remarks)
    }
}
