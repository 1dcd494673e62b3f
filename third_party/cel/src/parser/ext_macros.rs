//! Patch carried by Portcullis: the macros of cel-go's extensions that
//! Kubernetes' CEL enables, expanded as cel-go v0.26 expands them.
//!
//! - the two-variable comprehensions (`ext.TwoVarComprehensions`,
//!   Kubernetes 1.32): `all(i, v, p)`, `exists(i, v, p)`,
//!   `existsOne(i, v, p)` (and `exists_one`), `transformList(i, v, [f,] t)`,
//!   `transformMap(i, v, [f,] t)` and `transformMapEntry(i, v, [f,] t)`;
//!   over a list `i` is the index and `v` the element, over a map `i` is
//!   the key and `v` its value;
//! - `optMap(x, e)` and `optFlatMap(x, e)` of the optional library;
//! - `sortBy(x, key)` of the lists library (version 3, Kubernetes 1.34).
//!
//! The expansions call two functions no source can name (their names start
//! with `@`), which the interpreter evaluates itself: [`MAP_INSERT`] and
//! [`SORT_BY_ASSOCIATED_KEYS`].

use crate::common::ast::{
    operators, CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
};
use crate::parser::macros::MacroExpander;
use crate::parser::{MacroExprHelper, ParseError};

/// `cel.@mapInsert(map, key, value)`: `map` with `key` added (an error when
/// it is there already); `cel.@mapInsert(map, other)`: every entry of
/// `other` added so.
pub const MAP_INSERT: &str = "cel.@mapInsert";

/// `list.@sortByAssociatedKeys(keys)`: `list` ordered by `keys`, the key of
/// each element at its index (a stable sort).
pub const SORT_BY_ASSOCIATED_KEYS: &str = "@sortByAssociatedKeys";

/// The accumulator of every comprehension these macros build, cel-go's.
const ACCUMULATOR: &str = "@result";

/// The accumulator's name in older cel-go, which a variable may not take
/// either.
const OLD_ACCUMULATOR: &str = "__result__";

/// The variable `sortBy` binds its list to.
const SORT_BY_INPUT: &str = "@__sortBy_input__";

/// The loop variable of a comprehension over nothing (a binding).
const UNUSED: &str = "#unused";

/// The expander of one of these macros called with `args` on a target, if
/// it is one.
pub fn find_expander(func_name: &str, args: &[IdedExpr]) -> Option<MacroExpander> {
    let expander: MacroExpander = match (func_name, args.len()) {
        (operators::ALL, 3) => all,
        (operators::EXISTS, 3) => exists,
        (operators::EXISTS_ONE | "existsOne", 3) => exists_one,
        ("transformList", 3 | 4) => transform_list,
        ("transformMap", 3 | 4) => transform_map,
        ("transformMapEntry", 3 | 4) => transform_map_entry,
        ("optMap", 2) => opt_map,
        ("optFlatMap", 2) => opt_flat_map,
        ("sortBy", 2) => sort_by,
        _ => return None,
    };
    Some(expander)
}

/// What every two-variable comprehension is made of.
struct TwoVars {
    range: IdedExpr,
    first: String,
    second: String,
    /// The arguments after the two variables.
    rest: Vec<IdedExpr>,
}

impl TwoVars {
    fn read(
        helper: &mut MacroExprHelper,
        target: Option<IdedExpr>,
        args: Vec<IdedExpr>,
    ) -> Result<Self, ParseError> {
        let mut args = args.into_iter();
        let (Some(range), Some(first), Some(second)) = (target, args.next(), args.next()) else {
            return Err(error(helper, 0, "expected a target and two variables"));
        };
        let (first_id, second_id) = (first.id, second.id);
        let first = ident(helper, first)?;
        let second = ident(helper, second)?;
        if first == second {
            return Err(error(
                helper,
                second_id,
                &format!("duplicate variable name: {first}"),
            ));
        }
        for (name, id) in [(&first, first_id), (&second, second_id)] {
            if name == ACCUMULATOR || name == OLD_ACCUMULATOR {
                return Err(error(
                    helper,
                    id,
                    "iteration variable overwrites accumulator variable",
                ));
            }
        }
        Ok(Self {
            range,
            first,
            second,
            rest: args.collect(),
        })
    }

    /// The comprehension over the range with both variables.
    fn comprehension(
        self,
        helper: &mut MacroExprHelper,
        init: Expr,
        condition: Expr,
        step: IdedExpr,
        result: IdedExpr,
    ) -> IdedExpr {
        let accu_init = helper.next_expr(init);
        let loop_cond = helper.next_expr(condition);
        helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: self.range,
            iter_var: self.first,
            iter_var2: Some(self.second),
            accu_var: ACCUMULATOR.to_string(),
            accu_init,
            loop_cond,
            loop_step: step,
            result,
        })))
    }

    /// The predicate, filter or transform after the variables: the last
    /// argument, and the one before it when there are two.
    fn body(&mut self) -> (Option<IdedExpr>, IdedExpr) {
        let last = self.rest.pop().unwrap_or_default();
        (self.rest.pop(), last)
    }
}

