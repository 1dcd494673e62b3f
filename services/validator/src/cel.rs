//! CEL rules in the form of Kubernetes' ValidatingAdmissionPolicy:
//! `matchConditions`, `variables` and `validations` (`expression`,
//! `message`, `messageExpression`, `reason`), with `object`, `oldObject`,
//! `request` and `variables` bound and the Kubernetes CEL library
//! (kube-cel) registered. Expressions are compiled once, at load.

use std::time::Instant;

use kube::core::{GroupVersionKind, GroupVersionResource};
use kube_cel::KubeCelExt as _;
use kube_cel::cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use kube_cel::cel::common::value::Val;
use kube_cel::cel::{Context, Program, Value as Cel};
use portcullis_admission::{Operation, Request};
use serde::Deserialize;
use serde_json::Value;

use crate::budget::{Limit, Limits, Meter};
use crate::reads::{DataReads, Reads};

/// The longest expression accepted: a bound on compile and evaluation cost
/// alongside the evaluation deadline.
pub const MAX_EXPRESSION_LEN: usize = 5_000;

/// ValidatingAdmissionPolicy variables Portcullis does not bind, and why:
/// an expression using one is refused at load rather than failing on every
/// request.
const UNSUPPORTED_VARIABLES: [(&str, &str); 2] = [
    ("namespaceObject", "the namespace object is not bound; use `spec.match.namespaceSelector` for its labels"),
    ("authorizer", "authorization checks are not supported (a webhook would need a SubjectAccessReview per request)"),
];

/// A `matchConditions` or `variables` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedExpression {
    /// The name (`variables.<name>`).
    pub name: String,
    /// The CEL expression.
    pub expression: String,
}

/// A `validations` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// Must evaluate to true for the object to be valid.
    pub expression: String,
    /// Message when it is false.
    pub message: Option<String>,
    /// CEL producing the message; falls back to `message` if it fails.
    pub message_expression: Option<String>,
    /// Status reason of the denial.
    pub reason: Option<Reason>,
}

/// An `auditAnnotations` entry: recorded in the API server's audit event
/// for every request the policy applies to, as
/// `<webhook name>/<policy>.<key>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditAnnotation {
    /// The key: letters, digits, `-`, `_`, `.`; at most 63 characters.
    pub key: String,
    /// CEL yielding the value (a string), or `null` for none.
    pub value_expression: String,
}

/// The longest audit annotation value kept, as the API server's limit for
/// ValidatingAdmissionPolicy.
pub const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

/// A denial's status reason, as in ValidatingAdmissionPolicy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Reason {
    /// 401.
    Unauthorized,
    /// 403.
    #[default]
    Forbidden,
    /// 422.
    Invalid,
    /// 413.
    RequestEntityTooLarge,
}

impl Reason {
    /// The HTTP status code the API server reports.
    pub fn code(self) -> u16 {
        match self {
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::Invalid => 422,
            Self::RequestEntityTooLarge => 413,
        }
    }
}

/// A compiled expression with its source.
#[derive(Debug)]
pub struct Compiled {
    /// The name (variables, match conditions) or empty.
    pub name: String,
    /// The source text.
    pub source: String,
    program: Program,
}

/// A compiled validation.
#[derive(Debug)]
pub struct CompiledValidation {
    /// The expression.
    pub expression: Compiled,
    message: Option<String>,
    message_expression: Option<Compiled>,
    /// The reason (code) of a denial.
    pub reason: Reason,
}

/// A policy's CEL part.
#[derive(Debug, Default)]
pub struct CelRules {
    /// All must be true for the policy to apply.
    pub match_conditions: Vec<Compiled>,
    /// Evaluated in order; later ones may use earlier ones.
    pub variables: Vec<Compiled>,
    /// The checks.
    pub validations: Vec<CompiledValidation>,
    /// `(key, valueExpression)`.
    pub audit_annotations: Vec<(String, Compiled)>,
    /// What the expressions read of the request's data (what
    /// [`Bindings::of`] must convert for them).
    pub data_reads: DataReads,
}

