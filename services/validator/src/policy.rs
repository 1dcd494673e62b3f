//! `ValidatorPolicy` and `NamespacedValidatorPolicy` documents: what they
//! may say ([`PolicySpec`]), one compiled on its own ([`Policy::compile`]),
//! and the set in force assembled from compiled policies and exceptions
//! ([`PolicySet::assemble`]). Files and API objects go the same way: a
//! file's documents are compiled one by one, then assembled.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use portcullis_admission::documents::{self, DocumentError, Origin};
use portcullis_admission::names::API_VERSION;
use portcullis_admission::selector::SelectorError;
use portcullis_cel::reads::DataReads;
use portcullis_resources::Refusal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cel::{self, CelError, CelProblem, CelRules};
use crate::exception::{self, Exception, ExceptionError, ExceptionNamespaces};
use crate::matching::{Match, Matching};
use crate::native;
use crate::rules::{Rules, RulesError};
use portcullis_known::params::{ParamKind, ParamSpecError, Params};

/// The `kind` of a cluster-wide policy.
pub const KIND: &str = "ValidatorPolicy";
/// The `kind` of a policy that applies in its own namespace only.
pub const NAMESPACED_KIND: &str = "NamespacedValidatorPolicy";

/// The documents policy files may hold: `(apiVersion, kind)`.
const DOCUMENT_TYPES: [(&str, &str); 5] = [
    (API_VERSION, KIND),
    (API_VERSION, NAMESPACED_KIND),
    (API_VERSION, exception::KIND),
    (native::API_VERSION, native::POLICY_KIND),
    (native::API_VERSION, native::BINDING_KIND),
];

/// Namespaces no policy applies to unless it sets
/// `match.includeSystemNamespaces: true`; the Portcullis namespace is added
/// to these at startup.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// [`SYSTEM_NAMESPACES`] and the namespace Portcullis runs in: where no
/// policy applies unless it includes them.
pub fn system_namespaces(portcullis_namespace: &str) -> Vec<String> {
    SYSTEM_NAMESPACES.iter().map(|s| (*s).to_owned()).chain([portcullis_namespace.to_owned()]).collect()
}

/// Why a policy set was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A document does not parse or is not valid on its own.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A native ValidatingAdmissionPolicy, with a binding, that the API
    /// server would refuse or that cannot be judged outside it.
    #[error(transparent)]
    Native(#[from] crate::native::NativeError),
    /// Native policies given to the webhook.
    #[error(
        "ValidatingAdmissionPolicy and its bindings are enforced by the API server itself: the webhook does not take \
         them (give them to `check`, or let `audit` read them)"
    )]
    NativeInWebhook,
    /// Two documents define the same policy name.
    #[error("policy {name:?} is defined twice ({first} and {second})")]
    Duplicate {
        /// The name.
        name: String,
        /// The first definition.
        first: String,
        /// The second.
        second: String,
    },
}

/// One policy or exception document refused: `policy web`, with why.
#[derive(Debug, thiserror::Error)]
#[error("{what} {name}")]
pub struct Refused {
    /// `policy` or `exception`.
    pub what: &'static str,
    /// Its `metadata.name`.
    pub name: String,
    /// Why.
    #[source]
    pub reason: Reason,
}

