//! Patch carried by Portcullis: a comprehension's step that only adds to
//! its accumulator (`map`, `filter`, `transformList`, `transformMap`,
//! `transformMapEntry`, as the macros expand them) adds to it in place.
//!
//! Evaluated as written, `@result + [e]` copies the accumulator into a new
//! list on every pass, and `cel.@mapInsert(@result, k, v)` copies the map:
//! a loop over n elements did n²/2 copies (`lists.range(20000).map(x, x)`
//! took 10 s; cel-go's accumulators are mutable, and so linear). The
//! accumulator's name (`@result`) is one no source can write, so nothing in
//! the step but the shape matched here reads it; every other step is
//! evaluated as written. The meter is charged for the nodes the shortcut
//! does not evaluate, as evaluating them would charge it.

use std::any::Any;
use std::borrow::Cow;

use crate::common::ast::{operators, CallExpr, ComprehensionExpr, Expr, IdedExpr};
use crate::common::types::{CelBool, CelList, CelMap};
use crate::common::value::Val;
use crate::context::Context;
use crate::ext_eval::insert_new;
use crate::objects::{try_bool, Value};
use crate::parser::MAP_INSERT;
use crate::ExecutionError;

/// What a step adds to its accumulator.
enum Addition<'a> {
    /// `accu + [element]`.
    Element(&'a IdedExpr),
    /// `cel.@mapInsert(accu, key, value)`.
    Entry(&'a IdedExpr, &'a IdedExpr),
    /// `cel.@mapInsert(accu, entries)`.
    Entries(&'a IdedExpr),
}

/// A step that adds to the accumulator, under a condition or not.
struct Step<'a> {
    condition: Option<&'a IdedExpr>,
    addition: Addition<'a>,
}

/// One pass of `loop_`, its variables bound in `scope`: `false` when its
/// condition (which reads only the accumulator) ends the loop instead,
/// else [`step`].
pub(crate) fn pass<'a>(
    loop_: &'a ComprehensionExpr,
    scope: &mut Context<'a>,
    pending: &mut Option<ExecutionError>,
) -> Result<bool, ExecutionError> {
    if !try_bool(Value::resolve_val(&loop_.loop_cond, scope))? {
        return Ok(false);
    }
    step(loop_, scope, pending)?;
    Ok(true)
}

/// Evaluates `loop_`'s step in `scope` and makes its value the
/// accumulator. The error of an `all` or `exists` step (`@result && p`,
/// `@result || p`) is held in `pending` instead, the accumulator left as
/// it was, as cel-go holds it: a later `false` (`all`) or `true`
/// (`exists`) absorbs it ([`settle`]).
fn step<'a>(
    loop_: &'a ComprehensionExpr,
    scope: &mut Context<'a>,
    pending: &mut Option<ExecutionError>,
) -> Result<(), ExecutionError> {
    let accu = loop_.accu_var.as_str();
    let shortcut = accu.starts_with('@')
        .then(|| parse(&loop_.loop_step, accu))
        .flatten();
    let Some(step) = shortcut else {
        let value = Value::resolve_val(&loop_.loop_step, scope).map(Cow::into_owned);
        match value {
            Ok(value) => scope.add_variable_as_val(accu, value),
            Err(error) if absorbing(loop_).is_some() => {
                pending.get_or_insert(error);
            }
            Err(error) => return Err(error),
        }
        return Ok(());
    };
    if let Some(condition) = step.condition {
        scope.charge()?;
        if !try_bool(Value::resolve_val(condition, scope))? {
            // The third branch: the accumulator, unchanged.
            return scope.charge();
        }
    }
    // The call, the accumulator's identifier, and for a list the literal.
    scope.charge_many(match step.addition {
        Addition::Element(_) => 3,
        Addition::Entry(..) | Addition::Entries(_) => 2,
    })?;
    match step.addition {
        Addition::Element(element) => {
            let element = Value::resolve_val(element, scope)?.into_owned();
            edit(scope, accu, |list: &mut CelList| {
                list.push(element);
                Ok(())
            })
        }
        Addition::Entry(key, value) => {
            let key = Value::resolve_val(key, scope)?.into_owned().try_into()?;
            let value = Value::resolve_val(value, scope)?.into_owned();
            edit(scope, accu, |map: &mut CelMap| insert_new(map, key, value))
        }
        Addition::Entries(entries) => {
            let entries = Value::resolve_val(entries, scope)?.into_owned();
            let entries = entries
                .downcast_ref::<CelMap>()
                .ok_or(ExecutionError::NoSuchOverload)?;
            edit(scope, accu, |map: &mut CelMap| {
                for (key, value) in entries.inner() {
                    insert_new(map, key.clone(), value.clone_as_boxed())?;
                }
                Ok(())
            })
        }
    }
}

