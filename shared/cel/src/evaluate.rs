//! Evaluating compiled expressions over converted request data, under a
//! budget: one [`evaluate`] call is one policy on one request, its
//! expressions sharing the policy's budget and the request's deadline.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::time::{Duration, Instant};

use cel::common::types::{CelMap, CelMapKey};
use cel::{Context, ExecutionError, Value};
use kube_cel::KubeCelExt as _;

use crate::budget::{Limit, Limits, Meter};
use crate::{Bindings, Converted, Expression};

thread_local! {
    /// The Kubernetes CEL library, registered once per thread; each
    /// evaluation is a scope over it that borrows the request's data.
    static ROOT: Context<'static> = {
        let mut root = Context::default();
        root.register_all();
        root
    };
}

/// A limit stopped an evaluation, in `expression`.
///
/// The message names the flags by which every Portcullis service that
/// evaluates CEL sets these limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// Which limit.
    pub limit: Limit,
    /// The limits in force.
    pub limits: Limits,
    /// The source of the expression it stopped in.
    pub expression: String,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let expression = &self.expression;
        match self.limit {
            Limit::PerCall => write!(
                f,
                "CEL evaluation exceeded its cost budget: {expression:?} spent more than {} units (--cel-per-call-limit)",
                self.limits.per_call
            ),
            Limit::Policy => write!(
                f,
                "CEL evaluation exceeded its cost budget: the policy's expressions spent more than {} units \
                 (--cel-policy-budget), stopped in {expression:?}",
                self.limits.per_policy
            ),
            Limit::Deadline => {
                write!(f, "CEL evaluation exceeded its time budget (--cel-timeout), stopped in {expression:?}")
            }
        }
    }
}

/// Where expressions are evaluated: the request's data, `params` and (in
/// [`Scope::with_variables`]) `variables` bound, every expression charged
/// to one budget.
#[allow(missing_debug_implementations)] // the interpreter's Context has no Debug
pub struct Scope<'a, 'e> {
    ctx: Context<'a>,
    meter: &'a Meter,
    /// The expression being evaluated, for the message of a stop.
    current: &'a Cell<&'e str>,
    /// The policy's variables, in [`Scope::with_variables`].
    variables: Option<&'a Variables<'e>>,
}

impl<'e> Scope<'_, 'e> {
    /// Evaluates `expression` with a fresh per-expression limit, after the
    /// variables it names (in [`Scope::with_variables`]). A variable that
    /// failed is left unbound, so that reading it fails, and when the
    /// expression fails the variable's error is the answer; an expression
    /// that does not come to read it is unaffected. (`has(variables.x)` on
    /// a failed `x` answers `false`, where the API server fails.)
    pub fn execute(&self, expression: &'e Expression) -> Result<Value, ExecutionError> {
        let Some(variables) = self.variables else {
            self.start(expression);
            return expression.program.execute(&self.ctx);
        };
        let failed = variables.bind_read(self, expression.variables_read(), variables.declared.len());
        let values = variables.values.borrow();
        let mut ctx = self.ctx.new_inner_scope();
        ctx.add_variable_borrowed("variables", &*values);
        self.start(expression);
        match (expression.program.execute(&ctx), failed) {
            (Err(_), Some(failure)) => Err(failure),
            (result, _) => result,
        }
    }

    /// Runs `run` in a scope where `variables` (in their order) are bound
    /// as the API server binds them: each is evaluated for the first
    /// expression that names it, after the earlier variables it names, and
    /// at most once; one that no expression names costs nothing, one that
    /// fails fails only the expressions that read it, and one that names
    /// itself or a later variable fails (the API server does not compile
    /// it).
    pub fn with_variables<T>(
        &self,
        variables: impl IntoIterator<Item = (&'e str, &'e Expression)>,
        run: impl FnOnce(&Scope<'_, 'e>) -> T,
    ) -> T {
        let variables = Variables::new(variables);
        let ctx = self.ctx.new_inner_scope();
        run(&Scope { ctx, meter: self.meter, current: self.current, variables: Some(&variables) })
    }

    fn start(&self, expression: &'e Expression) {
        self.meter.next_expression();
        // The expression a limit stopped in is the one the stop names.
        if self.meter.stopped().is_none() {
            self.current.set(expression.source());
        }
    }
}

/// A policy's variables as they are bound, one evaluation of a policy.
struct Variables<'e> {
    declared: Vec<(&'e str, &'e Expression)>,
    states: RefCell<Vec<State>>,
    values: RefCell<CelMap>,
}

#[derive(Clone)]
enum State {
    Pending,
    Bound,
    Failed(ExecutionError),
}

impl<'e> Variables<'e> {
    fn new(declared: impl IntoIterator<Item = (&'e str, &'e Expression)>) -> Self {
        let declared: Vec<_> = declared.into_iter().collect();
        let states = RefCell::new(vec![State::Pending; declared.len()]);
        Self { declared, states, values: RefCell::new(CelMap::default()) }
    }

    /// Binds the variables among the first `before` that `reads` names
    /// (`None`: all of them); answers the first failure among them.
    fn bind_read(&self, scope: &Scope<'_, 'e>, reads: Option<&[String]>, before: usize) -> Option<ExecutionError> {
        let mut failure = None;
        for i in 0..before {
            if reads.is_none_or(|names| names.iter().any(|n| n == self.declared[i].0))
                && let Some(error) = self.bind_one(scope, i)
            {
                failure.get_or_insert(error);
            }
        }
        failure
    }

