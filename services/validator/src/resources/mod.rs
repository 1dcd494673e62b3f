//! The validator's kinds as API objects (`portcullis.dev/v1alpha1`):
//! `ValidatorPolicy` (cluster-wide), `NamespacedValidatorPolicy` (its
//! namespace only) and `PolicyException`, with the same spec as the files
//! (the spec types are [`crate::policy::PolicySpec`] and
//! [`crate::exception::Spec`]), their CRDs (`crds`) and how one object is
//! compiled on its own. Watching them and writing their status is
//! `portcullis-resources`' part, not this module's.
//!
//! The CRD schemas refuse what the API server can judge alone (enums,
//! required fields, empty expressions, a policy with nothing to check, a
//! namespaced policy reaching other namespaces), so a malformed object is
//! refused at `kubectl apply` with the field named; what needs the CEL
//! compiler is the compile's refusal, in the object's status.

pub(crate) mod schema;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt as _, ResourceExt as _};
use portcullis_resources::Refusal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exception::{self, Exception, ExceptionNamespaces};
use crate::policy::{Policy, PolicySpec};

/// The API server's check that a policy has something to check (the
/// compile's [`crate::policy::Reason::Empty`]).
const HAS_RULES_OR_VALIDATIONS: &str = "(has(self.spec.validations) && size(self.spec.validations) > 0) || \
     (has(self.spec.rules) && (has(self.spec.rules.requiredLabels) || has(self.spec.rules.requiredAnnotations) || \
     has(self.spec.rules.replicas) || has(self.spec.rules.services) || has(self.spec.rules.images) || \
     has(self.spec.rules.resources) || has(self.spec.rules.podSecurity)))";
/// Its message.
const NEEDS_RULES_OR_VALIDATIONS: &str = "spec: a policy needs rules or validations (it has neither)";

/// What the policy says: which requests it judges (`match`), by which
/// rules (built-in `rules`, CEL `validations`), and what it does with what
/// it finds (`action`).
#[derive(CustomResource, Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "portcullis.dev",
    version = "v1alpha1",
    kind = "ValidatorPolicy",
    doc = "A policy judging requests for every namespace and cluster-scoped objects: built-in rules and \
           CEL validations, and what to do with what they find (Deny, Warn, Audit).",
    status = "portcullis_resources::ResourceStatus",
    category = "portcullis",
    shortname = "vpol",
    printcolumn(name = "Action", type_ = "string", json_path = ".spec.action"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason"),
    printcolumn(name = "Enforced-By", type_ = "string", json_path = ".status.enforcedBy.path"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(HAS_RULES_OR_VALIDATIONS).message(NEEDS_RULES_OR_VALIDATIONS),
)]
#[serde(transparent)]
pub struct ValidatorPolicySpec(pub PolicySpec);

/// What the policy says, as a ValidatorPolicy's spec: which requests of
/// its namespace it judges (`match`), by which rules (built-in `rules`, CEL
/// `validations`), and what it does with what it finds (`action`).
#[derive(CustomResource, Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "portcullis.dev",
    version = "v1alpha1",
    kind = "NamespacedValidatorPolicy",
    namespaced,
    doc = "A policy judging requests for objects of its own namespace only (never cluster-scoped objects): \
           the same spec as a ValidatorPolicy, for a team to own the policies of its namespace.",
    status = "portcullis_resources::ResourceStatus",
    category = "portcullis",
    shortname = "nvpol",
    printcolumn(name = "Action", type_ = "string", json_path = ".spec.action"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(HAS_RULES_OR_VALIDATIONS).message(NEEDS_RULES_OR_VALIDATIONS),
    validation = Rule::new(
        "!has(self.spec.match) || !has(self.spec.match.excludeNamespaces) || size(self.spec.match.excludeNamespaces) == 0"
    ).message("spec.match.excludeNamespaces: a NamespacedValidatorPolicy applies only in its own namespace"),
    validation = Rule::new(
        "!has(self.spec.match) || !has(self.spec.match.includeSystemNamespaces) || !self.spec.match.includeSystemNamespaces"
    ).message("spec.match.includeSystemNamespaces: a NamespacedValidatorPolicy applies only in its own namespace"),
    validation = Rule::new("!has(self.spec.enforcement) || self.spec.enforcement == 'Webhook'")
        .message("spec.enforcement: a NamespacedValidatorPolicy is enforced by the webhook"),
)]
#[serde(transparent)]
pub struct NamespacedValidatorPolicySpec(pub PolicySpec);

/// Which objects are exempted (`namespaces`, `kinds`, `names`,
/// `objectSelector`) from which policies (`policies`), why (`reason`) and
/// until when (`expires`).
#[derive(CustomResource, Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[allow(clippy::duplicated_attributes)] // the columns' types, read as attributes
#[kube(
    group = "portcullis.dev",
    version = "v1alpha1",
    kind = "PolicyException",
    namespaced,
    doc = "Exempts the objects it selects, in its own namespace, from the policies it names, until it \
           expires. Which namespaces may hold exceptions is the cluster admin's setting.",
    status = "portcullis_resources::ResourceStatus",
    category = "portcullis",
    shortname = "pex",
    printcolumn(name = "Policies", type_ = "string", json_path = ".spec.policies"),
    printcolumn(name = "Expires", type_ = "string", json_path = ".spec.expires"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(transparent)]
pub struct PolicyExceptionSpec(pub exception::Spec);

impl ValidatorPolicy {
    /// Compiles this object as [`Policy::compile`] does.
    pub fn compile(&self, cost_limit: u64) -> Result<Policy, Refusal> {
        Policy::compile(&self.name_any(), None, self.spec.0.clone(), cost_limit)
    }
}

impl NamespacedValidatorPolicy {
    /// Compiles this object, bound to its namespace, as [`Policy::compile`]
    /// does.
    pub fn compile(&self, cost_limit: u64) -> Result<Policy, Refusal> {
        let namespace = self.namespace().unwrap_or_default();
        Policy::compile(&self.name_any(), Some(namespace), self.spec.0.clone(), cost_limit)
    }
}

impl PolicyException {
    /// Compiles this object, bound to its namespace, as
    /// [`Exception::compile`] does.
    pub fn compile(&self, allowed: &ExceptionNamespaces) -> Result<Exception, Refusal> {
        let namespace = self.namespace().unwrap_or_default();
        Exception::compile(&self.name_any(), Some(namespace), self.spec.0.clone(), allowed)
    }
}

/// The three CustomResourceDefinitions.
pub fn crds() -> [CustomResourceDefinition; 3] {
    [ValidatorPolicy::crd(), NamespacedValidatorPolicy::crd(), PolicyException::crd()]
}

/// The CRDs as multi-document YAML: what `portcullis-validator crds`
/// prints and `deploy/base/crds/validator.yaml` holds.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let documents = crds().iter().map(serde_yaml::to_string).collect::<Result<Vec<_>, _>>()?;
    Ok(documents.join("---\n"))
}
