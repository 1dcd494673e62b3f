//! A worst-case cost estimate of a CEL expression, made at load, so that a
//! policy whose work grows faster than the object it judges is refused
//! before any request reaches it (as the API server refuses such a rule).
//!
//! The model: everything an expression reads from the request (`object`,
//! `oldObject`, `request`, `params`, `namespaceObject`, `variables`) fits
//! in the API server's request limit of [`MAX_REQUEST_BYTES`], so a list or
//! map in it has at most [`MAX_ELEMENTS`] entries (each at least four bytes
//! of JSON) and a string at most that many bytes. A comprehension over such
//! a range runs its body once per element; inside it, the element itself is
//! one element's share of the data, so a body that only reads its element
//! costs a constant per element and the whole loop is linear in the
//! object's size, while a body that reads the object again (a nested loop,
//! a string operation on the whole object) is quadratic. Costs are kept as
//! a polynomial in the element count and evaluated at the limit: one per
//! node, and a tenth per byte for string and list traversals, the API
//! server's unit.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::Expression;

/// The API server's limit on a request body.
pub const MAX_REQUEST_BYTES: f64 = 3.0 * 1024.0 * 1024.0;
/// The most elements a list, map or string read from a request can have:
/// each takes at least four bytes of JSON (a one-character string or the
/// smallest object, and its separator).
pub const MAX_ELEMENTS: f64 = MAX_REQUEST_BYTES / 4.0;
/// Kubernetes' `StaticEstimatedCostLimit`: the default per-expression limit.
pub const DEFAULT_LIMIT: u64 = 10_000_000;

/// The variables bound to request data.
const DATA: [&str; 6] = ["object", "oldObject", "request", "params", "namespaceObject", "variables"];
/// Cost per byte of a traversal (string compare, concatenation, search).
const PER_BYTE: f64 = 0.1;
/// Operators and functions that yield a boolean or a number.
const COMPARISONS: [&str; 12] =
    ["_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in", "contains", "startsWith", "endsWith", "matches", "indexOf"];
/// Functions whose cost does not grow with their operands (a map or list
/// lookup, a size, boolean logic, conversions of scalars).
const CONSTANT_TIME: [&str; 13] = [
    "_[_]",
    "size",
    "_&&_",
    "_||_",
    "!_",
    "@not_strictly_false",
    "int",
    "uint",
    "double",
    "bool",
    "type",
    "dyn",
    "has",
];

/// A polynomial in the element count `n`: `terms[i]` is the coefficient of
/// `n^i`. Degrees past the last saturate to infinity.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Poly {
    terms: [f64; 4],
}

impl Poly {
    fn constant(c: f64) -> Self {
        Self { terms: [c, 0.0, 0.0, 0.0] }
    }

    fn linear() -> Self {
        Self { terms: [0.0, 1.0, 0.0, 0.0] }
    }

    fn add(self, other: Self) -> Self {
        let mut terms = self.terms;
        terms.iter_mut().zip(other.terms).for_each(|(a, b)| *a += b);
        Self { terms }
    }

    fn scale(self, factor: f64) -> Self {
        Self { terms: self.terms.map(|t| t * factor) }
    }

    fn max(self, other: Self) -> Self {
        if other.at(MAX_ELEMENTS) > self.at(MAX_ELEMENTS) { other } else { self }
    }

    /// `self × other`; a degree past the last becomes infinite.
    fn mul(self, other: Self) -> Self {
        let mut terms = [0.0; 4];
        for (i, a) in self.terms.iter().enumerate() {
            for (j, b) in other.terms.iter().enumerate() {
                let product = a * b;
                if product == 0.0 {
                    continue;
                }
                match terms.get_mut(i + j) {
                    Some(t) => *t += product,
                    None => terms[3] = f64::INFINITY,
                }
            }
        }
        Self { terms }
    }

    fn at(self, n: f64) -> f64 {
        self.terms.iter().rev().fold(0.0, |acc, t| acc * n + t)
    }
}

/// What the estimate knows about a value: how big it can be.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    cost: Poly,
    size: Poly,
}

/// The scope: names bound to one element of a loop's range.
struct Scope<'a> {
    elements: Vec<&'a str>,
    /// Names bound to a value by a comprehension over nothing (what
    /// `optMap`, `optFlatMap` and `sortBy` expand to), with its size.
    bound: Vec<(&'a str, Poly)>,
}

/// The worst-case cost of an expression with request data at the API
/// server's limit, rounded up (saturating at `u64::MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// All of it.
    pub total: u64,
    /// The part that grows faster than the object (quadratic and beyond):
    /// what the limit is checked against. The linear part is bounded by the
    /// request size itself, at a few operations per byte.
    pub superlinear: u64,
}

/// Estimates `expression`.
pub fn estimate(expression: &Expression) -> Cost {
    of(expression.program.expression())
}

