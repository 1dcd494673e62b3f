//! CEL rules in the form of Kubernetes' ValidatingAdmissionPolicy:
//! `matchConditions`, `variables` and `validations` (`expression`,
//! `message`, `messageExpression`, `reason`), with `object`, `oldObject`,
//! `request` and `variables` bound and the Kubernetes CEL library
//! (kube-cel) registered. Expressions are compiled once, at load.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use kube_cel::KubeCelExt as _;
use kube_cel::cel::context::VariableResolver;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value as Cel};
use serde::Deserialize;
use serde_json::Value;

/// The longest expression accepted: a bound on compile and evaluation cost
/// alongside the evaluation deadline.
pub const MAX_EXPRESSION_LEN: usize = 5_000;

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
}

/// What evaluating a policy's CEL found.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A match condition was false: the policy does not apply.
    NotMatched,
    /// Every validation was true (or there were none).
    Passed,
    /// These validations were false: `(message, reason)`.
    Violations(Vec<(String, Reason)>),
    /// Something could not be evaluated.
    Error(String),
}

fn compile(name: &str, what: &str, source: &str, cost_limit: u64) -> Result<Compiled, String> {
    if source.len() > MAX_EXPRESSION_LEN {
        return Err(format!("{what}: expression is {} characters; the limit is {MAX_EXPRESSION_LEN}", source.len()));
    }
    let program = Program::compile(source).map_err(|e| format!("{what}: {source:?} does not compile: {e}"))?;
    let cost = crate::cost::estimate(program.expression()).superlinear;
    if cost > cost_limit {
        let shown = if cost == u64::MAX { "unbounded".to_owned() } else { cost.to_string() };
        return Err(format!(
            "{what}: {source:?} has an estimated worst-case cost of {shown}, over the limit of {cost_limit} \
             (--cel-cost-limit): its work grows faster than the object it reads (a loop over the object inside \
             a loop over the object, or a scan of the whole object per element)"
        ));
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
        cost_limit: u64,
    ) -> Result<Self, String> {
        let match_conditions = match_conditions
            .iter()
            .map(|c| compile(&c.name, &format!("matchConditions {:?}", c.name), &c.expression, cost_limit))
            .collect::<Result<_, _>>()?;
        let variables = variables
            .iter()
            .map(|v| compile(&v.name, &format!("variables {:?}", v.name), &v.expression, cost_limit))
            .collect::<Result<_, _>>()?;
        let validations = validations
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let message_expression = v
                    .message_expression
                    .as_deref()
                    .map(|m| compile("", &format!("validations[{i}].messageExpression"), m, cost_limit))
                    .transpose()?;
                Ok(CompiledValidation {
                    expression: compile("", &format!("validations[{i}]"), &v.expression, cost_limit)?,
                    message: v.message.clone(),
                    message_expression,
                    reason: v.reason.unwrap_or_default(),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { match_conditions, variables, validations })
    }

    /// Whether there is anything to evaluate.
    pub fn is_empty(&self) -> bool {
        self.match_conditions.is_empty() && self.validations.is_empty()
    }

    /// Evaluates against `bindings`; past `deadline` the evaluation stops
    /// at its next read of a request variable (see [`Guard`]).
    pub fn evaluate(&self, bindings: &Bindings, deadline: Instant) -> Outcome {
        let guard = Guard { deadline, stopped: AtomicBool::new(false) };
        let outcome = self.evaluate_guarded(bindings, &guard);
        if guard.stopped.load(Ordering::Relaxed) { Outcome::Error(STOPPED.to_owned()) } else { outcome }
    }

    fn evaluate_guarded(&self, bindings: &Bindings, guard: &Guard) -> Outcome {
        // The data is converted once, into the context's own variables; the
        // guard is asked first on every lookup and answers only past the
        // deadline.
        let mut ctx = Context::default();
        ctx.register_all();
        ctx.set_variable_resolver(guard);
        ctx.add_variable_from_value("object", bindings.object.clone());
        ctx.add_variable_from_value("oldObject", bindings.old_object.clone());
        ctx.add_variable_from_value("request", bindings.request.clone());
        for condition in &self.match_conditions {
            match condition.program.execute(&ctx) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => return Outcome::NotMatched,
                Ok(other) => return Outcome::Error(not_bool("matchConditions", &condition.source, &other)),
                Err(e) => return Outcome::Error(format!("matchConditions {:?}: {e}", condition.name)),
            }
        }
        let mut variables: HashMap<Key, Cel> = HashMap::new();
        for variable in &self.variables {
            ctx.add_variable_from_value("variables", Cel::Map(Map { map: Arc::new(variables.clone()) }));
            match variable.program.execute(&ctx) {
                Ok(value) => {
                    variables.insert(Key::String(Arc::new(variable.name.clone())), value);
                }
                Err(e) => return Outcome::Error(format!("variables {:?}: {e}", variable.name)),
            }
        }
        ctx.add_variable_from_value("variables", Cel::Map(Map { map: Arc::new(variables) }));
        let mut violations = Vec::new();
        for v in &self.validations {
            match v.expression.program.execute(&ctx) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => violations.push((v.message(&ctx), v.reason)),
                Ok(other) => return Outcome::Error(not_bool("validation", &v.expression.source, &other)),
                Err(e) => return Outcome::Error(format!("validation {:?}: {e}", v.expression.source)),
            }
        }
        if violations.is_empty() { Outcome::Passed } else { Outcome::Violations(violations) }
    }
}

/// The error of an evaluation stopped at its deadline.
pub const STOPPED: &str = "CEL evaluation stopped at its deadline (--cel-timeout)";

/// Stops an evaluation that runs past its deadline. CEL asks a context's
/// resolver first on every lookup of a top-level variable (`object`,
/// `oldObject`, `request`, `variables`: a loop over the object looks it up
/// again on each pass of the enclosing loop). Before the deadline the guard
/// answers nothing, and the lookup finds the variable converted once; past
/// it, every lookup yields `null`, so the next field selection fails and the
/// evaluation ends instead of running on after its request was answered.
/// The most that still runs is one innermost loop.
struct Guard {
    deadline: Instant,
    stopped: AtomicBool,
}

impl VariableResolver for Guard {
    fn resolve(&self, _name: &str) -> Option<Cel> {
        if Instant::now() < self.deadline {
            return None;
        }
        self.stopped.store(true, Ordering::Relaxed);
        Some(Cel::Null)
    }
}

impl CompiledValidation {
    fn message(&self, ctx: &Context<'_>) -> String {
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
/// admission request and shared by every policy.
#[derive(Debug, Clone)]
pub struct Bindings {
    object: Cel,
    old_object: Cel,
    request: Cel,
}

impl Bindings {
    /// Converts the request's parts. `request` is the AdmissionRequest as
    /// JSON without its objects.
    pub fn new(object: Option<&Value>, old_object: Option<&Value>, request: &Value) -> Self {
        Self {
            object: object.map_or(Cel::Null, to_cel),
            old_object: old_object.map_or(Cel::Null, to_cel),
            request: to_cel(request),
        }
    }
}

/// JSON to CEL with Kubernetes' typing: integers are `int`, other numbers
/// `double`.
pub fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => Cel::Map(Map {
            map: Arc::new(map.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v))).collect()),
        }),
    }
}
