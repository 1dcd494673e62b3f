//! Running a compiled MAP on a request's object, as the API server's
//! `mutating` policy plugin does: match, then every match condition (one
//! false: not applied), then each mutation in order on the object the one
//! before left, each with its own budget; a failure denies the request
//! under `failurePolicy: Fail` and skips the policy under `Ignore`.

use std::borrow::Cow;
use std::time::Instant;

use portcullis_admission::Request;
use portcullis_admission::native_match::{KnownNamespaces, namespace_object_for};
use portcullis_cel::budget::Limits;
use portcullis_cel::json::to_json;
use portcullis_cel::{Bindings, Converted, Value as Cel, evaluate};
use portcullis_known::params::ParamSource;
use serde::Deserialize as _;
use serde_json::Value;

use super::{FailurePolicy, Mutation, NativeMutation, PatchType};
use crate::apply::{self, Atomics, MergeError, Schemas};

/// What a MAP needs besides the request.
#[derive(Clone, Copy)]
#[allow(missing_debug_implementations)] // KnownNamespaces has no Debug
pub struct Context<'a> {
    /// The namespaces, for `namespaceSelector` and `namespaceObject`.
    pub namespaces: &'a dyn KnownNamespaces,
    /// The schemas apply configurations are merged by.
    pub schemas: &'a Schemas,
    /// The CEL limits of each mutation.
    pub limits: Limits,
    /// When all CEL of the request must be done.
    pub deadline: Instant,
    /// The parameter objects a `paramRef` may name.
    pub params: &'a dyn ParamSource,
}

/// What running a MAP did.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// It does not apply to the request, or a match condition is false.
    NotApplied,
    /// It ran, and its mutations changed the object (`true`) or left it
    /// as it was.
    Applied(bool),
    /// It failed under `failurePolicy: Ignore`: the object is as before;
    /// the message says why.
    Ignored(String),
}

/// A MAP failed under `failurePolicy: Fail`: the request is denied with
/// this message, the API server's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy '{policy}' with binding '{binding}' denied request: {message}")]
pub struct Denied {
    /// The policy.
    pub policy: String,
    /// The binding.
    pub binding: String,
    /// Why.
    pub message: String,
}

impl NativeMutation {
    /// Runs the MAP on `object` (the request's object as the mutations
    /// before this one left it), in place; `accept` judges what its
    /// mutations left (an error is the MAP's failure). Under
    /// `failurePolicy: Fail` a failure leaves `object` as far as the
    /// mutations got, for the caller to drop with the request; under
    /// `Ignore`, as it was (a copy is kept while the mutations run).
    pub fn run(
        &self,
        context: Context<'_>,
        req: &Request,
        object: &mut Value,
        accept: impl Fn(&Value) -> Result<(), String>,
    ) -> Result<Outcome, Denied> {
        let mut before = None;
        let ran = self.try_run(context, req, object, &mut before);
        let ran = ran.and_then(|outcome| match outcome {
            Outcome::Applied(_) => accept(object).map(|()| outcome),
            other => Ok(other),
        });
        ran.or_else(|message| {
            if let Some(before) = before {
                *object = before;
            }
            self.failed(message)
        })
    }

    /// A failure of this MAP found after it ran, under its failure policy.
    pub fn failed(&self, message: String) -> Result<Outcome, Denied> {
        match self.failure {
            FailurePolicy::Ignore => Ok(Outcome::Ignored(message)),
            FailurePolicy::Fail => Err(Denied { policy: self.policy.clone(), binding: self.binding.clone(), message }),
        }
    }

    /// Runs the MAP on `object`, with `before` the object as it was once a
    /// mutation may change it, under `failurePolicy: Ignore`.
    fn try_run(
        &self,
        context: Context<'_>,
        req: &Request,
        object: &mut Value,
        before: &mut Option<Value>,
    ) -> Result<Outcome, String> {
        if let Some(matching) = &self.matching
            && !matching.applies(context.namespaces, req).map_err(|e| e.to_string())?
        {
            return Ok(Outcome::NotApplied);
        }
        // Without parameters; or with the first parameter object (by
        // namespace and name) whose match conditions hold: the API server
        // applies a MAP whose paramRef selects several with one of them.
        let params: Vec<Option<Converted>> = match &self.params {
            None => vec![None],
            Some(spec) => {
                let namespace = req.inner.namespace.as_deref().unwrap_or_default();
                let reads = self.data_reads.params.as_ref();
                let found = spec.objects(context.params, namespace);
                let found = found.map_err(|e| format!("failed to configure binding: {e}"))?;
                found.iter().map(|p| Some(Converted::reading(p, reads))).collect()
            }
        };
        if params.is_empty() {
            return Ok(Outcome::NotApplied);
        }
        // The namespace, looked up only when an expression reads it.
        let namespace_object = match self.data_reads.namespace_object {
            Some(_) => namespace_object_for(context.namespaces, req)
                .map_err(|unknown| format!("failed to configure policy: {unknown}"))?,
            None => None,
        };
        let namespace_object = namespace_object.as_deref();
        // The object as CEL sees it: converted once, and again only for a
        // mutation after one that changed it.
        let mut bindings = Bindings::with_object(req, Some(&*object), namespace_object, &self.data_reads);
        for param in &params {
            let param = param.as_ref();
            if !self.conditions_hold(context, &bindings, param)? {
                continue;
            }
            if self.failure == FailurePolicy::Ignore {
                *before = Some(object.clone());
            }
            let (mut changed, mut stale) = (false, false);
            for mutation in &self.mutations {
                if std::mem::take(&mut stale) {
                    bindings = Bindings::with_object(req, Some(&*object), namespace_object, &self.data_reads);
                }
                stale = self.mutate(mutation, context, req, &bindings, object, param)?;
                changed |= stale;
            }
            return Ok(Outcome::Applied(changed));
        }
        Ok(Outcome::NotApplied)
    }

