//! Native `MutatingAdmissionPolicy` objects (admissionregistration.k8s.io/v1)
//! run by the injector's own engine, with the API server's semantics: each
//! binding with its policy becomes one [`NativeMutation`], matched as the
//! API server matches (`portcullis_admission::native_match`), its mutations
//! evaluated by `portcullis-cel` in the mutation environment (`Object{...}`,
//! `JSONPatch{...}`) and applied in order ([`run`]): a JSON Patch as the
//! API server applies it, an apply configuration merged by server-side
//! apply's rules over the kind's schema ([`crate::apply`]).
//!
//! `mutate` tries a MAP before it reaches a cluster. A MAP is taken exactly
//! when the API server would take it: what it would refuse, or what cannot
//! be evaluated outside it (`authorizer`), is a clear error naming the
//! policy and the field, never a silent pass. `namespaceSelector` and
//! `namespaceObject` read the namespaces the caller knows (watched by the
//! webhook, given as manifests to `mutate`).

pub mod own;
mod parts;
pub mod run;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, Variable,
};
use portcullis_admission::native_match::{MatchError, NativeMatch};
use portcullis_cel::reads::DataReads;
use portcullis_cel::{CompileError, Environment, Expression, LoadBounds, compile_in};
use portcullis_known::params::{ParamSpecError, Params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apply::Atomics;

/// How a mutation's expression says its change (`patchType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PatchType {
    /// A list of `JSONPatch{op, path, value, from}`.
    #[serde(rename = "JSONPatch")]
    JsonPatch,
    /// An `Object{...}` merged by server-side apply's rules.
    ApplyConfiguration,
    /// An object applied as a JSON Merge Patch (RFC 7386): lists replaced
    /// whole, `null` removes a field. Portcullis' own, past MAP's limits.
    #[serde(rename = "JSONMergePatch")]
    JsonMergePatch,
}

/// What happens when a mutation fails (its expression errs or is stopped
/// by the budget, or its result does not apply): `Fail` denies the request,
/// `Ignore` admits it without this policy's changes, with a warning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// The request is denied (the default).
    #[default]
    Fail,
    /// The mutation is skipped.
    Ignore,
}

/// One compiled mutation.
#[derive(Debug)]
pub struct Mutation {
    /// Its patch type.
    pub patch_type: PatchType,
    /// Its expression.
    pub expression: Expression,
    /// Its value, when the expression names no variable: evaluated once,
    /// at load ([`portcullis_cel::fold`]).
    pub folded: Option<Folded>,
}

/// A mutation's value computed at load, and as JSON, which its patch is
/// made from.
#[derive(Debug)]
pub struct Folded {
    /// As the expression returned it, with its cost.
    pub constant: portcullis_cel::Constant,
    /// As JSON.
    pub json: serde_json::Value,
}

/// A named expression (match condition or variable).
#[derive(Debug)]
pub struct Named {
    /// Its name.
    pub name: String,
    /// Its expression.
    pub expression: Expression,
}

/// A MAP through one of its bindings, compiled.
#[derive(Debug)]
pub struct NativeMutation {
    /// The policy's name.
    pub policy: String,
    /// The binding's name.
    pub binding: String,
    /// The policy's and binding's match; `None` for the injector's own
    /// mutations, which see what its webhook configuration sends.
    matching: Option<NativeMatch>,
    conditions: Vec<Named>,
    variables: Vec<Named>,
    mutations: Vec<Mutation>,
    /// `failurePolicy`.
    pub failure: FailurePolicy,
    /// `reinvocationPolicy: IfNeeded`: run again when something after it
    /// changed the object.
    pub reinvoke: bool,
    /// What an apply configuration may do to atomic values.
    pub atomics: Atomics,
    /// `paramKind` with the binding's `paramRef`.
    params: Option<Params>,
    data_reads: DataReads,
}

impl NativeMutation {
    /// Whether the values of all of its mutations were computed at load
    /// ([`Folded`]); its match conditions and variables still run on each
    /// request.
    pub fn mutations_folded(&self) -> bool {
        self.mutations.iter().all(|m| m.folded.is_some())
    }

    /// Whether an expression reads `namespaceObject`.
    pub fn reads_namespace_object(&self) -> bool {
        self.data_reads.namespace_object.is_some()
    }
}

/// Why a MAP or binding could not be taken.
#[derive(Debug, thiserror::Error)]
#[error("MutatingAdmissionPolicy {policy:?} (binding {binding:?}): {problem}")]
pub struct NativeError {
    /// The policy.
    pub policy: String,
    /// The binding (empty for a policy without bindings).
    pub binding: String,
    /// What is wrong (boxed: errors stay small on the success path).
    #[source]
    pub problem: Box<Problem>,
}

