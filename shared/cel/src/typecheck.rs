//! The fields an expression selects that the type of what it selects them
//! from does not have, found as cel-go's type checker finds them
//! (`undefined field 'replicsa'`, `type 'bool' does not support field
//! selection`), on the types of [`crate::types`].
//!
//! The API server checks so at two times. When a policy is created, its
//! environment types `request`, `namespaceObject` and `variables` (the
//! policy's own variables as fields) and refuses an undefined field of
//! them. Afterwards, its status controller checks each validation and
//! message expression again with `object`, `oldObject` and `params` typed
//! by the schemas of the kinds the policy matches, and reports what it
//! finds as warnings (`status.typeChecking`): the policy still runs.
//!
//! Only fields are checked (undefined, or selected from a scalar), not
//! overloads (`'a' > 1`): a type the walk does not follow (a function's
//! result, a literal) is never checked, so where in doubt nothing is said.
//! A variable's value has the type its expression has where that is
//! certain ([`crate::refusal::compiled_variable`]), as the API server types
//! it: `variables.name.x` of `name: "'a'"` selects from a `string`; in
//! the status also where the kind's schema types it (`value_type`:
//! `object.spec.replicas` an `int`, an object `dyn`).

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::types::{DeclType, INDEX, NAMESPACE, REQUEST};

/// What an expression's variables are known to be.
#[derive(Debug, Clone, Copy, Default)]
pub struct Typed<'t> {
    /// `object`, `oldObject` and `params`.
    pub objects: Objects<'t>,
    /// The variables `variables` has (`None`: it is not checked).
    pub variables: Option<&'t [Variable<'t>]>,
}

/// How `object`, `oldObject` and `params` are typed: `dyn` when a policy
/// is created, by schemas when the status controller checks it.
#[derive(Debug, Clone, Copy, Default)]
pub enum Objects<'t> {
    /// As when a policy is created: all three `dyn`.
    #[default]
    Dyn,
    /// As the status controller checks a policy (`status.typeChecking`):
    /// `object` and `oldObject` of one kind the policy matches, `params`
    /// of its `paramKind` (`None`: `dyn`).
    Schemas {
        /// The kind's type.
        object: &'t DeclType,
        /// The `paramKind`'s type.
        params: Option<&'t DeclType>,
    },
}

impl<'t> Objects<'t> {
    fn object(self) -> Option<&'t DeclType> {
        match self {
            Self::Dyn => None,
            Self::Schemas { object, .. } => Some(object),
        }
    }

    fn params(self) -> Option<&'t DeclType> {
        match self {
            Self::Dyn => None,
            Self::Schemas { params, .. } => params,
        }
    }
}

/// One of a policy's variables, as an expression that reads it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable<'a> {
    /// Its name: `variables.<name>`.
    pub name: &'a str,
    /// The type of its value, where it is certain (`None`: `dyn`, nothing
    /// read from it is checked).
    pub value: Option<DeclType>,
}

impl<'a> Variable<'a> {
    /// A variable whose value's type is not known.
    pub fn untyped(name: &'a str) -> Self {
        Self { name, value: None }
    }
}

/// Every field `expr` selects that its operand's type lacks (or selects
/// from a scalar), with `typed`: the id of the selecting node and cel-go's
/// message (`undefined field 'x'`, `type 'bool' does not support field
/// selection`), in the order of the tree.
pub(crate) fn field_errors(expr: &IdedExpr, typed: Typed<'_>) -> Vec<(u64, String)> {
    let mut walk = Walk { typed, scope: Vec::new(), appended: Vec::new(), found: Vec::new() };
    walk.expr(expr);
    walk.found
}

/// The type the status controller gives a policy variable whose
/// expression is `expr`, with `typed`: what the schemas type it, as the
/// API server declares it ([`crate::output::declared`]: a scalar, or a
/// list or map of them, keeps its type, `object.spec.replicas` an `int`;
/// an object is `dyn`, a list of them `list(dyn)`); `None` where the walk
/// does not follow it.
pub(crate) fn value_type(expr: &IdedExpr, typed: Typed<'_>) -> Option<DeclType> {
    let mut walk = Walk { typed, scope: Vec::new(), appended: Vec::new(), found: Vec::new() };
    match walk.expr(expr) {
        Ty::Of(t) => Some(crate::output::declared(t)),
        _ => None,
    }
}

