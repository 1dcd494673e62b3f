//! Evaluating compiled expressions over converted request data, under a
//! budget: one [`evaluate`] call is one policy on one request, its
//! expressions sharing the policy's budget and the request's deadline.

use std::cell::Cell;
use std::fmt;
use std::time::Instant;

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

/// A variable (`variables.<name>`) could not be evaluated.
#[derive(Debug, thiserror::Error)]
#[error("variables {name:?}: {error}")]
pub struct VariableError {
    /// Its name.
    pub name: String,
    /// What went wrong.
    pub error: ExecutionError,
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
}

impl<'e> Scope<'_, 'e> {
    /// Evaluates `expression` with a fresh per-expression limit.
    pub fn execute(&self, expression: &'e Expression) -> Result<Value, ExecutionError> {
        self.start(expression);
        expression.program.execute(&self.ctx)
    }

    /// Evaluates `variables` in order, each seeing the ones before it as
    /// `variables.<name>`, then runs `run` in a scope where all of them are
    /// bound; the first variable that fails ends it.
    pub fn with_variables<T>(
        &self,
        variables: impl IntoIterator<Item = (&'e str, &'e Expression)>,
        run: impl FnOnce(&Scope<'_, 'e>) -> T,
    ) -> Result<T, VariableError> {
        // The map grows between evaluations, each in a scope that borrows it.
        let mut bound = CelMap::default();
        for (name, expression) in variables {
            self.start(expression);
            let mut scope = self.ctx.new_inner_scope();
            scope.add_variable_borrowed("variables", &bound);
            let value = expression.program.execute_val(&scope);
            drop(scope);
            match value {
                Ok(value) => bound.insert(CelMapKey::from(name), value),
                Err(error) => return Err(VariableError { name: name.to_owned(), error }),
            }
        }
        let mut ctx = self.ctx.new_inner_scope();
        ctx.add_variable_borrowed("variables", &bound);
        Ok(run(&Scope { ctx, meter: self.meter, current: self.current }))
    }

    fn start(&self, expression: &'e Expression) {
        self.meter.next_expression();
        self.current.set(expression.source());
    }
}

/// Runs `run` over `bindings` and `params` (`null` when `None`) under
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
        ctx.add_variable_borrowed("object", bindings.object.0.as_ref());
        ctx.add_variable_borrowed("oldObject", bindings.old_object.0.as_ref());
        ctx.add_variable_borrowed("request", bindings.request.0.as_ref());
        ctx.add_variable_borrowed("params", params.unwrap_or(&null).0.as_ref());
        run(&Scope { ctx, meter: &meter, current: &current })
    });
    match meter.stopped() {
        None => Ok(result),
        Some(limit) => Err(Exceeded { limit, limits, expression: current.get().to_owned() }),
    }
}
