//! CEL rules in the form of Kubernetes' ValidatingAdmissionPolicy:
//! `matchConditions`, `variables` and `validations` (`expression`,
//! `message`, `messageExpression`, `reason`), with `object`, `oldObject`,
//! `request` and `variables` bound and the Kubernetes CEL library
//! registered. Expressions are compiled once, at load, and evaluated by the
//! shared engine (`portcullis-cel`), which owns the cost estimate, the
//! conversion of what is read and the runtime budget.

use std::time::Instant;

use portcullis_cel::budget::{Limit, Limits};
use portcullis_cel::reads::DataReads;
use portcullis_cel::refusal::Returns;
use portcullis_cel::{
    Bindings, CompileError, Converted, Environment, Expression, LoadBounds, Scope, Value as Cel, compile_in,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names;

/// A `matchConditions` or `variables` entry.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamedExpression {
    /// The name (`variables.<name>`).
    #[schemars(length(min = 1))]
    pub name: String,
    /// The CEL expression.
    #[schemars(length(min = 1))]
    pub expression: String,
}

/// A `validations` entry.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// CEL that must evaluate to true for the object to be valid.
    #[schemars(length(min = 1))]
    pub expression: String,
    /// Message when it is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// CEL producing the message; falls back to `message` if it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expression: Option<String>,
    /// Status reason of the denial (default Forbidden).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// An `auditAnnotations` entry: recorded in the API server's audit event
/// for every request the policy applies to, as
/// `<webhook name>/<policy>.<key>`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditAnnotation {
    /// The key: letters, digits, `-`, `_`, `.`; at most 63 characters.
    #[schemars(length(min = 1, max = 63))]
    pub key: String,
    /// CEL yielding the value (a string), or `null` for none.
    #[schemars(length(min = 1))]
    pub value_expression: String,
}

/// The longest audit annotation value kept, as the API server's limit for
/// ValidatingAdmissionPolicy.
pub const MAX_AUDIT_VALUE_BYTES: usize = 10 * 1024;

/// A denial's status reason, as in ValidatingAdmissionPolicy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
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

/// A compiled expression with its name (variables, match conditions) or
/// an empty one.
#[derive(Debug)]
pub struct Compiled {
    /// The name.
    pub name: String,
    /// The expression.
    pub expression: Expression,
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
    /// The expression is refused by the engine.
    #[error(transparent)]
    Expression(#[from] CompileError),
    /// An audit annotation key that is not a valid name.
    #[error("key {0:?} must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")]
    BadKey(String),
    /// Two audit annotations with one key.
    #[error("key {0:?} is used twice")]
    DuplicateKey(String),
    /// Evaluates to a type the field does not take, for certain (the API
    /// server refuses such a policy when it is created).
    #[error("{0} (as the API server says when it refuses such a policy; `object.spec.paused == true` is a bool)")]
    Returns(String),
}

fn compile_named(
    name: &str,
    at: impl FnOnce() -> String,
    source: &str,
    returns: Returns,
    bounds: LoadBounds,
) -> Result<Compiled, CelError> {
    let refused = |problem| CelError { at: at(), problem };
    match compile_in(Environment::Validation, source, bounds) {
        Ok(expression) => match expression.evaluates_to().and_then(|got| returns.refuses(&got)) {
            None => Ok(Compiled { name: name.to_owned(), expression }),
            Some(why) => Err(refused(CelProblem::Returns(why))),
        },
        Err(problem) => Err(refused(problem.into())),
    }
}

impl CelRules {
    /// Compiles every expression; the first that fails to compile or is
    /// out of `bounds` is reported with its position.
    pub fn compile(
        match_conditions: Vec<NamedExpression>,
        variables: Vec<NamedExpression>,
        validations: Vec<Validation>,
        audit_annotations: Vec<AuditAnnotation>,
        bounds: LoadBounds,
    ) -> Result<Self, CelError> {
        let match_conditions = match_conditions
            .iter()
            .map(|c| {
                compile_named(&c.name, || format!("matchConditions {:?}", c.name), &c.expression, Returns::Bool, bounds)
            })
            .collect::<Result<_, _>>()?;
        let variables = variables
            .iter()
            .map(|v| compile_named(&v.name, || format!("variables {:?}", v.name), &v.expression, Returns::Any, bounds))
            .collect::<Result<_, _>>()?;
        let validations = validations
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let message_expression = v
                    .message_expression
                    .as_deref()
                    .map(|m| {
                        let at = || format!("validations[{i}].messageExpression");
                        compile_named("", at, m, Returns::String, bounds)
                    })
                    .transpose()?;
                Ok(CompiledValidation {
                    expression: compile_named(
                        "",
                        || format!("validations[{i}]"),
                        &v.expression,
                        Returns::Bool,
                        bounds,
                    )?,
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
                // The API server's rule: `<policy>/<key>` is a qualified name.
                let valid = a.key.len() <= names::NAME_PART_MAX_LEN && names::is_name_part(&a.key);
                if !valid {
                    return Err(CelError { at: at(), problem: CelProblem::BadKey(a.key.clone()) });
                }
                if !keys.insert(a.key.as_str()) {
                    return Err(CelError { at: at(), problem: CelProblem::DuplicateKey(a.key.clone()) });
                }
                let value_at = || format!("{}.valueExpression", at());
                let value = compile_named("", value_at, &a.value_expression, Returns::StringOrNull, bounds)?;
                Ok((a.key.clone(), value))
            })
            .collect::<Result<_, CelError>>()?;
        let mut rules =
            Self { match_conditions, variables, validations, audit_annotations, data_reads: DataReads::default() };
        let mut data_reads = DataReads::default();
        rules.programs().for_each(|c| data_reads.add(&c.expression));
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
        self.programs().any(|c| c.expression.reads(variable))
    }

