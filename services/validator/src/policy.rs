//! `ValidatorPolicy` documents: what they may say, and their compiled form.

use std::collections::BTreeMap;
use std::path::Path;

use portcullis_admission::documents::{self, DocumentError, Origin};
use portcullis_admission::selector::SelectorError;
use portcullis_cel::reads::DataReads;
use serde::Deserialize;

use crate::cel::{self, CelError, CelRules};
use crate::exception::{self, Exception, ExceptionError};
use crate::matching::Match;
use crate::params::{ParamKind, ParamSpecError, Params};
use crate::rules::{Rules, RulesError};

const KIND: &str = "ValidatorPolicy";

/// Namespaces no policy applies to unless it sets
/// `match.includeSystemNamespaces: true`; the Portcullis namespace is added
/// to these at startup.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// Why a policy set was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A document does not parse or is not valid on its own.
    #[error(transparent)]
    Document(#[from] DocumentError),
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
}

/// What a policy does with what it finds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum FailurePolicy {
    /// Treat it as a violation (fail closed).
    #[default]
    Fail,
    /// Ignore the rule (fail open), with a log line.
    Ignore,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    action: Action,
    #[serde(default)]
    failure_policy: FailurePolicy,
    #[serde(default, rename = "match")]
    matching: Match,
    #[serde(default)]
    rules: Rules,
    #[serde(default)]
    match_conditions: Vec<cel::NamedExpression>,
    #[serde(default)]
    variables: Vec<cel::NamedExpression>,
    #[serde(default)]
    validations: Vec<cel::Validation>,
    #[serde(default)]
    audit_annotations: Vec<cel::AuditAnnotation>,
    param_kind: Option<ParamKind>,
    param_ref: Option<serde_json::Value>,
}

/// A checked, compiled policy.
#[derive(Debug)]
pub struct Policy {
    /// `metadata.name`.
    pub name: String,
    /// What to do with violations.
    pub action: Action,
    /// What to do when a rule cannot be evaluated.
    pub failure_policy: FailurePolicy,
    /// Which requests it applies to.
    pub matching: Match,
    /// Built-in rules.
    pub rules: Rules,
    /// CEL match conditions, variables and validations.
    pub cel: CelRules,
    /// `paramKind` and `paramRef`: the objects CEL reads as `params`.
    pub params: Option<Params>,
}

/// Every policy in force, and the exceptions to them.
#[derive(Debug, Default)]
pub struct PolicySet {
    /// In document order.
    pub policies: Vec<Policy>,
    /// `PolicyException` documents, in document order.
    pub exceptions: Vec<Exception>,
    /// What the CEL expressions of every policy read of the request's
    /// data: all that a request converts into CEL values.
    pub cel_reads: DataReads,
}

impl PolicySet {
    /// Parses, checks and compiles every document of every source. A CEL
    /// expression that does not compile, or whose estimated worst-case cost
    /// exceeds `cost_limit`, is refused with its position.
    pub fn from_sources<'a>(
        sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
        cost_limit: u64,
    ) -> Result<Self, PolicyError> {
        let mut policies: Vec<Policy> = Vec::new();
        let mut origins: BTreeMap<String, Origin> = BTreeMap::new();
        let mut exceptions = Vec::new();
        for raw in documents::parse_kinds(sources, &[KIND, exception::KIND])? {
            if raw.kind == exception::KIND {
                exceptions.push(raw);
                continue;
            }
            let origin = raw.origin.clone();
            let doc: documents::Document<Spec> = raw.into_document()?;
            let name = doc.metadata.name;
            if name.trim().is_empty() {
                return Err(origin.invalid("metadata.name is required").into());
            }
            if let Some(first) = origins.get(&name) {
                return Err(PolicyError::Duplicate { name, first: first.to_string(), second: origin.to_string() });
            }
            let spec = doc.spec;
            let invalid = |reason: Reason| origin.invalid(Refused { what: "policy", name: name.clone(), reason });
            for (field, selector) in [
                ("namespaceSelector", &spec.matching.namespace_selector),
                ("objectSelector", &spec.matching.object_selector),
            ] {
                if let Some(selector) = selector {
                    selector.check().map_err(|e| invalid(Reason::Selector(field, e)))?;
                }
            }
            spec.rules.check().map_err(|e| invalid(e.into()))?;
            let cel = CelRules::compile(
                spec.match_conditions,
                spec.variables,
                spec.validations,
                spec.audit_annotations,
                cost_limit,
            )
            .map_err(|e| invalid(e.into()))?;
            if spec.rules.is_empty() && cel.validations.is_empty() {
                return Err(invalid(Reason::Empty).into());
            }
            let params = Params::from_spec(spec.param_kind, spec.param_ref).map_err(|e| invalid(e.into()))?;
            match &params {
                Some(_) if cel.validations.is_empty() => return Err(invalid(Reason::ParamsUnread).into()),
                None if cel.reads("params") => return Err(invalid(Reason::NoParamKind).into()),
                _ => {}
            }
            origins.insert(name.clone(), origin);
            policies.push(Policy {
                name,
                action: spec.action,
                failure_policy: spec.failure_policy,
                matching: spec.matching,
                rules: spec.rules,
                cel,
                params,
            });
        }
        let names: Vec<&str> = policies.iter().map(|p| p.name.as_str()).collect();
        let mut checked: Vec<Exception> = Vec::new();
        for raw in exceptions {
            let origin = raw.origin.clone();
            let doc: documents::Document<exception::Spec> = raw.into_document()?;
            let name = doc.metadata.name;
            if name.trim().is_empty() || checked.iter().any(|e| e.name == name) {
                return Err(origin.invalid(format!("exception {name:?}: metadata.name must be set and unique")).into());
            }
            let exception = Exception::new(name.clone(), doc.spec, &names).map_err(|e| {
                origin.invalid(Refused { what: "exception", name: name.clone(), reason: Reason::Exception(e) })
            })?;
            checked.push(exception);
        }
        let mut cel_reads = DataReads::default();
        policies.iter().for_each(|p| cel_reads.merge(&p.cel.data_reads));
        Ok(Self { policies, exceptions: checked, cel_reads })
    }

    /// Every `paramKind` a policy reads.
    pub fn param_kinds(&self) -> std::collections::BTreeSet<ParamKind> {
        self.policies.iter().filter_map(|p| p.params.as_ref()).map(|p| p.kind.clone()).collect()
    }
}