    /// Binds variable `i` unless it is already; its failure, if it failed.
    fn bind_one(&self, scope: &Scope<'_, 'e>, i: usize) -> Option<ExecutionError> {
        match &self.states.borrow()[i] {
            State::Bound => return None,
            State::Failed(error) => return Some(error.clone()),
            State::Pending => {}
        }
        let (name, expression) = self.declared[i];
        let reads = expression.variables_read();
        if let Some(later) =
            reads.and_then(|names| names.iter().find(|n| self.declared[i..].iter().any(|(d, _)| d == n)))
        {
            let error = ExecutionError::function_error(
                &format!("variables.{name}"),
                format!("reads variables.{later}, which is not declared before it"),
            );
            self.fail(i, error.clone());
            return Some(error);
        }
        let failed_before = self.bind_read(scope, reads, i);
        scope.start(expression);
        let value = {
            let values = self.values.borrow();
            let mut ctx = scope.ctx.new_inner_scope();
            ctx.add_variable_borrowed("variables", &*values);
            expression.program.execute_val(&ctx)
        };
        match value {
            Ok(value) => {
                self.values.borrow_mut().insert(CelMapKey::from(name), value);
                self.states.borrow_mut()[i] = State::Bound;
                None
            }
            Err(error) => {
                let error = failed_before
                    .unwrap_or_else(|| ExecutionError::function_error(&format!("variables.{name}"), error));
                self.fail(i, error.clone());
                Some(error)
            }
        }
    }

    /// Variable `i` failed with `error`; it stays unbound.
    fn fail(&self, i: usize, error: ExecutionError) {
        self.states.borrow_mut()[i] = State::Failed(error);
    }
}

/// Runs `run` over `bindings` and `params` (`null` when `None`; bound when
/// the bindings' reads say an expression reads them) under
/// `limits`, stopping at `deadline`; `Err` when a limit stopped it, whatever
/// `run` made of the failed expression.
pub fn evaluate<'e, T>(
    bindings: &Bindings,
    params: Option<&Converted>,
    limits: Limits,
    deadline: Instant,
    run: impl FnOnce(&Scope<'_, 'e>) -> T,
) -> Result<T, Exceeded> {
    let meter = Meter::new(limits, deadline);
    let current = Cell::new("");
    let null = Converted::null();
    let result = ROOT.with(|root| {
        let mut ctx = root.new_inner_scope();
        ctx.set_meter(&meter);
        let bound = [
            ("object", bindings.object.as_ref()),
            ("oldObject", bindings.old_object.as_ref()),
            ("request", bindings.request.as_ref()),
            ("params", bindings.params_read.then(|| params.unwrap_or(&null))),
            ("namespaceObject", bindings.namespace_object.as_ref()),
        ];
        for (name, value) in bound {
            if let Some(value) = value {
                ctx.add_variable_borrowed(name, value.0.as_ref());
            }
        }
        run(&Scope { ctx, meter: &meter, current: &current, variables: None })
    });
    match meter.stopped() {
        None => Ok(result),
        Some(limit) => Err(Exceeded { limit, limits, expression: current.get().to_owned() }),
    }
}

/// The most a constant expression may cost to be [folded](fold).
const FOLD_LIMIT: u64 = 10_000;

/// The longest folding may take: far more than [`FOLD_LIMIT`] units need,
/// so that whether an expression folds does not depend on the load.
const FOLD_TIMEOUT: Duration = Duration::from_secs(1);

/// A value computed at load by [`fold`], with what computing it spent.
#[derive(Debug)]
pub struct Constant {
    /// The value.
    pub value: Value,
    /// The units it spent: a request whose limits are lower must evaluate
    /// the expression itself, to be stopped as it would be.
    pub cost: u64,
}

impl Constant {
    /// Whether a request within `limits` and `deadline` may use the value:
    /// its cost is within both limits and the deadline has not passed,
    /// exactly when evaluating the expression there would succeed.
    pub fn usable(&self, limits: Limits, deadline: Instant) -> bool {
        self.cost <= limits.per_call.min(limits.per_policy) && Instant::now() < deadline
    }
}

/// The value of `expression` when it names no variable at all (no
/// `object`, `params`, `variables`, nor a comprehension's own that its
/// body reads): the same on every request, as Kubernetes' CEL has no clock
/// and no randomness, so it can be evaluated once, at load, instead of on
/// each request ([`Constant::usable`] says when a request may use it).
/// `None` when it names a variable, fails, or costs more than
/// [`FOLD_LIMIT`]: it then runs on each request, as any other.
pub fn fold(expression: &Expression) -> Option<Constant> {
    if !expression.program.references().variables().is_empty() {
        return None;
    }
    let meter = Meter::new(Limits { per_call: FOLD_LIMIT, per_policy: FOLD_LIMIT }, Instant::now() + FOLD_TIMEOUT);
    let value = ROOT.with(|root| {
        let mut ctx = root.new_inner_scope();
        ctx.set_meter(&meter);
        meter.next_expression();
        expression.program.execute(&ctx)
    });
    match (value, meter.stopped()) {
        (Ok(value), None) => Some(Constant { value, cost: meter.spent() }),
        _ => None,
    }
}
