//! The injector's own CEL mutations: MutatingAdmissionPolicy's language in
//! an `InjectorConfig`, for the pods the injector's webhook receives, with
//! what MAP refuses made possible: an apply configuration may replace an
//! atomic list or struct whole (`atomicFields: Replace`, the default), and
//! `patchType: JSONMergePatch` replaces lists whole and removes fields with
//! `null`, so items can be removed (`object.spec.containers.filter(...)`).

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, MatchResources, Variable};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use portcullis_admission::native_match::{MatchError, NativeMatch};
use portcullis_admission::parts::Parts;
use portcullis_known::params::{ParamKind, Params};

use super::{FailurePolicy, NativeMutation, PatchType, Problem, Uncompiled};
use crate::apply::{Atomics, BUILTIN};

/// A mutation of the injector's own, in MAP's shape: match conditions,
/// variables and mutations written as a MutatingAdmissionPolicy's are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelMutation {
    /// Its name, in messages, warnings and the trace.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Which requests, as a MutatingAdmissionPolicy's `matchConstraints`
    /// (`resourceRules` required, `excludeResourceRules`,
    /// `namespaceSelector`, `objectSelector`, `matchPolicy`), within what
    /// the webhook configuration sends (pod CREATEs); unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_constraints: Option<MatchResources>,
    /// Conditions on the pod (CEL, `object`, `request`): all must be true
    /// for the mutations to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
    /// Named expressions the mutations read as `variables.<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
    /// The kind of the parameter objects CEL reads as `params` (with
    /// `paramRef`): a MutatingAdmissionPolicy's `paramKind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_kind: Option<ParamKind>,
    /// Which parameter objects (with `paramKind`), as a
    /// MutatingAdmissionPolicyBinding's `paramRef`: one by name or those a
    /// selector picks, in the pod's namespace unless it names one, and
    /// what to do when none is found. Of several, the mutations run with
    /// the first (by namespace and name) whose match conditions hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "portcullis_known::params::param_ref_schema")]
    pub param_ref: Option<serde_json::Value>,
    /// The mutations, applied in order.
    #[schemars(length(min = 1))]
    pub mutations: Vec<OwnMutation>,
    /// `Fail` (default): a mutation that fails denies the pod; `Ignore`:
    /// the pod is admitted without this entry's changes, with a warning.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// What an apply configuration may do to atomic lists, maps and
    /// structs (a container's `args`, `nodeSelector`): `Replace` (default)
    /// sets them whole; `Refuse` fails as MutatingAdmissionPolicy does.
    #[serde(default = "replace")]
    pub atomic_fields: Atomics,
    /// `Never` (default): the entry runs once; `IfNeeded`: it runs once
    /// more when an entry after it changed the pod, as the API server
    /// reinvokes a MutatingAdmissionPolicy after a later change.
    #[serde(default)]
    pub reinvocation_policy: ReinvocationPolicy,
}

/// Whether an entry runs again after a later one changed the pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReinvocationPolicy {
    /// Once.
    #[default]
    Never,
    /// Once more, after an entry after it changed the pod.
    IfNeeded,
}

fn replace() -> Atomics {
    Atomics::Replace
}

/// One mutation: MAP's `patchType` with its expression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnMutation {
    /// `ApplyConfiguration`, `JSONPatch` or `JSONMergePatch`.
    pub patch_type: PatchType,
    /// For `ApplyConfiguration`: an expression returning `Object{...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_configuration: Option<Expression>,
    /// For `JSONPatch`: an expression returning `[JSONPatch{...}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patch: Option<Expression>,
    /// For `JSONMergePatch`: an expression returning `Object{...}`, merged
    /// as RFC 7386 says (lists replaced whole, `null` removes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_merge_patch: Option<Expression>,
}

/// An expression field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expression {
    /// The CEL expression.
    pub expression: String,
}