/// What is wrong with a MAP or binding.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// An expression the API server would refuse, or that cannot be
    /// evaluated here.
    #[error("{field}: {error}")]
    Expression {
        /// Where (`spec.mutations[0].applyConfiguration.expression`).
        field: String,
        /// Why.
        #[source]
        error: CompileError,
    },
    /// A field with a value the API server refuses.
    #[error("{field}: {why}")]
    Invalid {
        /// The field.
        field: String,
        /// Why.
        why: String,
    },
    /// An unusable `matchConstraints` or `matchResources`.
    #[error(transparent)]
    Match(#[from] MatchError),
    /// An unusable `paramKind` or `paramRef`.
    #[error(transparent)]
    Params(#[from] ParamSpecError),
}

/// Pairs each binding with its policy (`spec.policyName`) and compiles
/// them, in order of policy name then binding name (the API server's order
/// is that of a map, unspecified); a binding to a policy that is not there
/// is skipped, as in the API server.
pub fn assemble(
    policies: &[MutatingAdmissionPolicy],
    bindings: &[MutatingAdmissionPolicyBinding],
) -> (Vec<NativeMutation>, Vec<NativeError>) {
    let mut pairs: Vec<(&MutatingAdmissionPolicy, &MutatingAdmissionPolicyBinding)> = bindings
        .iter()
        .filter_map(|b| {
            let name = b.spec.as_ref()?.policy_name.as_deref()?;
            policies.iter().find(|p| p.metadata.name.as_deref() == Some(name)).map(|p| (p, b))
        })
        .collect();
    pairs.sort_by(|a, b| (&a.0.metadata.name, &a.1.metadata.name).cmp(&(&b.0.metadata.name, &b.1.metadata.name)));
    let (mut compiled, mut errors) = (Vec::new(), Vec::new());
    for (policy, binding) in pairs {
        match compile(policy, binding) {
            Ok(c) => compiled.push(c),
            Err(e) => errors.push(e),
        }
    }
    (compiled, errors)
}

/// Compiles `policy` through `binding`, its expressions within the API
/// server's load bounds ([`LoadBounds::ApiServer`]): an expression longer
/// than Portcullis' own bound or costlier than its estimate allows is
/// taken, as the API server takes it; the runtime bounds stop it.
pub fn compile(
    policy: &MutatingAdmissionPolicy,
    binding: &MutatingAdmissionPolicyBinding,
) -> Result<NativeMutation, NativeError> {
    let policy_name = policy.metadata.name.clone().unwrap_or_default();
    let binding_name = binding.metadata.name.clone().unwrap_or_default();
    let fail = |problem| NativeError {
        policy: policy_name.clone(),
        binding: binding_name.clone(),
        problem: Box::new(problem),
    };
    let spec = policy.spec.as_ref().ok_or_else(|| fail(invalid("spec", "Required value")))?;
    let binding_spec = binding.spec.as_ref().ok_or_else(|| fail(invalid("spec", "Required value")))?;
    let params =
        Params::of_native(spec.param_kind.as_ref(), binding_spec.param_ref.as_ref()).map_err(|e| fail(e.into()))?;
    let matching =
        NativeMatch::new(spec.match_constraints.as_ref(), &binding_name, binding_spec.match_resources.as_ref())
            .map_err(|e| fail(e.into()))?;
    let mut mutations = Vec::new();
    for (i, m) in spec.mutations.iter().flatten().enumerate() {
        let (patch_type, source, field) = match (m.patch_type.as_str(), &m.json_patch, &m.apply_configuration) {
            ("JSONPatch", Some(p), None) => (PatchType::JsonPatch, p.expression.as_deref(), "jsonPatch"),
            ("ApplyConfiguration", None, Some(a)) => {
                (PatchType::ApplyConfiguration, a.expression.as_deref(), "applyConfiguration")
            }
            (other, ..) => {
                let why = format!("patchType {other:?} needs exactly its own field (jsonPatch or applyConfiguration)");
                return Err(fail(invalid(&format!("spec.mutations[{i}]"), &why)));
            }
        };
        let field = format!("spec.mutations[{i}].{field}.expression");
        mutations.push((patch_type, source.ok_or_else(|| fail(invalid(&field, "Required value")))?, field));
    }
    let reinvoke = match spec.reinvocation_policy.as_deref() {
        // Required in admissionregistration.k8s.io/v1, as the API server
        // says.
        None => return Err(fail(invalid("spec.reinvocationPolicy", "Required value"))),
        Some("Never") => false,
        Some("IfNeeded") => true,
        Some(other) => return Err(fail(invalid("spec.reinvocationPolicy", &format!("unsupported value {other:?}")))),
    };
    let failure = match spec.failure_policy.as_deref() {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(other) => return Err(fail(invalid("spec.failurePolicy", &format!("unsupported value {other:?}")))),
    };
    let uncompiled = Uncompiled {
        policy: policy_name.clone(),
        binding: binding_name.clone(),
        matching: Some(matching),
        params,
        conditions: spec.match_conditions.as_deref().unwrap_or_default(),
        variables: spec.variables.as_deref().unwrap_or_default(),
        mutations,
        failure,
        reinvoke,
        // As the API server: setting part of an atomic value is refused.
        atomics: Atomics::Refuse,
        field_prefix: "spec.",
    };
    uncompiled.compile(LoadBounds::ApiServer).map_err(fail)
}

/// A MAP with its binding, or one of the injector's own mutations, before
/// its expressions are compiled.
struct Uncompiled<'a> {
    policy: String,
    binding: String,
    matching: Option<NativeMatch>,
    params: Option<Params>,
    conditions: &'a [MatchCondition],
    variables: &'a [Variable],
    /// Each mutation's patch type, expression and field.
    mutations: Vec<(PatchType, &'a str, String)>,
    failure: FailurePolicy,
    reinvoke: bool,
    atomics: Atomics,
    /// `spec.` for a MAP, where the fields are under its spec.
    field_prefix: &'static str,
}

impl Uncompiled<'_> {
    /// Compiles the expressions, refusing what the API server would.
    fn compile(self, bounds: LoadBounds) -> Result<NativeMutation, Problem> {
        let prefix = self.field_prefix;
        let expression = |field: String, source: &str| {
            compile_in(Environment::Mutation, source, bounds).map_err(|error| Problem::Expression { field, error })
        };
        let mut conditions = Vec::new();
        for (i, c) in self.conditions.iter().enumerate() {
            let field = format!("{prefix}matchConditions[{i}].expression");
            conditions.push(Named { name: c.name.clone(), expression: expression(field, &c.expression)? });
        }
        let mut variables = Vec::new();
        for (i, v) in self.variables.iter().enumerate() {
            let field = format!("{prefix}variables[{i}].expression");
            variables.push(Named { name: v.name.clone(), expression: expression(field, &v.expression)? });
        }
        if self.mutations.is_empty() {
            return Err(invalid(&format!("{prefix}mutations"), "Required value"));
        }
        let mut mutations = Vec::new();
        for (patch_type, source, field) in self.mutations {
            let expression = expression(field, source)?;
            let folded = portcullis_cel::fold(&expression).and_then(|constant| {
                Some(Folded { json: portcullis_cel::json::to_json(&constant.value).ok()?, constant })
            });
            mutations.push(Mutation { patch_type, expression, folded });
        }
        let mut data_reads = DataReads::default();
        let all = conditions.iter().chain(&variables).map(|n| &n.expression);
        for e in all.chain(mutations.iter().map(|m| &m.expression)) {
            data_reads.add(e);
        }
        Ok(NativeMutation {
            policy: self.policy,
            binding: self.binding,
            matching: self.matching,
            conditions,
            variables,
            mutations,
            failure: self.failure,
            reinvoke: self.reinvoke,
            atomics: self.atomics,
            params: self.params,
            data_reads,
        })
    }
}