    /// Evaluates against `bindings` and `params` (`null` without
    /// `paramKind`) under `limits`, stopping at `deadline`.
    pub fn evaluate(
        &self,
        bindings: &Bindings,
        params: Option<&Converted>,
        limits: Limits,
        deadline: Instant,
    ) -> Outcome {
        match portcullis_cel::evaluate(bindings, params, limits, deadline, |scope| self.evaluate_in(scope)) {
            Ok(outcome) => outcome,
            Err(exceeded) => Outcome::Exceeded { limit: exceeded.limit, message: exceeded.to_string() },
        }
    }

    fn evaluate_in<'e>(&'e self, scope: &Scope<'_, 'e>) -> Outcome {
        for condition in &self.match_conditions {
            match scope.execute(&condition.expression) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => return Outcome::NotMatched,
                Ok(other) => return Outcome::Error(not_bool("matchConditions", condition, &other)),
                Err(e) => return Outcome::Error(format!("matchConditions {:?}: {e}", condition.name)),
            }
        }
        let variables = self.variables.iter().map(|v| (v.name.as_str(), &v.expression));
        scope.with_variables(variables, |scope| self.judge(scope))
    }

    /// The validations and audit annotations, with the variables bound.
    fn judge<'e>(&'e self, scope: &Scope<'_, 'e>) -> Outcome {
        let mut violations = Vec::new();
        for v in &self.validations {
            match scope.execute(&v.expression.expression) {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => violations.push((v.message(scope), v.reason)),
                Ok(other) => return Outcome::Error(not_bool("validation", &v.expression, &other)),
                Err(e) => return Outcome::Error(format!("validation {:?}: {e}", v.expression.expression.source())),
            }
        }
        let mut annotations = Vec::new();
        for (key, value) in &self.audit_annotations {
            match scope.execute(&value.expression) {
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

impl CompiledValidation {
    fn message<'e>(&'e self, scope: &Scope<'_, 'e>) -> String {
        let from_expression = self.message_expression.as_ref().and_then(|m| match scope.execute(&m.expression) {
            Ok(Cel::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
            _ => None,
        });
        from_expression
            .or_else(|| self.message.clone())
            .unwrap_or_else(|| format!("failed expression: {}", self.expression.expression.source()))
    }
}

fn not_bool(what: &str, compiled: &Compiled, value: &Cel) -> String {
    format!("{what} {:?} returned {value:?}, not a bool", compiled.expression.source())
}