/// Why a policy or exception document is not valid on its own.
#[derive(Debug, thiserror::Error)]
pub enum Reason {
    /// A selector the API server would refuse, in the field named.
    #[error("{0}")]
    Selector(&'static str, #[source] SelectorError),
    /// Contradictory built-in rules.
    #[error(transparent)]
    Rules(#[from] RulesError),
    /// A CEL expression that does not compile or costs too much.
    #[error(transparent)]
    Cel(#[from] CelError),
    /// `paramKind` and `paramRef` that do not fit together.
    #[error(transparent)]
    Params(#[from] ParamSpecError),
    /// Nothing to check.
    #[error("has neither rules nor validations")]
    Empty,
    /// Parameters that no expression could read.
    #[error("paramKind is set but no CEL validation could read params")]
    ParamsUnread,
    /// An expression reads parameters the policy does not have.
    #[error("an expression reads `params` but the policy has no paramKind")]
    NoParamKind,
    /// An invalid exception.
    #[error(transparent)]
    Exception(#[from] ExceptionError),
    /// A namespaced policy reaching outside its namespace: the field and
    /// why.
    #[error("{0}")]
    OutOfNamespace(String),
}

impl Reason {
    /// The `Ready=False` reason: `CompileError` (a CEL expression does not
    /// compile), `CostOverLimit` (its estimated cost is over the limit),
    /// `OutOfNamespace` (a namespaced policy reaching further than its
    /// namespace), `NamespaceNotAllowed` (an exception where none may
    /// live), `Invalid` (anything else).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Cel(CelError {
                problem: CelProblem::Expression(portcullis_cel::CompileError::TooCostly { .. }),
                ..
            }) => "CostOverLimit",
            Self::Cel(CelError { problem: CelProblem::Expression(_), .. }) => "CompileError",
            Self::OutOfNamespace(_) => "OutOfNamespace",
            Self::Exception(e) => e.reason(),
            _ => "Invalid",
        }
    }

    /// As an object's status says it: the reason, and the field and
    /// problem as `check` prints them.
    pub fn refusal(&self) -> Refusal {
        Refusal::new(self.code(), portcullis_telemetry::error_chain(self))
    }
}

/// What a policy does with what it finds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Action {
    /// Refuse the request, with every violation in the message.
    #[default]
    Deny,
    /// Allow, and return the violations as warnings (`kubectl` prints
    /// `Warning: ...`).
    Warn,
    /// Allow; log, count and trace the violations.
    Audit,
}

impl Action {
    /// Lower-case name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Warn => "warn",
            Self::Audit => "audit",
        }
    }
}

/// What happens when a rule cannot be evaluated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum FailurePolicy {
    /// Treat it as a violation (fail closed).
    #[default]
    Fail,
    /// Ignore the rule (fail open), with a log line.
    Ignore,
}

/// Who enforces a `ValidatorPolicy` in a cluster (ADR 0009). Files, and
/// `check`, ignore it: offline, `vap` prints the pair to apply by hand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Enforcement {
    /// The webhook, always.
    #[default]
    Webhook,
    /// The API server, through a generated ValidatingAdmissionPolicy and
    /// binding, when the policy can be pushed down; else the webhook, and
    /// a Warning Event says why.
    InProcess,
    /// The API server when the policy can be pushed down, else the webhook;
    /// the status says which and why.
    Auto,
}

impl Enforcement {
    /// Whether this is the default, `Webhook`.
    pub fn is_webhook(&self) -> bool {
        *self == Self::Webhook
    }
}

/// What a `ValidatorPolicy` or `NamespacedValidatorPolicy` says: which
/// requests it judges, by which rules, and what it does with what it
/// finds. A policy needs built-in `rules` or CEL `validations`, or both.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// What the policy does with what it finds: Deny refuses the request
    /// with every violation in the message, Warn allows it with warnings,
    /// Audit allows it and logs, counts and traces the violations.
    #[serde(default)]
    pub action: Action,
    /// What happens when a rule cannot be evaluated: Fail (a violation,
    /// fail closed) or Ignore (fail open, with a log line).
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// Which requests the policy judges; empty: CREATE and UPDATE of every
    /// resource outside the system namespaces.
    #[serde(default, rename = "match")]
    pub matching: Match,
    /// Built-in rules: labels, annotations, replicas, Services, images,
    /// resources, pod security.
    #[serde(default)]
    pub rules: Rules,
    /// CEL conditions that must all be true for the policy to apply, as in
    /// ValidatingAdmissionPolicy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<cel::NamedExpression>,
    /// CEL variables, read as `variables.<name>` by later expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<cel::NamedExpression>,
    /// CEL checks, as in ValidatingAdmissionPolicy: each must be true.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<cel::Validation>,
    /// CEL values recorded in the API server's audit event for every
    /// request the policy applies to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit_annotations: Vec<cel::AuditAnnotation>,
    /// The kind of the parameter objects CEL reads as `params` (with
    /// `paramRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_kind: Option<ParamKind>,
    /// Which parameter objects (with `paramKind`), as a
    /// ValidatingAdmissionPolicyBinding's `paramRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "portcullis_known::params::param_ref_schema")]
    pub param_ref: Option<serde_json::Value>,
    /// Who enforces the policy in a cluster: `Webhook` (the default);
    /// `InProcess` or `Auto`: the API server itself, through a generated
    /// ValidatingAdmissionPolicy and binding, when nothing in the policy
    /// needs the webhook (`status.enforcedBy` says which, and why). A
    /// NamespacedValidatorPolicy is always enforced by the webhook.
    #[serde(default, skip_serializing_if = "Enforcement::is_webhook")]
    pub enforcement: Enforcement,
}