fn all(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut vars = TwoVars::read(helper, target, args)?;
    let (_, predicate) = vars.body();
    let accu = accumulator(helper);
    let condition = call(operators::NOT_STRICTLY_FALSE, vec![accu]);
    let accu = accumulator(helper);
    let step = helper.next_expr(call(operators::LOGICAL_AND, vec![accu, predicate]));
    let result = accumulator(helper);
    Ok(vars.comprehension(helper, boolean(true), condition, step, result))
}

fn exists(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut vars = TwoVars::read(helper, target, args)?;
    let (_, predicate) = vars.body();
    let accu = accumulator(helper);
    let not = helper.next_expr(call(operators::LOGICAL_NOT, vec![accu]));
    let condition = call(operators::NOT_STRICTLY_FALSE, vec![not]);
    let accu = accumulator(helper);
    let step = helper.next_expr(call(operators::LOGICAL_OR, vec![accu, predicate]));
    let result = accumulator(helper);
    Ok(vars.comprehension(helper, boolean(false), condition, step, result))
}

fn exists_one(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut vars = TwoVars::read(helper, target, args)?;
    let (_, predicate) = vars.body();
    let accu = accumulator(helper);
    let one = helper.next_expr(int(1));
    let plus_one = helper.next_expr(call(operators::ADD, vec![accu, one]));
    let accu = accumulator(helper);
    let step = helper.next_expr(call(
        operators::CONDITIONAL,
        vec![predicate, plus_one, accu],
    ));
    let accu = accumulator(helper);
    let one = helper.next_expr(int(1));
    let result = helper.next_expr(call(operators::EQUALS, vec![accu, one]));
    Ok(vars.comprehension(helper, int(0), boolean(true), step, result))
}

fn transform_list(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut vars = TwoVars::read(helper, target, args)?;
    let (filter, transform) = vars.body();
    let accu = accumulator(helper);
    let item = helper.next_expr(Expr::List(ListExpr::new(vec![transform])));
    let step = helper.next_expr(call(operators::ADD, vec![accu, item]));
    let step = filtered(helper, filter, step);
    let result = accumulator(helper);
    let init = Expr::List(ListExpr::new(Vec::new()));
    Ok(vars.comprehension(helper, init, boolean(true), step, result))
}

fn transform_map(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut vars = TwoVars::read(helper, target, args)?;
    let (filter, transform) = vars.body();
    let accu = accumulator(helper);
    let key = helper.next_expr(Expr::Ident(vars.first.clone()));
    let step = helper.next_expr(call(MAP_INSERT, vec![accu, key, transform]));
    let step = filtered(helper, filter, step);
    let result = accumulator(helper);
    Ok(vars.comprehension(helper, empty_map(), boolean(true), step, result))
}

fn transform_map_entry(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut vars = TwoVars::read(helper, target, args)?;
    let (filter, transform) = vars.body();
    let accu = accumulator(helper);
    let step = helper.next_expr(call(MAP_INSERT, vec![accu, transform]));
    let step = filtered(helper, filter, step);
    let result = accumulator(helper);
    Ok(vars.comprehension(helper, empty_map(), boolean(true), step, result))
}

/// `x.optMap(v, e)`: `x.hasValue() ? optional.of(e with v = x.value()) :
/// optional.none()`.
fn opt_map(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    optional_binding(helper, target, args, "optMap", true)
}

/// `x.optFlatMap(v, e)`: `x.hasValue() ? (e with v = x.value()) :
/// optional.none()`.
fn opt_flat_map(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    optional_binding(helper, target, args, "optFlatMap", false)
}

fn optional_binding(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
    name: &str,
    wrap: bool,
) -> Result<IdedExpr, ParseError> {
    let mut args = args.into_iter();
    let (Some(target), Some(var), Some(body)) = (target, args.next(), args.next()) else {
        return Err(error(
            helper,
            0,
            &format!("{name}() expects a target and two arguments"),
        ));
    };
    let var = match var.expr {
        Expr::Ident(var) => var,
        _ => {
            return Err(error(
                helper,
                var.id,
                &format!("{name}() variable name must be a simple identifier"),
            ))
        }
    };
    let has_value = helper.next_expr(member(target.clone(), "hasValue", Vec::new()));
    let value = helper.next_expr(member(target, "value", Vec::new()));
    let mut present = bind(helper, var, value, body);
    if wrap {
        let optional = helper.next_expr(Expr::Ident("optional".to_string()));
        present = helper.next_expr(member(optional, "of", vec![present]));
    }
    let optional = helper.next_expr(Expr::Ident("optional".to_string()));
    let none = helper.next_expr(member(optional, "none", Vec::new()));
    Ok(helper.next_expr(call(
        operators::CONDITIONAL,
        vec![has_value, present, none],
    )))
}