/// Estimates a syntax tree.
pub(crate) fn of(expr: &IdedExpr) -> Cost {
    let cost = walk(expr, &mut Scope { elements: Vec::new(), bound: Vec::new() }).cost;
    let mut superlinear = cost;
    superlinear.terms[0] = 0.0;
    superlinear.terms[1] = 0.0;
    Cost { total: rounded(cost.at(MAX_ELEMENTS)), superlinear: rounded(superlinear.at(MAX_ELEMENTS)) }
}

fn rounded(cost: f64) -> u64 {
    let cost = cost.ceil();
    if cost.is_finite() && cost < u64::MAX as f64 { cost as u64 } else { u64::MAX }
}

fn walk<'a>(expr: &'a IdedExpr, scope: &mut Scope<'a>) -> Estimate {
    let one = Poly::constant(1.0);
    match &expr.expr {
        Expr::Unspecified => Estimate { cost: Poly::default(), size: Poly::default() },
        Expr::Literal(_) => Estimate { cost: one, size: one },
        Expr::Ident(name) => {
            // An element's share of the data is one unit; the data is all of it.
            let bound = scope.bound.iter().rev().find(|(bound, _)| bound == name).map(|&(_, size)| size);
            let size = if let Some(size) = bound {
                size
            } else if scope.elements.contains(&name.as_str()) {
                one
            } else if DATA.contains(&name.as_str()) {
                Poly::linear()
            } else {
                one
            };
            Estimate { cost: one, size }
        }
        Expr::Select(select) => {
            let operand = walk(&select.operand, scope);
            Estimate { cost: operand.cost.add(one), size: operand.size }
        }
        Expr::List(list) => {
            let elements: Vec<Estimate> = list.elements.iter().map(|e| walk(e, scope)).collect();
            sequence(&elements)
        }
        Expr::Map(map) => {
            let entries: Vec<Estimate> = map.entries.iter().flat_map(|e| entry(&e.expr, scope)).collect();
            sequence(&entries)
        }
        Expr::Struct(structure) => {
            let entries: Vec<Estimate> = structure.entries.iter().flat_map(|e| entry(&e.expr, scope)).collect();
            sequence(&entries)
        }
        Expr::Call(call) => {
            let target = call.target.as_deref().map(|t| walk(t, scope));
            let args: Vec<Estimate> = call.args.iter().map(|a| walk(a, scope)).collect();
            let operands: Vec<Estimate> = target.into_iter().chain(args.iter().copied()).collect();
            if call.func_name == "_?_:_" && args.len() == 3 {
                return Estimate {
                    cost: args[0].cost.add(args[1].cost.max(args[2].cost)).add(one),
                    size: args[1].size.max(args[2].size),
                };
            }
            let inputs = operands.iter().fold(Poly::default(), |acc, o| acc.add(o.cost));
            let name = call.func_name.as_str();
            if CONSTANT_TIME.contains(&name) {
                // A lookup yields a part of its operand (as large as it, at
                // most); the others a scalar.
                let size = match name {
                    // Indexed by a loop's element: that element's share.
                    "_[_]" if call.args.get(1).is_some_and(|i| is_element(i, scope)) => one,
                    "_[_]" => operands.first().map_or(one, |o| o.size),
                    _ => one,
                };
                return Estimate { cost: inputs.add(one), size };
            }
            // Otherwise a traversal of its largest operand (string compare,
            // search, concatenation, `in` on a list). Comparisons yield a
            // boolean; anything else may be as large as its operands together.
            let largest = operands.iter().fold(Poly::default(), |acc, o| acc.max(o.size));
            let size = if COMPARISONS.contains(&name) {
                one
            } else {
                operands.iter().fold(Poly::default(), |acc, o| acc.add(o.size))
            };
            Estimate { cost: inputs.add(one).add(largest.scale(PER_BYTE)), size }
        }
        // A binding (`x.optMap(v, e)`, `list.sortBy(v, k)`): the result,
        // once, with the variable as big as its value.
        Expr::Comprehension(loop_) if matches!(&loop_.iter_range.expr, Expr::List(l) if l.elements.is_empty()) => {
            let init = walk(&loop_.accu_init, scope);
            scope.bound.push((loop_.accu_var.as_str(), init.size));
            let result = walk(&loop_.result, scope);
            scope.bound.pop();
            Estimate { cost: init.cost.add(result.cost), size: result.size }
        }
        Expr::Comprehension(loop_) => {
            let range = walk(&loop_.iter_range, scope);
            let init = walk(&loop_.accu_init, scope);
            let bound = scope.elements.len();
            scope.elements.push(loop_.iter_var.as_str());
            if let Some(second) = &loop_.iter_var2 {
                scope.elements.push(second.as_str());
            }
            // The step is the macro's body; the condition and the
            // accumulator are the macro's own bookkeeping, not counted.
            let body = walk(&loop_.loop_step, scope).cost;
            scope.elements.truncate(bound);
            let result = walk(&loop_.result, scope);
            // Once per element of the range: as many as its size allows.
            let iterations = range.size;
            Estimate { cost: range.cost.add(init.cost).add(iterations.mul(body)).add(result.cost), size: range.size }
        }
    }
}