/// The end of a loop whose step failed (`pending`): its error, unless the
/// accumulator reached the value that absorbs errors (`false` for
/// `all`, `true` for `exists`).
pub(crate) fn settle(
    loop_: &ComprehensionExpr,
    scope: &Context,
    pending: Option<ExecutionError>,
) -> Result<(), ExecutionError> {
    let Some(error) = pending else {
        return Ok(());
    };
    let absorbed = absorbing(loop_).is_some_and(|absorbing| {
        scope
            .get_variable(&loop_.accu_var)
            .is_some_and(|accu| accu.downcast_ref::<CelBool>().is_some_and(|b| *b.inner() == absorbing))
    });
    if absorbed {
        Ok(())
    } else {
        Err(error)
    }
}

/// For an `all` step (`@result && p`) `false`, for an `exists` step
/// (`@result || p`) `true`: the value that absorbs an error; `None` for
/// any other step.
fn absorbing(loop_: &ComprehensionExpr) -> Option<bool> {
    let accu = loop_.accu_var.as_str();
    let Expr::Call(call) = &loop_.loop_step.expr else {
        return None;
    };
    match (call.func_name.as_str(), call.target.as_ref(), call.args.as_slice()) {
        (operators::LOGICAL_AND, None, [left, _]) if accu.starts_with('@') && is(left, accu) => Some(false),
        (operators::LOGICAL_OR, None, [left, _]) if accu.starts_with('@') && is(left, accu) => Some(true),
        _ => None,
    }
}

/// Edits the accumulator `accu` of `scope`, a `T`, in place.
fn edit<'a, T: Val>(
    scope: &mut Context<'a>,
    accu: &str,
    change: impl FnOnce(&mut T) -> Result<(), ExecutionError>,
) -> Result<(), ExecutionError> {
    let mut value = scope
        .take_variable(accu)
        .ok_or_else(|| ExecutionError::UndeclaredReference(accu.to_string().into()))?
        .into_owned();
    let edited = match (value.as_mut() as &mut dyn Any).downcast_mut::<T>() {
        Some(target) => change(target),
        None => Err(ExecutionError::NoSuchOverload),
    };
    scope.add_variable_as_val(accu, value);
    edited
}

/// The step's shape, if it only adds to the accumulator `accu`.
fn parse<'a>(step: &'a IdedExpr, accu: &str) -> Option<Step<'a>> {
    let Expr::Call(call) = &step.expr else {
        return None;
    };
    match (call.func_name.as_str(), call.target.as_ref(), call.args.as_slice()) {
        (operators::CONDITIONAL, None, [condition, added, unchanged]) if is(unchanged, accu) => {
            let Expr::Call(added) = &added.expr else {
                return None;
            };
            addition(added, accu).map(|addition| Step {
                condition: Some(condition),
                addition,
            })
        }
        _ => addition(call, accu).map(|addition| Step {
            condition: None,
            addition,
        }),
    }
}

fn addition<'a>(call: &'a CallExpr, accu: &str) -> Option<Addition<'a>> {
    if call.target.is_some() {
        return None;
    }
    match (call.func_name.as_str(), call.args.as_slice()) {
        (operators::ADD, [target, list]) if is(target, accu) => match &list.expr {
            Expr::List(list) if list.optional_indices.is_empty() => match list.elements.as_slice() {
                [element] => Some(Addition::Element(element)),
                _ => None,
            },
            _ => None,
        },
        (MAP_INSERT, [target, key, value]) if is(target, accu) => Some(Addition::Entry(key, value)),
        (MAP_INSERT, [target, entries]) if is(target, accu) => Some(Addition::Entries(entries)),
        _ => None,
    }
}

fn is(expr: &IdedExpr, name: &str) -> bool {
    matches!(&expr.expr, Expr::Ident(ident) if ident == name)
}
