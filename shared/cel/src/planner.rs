//! What cel-go's planner does to a checked expression that can make
//! kube-apiserver's compiler fail: it folds a list or map literal of
//! constants into one value, and folding a map with a `bytes` key panics
//! (the key is hashed as a Go slice). The API server answers such a
//! policy with an internal error; [`crate::refusal`] refuses it in words.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// The first map literal of constants with a `bytes` key in `expr`
/// (`{b'k': 1}`), by node id, in the order of the tree.
pub(crate) fn bytes_keyed_map(expr: &IdedExpr) -> Option<u64> {
    let children: Vec<&IdedExpr> = match &expr.expr {
        Expr::Map(map) => {
            let bytes_key = |e: &EntryExpr| matches!(e, EntryExpr::MapEntry(e) if matches!(e.key.expr, Expr::Literal(LiteralValue::Bytes(_))));
            if constant(expr) && map.entries.iter().any(|e| bytes_key(&e.expr)) {
                return Some(expr.id);
            }
            map.entries.iter().flat_map(|e| entry(&e.expr)).collect()
        }
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Select(select) => vec![&*select.operand],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Struct(structure) => structure.entries.iter().flat_map(|e| entry(&e.expr)).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    children.into_iter().find_map(bytes_keyed_map)
}

fn entry(entry: &EntryExpr) -> Vec<&IdedExpr> {
    match entry {
        EntryExpr::StructField(field) => vec![&field.value],
        EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
    }
}

/// Whether cel-go's planner folds `expr` into a constant: a literal, or a
/// list or map literal of constants (without optional items).
fn constant(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Literal(_) => true,
        Expr::List(list) => list.optional_indices.is_empty() && list.elements.iter().all(constant),
        Expr::Map(map) => map.entries.iter().all(
            |e| matches!(&e.expr, EntryExpr::MapEntry(e) if !e.optional && constant(&e.key) && constant(&e.value)),
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Program;
    use cel::parser::Parser;

    fn found(source: &str) -> bool {
        let parser = Parser::new().enable_optional_syntax(true);
        bytes_keyed_map(Program::compile_with(parser, source).expect("it parses").expression()).is_some()
    }

    #[test]
    fn only_a_constant_map_with_a_bytes_key_is_found() {
        assert!(found("{b'k': 1} == {}"));
        assert!(found("[1].all(x, {'a': {b'k': [1]}}.size() > x)"));
        assert!(!found("{b'k': object.x} == {}"));
        assert!(!found("{'k': b'v'} == {}"));
        assert!(!found("{?b'k': optional.of(1)} == {}"));
    }
}