fn is_element(expr: &IdedExpr, scope: &Scope<'_>) -> bool {
    matches!(&expr.expr, Expr::Ident(name) if scope.elements.contains(&name.as_str()))
}

fn entry<'a>(entry: &'a EntryExpr, scope: &mut Scope<'a>) -> Vec<Estimate> {
    match entry {
        EntryExpr::StructField(field) => vec![walk(&field.value, scope)],
        EntryExpr::MapEntry(map_entry) => vec![walk(&map_entry.key, scope), walk(&map_entry.value, scope)],
    }
}

fn sequence(parts: &[Estimate]) -> Estimate {
    let cost = parts.iter().fold(Poly::constant(1.0), |acc, p| acc.add(p.cost));
    let size = parts.iter().fold(Poly::constant(1.0), |acc, p| acc.add(p.size));
    Estimate { cost, size }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(source: &str) -> u64 {
        estimate(&crate::compile(source, u64::MAX).expect("compiles")).total
    }

    fn superlinear(source: &str) -> u64 {
        estimate(&crate::compile(source, u64::MAX).expect("compiles")).superlinear
    }

    #[test]
    fn a_binding_keeps_the_size_of_its_value() {
        let plain = "object.metadata.managedFields.all(a, object.metadata.managedFields.exists(b, a == b))";
        let limit = DEFAULT_LIMIT;
        assert!(superlinear(plain) > limit);
        for bound in [
            "object.metadata.managedFields.sortBy(c, c.manager).all(a, object.metadata.managedFields.exists(b, a == b))",
            "object.?metadata.?managedFields.optMap(fs, fs.all(a, fs.exists(b, a == b))).orValue(true)",
            "object.metadata.managedFields.sortBy(c, object.metadata.managedFields.filter(d, d == c).size()).size() > 0",
        ] {
            assert!(superlinear(bound) > limit, "{bound}: {}", superlinear(bound));
        }
        assert!(superlinear("object.?spec.?replicas.optMap(r, r <= 5).orValue(true)") == 0);
        assert!(superlinear("object.spec.containers.sortBy(c, c.name).map(c, c.name).size() > 0") == 0);
    }

    #[test]
    fn constants_and_field_reads_are_cheap() {
        // A comparison may meet a string as large as the object: linear.
        assert!(cost("object.spec.replicas <= 5") < 1_000_000);
        assert!(cost("size(object.metadata.name) < 64") < 100);
        assert!(
            cost("request.operation != 'UPDATE' || object.spec.selector == oldObject.spec.selector")
                < MAX_ELEMENTS as u64
        );
    }

    #[test]
    fn a_loop_reading_its_element_is_linear_in_the_object() {
        let source = "object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example.com/'))";
        assert!(cost(source) > MAX_ELEMENTS as u64, "{}", cost(source));
        assert_eq!(superlinear(source), 0);
    }

    #[test]
    fn a_nested_loop_over_the_object_is_quadratic_and_over_the_limit() {
        let quadratic = "object.metadata.annotations.all(k, object.metadata.annotations.all(j, k == j || object.metadata.annotations[k] != object.metadata.annotations[j]))";
        assert!(superlinear(quadratic) > 100_000_000_000, "{}", superlinear(quadratic));
        let cubic = "object.data.items.all(a, object.data.items.all(b, object.data.items.all(c, a + b + c != '')))";
        assert!(superlinear(cubic) > 100_000_000_000_000_000, "{}", superlinear(cubic));
    }

    #[test]
    fn a_string_operation_on_the_whole_object_inside_a_loop_is_quadratic() {
        let scan = "object.spec.containers.all(c, string(object).contains(c.name))";
        assert!(superlinear(scan) > DEFAULT_LIMIT, "{}", superlinear(scan));
    }

    #[test]
    fn a_conditional_costs_its_dearer_branch() {
        let cheap = cost("true ? 1 : 2");
        let dear = cost("true ? object.spec.containers.all(c, c.name != '') : 2");
        assert!(dear > cheap * 1000, "{cheap} {dear}");
    }

    #[test]
    fn lookups_in_a_loop_stay_linear() {
        let lookups = "object.metadata.labels.all(k, size(object.metadata.labels[k]) < 64)";
        assert_eq!(superlinear(lookups), 0);
    }

    #[test]
    fn literal_lists_are_as_long_as_they_are() {
        assert!(cost("[1, 2, 3].all(x, x > 0)") < 100);
    }
}
