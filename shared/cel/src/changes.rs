//! What a mutation's expression may change of the object, found in its
//! syntax tree at load: with [`crate::reads`], what a mutating webhook
//! must build of an object for its mutations to see and change exactly
//! what they would on the whole one.
//!
//! An `Object{...}` construction (an apply configuration, a merge patch)
//! changes only the fields it names, each as far as a construction nested
//! in it names; any other value (a map or list literal, a variable, a
//! function's result) may change anything below its field. A list of
//! `JSONPatch{...}` changes what the literal start of each `path` and
//! `from` names: `"/metadata/annotations/" + key` anything below
//! `metadata.annotations`. A conditional changes what either branch
//! changes, a concatenation of lists what either list changes. Anything
//! else may change the whole object.

use std::collections::BTreeMap;

use cel::common::ast::operators::{ADD, CONDITIONAL};
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::Expression;

/// Where a mutation may change a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Only these fields of it, each as far as its own [`Changes`] says.
    Fields(BTreeMap<String, Changes>),
    /// Anywhere.
    Whole,
}

impl Changes {
    /// Nothing at all.
    pub fn none() -> Self {
        Self::Fields(BTreeMap::new())
    }

    /// Widens `self` to what `other` changes too.
    pub fn merge(&mut self, other: Changes) {
        match (&mut *self, other) {
            (Changes::Whole, _) => {}
            (_, Changes::Whole) => *self = Changes::Whole,
            (Changes::Fields(mine), Changes::Fields(theirs)) => {
                for (field, changes) in theirs {
                    match mine.get_mut(&field) {
                        Some(existing) => existing.merge(changes),
                        None => {
                            mine.insert(field, changes);
                        }
                    }
                }
            }
        }
    }

    /// What an expression returning an object (an apply configuration or
    /// a merge patch) may change.
    pub fn of_object(expression: &Expression) -> Self {
        constructed(expression.program.expression())
    }

    /// What an expression returning a list of `JSONPatch{...}` may change.
    pub fn of_json_patch(expression: &Expression) -> Self {
        patches(expression.program.expression())
    }
}

/// The two branches of `c ? a : b`, if `expr` is one.
fn branches(expr: &IdedExpr) -> Option<(&IdedExpr, &IdedExpr)> {
    match &expr.expr {
        Expr::Call(call) if call.func_name == CONDITIONAL && call.target.is_none() => match call.args.as_slice() {
            [_, a, b] => Some((a, b)),
            _ => None,
        },
        _ => None,
    }
}

/// Both operands of `a + b`, if `expr` is one.
fn operands(expr: &IdedExpr) -> Option<(&IdedExpr, &IdedExpr)> {
    match &expr.expr {
        Expr::Call(call) if call.func_name == ADD && call.target.is_none() => match call.args.as_slice() {
            [a, b] => Some((a, b)),
            _ => None,
        },
        _ => None,
    }
}

fn either(a: Changes, b: Changes) -> Changes {
    let mut changes = a;
    changes.merge(b);
    changes
}

fn constructed(expr: &IdedExpr) -> Changes {
    if let Some((a, b)) = branches(expr) {
        return either(constructed(a), constructed(b));
    }
    let Expr::Struct(construction) = &expr.expr else { return Changes::Whole };
    let mut fields = Changes::none();
    for entry in &construction.entries {
        let EntryExpr::StructField(field) = &entry.expr else { return Changes::Whole };
        fields.merge(Changes::Fields(BTreeMap::from([(field.field.clone(), constructed(&field.value))])));
    }
    fields
}

fn patches(expr: &IdedExpr) -> Changes {
    if let Some((a, b)) = branches(expr).or_else(|| operands(expr)) {
        return either(patches(a), patches(b));
    }
    let Expr::List(list) = &expr.expr else { return Changes::Whole };
    list.elements.iter().map(patch).fold(Changes::none(), either)
}

/// What one `JSONPatch{op, path, from, value}` may change: below `path`
/// and `from`.
fn patch(expr: &IdedExpr) -> Changes {
    let Expr::Struct(construction) = &expr.expr else { return Changes::Whole };
    let mut changes = Changes::none();
    let mut has_path = false;
    for entry in &construction.entries {
        let EntryExpr::StructField(field) = &entry.expr else { return Changes::Whole };
        if field.field == "path" || field.field == "from" {
            has_path |= field.field == "path";
            changes.merge(below(&field.value));
        }
    }
    if has_path { changes } else { Changes::Whole }
}