    /// One mutation on `current` (which `bindings` hold converted), in
    /// place: whether it changed it (not when a JSON Patch `test` failed).
    fn mutate(
        &self,
        mutation: &Mutation,
        context: Context<'_>,
        req: &Request,
        bindings: &Bindings,
        current: &mut Value,
        param: Option<&Converted>,
    ) -> Result<bool, String> {
        let evaluated;
        // A value computed at load, when evaluating it here would succeed.
        let folded = mutation.folded.as_ref().filter(|f| f.constant.usable(context.limits, context.deadline));
        let (result, json) = match folded {
            Some(folded) => (&folded.constant.value, Some(&folded.json)),
            None => {
                let variables = self.variables.iter().map(|v| (v.name.as_str(), &v.expression));
                evaluated = evaluate(bindings, param, context.limits, context.deadline, |scope| {
                    scope.with_variables(variables, |scope| scope.execute(&mutation.expression))
                })
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("expression {:?}: {e}", mutation.expression.source()))?;
                (&evaluated, None)
            }
        };
        let patched = match mutation.patch_type {
            PatchType::JsonPatch => json_patch(result, json, current)?,
            PatchType::ApplyConfiguration => {
                return apply_configuration(context.schemas, req, result, json, current, self.atomics);
            }
            PatchType::JsonMergePatch => Some(merge_patch(result, json, current.clone())?),
        };
        Ok(patched.is_some_and(|patched| {
            let changed = patched != *current;
            *current = patched;
            changed
        }))
    }

    /// Every match condition on the object: one false and the MAP does not
    /// apply, even when another failed; otherwise the first failure.
    fn conditions_hold(
        &self,
        context: Context<'_>,
        bindings: &Bindings,
        param: Option<&Converted>,
    ) -> Result<bool, String> {
        if self.conditions.is_empty() {
            return Ok(true);
        }
        let results = evaluate(bindings, param, context.limits, context.deadline, |scope| {
            self.conditions
                .iter()
                .map(|c| match scope.execute(&c.expression) {
                    Ok(Cel::Bool(holds)) => Ok(holds),
                    Ok(other) => Err(format!("matchConditions {:?} returned {other:?}, not a bool", c.name)),
                    Err(e) => Err(format!("matchConditions {:?}: {e}", c.name)),
                })
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string())?;
        if results.iter().any(|r| matches!(r, Ok(false))) {
            return Ok(false);
        }
        results.into_iter().find_map(Result::err).map_or(Ok(true), Err)
    }
}

/// An expression's result as JSON: `json` when it was folded at load,
/// else converted now.
fn as_json<'a>(result: &Cel, json: Option<&'a Value>) -> Result<Cow<'a, Value>, String> {
    match json {
        Some(json) => Ok(Cow::Borrowed(json)),
        None => to_json(result).map(Cow::Owned).map_err(|e| e.to_string()),
    }
}

/// Applies the `[JSONPatch{...}]` an expression returned, as the API server
/// does: a failed `test` leaves the object unchanged (`None`); any other
/// failure is the mutation's.
fn json_patch(result: &Cel, json: Option<&Value>, object: &Value) -> Result<Option<Value>, String> {
    let operations = as_json(result, json).map_err(|e| format!("JSON Patch: {e}"))?;
    if !operations.is_array() {
        return Err(format!("type mismatch: JSONPatchType.expression should evaluate to array, got {result:?}"));
    }
    let patch = json_patch::Patch::deserialize(&*operations)
        .map_err(|e| format!("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: {e}"))?;
    let mut patched = object.clone();
    match json_patch::patch(&mut patched, &patch) {
        Ok(()) => Ok(Some(patched)),
        Err(e) if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) => Ok(None),
        Err(e) => Err(format!("JSON Patch: {}", patch_error(object, &patch, &e))),
    }
}