/// What evaluating a policy's CEL found.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A match condition was false: the policy does not apply.
    NotMatched,
    /// Every validation was true (or there were none); the audit
    /// annotations, `(key, value)`.
    Passed(Vec<(String, String)>),
    /// These validations were false: `(message, reason)`; and the audit
    /// annotations.
    Violations(Vec<(String, Reason)>, Vec<(String, String)>),
    /// Something could not be evaluated.
    Error(String),
    /// A cost or time limit stopped the evaluation.
    Exceeded {
        /// Which one.
        limit: Limit,
        /// What to tell the user.
        message: String,
    },
}

/// Why a policy's CEL was refused at load: the field it is in
/// (`validations[0]`, `variables "x"`), and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{at}")]
pub struct CelError {
    /// The field.
    pub at: String,
    /// What is wrong.
    #[source]
    pub problem: CelProblem,
}

/// What is wrong with one CEL expression or audit annotation.
#[derive(Debug, thiserror::Error)]
pub enum CelProblem {
    /// Longer than [`MAX_EXPRESSION_LEN`].
    #[error("expression is {0} characters; the limit is {MAX_EXPRESSION_LEN}")]
    TooLong(usize),
    /// Not CEL.
    #[error("{expression:?} does not compile")]
    Syntax {
        /// The expression.
        expression: String,
        /// What the parser said.
        #[source]
        error: kube_cel::cel::ParseErrors,
    },
    /// Reads a variable Portcullis does not provide.
    #[error("{expression:?} uses `{variable}`, which Portcullis does not provide: {why}")]
    Unsupported {
        /// The expression.
        expression: String,
        /// The variable.
        variable: &'static str,
        /// Why it is not provided.
        why: &'static str,
    },
    /// Its worst-case cost is over the limit.
    #[error(
        "{expression:?} has an estimated worst-case cost of {}, over the limit of {limit} (--cel-cost-limit): \
         its work grows faster than the object it reads (a loop over the object inside a loop over the object, \
         or a scan of the whole object per element)",
        if *cost == u64::MAX { "unbounded".to_owned() } else { cost.to_string() }
    )]
    TooCostly {
        /// The expression.
        expression: String,
        /// Its estimated cost (`u64::MAX`: unbounded).
        cost: u64,
        /// The limit.
        limit: u64,
    },
    /// An audit annotation key that is not a valid name.
    #[error("key {0:?} must be 1-63 letters, digits, '-', '_' or '.'")]
    BadKey(String),
    /// Two audit annotations with one key.
    #[error("key {0:?} is used twice")]
    DuplicateKey(String),
}

fn compile(name: &str, at: impl FnOnce() -> String, source: &str, cost_limit: u64) -> Result<Compiled, CelError> {
    let refuse = |problem| CelError { at: at(), problem };
    if source.len() > MAX_EXPRESSION_LEN {
        return Err(refuse(CelProblem::TooLong(source.len())));
    }
    // Kubernetes' CEL environment has the optional syntax (`a.?b`, `[?x]`).
    let parser = kube_cel::cel::parser::Parser::new().enable_optional_syntax(true);
    let program = match Program::compile_with(parser, source) {
        Ok(program) => program,
        Err(error) => return Err(refuse(CelProblem::Syntax { expression: source.to_owned(), error })),
    };
    let references = program.references();
    if let Some((variable, why)) = UNSUPPORTED_VARIABLES.into_iter().find(|(v, _)| references.has_variable(v)) {
        return Err(refuse(CelProblem::Unsupported { expression: source.to_owned(), variable, why }));
    }
    let cost = crate::cost::estimate(program.expression()).superlinear;
    if cost > cost_limit {
        return Err(refuse(CelProblem::TooCostly { expression: source.to_owned(), cost, limit: cost_limit }));
    }
    Ok(Compiled { name: name.to_owned(), source: source.to_owned(), program })
}