/// Below the JSON Pointer `expr` evaluates to, as far as its literal start
/// says: a pointer that goes on past its literal may go on within its last
/// literal token, so that token is not kept.
fn below(expr: &IdedExpr) -> Changes {
    let mut start = expr;
    let mut complete = true;
    while let Some((first, _)) = operands(start) {
        start = first;
        complete = false;
    }
    let Expr::Literal(LiteralValue::String(pointer)) = &start.expr else { return Changes::Whole };
    let Some(rest) = pointer.strip_prefix('/') else { return Changes::Whole };
    let mut tokens: Vec<&str> = rest.split('/').collect();
    if !complete {
        tokens.pop();
    }
    tokens.iter().rev().fold(Changes::Whole, |inner, token| {
        Changes::Fields(BTreeMap::from([(token.replace("~1", "/").replace("~0", "~"), inner)]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Environment, LoadBounds, compile_in};

    fn expression(source: &str) -> Expression {
        compile_in(Environment::Mutation, source, LoadBounds::Portcullis { cost: crate::cost::DEFAULT_LIMIT })
            .expect("compiles")
    }

    fn fields<const N: usize>(entries: [(&str, Changes); N]) -> Changes {
        Changes::Fields(entries.into_iter().map(|(name, c)| (name.to_owned(), c)).collect())
    }

    #[test]
    fn a_construction_changes_the_fields_it_names_and_below_any_other_value() {
        let labels = r#"Object{metadata: Object.metadata{labels: {"team": "x"}}}"#;
        let expected = fields([("metadata", fields([("labels", Changes::Whole)]))]);
        assert_eq!(Changes::of_object(&expression(labels)), expected);

        let sidecar = r#"Object{spec: Object.spec{?hostNetwork: optional.of(true),
            containers: [Object.spec.containers{name: "proxy"}]}}"#;
        let expected = fields([("spec", fields([("containers", Changes::Whole), ("hostNetwork", Changes::Whole)]))]);
        assert_eq!(Changes::of_object(&expression(sidecar)), expected);

        let branches =
            r#"has(object.spec) ? Object{metadata: Object.metadata{labels: {}}} : Object{spec: Object.spec{}}"#;
        let expected = fields([("metadata", fields([("labels", Changes::Whole)])), ("spec", Changes::none())]);
        assert_eq!(Changes::of_object(&expression(branches)), expected);

        for whole in ["object", r#"true ? Object{} : object"#, "variables.config"] {
            assert_eq!(Changes::of_object(&expression(whole)), Changes::Whole, "{whole}");
        }
    }

    #[test]
    fn a_json_patch_changes_below_the_literal_start_of_its_paths() {
        let escaped = r#"[JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("a/b"), value: "on"},
            JSONPatch{op: "move", from: "/spec/x~1y", path: "/spec/containers/-"}]"#;
        let expected = fields([
            ("metadata", fields([("annotations", Changes::Whole)])),
            ("spec", fields([("containers", fields([("-", Changes::Whole)])), ("x/y", Changes::Whole)])),
        ]);
        assert_eq!(Changes::of_json_patch(&expression(escaped)), expected);

        let partial_token = r#"[JSONPatch{op: "remove", path: "/metadata/labels/team-" + "x"}] + []"#;
        assert_eq!(
            Changes::of_json_patch(&expression(partial_token)),
            fields([("metadata", fields([("labels", Changes::Whole)]))])
        );
        assert_eq!(Changes::of_json_patch(&expression("true ? [] : []")), Changes::none());

        for whole in [
            r#"[JSONPatch{op: "add", path: variables.path, value: 1}]"#,
            r#"[JSONPatch{op: "add", path: "", value: {}}]"#,
            r#"[JSONPatch{op: "add", value: 1}]"#,
            r#"object.spec.containers.map(c, JSONPatch{op: "remove", path: "/spec/x"})"#,
        ] {
            assert_eq!(Changes::of_json_patch(&expression(whole)), Changes::Whole, "{whole}");
        }
    }
}
