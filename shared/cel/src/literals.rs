//! cel-go's literal validators, which Kubernetes' environment runs after a
//! type check that found nothing (since 1.29): a `duration` or `timestamp`
//! conversion, or a `matches`, whose literal argument cannot be read is
//! refused where the literal is written (`invalid duration argument`), as
//! the API server refuses it when the policy is created. As cel-go does,
//! the literal is judged by evaluating the call, here with this engine.
//! The fourth validator Kubernetes turns on, of homogeneous aggregate
//! literals, needs each item's type, and so runs in the walk that types
//! them ([`crate::output`]).

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::{Context, Program};

/// The calls in `expr` whose literal argument the API server refuses:
/// each literal's node id and cel-go's words, in the order of the tree.
pub(crate) fn refused(expr: &IdedExpr) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    walk(expr, &mut found);
    found
}

/// The call that judges a function's literal, bound to `p`. cel-go judges
/// the first argument of every call of the name: a method's argument
/// (`s.matches('[')`'s pattern), but a global call's first (`matches(s,
/// p)`'s `s`).
fn judge(function: &str) -> Option<&'static str> {
    match function {
        "duration" => Some("duration(p)"),
        "timestamp" => Some("timestamp(p)"),
        "matches" => Some("''.matches(p)"),
        _ => None,
    }
}

fn walk(expr: &IdedExpr, found: &mut Vec<(u64, String)>) {
    match &expr.expr {
        Expr::Call(call) => {
            if let (Some(judge), Some(argument)) = (judge(&call.func_name), call.args.first())
                && let Expr::Literal(LiteralValue::String(literal)) = &argument.expr
                && !evaluates(judge, literal)
            {
                found.push((argument.id, format!("invalid {} argument", call.func_name)));
            }
            call.target.iter().for_each(|t| walk(t, found));
            call.args.iter().for_each(|a| walk(a, found));
        }
        Expr::Select(select) => walk(&select.operand, found),
        Expr::List(list) => list.elements.iter().for_each(|e| walk(e, found)),
        Expr::Map(map) => map.entries.iter().for_each(|e| entry(&e.expr, found)),
        Expr::Struct(structure) => structure.entries.iter().for_each(|e| entry(&e.expr, found)),
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(part, found);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(entry: &EntryExpr, found: &mut Vec<(u64, String)>) {
    match entry {
        EntryExpr::StructField(field) => walk(&field.value, found),
        EntryExpr::MapEntry(e) => {
            walk(&e.key, found);
            walk(&e.value, found);
        }
    }
}

/// Whether `judge` evaluates with `p` the string `literal`.
fn evaluates(judge: &str, literal: &str) -> bool {
    let Ok(program) = Program::compile(judge) else { return true };
    let mut context = Context::default();
    context.add_variable_from_value("p", literal.to_owned());
    program.execute(&context).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(source: &str) -> Vec<String> {
        let program = Program::compile(source).expect("it parses");
        refused(program.expression()).into_iter().map(|(_, message)| message).collect()
    }

    #[test]
    fn a_literal_that_cannot_be_read_is_refused_and_others_are_not() {
        assert_eq!(errors("duration('x') == duration('1h30m')"), ["invalid duration argument"]);
        assert_eq!(
            errors("timestamp('2020-01-01') < timestamp('2020-01-01T00:00:00Z')"),
            ["invalid timestamp argument"]
        );
        assert_eq!(errors("[1].all(x, 'a'.matches('['))"), ["invalid matches argument"]);
        assert!(
            errors("duration(object.d) > duration('-1.5s') && object.s.matches('^a+$') && timestamp(1) < now")
                .is_empty()
        );
    }
}