impl CelRules {
    /// Compiles every expression; the first that fails to compile or costs
    /// more than `cost_limit` is reported with its position.
    pub fn compile(
        match_conditions: Vec<NamedExpression>,
        variables: Vec<NamedExpression>,
        validations: Vec<Validation>,
        audit_annotations: Vec<AuditAnnotation>,
        cost_limit: u64,
    ) -> Result<Self, CelError> {
        let match_conditions = match_conditions
            .iter()
            .map(|c| compile(&c.name, || format!("matchConditions {:?}", c.name), &c.expression, cost_limit))
            .collect::<Result<_, _>>()?;
        let variables = variables
            .iter()
            .map(|v| compile(&v.name, || format!("variables {:?}", v.name), &v.expression, cost_limit))
            .collect::<Result<_, _>>()?;
        let validations = validations
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let message_expression = v
                    .message_expression
                    .as_deref()
                    .map(|m| compile("", || format!("validations[{i}].messageExpression"), m, cost_limit))
                    .transpose()?;
                Ok(CompiledValidation {
                    expression: compile("", || format!("validations[{i}]"), &v.expression, cost_limit)?,
                    message: v.message.clone(),
                    message_expression,
                    reason: v.reason.unwrap_or_default(),
                })
            })
            .collect::<Result<_, CelError>>()?;
        let mut keys = std::collections::HashSet::new();
        let audit_annotations = audit_annotations
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let at = || format!("auditAnnotations[{i}]");
                let valid = (1..=63).contains(&a.key.len())
                    && a.key.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && a.key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
                if !valid {
                    return Err(CelError { at: at(), problem: CelProblem::BadKey(a.key.clone()) });
                }
                if !keys.insert(a.key.as_str()) {
                    return Err(CelError { at: at(), problem: CelProblem::DuplicateKey(a.key.clone()) });
                }
                let value = compile("", || format!("{}.valueExpression", at()), &a.value_expression, cost_limit)?;
                Ok((a.key.clone(), value))
            })
            .collect::<Result<_, CelError>>()?;
        let mut rules =
            Self { match_conditions, variables, validations, audit_annotations, data_reads: DataReads::default() };
        let mut data_reads = DataReads::default();
        rules.programs().for_each(|c| data_reads.add(c.program.expression()));
        rules.data_reads = data_reads;
        Ok(rules)
    }

    /// Every compiled expression.
    fn programs(&self) -> impl Iterator<Item = &Compiled> {
        let validations =
            self.validations.iter().flat_map(|v| std::iter::once(&v.expression).chain(&v.message_expression));
        self.match_conditions
            .iter()
            .chain(&self.variables)
            .chain(validations)
            .chain(self.audit_annotations.iter().map(|(_, c)| c))
    }

    /// Whether there is anything to evaluate.
    pub fn is_empty(&self) -> bool {
        self.match_conditions.is_empty() && self.validations.is_empty()
    }

    /// Whether any expression reads `variable` (`params`, ...).
    pub fn reads(&self, variable: &str) -> bool {
        self.programs().any(|c| c.program.references().has_variable(variable))
    }

    /// Evaluates against `bindings` and `params` (`null` without
    /// `paramKind`) under `limits`, stopping at `deadline` (see
    /// [`crate::budget`]).
    pub fn evaluate(
        &self,
        bindings: &Bindings,
        params: Option<&dyn Val>,
        limits: Limits,
        deadline: Instant,
    ) -> Outcome {
        let meter = Meter::new(limits, deadline);
        let mut current = "";
        let outcome = ROOT.with(|root| {
            // One function registry per thread, made once; each evaluation
            // is a scope over it that borrows the request's data.
            let mut ctx = root.new_inner_scope();
            ctx.set_meter(&meter);
            ctx.add_variable_borrowed("object", bindings.object.as_ref());
            ctx.add_variable_borrowed("oldObject", bindings.old_object.as_ref());
            ctx.add_variable_borrowed("request", bindings.request.as_ref());
            ctx.add_variable_borrowed("params", params.unwrap_or(&CelNull));
            self.evaluate_in(&mut ctx, &meter, &mut current)
        });
        match meter.stopped() {
            None => outcome,
            Some(limit) => Outcome::Exceeded { limit, message: exceeded(limit, limits, current) },
        }
    }

    fn evaluate_in<'a>(&'a self, ctx: &mut Context<'_>, meter: &Meter, current: &mut &'a str) -> Outcome {
        for condition in &self.match_conditions {
            meter.next_expression();
            *current = &condition.source;
            match condition.program.execute(ctx) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => return Outcome::NotMatched,
                Ok(other) => return Outcome::Error(not_bool("matchConditions", &condition.source, &other)),
                Err(e) => return Outcome::Error(format!("matchConditions {:?}: {e}", condition.name)),
            }
        }
        // Each variable sees the ones before it: the map grows between
        // evaluations, each in a scope that borrows it.
        let mut variables = CelMap::default();
        for variable in &self.variables {
            meter.next_expression();
            *current = &variable.source;
            let mut scope = ctx.new_inner_scope();
            scope.add_variable_borrowed("variables", &variables);
            let value = variable.program.execute_val(&scope);
            drop(scope);
            match value {
                Ok(value) => variables.insert(CelMapKey::from(variable.name.as_str()), value),
                Err(e) => return Outcome::Error(format!("variables {:?}: {e}", variable.name)),
            }
        }
        let mut ctx = ctx.new_inner_scope();
        ctx.add_variable_borrowed("variables", &variables);
        let ctx = &mut ctx;
        let mut violations = Vec::new();
        for v in &self.validations {
            meter.next_expression();
            *current = &v.expression.source;
            match v.expression.program.execute(ctx) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => violations.push((v.message(ctx, meter), v.reason)),
                Ok(other) => return Outcome::Error(not_bool("validation", &v.expression.source, &other)),
                Err(e) => return Outcome::Error(format!("validation {:?}: {e}", v.expression.source)),
            }
        }
        let mut annotations = Vec::new();
        for (key, value) in &self.audit_annotations {
            meter.next_expression();
            *current = &value.source;
            match value.program.execute(ctx) {
                Ok(Cel::Null) => {}
                Ok(Cel::String(s)) => {
                    annotations.push((
                        key.clone(),
                        s.chars()
                            .scan(0, |n, c| {
                                *n += c.len_utf8();
                                (*n <= MAX_AUDIT_VALUE_BYTES).then_some(c)
                            })
                            .collect(),
                    ));
                }
                Ok(other) => {
                    return Outcome::Error(format!(
                        "auditAnnotations {key:?} returned {other:?}, not a string or null"
                    ));
                }
                Err(e) => return Outcome::Error(format!("auditAnnotations {key:?}: {e}")),
            }
        }
        if violations.is_empty() { Outcome::Passed(annotations) } else { Outcome::Violations(violations, annotations) }
    }
}