/// A checked, compiled policy.
#[derive(Debug)]
pub struct Policy {
    /// Its identity, as logs, metrics, reports and denials show it:
    /// `metadata.name`, or `namespace/name` for a namespaced policy (two
    /// teams may both have `require-labels`).
    pub name: String,
    /// The namespace of a namespaced policy: the only one it applies in.
    pub namespace: Option<String>,
    /// What to do with violations.
    pub action: Action,
    /// What to do when a rule cannot be evaluated.
    pub failure_policy: FailurePolicy,
    /// Which requests it applies to.
    pub matching: Matching,
    /// Built-in rules.
    pub rules: Rules,
    /// CEL match conditions, variables and validations.
    pub cel: CelRules,
    /// `paramKind` and `paramRef`: the objects CEL reads as `params`.
    pub params: Option<Params>,
}

impl Policy {
    /// Checks and compiles one policy, `name` (`metadata.name`) in
    /// `namespace` for a `NamespacedValidatorPolicy`. A CEL expression that
    /// does not compile, or whose estimated worst-case cost exceeds
    /// `cost_limit`, is refused with its position.
    pub fn check(name: &str, namespace: Option<String>, spec: PolicySpec, cost_limit: u64) -> Result<Self, Reason> {
        let mut spec = spec;
        if let Some(own) = &namespace {
            let outside = |field: &str| {
                Reason::OutOfNamespace(format!(
                    "{field}: a NamespacedValidatorPolicy applies only in its own namespace ({own})"
                ))
            };
            if spec.matching.include_system_namespaces {
                return Err(outside("match.includeSystemNamespaces"));
            }
            if !spec.matching.exclude_namespaces.is_empty() {
                return Err(outside("match.excludeNamespaces"));
            }
        }
        spec.matching.namespace = namespace.clone();
        for (field, selector) in [
            ("namespaceSelector", &spec.matching.namespace_selector),
            ("objectSelector", &spec.matching.object_selector),
        ] {
            if let Some(selector) = selector {
                selector.check().map_err(|e| Reason::Selector(field, e))?;
            }
        }
        spec.rules.check()?;
        let cel = CelRules::compile(
            spec.match_conditions,
            spec.variables,
            spec.validations,
            spec.audit_annotations,
            portcullis_cel::LoadBounds::Portcullis { cost: cost_limit },
        )?;
        if spec.rules.is_empty() && cel.validations.is_empty() {
            return Err(Reason::Empty);
        }
        let params = Params::from_spec(spec.param_kind, spec.param_ref)?;
        match &params {
            Some(_) if cel.validations.is_empty() => return Err(Reason::ParamsUnread),
            None if cel.reads("params") => return Err(Reason::NoParamKind),
            _ => {}
        }
        if let (Some(own), Some(other)) = (&namespace, params.as_ref().and_then(|p| p.namespace.as_ref()))
            && own != other
        {
            return Err(Reason::OutOfNamespace(format!(
                "paramRef.namespace: {other}: a NamespacedValidatorPolicy reads parameters in its own namespace \
                 ({own}) only"
            )));
        }
        Ok(Self {
            name: identity(name, namespace.as_deref()),
            namespace,
            action: spec.action,
            failure_policy: spec.failure_policy,
            matching: Matching::Portcullis(spec.matching),
            rules: spec.rules,
            cel,
            params,
        })
    }

    /// [`Policy::check`], refused as the object's status says it:
    /// `CompileError`, `CostOverLimit`, `OutOfNamespace` or `Invalid`, with
    /// the field and problem as `check` prints them.
    pub fn compile(name: &str, namespace: Option<String>, spec: PolicySpec, cost_limit: u64) -> Result<Self, Refusal> {
        Self::check(name, namespace, spec, cost_limit).map_err(|reason| reason.refusal())
    }
}