/// `list.sortBy(v, key)`: the list, bound once, ordered by
/// `list.map(v, key)`.
fn sort_by(
    helper: &mut MacroExprHelper,
    target: Option<IdedExpr>,
    args: Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let mut args = args.into_iter();
    let (Some(target), Some(var), Some(key)) = (target, args.next(), args.next()) else {
        return Err(error(helper, 0, "sortBy() expects a target and two arguments"));
    };
    let var_id = var.id;
    if matches!(
        target.expr,
        Expr::Literal(_) | Expr::Map(_) | Expr::Struct(_) | Expr::Unspecified
    ) {
        return Err(error(
            helper,
            target.id,
            "sortBy can only be applied to a list, identifier, comprehension, call or select expression",
        ));
    }
    // As cel-go's `MakeMap` checks the variable.
    let var = match var.expr {
        Expr::Ident(var) if var == ACCUMULATOR || var == OLD_ACCUMULATOR => {
            return Err(error(
                helper,
                var_id,
                "iteration variable overwrites accumulator variable",
            ))
        }
        Expr::Ident(var) => var,
        _ => return Err(error(helper, var_id, "argument is not an identifier")),
    };
    // `@__sortBy_input__.map(var, key)`, as the `map` macro expands it.
    let input = helper.next_expr(Expr::Ident(SORT_BY_INPUT.to_string()));
    let accu = accumulator(helper);
    let item = helper.next_expr(Expr::List(ListExpr::new(vec![key])));
    let step = helper.next_expr(call(operators::ADD, vec![accu, item]));
    let result = accumulator(helper);
    let accu_init = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let loop_cond = helper.next_expr(boolean(true));
    let keys = helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: input,
        iter_var: var,
        iter_var2: None,
        accu_var: ACCUMULATOR.to_string(),
        accu_init,
        loop_cond,
        loop_step: step,
        result,
    })));
    let input = helper.next_expr(Expr::Ident(SORT_BY_INPUT.to_string()));
    let sorted = helper.next_expr(member(input, SORT_BY_ASSOCIATED_KEYS, vec![keys]));
    Ok(bind(helper, SORT_BY_INPUT.to_string(), target, sorted))
}

/// `body` with `var` bound to `value`: a comprehension over no element
/// whose accumulator is the variable, as cel-go binds.
fn bind(helper: &mut MacroExprHelper, var: String, value: IdedExpr, body: IdedExpr) -> IdedExpr {
    let iter_range = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let loop_cond = helper.next_expr(boolean(false));
    let loop_step = helper.next_expr(Expr::Ident(var.clone()));
    helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range,
        iter_var: UNUSED.to_string(),
        iter_var2: None,
        accu_var: var,
        accu_init: value,
        loop_cond,
        loop_step,
        result: body,
    })))
}

/// `filter ? step : accumulator`, or `step` without a filter.
fn filtered(helper: &mut MacroExprHelper, filter: Option<IdedExpr>, step: IdedExpr) -> IdedExpr {
    match filter {
        Some(filter) => {
            let accu = accumulator(helper);
            helper.next_expr(call(operators::CONDITIONAL, vec![filter, step, accu]))
        }
        None => step,
    }
}

fn accumulator(helper: &mut MacroExprHelper) -> IdedExpr {
    helper.next_expr(Expr::Ident(ACCUMULATOR.to_string()))
}

fn call(func_name: &str, args: Vec<IdedExpr>) -> Expr {
    Expr::Call(CallExpr {
        func_name: func_name.to_string(),
        target: None,
        args,
    })
}

fn member(target: IdedExpr, func_name: &str, args: Vec<IdedExpr>) -> Expr {
    Expr::Call(CallExpr {
        func_name: func_name.to_string(),
        target: Some(Box::new(target)),
        args,
    })
}

fn boolean(value: bool) -> Expr {
    Expr::Literal(LiteralValue::Boolean(value.into()))
}

fn int(value: i64) -> Expr {
    Expr::Literal(LiteralValue::Int(value.into()))
}

fn empty_map() -> Expr {
    Expr::Map(MapExpr {
        entries: Vec::new(),
    })
}

fn ident(helper: &MacroExprHelper, expr: IdedExpr) -> Result<String, ParseError> {
    match expr.expr {
        Expr::Ident(name) => Ok(name),
        _ => Err(error(helper, expr.id, "argument must be a simple name")),
    }
}

fn error(helper: &MacroExprHelper, id: u64, msg: &str) -> ParseError {
    ParseError {
        source: None,
        pos: helper.pos_for(id).unwrap_or_default(),
        msg: msg.to_string(),
        expr_id: 0,
        source_info: None,
    }
}