fn invalid(field: &str, why: &str) -> Problem {
    Problem::Invalid { field: field.to_owned(), why: why.to_owned() }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::{MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding};

    /// Portcullis' own bounds on an expression (its length, its estimated
    /// cost) are not the API server's: a MAP over them is taken, as the
    /// API server takes it, and its runtime bounds apply.
    #[test]
    fn a_map_over_portcullis_own_bounds_is_taken_as_the_api_server_takes_it() {
        let long = "a".repeat(portcullis_cel::MAX_EXPRESSION_LEN);
        let quadratic = "object.metadata.labels.all(a, object.metadata.labels.all(b, a == b || a != b))";
        for expression in [format!("'{long}' != ''"), quadratic.to_owned()] {
            let policy: MutatingAdmissionPolicy = serde_yaml::from_str(&format!(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {{name: p}}\nspec:\n  \
                 reinvocationPolicy: Never\n  matchConstraints:\n    resourceRules: [{{apiGroups: [''], apiVersions: [v1], \
                 operations: [CREATE], resources: [pods]}}]\n  matchConditions: [{{name: c, expression: \"{expression}\"}}]\n  \
                 mutations: [{{patchType: JSONPatch, jsonPatch: {{expression: '[]'}}}}]\n"
            ))
            .unwrap_or_else(|e| panic!("{e}"));
            let binding: MutatingAdmissionPolicyBinding = serde_yaml::from_str(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: p}\n\
                 spec: {policyName: p}\n",
            )
            .unwrap_or_else(|e| panic!("{e}"));
            assert!(super::compile(&policy, &binding).is_ok(), "{}", &expression[..40]);
        }
    }
}
