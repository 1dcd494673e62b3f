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
//! macros that give a `bool`, the fields `request` and `namespaceObject`
//! type (scalars, lists and maps of them), and a policy variable whose
//! value is one of these. Anything else (a function's result, a list
//! literal) is `None`, and never refused here.

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};

use crate::typecheck::Variable;
use crate::types::{DeclType, NAMESPACE, REQUEST};

/// The type name `expr` evaluates to, as cel-go prints it (`bool`, `int`,
/// `string`, `dyn`, `null_type`, `list(string)`), when it is certain;
/// `variables` are the policy's variables it sees.
pub(crate) fn output_type(expr: &IdedExpr, variables: &[Variable<'_>]) -> Option<String> {
    Output { scope: Vec::new(), variables }.of(expr).and_then(Known::name)
}

/// The type the API server gives a variable whose expression is `expr`,
/// where it is certain: the expression's, but `dyn` for an object
/// (`request.userInfo`); `None` for a list or map of objects.
pub(crate) fn variable_type(expr: &IdedExpr, variables: &[Variable<'_>]) -> Option<DeclType> {
    match (Output { scope: Vec::new(), variables }).of(expr)? {
        Known::Scalar("dyn") | Known::Typed(DeclType::Object(_)) => Some(DeclType::Dyn),
        Known::Scalar(name) => Some(DeclType::Scalar(name)),
        Known::Typed(typed) => typed.cel_name().is_some().then(|| typed.clone()),
    }
}

/// What is known of a value's type.
#[derive(Debug, Clone, Copy)]
enum Known<'t> {
    /// A scalar, by name.
    Scalar(&'static str),
    /// A value of one of the environment's types, or a variable's.
    Typed(&'t DeclType),
}

impl Known<'_> {
    /// The scalar's name (`dyn` included), `None` for a list or a map.
    fn scalar(self) -> Option<&'static str> {
        match self {
            Self::Scalar(name) => Some(name),
            Self::Typed(DeclType::Scalar(name)) => Some(*name),
            Self::Typed(DeclType::Dyn) => Some("dyn"),
            Self::Typed(_) => None,
        }
    }

    fn name(self) -> Option<String> {
        match self {
            Self::Scalar(name) => Some(name.to_owned()),
            Self::Typed(typed) => typed.cel_name(),
        }
    }
}

const BOOL: Known<'static> = Known::Scalar("bool");
const DYN: Known<'static> = Known::Scalar("dyn");

struct Output<'e, 't> {
    scope: Vec<(&'e str, Option<Known<'t>>)>,
    variables: &'t [Variable<'t>],
}

impl<'e, 't> Output<'e, 't> {
    fn of(&mut self, expr: &'e IdedExpr) -> Option<Known<'t>> {
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
            Expr::Select(select) if matches!(&select.operand.expr, Expr::Ident(v) if v == "variables") => {
                let variable = self.variables.iter().find(|v| v.name == select.field)?;
                variable.value.as_ref().map(Known::Typed)
            }
            Expr::Select(select) => match self.of(&select.operand)? {
                Known::Scalar("dyn") | Known::Typed(DeclType::Dyn) => Some(DYN),
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

    fn call(&mut self, call: &'e CallExpr) -> Option<Known<'t>> {
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
                Known::Scalar("dyn") | Known::Typed(DeclType::Dyn) => Some(DYN),
                Known::Typed(DeclType::Map(values) | DeclType::List(values)) => Some(Known::Typed(values)),
                _ => None,
            },
            // Arithmetic and concatenation: the overload a typed operand
            // picks (`'a' + dyn` is a string, `dyn + 1` an int); two `dyn`s
            // match every overload, whose results differ: `dyn`.
            ("_+_" | "_-_" | "_*_" | "_/_" | "_%_", false, [left, right]) => {
                let (left, right) = (self.of(left).and_then(Known::scalar), self.of(right).and_then(Known::scalar));
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
                match (self.of(yes).and_then(Known::scalar), self.of(no).and_then(Known::scalar)) {
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

    fn output(source: &str) -> Option<String> {
        output_with(source, &[])
    }

    fn output_with(source: &str, variables: &[Variable<'_>]) -> Option<String> {
        let program = Program::compile_with(Parser::new().enable_optional_syntax(true), source).expect("CEL");
        output_type(program.expression(), variables)
    }

    fn variable(source: &str, variables: &[Variable<'_>]) -> Option<DeclType> {
        let program = Program::compile_with(Parser::new().enable_optional_syntax(true), source).expect("CEL");
        variable_type(program.expression(), variables)
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
            ("namespaceObject.metadata.labels", Some("map(string, string)")),
            ("request.userInfo.groups", Some("list(string)")),
            ("request.userInfo.extra", Some("map(string, list(string))")),
        ];
        for (source, expected) in cases {
            assert_eq!(output(source).as_deref(), expected, "{source}");
        }
    }

    #[test]
    fn what_is_not_certain_is_not_said() {
        for source in ["variables.s", "[1].map(x, x)", "variables.a + object.b", "request.userInfo", "f(1)", "x"] {
            assert_eq!(output(source), None, "{source}");
        }
    }

    #[test]
    fn a_variable_has_its_expressions_type_and_objects_are_dyn() {
        // The API server's words for `variables.<name>` in a validation
        // (kube-apiserver 1.36, dry run): `must evaluate to bool but got
        // list(string)`.
        let cases = [
            ("object.metadata.name", Some("dyn")),
            ("'a'", Some("string")),
            ("object.spec.replicas > 1", Some("bool")),
            ("request", Some("dyn")),
            ("request.userInfo", Some("dyn")),
            ("namespaceObject.metadata", Some("dyn")),
            ("request.name", Some("string")),
            ("request.userInfo.groups", Some("list(string)")),
            ("namespaceObject.metadata.labels", Some("map(string, string)")),
            ("size(object.x)", Some("int")),
            ("object.spec.replicas > 1 ? 'a' : 'b'", Some("string")),
            ("[object.x]", None),
            ("f(1)", None),
        ];
        for (source, expected) in cases {
            let value = variable(source, &[]);
            assert_eq!(value.as_ref().and_then(DeclType::cel_name).as_deref(), expected, "{source}");
        }
        let earlier = [
            Variable { name: "s", value: variable("'a'", &[]) },
            Variable { name: "o", value: variable("request.userInfo", &[]) },
            Variable::untyped("u"),
        ];
        assert_eq!(output_with("variables.s", &earlier).as_deref(), Some("string"));
        assert_eq!(output_with("variables.s + variables.o.x", &earlier).as_deref(), Some("string"));
        assert_eq!(output_with("variables.o.x", &earlier).as_deref(), Some("dyn"));
        assert_eq!(output_with("variables.u", &earlier), None);
        assert_eq!(variable("variables.s + 'b'", &earlier).and_then(|t| t.cel_name()).as_deref(), Some("string"));
    }
}
