//! The type of what an expression evaluates to, where cel-go's checker
//! is certain of it in Kubernetes' admission environment: the API server
//! refuses a policy whose validation or match condition is not a `bool`,
//! whose message expression is not a `string`, or whose audit annotation
//! value is neither a `string` nor `null` (`must evaluate to bool but got
//! dyn`). `object`, `oldObject` and `params` are `dyn` there, so reading a
//! field of them is `dyn` too, and so is a `has()` or a comparison `bool`.
//!
//! Only what is certain is said: a literal, a read from a `dyn` variable,
//! comparisons and logic, the conversions (`string(x)`), `size`, the
//! macros that give a `bool`, and the fields `request` and
//! `namespaceObject` type as scalars. Anything else (a function's result,
//! a list, a policy variable's value) is `None`, and never refused here.

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};

use crate::types::{DeclType, NAMESPACE, REQUEST};

/// The type name `expr` evaluates to, as cel-go prints it (`bool`, `int`,
/// `string`, `dyn`, `null_type`), when it is certain.
pub(crate) fn output_type(expr: &IdedExpr) -> Option<&'static str> {
    Output { scope: Vec::new() }.of(expr).and_then(Known::name)
}

/// What is known of a value's type.
#[derive(Debug, Clone, Copy)]
enum Known {
    /// A scalar, by name.
    Scalar(&'static str),
    /// A value of one of the environment's object types.
    Typed(&'static DeclType),
}

impl Known {
    fn name(self) -> Option<&'static str> {
        match self {
            Self::Scalar(name) => Some(name),
            Self::Typed(DeclType::Scalar(name)) => Some(name),
            Self::Typed(DeclType::Dyn) => Some("dyn"),
            Self::Typed(_) => None,
        }
    }
}

const BOOL: Known = Known::Scalar("bool");
const DYN: Known = Known::Scalar("dyn");

struct Output<'e> {
    scope: Vec<(&'e str, Option<Known>)>,
}

impl<'e> Output<'e> {
    fn of(&mut self, expr: &'e IdedExpr) -> Option<Known> {
        match &expr.expr {
            Expr::Literal(literal) => Some(Known::Scalar(match literal {
                LiteralValue::Boolean(_) => "bool",
                LiteralValue::Bytes(_) => "bytes",
                LiteralValue::Double(_) => "double",
                LiteralValue::Int(_) => "int",
                LiteralValue::Null => "null_type",
                LiteralValue::String(_) => "string",
                LiteralValue::UInt(_) => "uint",
            })),
            Expr::Ident(name) => {
                if let Some((_, known)) = self.scope.iter().rev().find(|(n, _)| n == name) {
                    return *known;
                }
                match name.as_str() {
                    "object" | "oldObject" | "params" => Some(DYN),
                    "request" => Some(Known::Typed(&REQUEST)),
                    "namespaceObject" => Some(Known::Typed(&NAMESPACE)),
                    _ => None,
                }
            }
            Expr::Select(select) if select.test => Some(BOOL),
            Expr::Select(select) => match self.of(&select.operand)? {
                Known::Scalar("dyn") => Some(DYN),
                Known::Typed(DeclType::Object(fields)) => DeclType::field(fields, &select.field).map(Known::Typed),
                Known::Typed(DeclType::Map(values)) => Some(Known::Typed(values)),
                _ => None,
            },
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(c) => {
                // all, exists (a bool accumulator) and exists_one (the
                // result compares): the result with the accumulator's type.
                let accumulator = match &c.accu_init.expr {
                    Expr::Literal(LiteralValue::Boolean(_)) => Some(BOOL),
                    _ => None,
                };
                let outer = self.scope.len();
                self.scope.push((c.iter_var.as_str(), None));
                if let Some(second) = &c.iter_var2 {
                    self.scope.push((second.as_str(), None));
                }
                self.scope.push((c.accu_var.as_str(), accumulator));
                let result = self.of(&c.result);
                self.scope.truncate(outer);
                result
            }
            Expr::List(_) | Expr::Map(_) | Expr::Struct(_) | Expr::Unspecified => None,
        }
    }