/// A failed operation in the words of the JSON Patch library the API
/// server uses (evanphx/json-patch v4) where a path is missing, so that
/// `mutate` and the API server refuse alike; other failures in ours.
fn patch_error(object: &Value, patch: &json_patch::Patch, error: &json_patch::PatchError) -> String {
    use json_patch::{PatchErrorKind, PatchOperation};
    let Some(operation) = patch.0.get(error.operation) else { return error.to_string() };
    if !matches!(error.kind, PatchErrorKind::InvalidPointer) {
        return error.to_string();
    }
    let path = error.path.as_str();
    let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
    let parent_exists = object.pointer(parent).is_some();
    match operation {
        PatchOperation::Add(_) if !parent_exists => {
            format!("add operation does not apply: doc is missing path: \"{path}\": missing value")
        }
        PatchOperation::Replace(_) if parent_exists => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        PatchOperation::Replace(_) => {
            format!("replace operation does not apply: doc is missing path: {path}: missing value")
        }
        PatchOperation::Remove(_) if parent_exists => {
            let key = last.replace("~1", "/").replace("~0", "~");
            format!("error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value")
        }
        PatchOperation::Remove(_) => {
            format!("remove operation does not apply: doc is missing path: \"{path}\": missing value")
        }
        PatchOperation::Test(_) => format!("test operation does not apply: is missing path: {path}: missing value"),
        _ => error.to_string(),
    }
}

/// Applies the object an expression returned as a JSON Merge Patch.
fn merge_patch(result: &Cel, json: Option<&Value>, mut object: Value) -> Result<Value, String> {
    let patch = as_json(result, json).map_err(|e| format!("JSON Merge Patch: {e}"))?;
    if !patch.is_object() {
        return Err(format!("JSON Merge Patch: the expression should evaluate to an object, got {result:?}"));
    }
    json_patch::merge(&mut object, &patch);
    Ok(object)
}

/// Merges the `Object{...}` an expression returned into the object, in
/// place: whether it changed.
fn apply_configuration(
    schemas: &Schemas,
    req: &Request,
    result: &Cel,
    json: Option<&Value>,
    object: &mut Value,
    atomics: Atomics,
) -> Result<bool, String> {
    let config = as_json(result, json).map_err(|e| format!("error applying patch: {e}"))?;
    if !config.is_object() {
        return Err(format!("unsupported return type from ApplyConfiguration expression: {result:?}"));
    }
    let kind = req.kind();
    let shape = schemas.kind(&kind.group, &kind.version, &kind.kind).ok_or_else(|| {
        format!(
            "Resource kind {}/{}, Kind={} has no schema here (offline: the built-in kinds, or give its CRD with --schema)",
            kind.group, kind.version, kind.kind
        )
    })?;
    apply::apply(schemas, shape, object, &config, atomics).map_err(|e| match e {
        MergeError::Atomic(_) => format!("error applying patch: invalid ApplyConfiguration: {e}"),
        other => format!("error applying patch: failed to merge patch: {other}"),
    })
}

/// What running a list of MAPs in order did.
#[derive(Debug, Default)]
pub struct Round {
    /// The object as they left it.
    pub object: Value,
    /// Why MAPs under `failurePolicy: Ignore` were skipped.
    pub warnings: Vec<String>,
    /// `policy/binding` of each MAP that applied.
    pub applied: Vec<String>,
    /// The MAPs with `reinvocationPolicy: IfNeeded` that applied (indexes).
    pub reinvocable: Vec<usize>,
    /// Of those, the ones a later MAP's change asks to run again.
    pub reinvoke: Vec<usize>,
}

/// Runs `mutations` (those at the indexes `only`, when given) in order on
/// `object`; the first denial ends it.
pub fn run_round(
    mutations: &[NativeMutation],
    only: Option<&[usize]>,
    context: Context<'_>,
    req: &Request,
    object: Value,
) -> Result<Round, Denied> {
    let mut round = Round { object, ..Round::default() };
    for (i, mutation) in mutations.iter().enumerate() {
        if only.is_some_and(|only| !only.contains(&i)) {
            continue;
        }
        match mutation.run(context, req, &mut round.object, |_| Ok(()))? {
            Outcome::NotApplied => continue,
            Outcome::Ignored(why) => round.warnings.push(format!(
                "policy '{}' with binding '{}' was ignored (failurePolicy: Ignore): {why}",
                mutation.policy, mutation.binding
            )),
            Outcome::Applied(changed) => {
                if changed {
                    // As the API server: a change asks every reinvocable
                    // MAP invoked before it to run again.
                    round.reinvoke.clone_from(&round.reinvocable);
                }
                round.applied.push(format!("{}/{}", mutation.policy, mutation.binding));
                if mutation.reinvoke {
                    round.reinvocable.push(i);
                }
            }
        }
    }
    Ok(round)
}