thread_local! {
    /// The Kubernetes CEL library, registered once per thread.
    static ROOT: Context<'static> = {
        let mut root = Context::default();
        root.register_all();
        root
    };
}

fn exceeded(limit: Limit, limits: Limits, expression: &str) -> String {
    match limit {
        Limit::PerCall => format!(
            "CEL evaluation exceeded its cost budget: {expression:?} spent more than {} units (--cel-per-call-limit)",
            limits.per_call
        ),
        Limit::Policy => format!(
            "CEL evaluation exceeded its cost budget: the policy's expressions spent more than {} units \
             (--cel-policy-budget), stopped in {expression:?}",
            limits.per_policy
        ),
        Limit::Deadline => {
            format!("CEL evaluation exceeded its time budget (--cel-timeout), stopped in {expression:?}")
        }
    }
}

impl CompiledValidation {
    fn message(&self, ctx: &Context<'_>, meter: &Meter) -> String {
        meter.next_expression();
        let from_expression = self.message_expression.as_ref().and_then(|m| match m.program.execute(ctx) {
            Ok(Cel::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
            _ => None,
        });
        from_expression
            .or_else(|| self.message.clone())
            .unwrap_or_else(|| format!("failed expression: {}", self.expression.source))
    }
}

fn not_bool(what: &str, source: &str, value: &Cel) -> String {
    format!("{what} {source:?} returned {value:?}, not a bool")
}

/// `object`, `oldObject` and `request` as CEL values, converted once per
/// admission request and borrowed by every policy's evaluation.
pub struct Bindings {
    object: Box<dyn Val>,
    old_object: Box<dyn Val>,
    request: Box<dyn Val>,
}

impl std::fmt::Debug for Bindings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bindings").finish_non_exhaustive()
    }
}

