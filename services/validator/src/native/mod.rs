//! Native `ValidatingAdmissionPolicy` objects (admissionregistration.k8s.io/v1)
//! judged by the validator's own engine: each binding with its policy
//! becomes one [`Policy`], matched as the API server matches
//! (`portcullis_admission::native_match`) and worded as the API server words its denials, so that
//! `check` tests a VAP before it reaches a cluster and the audit reports
//! the objects that already break one. The API server enforces them; the
//! webhook never does.
//!
//! A VAP is taken exactly when the API server would take it: the
//! validator's stricter load-time cost estimate becomes a warning here, and
//! what the API server would refuse (an expression that does not compile,
//! a field its validation refuses: [`fields`], the one place those rules
//! are written), or what cannot be judged outside it (`authorizer`), is a
//! clear error, never a silent pass. Compiling maps the fields' values to
//! the engine's; whatever it cannot take that [`fields`] also finds (a
//! value it cannot map, a match or `paramRef` it cannot build) is refused
//! with [`fields`]' errors, and only what those checks do not cover (a
//! selector the API server takes and Portcullis cannot) in its own.
//! `namespaceObject` is the object's namespace, watched in a cluster and
//! among the manifests offline; one that is not known fails the policy.

pub mod builtin;
pub mod fields;
pub mod generate;
mod pods;
pub mod typecheck;
pub mod watched;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use portcullis_cel::{CompileError, LoadBounds};

use crate::cel::{self, CelError, CelProblem, CelRules};
use crate::matching::Matching;
use crate::policy::{Action, FailurePolicy, Policy};
use portcullis_admission::native_match::{MatchError, NativeMatch};
use portcullis_known::params::{ParamSpecError, Params};

/// The API version of native policies and bindings.
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";
/// The kind of a native policy.
pub const POLICY_KIND: &str = "ValidatingAdmissionPolicy";
/// The kind of a native policy's binding.
pub const BINDING_KIND: &str = "ValidatingAdmissionPolicyBinding";

/// Why a native policy, through one binding, cannot be judged here.
#[derive(Debug, thiserror::Error)]
#[error("ValidatingAdmissionPolicy {policy:?} with binding {binding:?}: {problem}")]
pub struct NativeError {
    /// The policy's name.
    pub policy: String,
    /// The binding's name.
    pub binding: String,
    /// What is wrong.
    #[source]
    pub problem: Box<Problem>,
}