/// A compiled [`CelMutation`], compared by its spec.
#[derive(Debug, Clone)]
pub struct CompiledMutation {
    /// What was written.
    pub spec: CelMutation,
    /// What runs.
    pub compiled: Arc<NativeMutation>,
    /// What it reads and changes of a pod: a request read without these
    /// parts is decided without it.
    pub pod_parts: Parts,
    /// Whether it may change the pod's spec; if not, the spec stays as
    /// usable as it was ([`crate::pod::unusable_in`]).
    pub spec_may_change: bool,
}

impl CompiledMutation {
    /// Whether it needs the namespaces: a `namespaceSelector`, or an
    /// expression reading `namespaceObject`.
    pub fn needs_namespaces(&self) -> bool {
        self.spec.match_constraints.as_ref().is_some_and(|c| c.namespace_selector.is_some())
            || self.compiled.reads_namespace_object()
    }
}

impl PartialEq for CompiledMutation {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

impl CelMutation {
    /// Compiles the mutation, refusing what would fail on every pod.
    pub fn compile(&self, cost_limit: u64) -> Result<CompiledMutation, Box<Problem>> {
        let fail = Box::new;
        if self.name.trim().is_empty() {
            return Err(fail(Problem::Invalid { field: "name".to_owned(), why: "Required value".into() }));
        }
        let mut mutations = Vec::new();
        for (i, m) in self.mutations.iter().enumerate() {
            let (source, field) = match m.patch_type {
                PatchType::ApplyConfiguration => (&m.apply_configuration, "applyConfiguration"),
                PatchType::JsonPatch => (&m.json_patch, "jsonPatch"),
                PatchType::JsonMergePatch => (&m.json_merge_patch, "jsonMergePatch"),
            };
            let set =
                [&m.apply_configuration, &m.json_patch, &m.json_merge_patch].iter().filter(|e| e.is_some()).count();
            let field = format!("mutations[{i}].{field}.expression");
            let Some(source) = source.as_ref().filter(|_| set == 1) else {
                let why = "Required value, and no expression of another patch type".to_owned();
                return Err(fail(Problem::Invalid { field, why }));
            };
            mutations.push((m.patch_type, source.expression.as_str(), field));
        }
        let uncompiled = Uncompiled {
            policy: self.name.clone(),
            binding: String::new(),
            // Unset: what the webhook configuration sends.
            matching: match self.match_constraints.as_ref() {
                Some(constraints) => {
                    Some(NativeMatch::new(Some(constraints), "", None).map_err(|e| fail(within_entry(e)))?)
                }
                None => None,
            },
            params: Params::from_spec(self.param_kind.clone(), self.param_ref.clone()).map_err(|e| fail(e.into()))?,
            conditions: &self.match_conditions,
            variables: &self.variables,
            mutations,
            failure: self.failure_policy,
            reinvoke: self.reinvocation_policy == ReinvocationPolicy::IfNeeded,
            atomics: self.atomic_fields,
            field_prefix: "",
        };
        let compiled = uncompiled.compile(portcullis_cel::LoadBounds::Portcullis { cost: cost_limit }).map_err(fail)?;
        let pod_parts = compiled.object_parts(&BUILTIN, BUILTIN.kind("", "v1", "Pod"));
        let spec_may_change = compiled.may_change("spec");
        Ok(CompiledMutation { spec: self.clone(), compiled: Arc::new(compiled), pod_parts, spec_may_change })
    }
}

/// A `matchConstraints` problem named by the entry's own field: the
/// shared matcher speaks of a MutatingAdmissionPolicy's
/// `spec.matchConstraints`.
fn within_entry(error: MatchError) -> Problem {
    let (field, why) = match error {
        MatchError::NoRules => ("matchConstraints.resourceRules", "Required value".to_owned()),
        other => ("matchConstraints", other.to_string()),
    };
    Problem::Invalid { field: field.to_owned(), why }
}