/// `name`, or `namespace/name`: how a policy or exception is shown.
pub fn identity(name: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// Every ValidatorPolicy and NamespacedValidatorPolicy document of
/// `sources` as written: name, namespace (namespaced ones) and spec; other
/// kinds are skipped.
pub fn specs<'a>(
    sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
) -> Result<Vec<(String, Option<String>, PolicySpec)>, DocumentError> {
    let mut specs = Vec::new();
    for raw in documents::parse_typed(sources, &DOCUMENT_TYPES)? {
        if raw.kind != KIND && raw.kind != NAMESPACED_KIND {
            continue;
        }
        let namespaced = raw.kind == NAMESPACED_KIND;
        let doc: documents::Document<PolicySpec> = raw.into_document()?;
        let namespace = doc.metadata.namespace.filter(|n| namespaced && !n.is_empty());
        specs.push((doc.metadata.name, namespace, doc.spec));
    }
    Ok(specs)
}

/// Every policy in force, and the exceptions to them.
#[derive(Debug, Default)]
pub struct PolicySet {
    /// In document order (files) or as the caller assembled them; shared,
    /// so that an unchanged object is never compiled again.
    pub policies: Vec<Arc<Policy>>,
    /// `PolicyException`s, in the same way.
    pub exceptions: Vec<Arc<Exception>>,
    /// What the CEL expressions of every policy read of the request's
    /// data: all that a request converts into CEL values.
    pub cel_reads: DataReads,
    /// What the API server accepts in a native policy and a
    /// `ValidatorPolicy` may not do (an estimated cost over the limit).
    pub warnings: Vec<String>,
    /// Whether a policy reads the namespaces (a `namespaceSelector`, or
    /// `namespaceObject`): a request then waits for its namespace to reach
    /// the watch.
    pub reads_namespaces: bool,
    /// The native ValidatingAdmissionPolicies of files, as written, that
    /// `check` type-checks as the API server would
    /// ([`native::typecheck`]).
    pub native_sources: Vec<ValidatingAdmissionPolicy>,
}

impl PolicySet {
    /// The set of compiled `policies` and `exceptions`, in that order. An
    /// exception naming a policy that is not there exempts from nothing.
    pub fn assemble(policies: Vec<Arc<Policy>>, exceptions: Vec<Arc<Exception>>) -> Self {
        let mut cel_reads = DataReads::default();
        policies.iter().for_each(|p| cel_reads.merge(&p.cel.data_reads));
        let reads_namespaces =
            cel_reads.namespace_object.is_some() || policies.iter().any(|p| p.matching.reads_namespaces());
        Self { policies, exceptions, cel_reads, warnings: Vec::new(), reads_namespaces, native_sources: Vec::new() }
    }