/// What is wrong with a native policy or its binding.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The policy has no `spec`.
    #[error("spec: Required value")]
    NoSpec,
    /// An expression the API server refuses, or one that reads what only
    /// the API server has.
    #[error(transparent)]
    Cel(CelError),
    /// `matchConstraints` or `matchResources` the API server refuses.
    #[error(transparent)]
    Match(#[from] MatchError),
    /// A value compiling cannot map (a `failurePolicy`, `reason` or
    /// validation action the API server refuses), with the field errors
    /// of its object in the API server's words ([`fields`]).
    #[error(transparent)]
    Invalid(fields::Invalid),
    /// `paramKind` with a binding whose `paramRef` cannot be used.
    #[error("binding spec.paramRef: {0}")]
    Params(#[from] ParamSpecError),
}

/// One native policy through one binding, compiled, with what the API
/// server would accept but the validator warns of.
#[derive(Debug)]
pub struct Compiled {
    /// The policy, named after the ValidatingAdmissionPolicy.
    pub policy: Arc<Policy>,
    /// Warnings: expressions whose estimated cost the validator would
    /// refuse in a `ValidatorPolicy`.
    pub warnings: Vec<String>,
}

/// Every binding's policy, and what could not be compiled.
#[derive(Debug, Default)]
pub struct Natives {
    /// In binding name order.
    pub policies: Vec<Arc<Policy>>,
    /// Warnings of the policies taken.
    pub warnings: Vec<String>,
    /// The pairs refused.
    pub refused: Vec<NativeError>,
}

/// Pairs every binding with its policy (a binding whose policy is not
/// there binds nothing, as in the API server) and compiles each pair.
pub fn assemble(
    policies: &[ValidatingAdmissionPolicy],
    bindings: &[ValidatingAdmissionPolicyBinding],
    cost_limit: u64,
) -> Natives {
    let by_name: BTreeMap<&str, &ValidatingAdmissionPolicy> =
        policies.iter().filter_map(|p| Some((p.metadata.name.as_deref()?, p))).collect();
    let mut sorted: Vec<&ValidatingAdmissionPolicyBinding> = bindings.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut natives = Natives::default();
    for binding in sorted {
        let Some(policy) = by_name.get(binding.spec.policy_name.as_str()) else {
            continue;
        };
        match compile(policy, binding, cost_limit) {
            Ok(compiled) => {
                natives.policies.push(compiled.policy);
                natives.warnings.extend(compiled.warnings);
            }
            Err(e) => natives.refused.push(e),
        }
    }
    natives
}

/// Compiles `policy` through `binding`: CEL as the API server takes it
/// (an estimated cost over `cost_limit`, or an expression over Portcullis'
/// length bound, only warns), the match, the
/// actions and parameters. The fields are [`fields`]' to check, before
/// (a file's pair, at parse) or by the API server (a cluster's): what is
/// refused here (a value not mapped, a match or `paramRef` not built) is
/// refused with their errors when they find it.
pub fn compile(
    policy: &ValidatingAdmissionPolicy,
    binding: &ValidatingAdmissionPolicyBinding,
    cost_limit: u64,
) -> Result<Compiled, NativeError> {
    let name = policy.metadata.name.clone().unwrap_or_default();
    let binding_name = binding.metadata.name.clone().unwrap_or_default();
    let fail = |problem: Problem| NativeError {
        policy: name.clone(),
        binding: binding_name.clone(),
        problem: Box::new(problem),
    };
    // What compiling cannot take is refused in the field checks' words,
    // the API server's (the policy's errors first). A file's pair passed
    // them before compiling and a cluster's passed the API server's own;
    // should they find nothing (they and compiling disagreeing, a bug),
    // `otherwise` says what compiling met.
    let refuse = |otherwise: Problem| fail(field_errors(policy, binding).map_or(otherwise, Problem::Invalid));
    let unexplained = |kind, name: &str| Problem::Invalid(fields::Invalid::unexplained(kind, name));
    let spec = policy.spec.as_ref().ok_or_else(|| refuse(Problem::NoSpec))?;
    let binding_spec = &binding.spec;
    let action =
        action(&binding_spec.validation_actions).ok_or_else(|| refuse(unexplained(BINDING_KIND, &binding_name)))?;
    let refused = || refuse(unexplained(POLICY_KIND, &name));
    let failure_policy = match spec.failure_policy.as_deref() {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(_) => return Err(refused()),
    };
    let named = |name: &String, expression: &String| cel::NamedExpression {
        name: name.clone(),
        expression: expression.clone(),
    };
    let match_conditions: Vec<_> =
        spec.match_conditions.iter().flatten().map(|c| named(&c.name, &c.expression)).collect();
    let variables: Vec<_> = spec.variables.iter().flatten().map(|v| named(&v.name, &v.expression)).collect();
    let mut validations = Vec::new();
    for v in spec.validations.iter().flatten() {
        let reason = match v.reason.as_deref() {
            // The API server's default for a VAP (a ValidatorPolicy's is Forbidden).
            None => Some(cel::Reason::Invalid),
            Some("Forbidden") => Some(cel::Reason::Forbidden),
            Some("Invalid") => Some(cel::Reason::Invalid),
            Some("RequestEntityTooLarge") => Some(cel::Reason::RequestEntityTooLarge),
            Some(_) => return Err(refused()),
        };
        validations.push(cel::Validation {
            expression: v.expression.clone(),
            message: v.message.clone().filter(|m| !m.is_empty()),
            message_expression: v.message_expression.clone().filter(|m| !m.is_empty()),
            reason,
        });
    }
    let audit_annotations: Vec<cel::AuditAnnotation> = spec
        .audit_annotations
        .iter()
        .flatten()
        .map(|a| cel::AuditAnnotation { key: a.key.clone(), value_expression: a.value_expression.clone() })
        .collect();
    let mut warnings = Vec::new();
    let compile = |bounds| {
        CelRules::compile(
            match_conditions.clone(),
            variables.clone(),
            validations.clone(),
            audit_annotations.clone(),
            bounds,
        )
    };
    let cel = match compile(LoadBounds::Portcullis { cost: cost_limit }) {
        Ok(cel) => cel,
        Err(
            e @ CelError {
                problem: CelProblem::Expression(CompileError::TooCostly { .. } | CompileError::TooLong { .. }),
                ..
            },
        ) => {
            // Portcullis' own load-time bounds, not the API server's, which
            // takes it; its runtime budget bounds it, here as there. The
            // first expression out of them is named.
            warnings.push(format!(
                "ValidatingAdmissionPolicy {name:?}: {} (taken, as the API server takes it; its runtime cost \
                 limit applies)",
                portcullis_telemetry::error_chain(&e)
            ));
            compile(LoadBounds::ApiServer).map_err(|e| fail(Problem::Cel(e)))?
        }
        Err(e) => return Err(fail(Problem::Cel(e))),
    };
    let matching =
        NativeMatch::new(spec.match_constraints.as_ref(), &binding_name, binding_spec.match_resources.as_ref())
            .map_err(|e| refuse(e.into()))?;
    let params =
        Params::of_native(spec.param_kind.as_ref(), binding_spec.param_ref.as_ref()).map_err(|e| refuse(e.into()))?;
    let policy = Policy {
        name,
        namespace: None,
        action,
        failure_policy,
        matching: Matching::Native(Box::new(matching)),
        rules: Default::default(),
        cel,
        params,
    };
    Ok(Compiled { policy: Arc::new(policy), warnings })
}

/// The binding's `validationActions` as one action: Deny (with or without
/// Audit) denies, Warn (with or without Audit) warns, Audit alone audits;
/// `None` for a list the API server refuses (none, an unknown action, Deny
/// with Warn).
fn action(actions: &[String]) -> Option<Action> {
    if actions.is_empty() || actions.iter().any(|a| !matches!(a.as_str(), "Deny" | "Warn" | "Audit")) {
        return None;
    }
    let has = |a: &str| actions.iter().any(|x| x == a);
    match (has("Deny"), has("Warn")) {
        (true, true) => None,
        (true, false) => Some(Action::Deny),
        (false, true) => Some(Action::Warn),
        (false, false) => Some(Action::Audit),
    }
}

/// What the field checks find wrong with the pair (the policy's errors
/// first), if anything.
fn field_errors(
    policy: &ValidatingAdmissionPolicy,
    binding: &ValidatingAdmissionPolicyBinding,
) -> Option<fields::Invalid> {
    fields::policy(policy).and_then(|()| fields::binding(binding)).err()
}

/// The API server's words for a native policy's finding: the denial
/// (`ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`)
/// or the warning (`Validation failed for ValidatingAdmissionPolicy 'p'
/// with binding 'b': ...`).
pub fn worded(policy: &str, binding: &str, action: Action, message: &str) -> String {
    match action {
        Action::Deny => {
            format!("ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}")
        }
        Action::Warn | Action::Audit => {
            format!("Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding}': {message}")
        }
    }
}

#[cfg(test)]
mod tests;