    fn call(&mut self, call: &'e CallExpr) -> Option<Known> {
        let scalar = |name| Some(Known::Scalar(name));
        match (call.func_name.as_str(), call.target.is_some(), call.args.as_slice()) {
            (
                "_==_"
                | "_!=_"
                | "_<_"
                | "_<=_"
                | "_>_"
                | "_>=_"
                | "_&&_"
                | "_||_"
                | "!_"
                | "@in"
                | "@not_strictly_false",
                false,
                _,
            ) => Some(BOOL),
            ("startsWith" | "endsWith" | "matches", true, [_]) => Some(BOOL),
            ("size", _, _) => scalar("int"),
            ("string" | "int" | "uint" | "double" | "bool" | "bytes", false, [_]) => {
                scalar(match call.func_name.as_str() {
                    "string" => "string",
                    "int" => "int",
                    "uint" => "uint",
                    "double" => "double",
                    "bool" => "bool",
                    _ => "bytes",
                })
            }
            ("_[_]", false, [operand, _]) => match self.of(operand)? {
                Known::Scalar("dyn") => Some(DYN),
                Known::Typed(DeclType::Map(values) | DeclType::List(values)) => Some(Known::Typed(values)),
                _ => None,
            },
            // Arithmetic and concatenation: the overload a typed operand
            // picks (`'a' + dyn` is a string, `dyn + 1` an int); two `dyn`s
            // match every overload, whose results differ: `dyn`.
            ("_+_" | "_-_" | "_*_" | "_/_" | "_%_", false, [left, right]) => {
                let (left, right) = (self.of(left).and_then(Known::name), self.of(right).and_then(Known::name));
                match (left, right) {
                    (Some("dyn"), Some("dyn")) => Some(DYN),
                    (Some(t @ ("int" | "uint" | "double" | "string" | "bytes")), Some(u)) if u == t || u == "dyn" => {
                        scalar(t)
                    }
                    (Some("dyn"), Some(t @ ("int" | "uint" | "double" | "string" | "bytes"))) => scalar(t),
                    _ => None,
                }
            }
            ("_?_:_", false, [_, yes, no]) => {
                match (self.of(yes).and_then(Known::name), self.of(no).and_then(Known::name)) {
                    (Some(a), Some(b)) if a == b => scalar(a),
                    (Some("dyn"), Some(_)) | (Some(_), Some("dyn")) => Some(DYN),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use cel::Program;
    use cel::parser::Parser;

    use super::*;

    fn output(source: &str) -> Option<&'static str> {
        let program = Program::compile_with(Parser::new().enable_optional_syntax(true), source).expect("CEL");
        output_type(program.expression())
    }

    #[test]
    fn what_the_api_server_says_an_expression_gives() {
        // The API server's words for each (kube-apiserver 1.36, dry run).
        let cases = [
            ("'x'", Some("string")),
            ("object.spec.paused", Some("dyn")),
            ("1", Some("int")),
            ("request.dryRun", Some("bool")),
            ("request.name", Some("string")),
            ("'a' + object.metadata.name", Some("string")),
            ("object.metadata.name + 'a'", Some("string")),
            ("object.spec.replicas + 1", Some("int")),
            ("has(object.spec) ? true : object.spec.paused", Some("dyn")),
            ("size(object.spec)", Some("int")),
            ("[1].all(x, x > 0)", Some("bool")),
            ("null", Some("null_type")),
            ("object.metadata.labels['a']", Some("dyn")),
            ("namespaceObject.metadata.labels['a']", Some("string")),
            ("object.metadata.name + object.spec.x", Some("dyn")),
            ("object.a * object.b", Some("dyn")),
        ];
        for (source, expected) in cases {
            assert_eq!(output(source), expected, "{source}");
        }
    }

    #[test]
    fn what_is_not_certain_is_not_said() {
        for source in ["variables.s", "[1].map(x, x)", "variables.a + object.b", "request.userInfo", "f(1)", "x"] {
            assert_eq!(output(source), None, "{source}");
        }
    }
}