    /// Parses, checks and compiles every document of every source, with
    /// exceptions allowed in any namespace (see [`PolicySet::from_sources_in`]).
    pub fn from_sources<'a>(
        sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
        cost_limit: u64,
    ) -> Result<Self, PolicyError> {
        Self::from_sources_in(sources, cost_limit, &ExceptionNamespaces::Any)
    }

    /// Parses, checks and compiles every document of every source, each
    /// as [`Policy::check`] and [`Exception::check`] do (an exception
    /// with a `metadata.namespace` only where `exception_namespaces`
    /// allows), then assembles them. Unlike in a cluster, one bad document
    /// refuses the whole set, and so does an exception naming a policy the
    /// files do not define.
    pub fn from_sources_in<'a>(
        sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
        cost_limit: u64,
        exception_namespaces: &ExceptionNamespaces,
    ) -> Result<Self, PolicyError> {
        let mut policies: Vec<Arc<Policy>> = Vec::new();
        let mut origins: BTreeMap<String, Origin> = BTreeMap::new();
        let mut exceptions = Vec::new();
        let (mut native_policies, mut native_bindings) = (Vec::new(), Vec::new());
        for raw in documents::parse_typed(sources, &DOCUMENT_TYPES)? {
            match raw.kind.as_str() {
                exception::KIND => {
                    exceptions.push(raw);
                    continue;
                }
                // Files have not been through the API server's validation
                // (the cluster's objects have): they go through ours.
                native::POLICY_KIND => {
                    let origin = raw.origin.clone();
                    let policy = raw.into_object()?;
                    native::fields::policy(&policy).map_err(|e| origin.invalid(e))?;
                    native_policies.push(policy);
                    continue;
                }
                native::BINDING_KIND => {
                    let origin = raw.origin.clone();
                    let binding = raw.into_object()?;
                    native::fields::binding(&binding).map_err(|e| origin.invalid(e))?;
                    native_bindings.push(binding);
                    continue;
                }
                _ => {}
            }
            let namespaced = raw.kind == NAMESPACED_KIND;
            let origin = raw.origin.clone();
            let doc: documents::Document<PolicySpec> = raw.into_document()?;
            let name = doc.metadata.name;
            if name.trim().is_empty() {
                return Err(origin.invalid("metadata.name is required").into());
            }
            // kubectl drops the namespace of a cluster-scoped object; so do we.
            let namespace = match doc.metadata.namespace.filter(|n| !n.is_empty()) {
                Some(namespace) if namespaced => Some(namespace),
                None if namespaced => {
                    return Err(origin
                        .invalid(format!("{NAMESPACED_KIND} {name}: metadata.namespace is required"))
                        .into());
                }
                _ => None,
            };
            let id = identity(&name, namespace.as_deref());
            if let Some(first) = origins.get(&id) {
                return Err(PolicyError::Duplicate { name: id, first: first.to_string(), second: origin.to_string() });
            }
            let policy = Policy::check(&name, namespace, doc.spec, cost_limit)
                .map_err(|reason| origin.invalid(Refused { what: "policy", name: id.clone(), reason }))?;
            origins.insert(id, origin);
            policies.push(Arc::new(policy));
        }
        let mut checked: Vec<Arc<Exception>> = Vec::new();
        for raw in exceptions {
            let origin = raw.origin.clone();
            let doc: documents::Document<exception::Spec> = raw.into_document()?;
            let name = doc.metadata.name;
            let namespace = doc.metadata.namespace.filter(|n| !n.is_empty());
            let id = identity(&name, namespace.as_deref());
            if name.trim().is_empty() || checked.iter().any(|e| e.name == id) {
                return Err(origin.invalid(format!("exception {name:?}: metadata.name must be set and unique")).into());
            }
            let refused = |e: ExceptionError| {
                origin.invalid(Refused { what: "exception", name: id.clone(), reason: Reason::Exception(e) })
            };
            let exception = Exception::check(&name, namespace, doc.spec, exception_namespaces).map_err(refused)?;
            let unknown = exception
                .spec
                .policies
                .iter()
                .find(|entry| !policies.iter().any(|p| exception.entry_names(entry, &p.name)));
            if let Some(unknown) = unknown {
                return Err(refused(ExceptionError::UnknownPolicy(unknown.clone())).into());
            }
            checked.push(Arc::new(exception));
        }
        let mut natives = native::assemble(&native_policies, &native_bindings, cost_limit);
        if let Some(refused) = std::mem::take(&mut natives.refused).into_iter().next() {
            return Err(PolicyError::Native(refused));
        }
        let mut set = Self::assemble(policies, checked).with_natives(natives);
        set.native_sources = native_policies;
        Ok(set)
    }

    /// This set and the native policies of `natives` (refusals dropped:
    /// the caller has said what they are).
    pub fn with_natives(self, natives: native::Natives) -> Self {
        let mut policies = self.policies;
        policies.extend(natives.policies);
        let mut set = Self::assemble(policies, self.exceptions);
        set.warnings = natives.warnings;
        set
    }

    /// Whether any policy is a native ValidatingAdmissionPolicy.
    pub fn has_native(&self) -> bool {
        self.policies.iter().any(|p| p.matching.binding().is_some())
    }

    /// Every `paramKind` a policy reads.
    pub fn param_kinds(&self) -> std::collections::BTreeSet<ParamKind> {
        self.policies.iter().filter_map(|p| p.params.as_ref()).map(|p| p.kind.clone()).collect()
    }
}