/// A type as far as the walk follows it.
#[derive(Debug, Clone)]
enum Ty<'t> {
    /// Not followed: nothing selected from it is checked.
    Dyn,
    /// One of the schemas' or the environment's types.
    Of(&'t DeclType),
    /// A list the expression built (`map`, `filter`) of these items.
    ListOf(Box<Ty<'t>>),
    /// `optional_type(...)`: what `a.?b` gives.
    Optional(Box<Ty<'t>>),
    /// `variables`, whose fields are the policy's variables.
    Variables,
}

impl<'t> Ty<'t> {
    /// Whether `key` (typed `key_type` by the walk) indexes this for
    /// certain: a list by an int, a map by a string, or a key whose type
    /// the walk does not know (`dyn` is taken).
    fn takes_key(&self, key: &IdedExpr, key_type: &Ty<'_>) -> bool {
        let wanted = match self {
            Self::Of(DeclType::List(_)) | Self::ListOf(_) => "int",
            Self::Of(DeclType::Map(keys, _)) => match &**keys {
                DeclType::Scalar(name) => *name,
                _ => return true,
            },
            _ => return true,
        };
        match (&key.expr, key_type) {
            (Expr::Literal(LiteralValue::Int(_)), _) => wanted == "int",
            (Expr::Literal(LiteralValue::UInt(_)), _) => wanted == "uint",
            (Expr::Literal(LiteralValue::Boolean(_)), _) => wanted == "bool",
            (Expr::Literal(LiteralValue::Double(_)), _) => wanted == "double",
            (Expr::Literal(LiteralValue::String(_)), _) => wanted == "string",
            (Expr::Literal(_), _) => false,
            (_, Ty::Of(DeclType::Scalar(name))) => *name == wanted,
            (_, Ty::Dyn) => true,
            _ => false,
        }
    }

    /// Whether `value` (typed `value_type`) is certainly of this type: the
    /// same schema type, an empty list or map literal for a list or a map,
    /// `null` for an object.
    fn holds(&self, value: &IdedExpr, value_type: &Ty<'_>) -> bool {
        match (self, &value.expr, value_type) {
            (Self::Of(DeclType::List(_)), Expr::List(list), _) => list.elements.is_empty(),
            (Self::Of(DeclType::Map(..)), Expr::Map(map), _) => map.entries.is_empty(),
            (Self::Of(DeclType::Object { .. }), Expr::Literal(LiteralValue::Null), _) => true,
            (Self::Of(mine), _, Ty::Of(theirs)) => std::ptr::eq(*mine, *theirs),
            _ => false,
        }
    }

    /// The type of a list's items, or of a map's values when `values`.
    fn items(&self, values: bool) -> Ty<'t> {
        match self {
            Self::Of(DeclType::List(items)) => Ty::Of(items),
            Self::Of(DeclType::Map(_, v)) if values => Ty::Of(v),
            Self::ListOf(items) => (**items).clone(),
            _ => Ty::Dyn,
        }
    }
}

/// A walk of the tree with the comprehensions' variables in scope.
struct Walk<'t, 'e> {
    typed: Typed<'t>,
    scope: Vec<(&'e str, Ty<'t>)>,
    /// Per comprehension being walked: its accumulator and the type of
    /// the items its step appends (`@result + [x]`), once seen.
    appended: Vec<(&'e str, Option<Ty<'t>>)>,
    found: Vec<(u64, String)>,
}

impl<'t, 'e> Walk<'t, 'e> {
    fn expr(&mut self, expr: &'e IdedExpr) -> Ty<'t> {
        match &expr.expr {
            Expr::Ident(name) => self.ident(name),
            // The status controller's checker does not resolve the
            // authorizer's `requestResource` and says so at each use (the
            // policy runs); when the policy is created, it does.
            Expr::Select(select)
                if matches!(self.typed.objects, Objects::Schemas { .. })
                    && select.field == "requestResource"
                    && matches!(&select.operand.expr, Expr::Ident(n) if n == "authorizer")
                    && !self.scope.iter().any(|(n, _)| *n == "authorizer") =>
            {
                let message = "unexpected failed resolution of 'kubernetes.authorization.Authorizer'";
                self.found.push((expr.id, message.to_owned()));
                Ty::Dyn
            }
            Expr::Select(select) => {
                let operand = self.expr(&select.operand);
                let field = self.field(expr.id, operand, &select.field, false);
                if select.test { Ty::Dyn } else { field }
            }
            Expr::Call(call) => self.call(expr, call),
            Expr::List(list) => {
                for element in &list.elements {
                    self.expr(element);
                }
                Ty::Dyn
            }
            Expr::Map(map) => {
                map.entries.iter().for_each(|e| self.entry(&e.expr));
                Ty::Dyn
            }
            Expr::Struct(structure) => {
                structure.entries.iter().for_each(|e| self.entry(&e.expr));
                Ty::Dyn
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Literal(_) | Expr::Unspecified => Ty::Dyn,
        }
    }

    fn entry(&mut self, entry: &'e EntryExpr) {
        match entry {
            EntryExpr::StructField(field) => {
                self.expr(&field.value);
            }
            EntryExpr::MapEntry(entry) => {
                self.expr(&entry.key);
                self.expr(&entry.value);
            }
        }
    }

    fn ident(&self, name: &str) -> Ty<'t> {
        if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| *n == name) {
            return t.clone();
        }
        let known = |t: Option<&'t DeclType>| t.map_or(Ty::Dyn, Ty::Of);
        match name {
            "object" | "oldObject" => known(self.typed.objects.object()),
            "params" => known(self.typed.objects.params()),
            "request" => Ty::Of(&REQUEST),
            "namespaceObject" => Ty::Of(&NAMESPACE),
            "variables" if self.typed.variables.is_some() => Ty::Variables,
            _ => Ty::Dyn,
        }
    }

    /// cel-go's `checkSelectField`: a field of an object, a map's value;
    /// through an optional, an optional; `optional` for `a.?b`.
    fn field(&mut self, id: u64, operand: Ty<'t>, field: &str, optional: bool) -> Ty<'t> {
        let (target, wrapped) = match operand {
            Ty::Optional(inner) => (*inner, true),
            other => (other, false),
        };
        let found = match target {
            Ty::Of(DeclType::Object { fields, .. }) => {
                DeclType::field(fields, field).map(Ty::Of).ok_or_else(|| format!("undefined field '{field}'"))
            }
            Ty::Of(DeclType::Map(_, values)) => Ok(Ty::Of(values)),
            Ty::Of(scalar @ DeclType::Scalar(_)) => {
                let name = crate::overloads::name(scalar);
                Err(format!("type '{name}' does not support field selection"))
            }
            // A list has no fields; one of objects cel-go names by a type
            // name Portcullis does not give: nothing is said of it.
            Ty::Of(list @ DeclType::List(_)) => match list.cel_name() {
                Some(name) => Err(format!("type '{name}' does not support field selection")),
                None => Ok(Ty::Dyn),
            },
            Ty::Variables => match self.typed.variables.unwrap_or_default().iter().find(|v| v.name == field) {
                None => Err(format!("undefined field '{field}'")),
                Some(Variable { value: Some(value), .. }) => Ok(Ty::Of(value)),
                Some(_) => Ok(Ty::Dyn),
            },
            _ => Ok(Ty::Dyn),
        };
        match found {
            Err(message) => {
                self.found.push((id, message));
                Ty::Dyn
            }
            Ok(t) if wrapped || optional => Ty::Optional(Box::new(t)),
            Ok(t) => t,
        }
    }

    fn call(&mut self, expr: &'e IdedExpr, call: &'e CallExpr) -> Ty<'t> {
        let target = call.target.as_deref().map(|t| self.expr(t));
        match (call.func_name.as_str(), target, call.args.as_slice()) {
            ("_?._", None, [operand, IdedExpr { expr: Expr::Literal(field), .. }]) => {
                let operand = self.expr(operand);
                match field {
                    LiteralValue::String(field) => self.field(expr.id, operand, field, true),
                    _ => Ty::Dyn,
                }
            }
            ("_[_]" | "_[?_]", None, [operand, index]) => {
                let operand = self.expr(operand);
                let key = self.expr(index);
                let optional = call.func_name == "_[?_]";
                let (target, wrapped) = match operand {
                    Ty::Optional(inner) => (*inner, true),
                    other => (other, optional),
                };
                // A key of the wrong kind picks no overload: cel-go says
                // so, and nothing after it.
                if !target.takes_key(index, &key) {
                    return Ty::Dyn;
                }
                let items = target.items(true);
                if wrapped { Ty::Optional(Box::new(items)) } else { items }
            }
            ("value", Some(Ty::Optional(inner)), []) => *inner,
            // `orValue(x)` is the optional's type where `x` is of it for
            // certain (the same type, or an empty literal of its kind);
            // another `x` makes it `dyn`, or picks no overload.
            ("orValue", Some(Ty::Optional(inner)), [fallback]) => {
                let other = self.expr(fallback);
                if inner.holds(fallback, &other) { *inner } else { Ty::Dyn }
            }
            ("_+_", None, [accumulator @ IdedExpr { expr: Expr::Ident(name), .. }, appended]) => {
                self.expr(accumulator);
                let item = match &appended.expr {
                    Expr::List(list) if list.elements.len() == 1 => Some(self.expr(&list.elements[0])),
                    _ => None,
                };
                if item.is_none() {
                    self.expr(appended);
                }
                if let (Some(item), Some((accumulator, seen))) = (item, self.appended.last_mut())
                    && *accumulator == name
                    && seen.is_none()
                {
                    *seen = Some(item);
                }
                Ty::Dyn
            }
            (_, _, args) => {
                for arg in args {
                    self.expr(arg);
                }
                Ty::Dyn
            }
        }
    }

    /// The loop variables typed by the range (a list's item, or its index
    /// and item; a map's key, or its key and value), the accumulator by what the step appends to
    /// an empty list (`map` and `filter` build lists of it), the result
    /// by the result expression.
    fn comprehension(&mut self, c: &'e ComprehensionExpr) -> Ty<'t> {
        let range = self.expr(&c.iter_range);
        self.expr(&c.accu_init);
        let is_map = matches!(range, Ty::Of(DeclType::Map(..)));
        let key = match range {
            Ty::Of(DeclType::Map(keys, _)) => Ty::Of(keys),
            Ty::Of(DeclType::List(_)) | Ty::ListOf(_) => Ty::Of(&INDEX),
            _ => Ty::Dyn,
        };
        let (first, second) = match &c.iter_var2 {
            None if is_map => (key, None),
            None => (range.items(false), None),
            Some(second) => (key, Some((second.as_str(), range.items(true)))),
        };
        let outer = self.scope.len();
        self.scope.push((c.iter_var.as_str(), first));
        self.scope.extend(second);
        self.scope.push((c.accu_var.as_str(), Ty::Dyn));
        self.appended.push((c.accu_var.as_str(), None));
        self.expr(&c.loop_cond);
        self.expr(&c.loop_step);
        let appended = self.appended.pop().and_then(|(_, seen)| seen);
        let empty_list = matches!(&c.accu_init.expr, Expr::List(list) if list.elements.is_empty());
        if let (true, Some(item)) = (empty_list, appended) {
            self.scope.push((c.accu_var.as_str(), Ty::ListOf(Box::new(item))));
        }
        let result = self.expr(&c.result);
        self.scope.truncate(outer);
        result
    }
}

#[cfg(test)]
mod tests {
    use cel::Program;
    use cel::parser::Parser;

    use super::*;
    use crate::schemas::BUILTIN;

    fn undefined(source: &str, typed: Typed<'_>) -> Vec<String> {
        let program = Program::compile_with(Parser::new().enable_optional_syntax(true), source).expect("CEL");
        let found = field_errors(program.expression(), typed).into_iter().map(|(_, message)| message);
        found.map(|m| m.trim_start_matches("undefined field '").trim_end_matches('\'').to_owned()).collect()
    }

    #[test]
    fn fields_a_deployment_lacks_are_found_through_loops_and_optionals() {
        let deployment = BUILTIN.kind("apps", "v1", "Deployment").expect("built in");
        let typed = Typed { objects: Objects::Schemas { object: &deployment, params: None }, ..Typed::default() };
        let cases: [(&str, &[&str]); 9] = [
            ("object.spec.replicsa > 1", &["replicsa"]),
            ("has(object.spec.foo) || object.metadata.namespace == ''", &["foo"]),
            ("object.?spec.?bar.orValue(1) == 1 && object.?spec.replicas.orValue(1) == 1", &["bar"]),
            ("object.spec.template.spec.containers.all(c, c.imagee != '')", &["imagee"]),
            ("object.spec.template.spec.containers.map(c, c).all(x, x.nam != '')", &["nam"]),
            ("object.spec.template.spec.containers.filter(c, c.name != '').exists(x, x.foo)", &["foo"]),
            ("object.spec.template.metadata.labels.all(k, k != '') && object.metadata.labels.a == 'b'", &[]),
            ("object.spec.template.spec.containers[0].ports.exists(p, p.targetPort == 1)", &["targetPort"]),
            (
                "object.spec.selector.matchLabels.all(k, v, v.x == '') && request.usrInfo == ''",
                &["type 'string' does not support field selection", "usrInfo"],
            ),
        ];
        for (source, fields) in cases {
            assert_eq!(undefined(source, typed), fields.to_vec(), "{source}");
        }
    }

    #[test]
    fn a_variable_of_an_object_type_is_dyn() {
        let typed = Typed::default();
        let value = |source: &str| value_type(Program::compile(source).expect("it parses").expression(), typed);
        let name = |source: &str| value(source).and_then(|t| t.cel_name());
        assert_eq!(name("request.userInfo").as_deref(), Some("dyn"));
        assert_eq!(name("namespaceObject.status.conditions").as_deref(), Some("list(dyn)"));
        assert_eq!(value("request.userInfo.groups").and_then(|t| t.cel_name()).as_deref(), Some("list(string)"));
    }

    #[test]
    fn what_is_not_typed_is_not_checked() {
        let typed = Typed::default();
        assert!(undefined("object.spec.anything.at.all && params.x && variables.y", typed).is_empty());
        assert!(undefined("[object.spec].all(s, s.foo) && request.options.x == 1", typed).is_empty());
        assert_eq!(undefined("namespaceObject.metadata.lables.a == 'b'", typed), ["lables"]);
        let declared = [Variable::untyped("a")];
        let typed = Typed { variables: Some(&declared), ..Typed::default() };
        assert_eq!(undefined("variables.a.x == variables.nope", typed), ["nope"]);
        let keys = "request.userInfo.extra.all(k, k.x) && request.userInfo.groups.all(i, g, i.y && g.z)";
        let scalar = |t: &str| format!("type '{t}' does not support field selection");
        assert_eq!(undefined(keys, typed), [scalar("string"), scalar("int"), scalar("string")]);
        // Found by a second read against kube-apiserver 1.36: where cel-go
        // picks no overload (or the result is `dyn`), nothing is said of
        // what follows.
        for source in [
            "request.?userInfo.orValue(object).usrname == ''",
            "request.userInfo.groups['a'].x == ''",
            "request.userInfo.extra[0].x == ''",
            "request.?userInfo.?groups.orValue(object.g).all(s, s.z)",
        ] {
            assert!(undefined(source, typed).is_empty(), "{source}");
        }
        let taken = "request.?userInfo.orValue(null).usrname == '' && request.userInfo.groups[0].x == ''";
        assert_eq!(undefined(taken, typed), ["usrname", scalar("string").as_str()]);
        assert_eq!(
            undefined("request.dryRun.x || namespaceObject.metadata.creationTimestamp.y", typed),
            ["type 'bool' does not support field selection", "type 'timestamp' does not support field selection"]
        );
    }

    /// kube-apiserver 1.36's words (v0.36.3's compiler): a map is indexed
    /// by its key type, so of `variables.m` holding `{1: 'a'}` an `int`
    /// gives a string, whose fields are said, and a string no overload
    /// takes, after which nothing is; `null` is named `null`.
    #[test]
    fn a_maps_key_type_decides_what_its_index_gives() {
        use crate::types::{INT, STRING};
        let declared = [
            Variable { name: "m", value: Some(DeclType::Map(Box::new(INT), Box::new(STRING))) },
            Variable { name: "n", value: Some(DeclType::Scalar("null_type")) },
        ];
        let typed = Typed { variables: Some(&declared), ..Typed::default() };
        let scalar = |t: &str| format!("type '{t}' does not support field selection");
        assert_eq!(undefined("variables.m[1].y == 'a'", typed), [scalar("string")]);
        assert!(undefined("variables.m['x'].y == 'a'", typed).is_empty());
        assert!(undefined("variables.m[1u].y == 'a'", typed).is_empty());
        assert_eq!(undefined("variables.n.y == 1", typed), [scalar("null")]);
    }
}