impl Bindings {
    /// The objects and the request of an admission request, as far as
    /// `reads` says expressions read them (see [`crate::reads`]).
    pub fn of(req: &Request, reads: &DataReads) -> Self {
        let part = |value: Option<&Value>, reads: &Option<Reads>| match (value, reads) {
            (Some(value), Some(reads)) => to_cel_reading(value, reads),
            _ => Box::new(CelNull) as Box<dyn Val>,
        };
        Self {
            object: part(req.object.as_ref(), &reads.object),
            old_object: part(req.old_object.as_ref(), &reads.old_object),
            request: reads.request.as_ref().map_or_else(|| Box::new(CelNull) as Box<dyn Val>, |r| request(req, r)),
        }
    }
}

/// The `request` variable, made straight from the decoded request, with
/// the fields `reads` names (each whole). As in Kubernetes, where it is a
/// typed message, unset fields read as their zero value (`""`, `[]`, `{}`),
/// not as errors.
fn request(req: &Request, reads: &Reads) -> Box<dyn Val> {
    let r = &req.inner;
    let user = &r.user_info;
    let text = |s: &str| Box::new(CelString::from(s)) as Box<dyn Val>;
    let texts = |items: &[String]| -> Box<dyn Val> {
        Box::new(CelList::from(items.iter().map(|s| text(s)).collect::<Vec<_>>()))
    };
    let kind = |k: &GroupVersionKind| {
        record([("group", text(&k.group)), ("version", text(&k.version)), ("kind", text(&k.kind))])
    };
    let resource = |k: &GroupVersionResource| {
        record([("group", text(&k.group)), ("version", text(&k.version)), ("resource", text(&k.resource))])
    };
    let sub_resource = r.sub_resource.as_deref().unwrap_or_default();
    let extra = || {
        Box::new(user.extra.iter().flatten().map(|(k, v)| (CelMapKey::from(k.as_str()), texts(v))).collect::<CelMap>())
            as Box<dyn Val>
    };
    let user_info = || {
        record([
            ("username", text(user.username.as_deref().unwrap_or_default())),
            ("uid", text(user.uid.as_deref().unwrap_or_default())),
            ("groups", texts(user.groups.as_deref().unwrap_or_default())),
            ("extra", extra()),
        ])
    };
    let fields: [Field<'_>; 13] = [
        ("uid", &|| text(&r.uid)),
        ("kind", &|| kind(&r.kind)),
        ("resource", &|| resource(&r.resource)),
        ("subResource", &|| text(sub_resource)),
        ("requestKind", &|| kind(r.request_kind.as_ref().unwrap_or(&r.kind))),
        ("requestResource", &|| resource(r.request_resource.as_ref().unwrap_or(&r.resource))),
        ("requestSubResource", &|| text(r.request_sub_resource.as_deref().unwrap_or(sub_resource))),
        ("name", &|| text(&r.name)),
        ("namespace", &|| text(r.namespace.as_deref().unwrap_or_default())),
        ("operation", &|| text(operation(&r.operation))),
        ("userInfo", &user_info),
        ("dryRun", &|| Box::new(CelBool::from(r.dry_run))),
        ("options", &|| r.options.as_ref().map_or_else(|| record([]), |o| to_cel(&o.0))),
    ];
    let fields = fields.into_iter().filter(|(name, _)| reads.field(name).is_some());
    Box::new(fields.map(|(name, value)| (CelMapKey::from(name), value())).collect::<CelMap>())
}

/// A field of a record and how to make its value, when it is read.
type Field<'a> = (&'static str, &'a dyn Fn() -> Box<dyn Val>);

fn record<const N: usize>(fields: [(&str, Box<dyn Val>); N]) -> Box<dyn Val> {
    Box::new(fields.into_iter().map(|(k, v)| (CelMapKey::from(k), v)).collect::<CelMap>())
}

/// A parameter object as `params`, as far as `reads` says (`null` when no
/// expression reads `params`).
pub fn params(object: &Value, reads: Option<&Reads>) -> Box<dyn Val> {
    reads.map_or_else(|| Box::new(CelNull) as Box<dyn Val>, |reads| to_cel_reading(object, reads))
}

/// `value` as far as `reads` says: the fields of an object that are read,
/// a placeholder for one only tested with `has`, the rest whole.
fn to_cel_reading(value: &Value, reads: &Reads) -> Box<dyn Val> {
    match (reads, value) {
        (Reads::Presence, _) => Box::new(CelNull),
        (Reads::Fields(fields), Value::Object(map)) => Box::new(
            fields
                .iter()
                .filter_map(|(name, reads)| {
                    map.get(name).map(|value| (CelMapKey::from(name.as_str()), to_cel_reading(value, reads)))
                })
                .collect::<CelMap>(),
        ),
        _ => to_cel(value),
    }
}

/// An operation as the API server names it.
pub fn operation(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// JSON to the interpreter's values, with Kubernetes' typing: integers are
/// `int`, other numbers `double`. Converted straight, in one pass.
pub fn to_cel(value: &Value) -> Box<dyn Val> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => Box::new(CelList::from(items.iter().map(to_cel).collect::<Vec<_>>())),
        Value::Object(map) => {
            Box::new(map.iter().map(|(k, v)| (CelMapKey::from(k.as_str()), to_cel(v))).collect::<CelMap>())
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The keys of a converted map, sorted.
    fn keys(value: &dyn Val) -> Vec<String> {
        let map = value.downcast_ref::<CelMap>().expect("a map");
        let mut keys: Vec<String> = map
            .inner()
            .keys()
            .map(|k| match k {
                CelMapKey::String(s) => s.inner().to_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn bindings_hold_only_what_the_expressions_read() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "shop", "managedFields": [{"manager": "kubectl"}],
                         "annotations": {"big": "x"}},
            "data": {"a": "1"}, "status": {"phase": "x"}});
        let review = portcullis_admission::manifest::as_review(object).unwrap();
        let req = portcullis_admission::decode(&serde_json::to_vec(&review).unwrap()).unwrap();
        let mut reads = DataReads::default();
        for source in ["object.metadata.name == 'c'", "has(object.metadata.annotations)", "request.operation != ''"] {
            reads.add(Program::compile(source).unwrap().expression());
        }
        let bindings = Bindings::of(&req, &reads);
        assert_eq!(keys(bindings.object.as_ref()), ["metadata"]);
        let metadata = bindings.object.downcast_ref::<CelMap>().unwrap().get_str("metadata").unwrap();
        assert_eq!(keys(metadata), ["annotations", "name"]);
        let annotations = metadata.downcast_ref::<CelMap>().unwrap().get_str("annotations").unwrap();
        assert!(annotations.downcast_ref::<CelNull>().is_some(), "only has() reads it: a placeholder");
        assert_eq!(keys(bindings.request.as_ref()), ["operation"]);
        assert!(bindings.old_object.downcast_ref::<CelNull>().is_some(), "oldObject is not read");
        let whole = Bindings::of(&req, &DataReads::everything());
        assert_eq!(keys(whole.object.as_ref()), ["apiVersion", "data", "kind", "metadata", "status"]);
    }
}
