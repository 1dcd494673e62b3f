//! The type of what an expression evaluates to, where cel-go's checker
//! is certain of it in Kubernetes' admission environment, and the calls
//! whose arguments no overload takes ([`crate::overloads`]): the API
//! server refuses a policy whose validation or match condition is not a
//! `bool`, whose message expression is not a `string`, or whose audit
//! annotation value is neither a `string` nor `null` (`must evaluate to
//! bool but got dyn`), and one that calls an operator or function on
//! arguments none of its overloads takes (`'a' + 1`). `object`,
//! `oldObject` and `params` are `dyn` there, so reading a field of them is
//! `dyn` too, and so is a `has()` or a comparison `bool`.
//!
//! Only what is certain is said: a literal, a list literal of one type
//! (or of several, as cel-go's checker joins them), a
//! map literal with string keys, a read from a `dyn` variable, the
//! operators, conversions, indexes and functions of the overload tables
//! (cel-go's and Kubernetes' libraries', [`crate::libraries`]), the macros
//! that give a `bool`, the fields `request` and `namespaceObject` type
//! (scalars, lists and maps of them), optionals (`a.?b`, `m[?k]`,
//! `optional.of(x)`) and a policy variable whose value is one of these.
//! Anything else (another macro's result) is `None`, and never refused
//! here. cel-go's type variables (an empty literal's items,
//! `optional.none()`'s value) are followed as `dyn`, and nothing that
//! depends on them is said ([`Output::type_variables`]).

use std::borrow::Cow;
use std::collections::HashMap;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue};

use crate::overloads::{Resolved, leaves_variable, resolve, whatever};
use crate::typecheck::Variable;
use crate::types::{DeclType, NAMESPACE, REQUEST};

/// What one walk of an expression finds.
#[derive(Debug)]
pub(crate) struct Analysis {
    /// The type name it evaluates to, as the API server names it
    /// ([`result_name`]: `bool`, `int`, `dyn`, `null_type`,
    /// `list(string)`, `google.protobuf.Duration`), when it is certain.
    pub(crate) output: Option<String>,
    /// The calls whose arguments no overload takes: each node's id and
    /// cel-go's words, in the order of the tree.
    pub(crate) overload_errors: Vec<(u64, String)>,
    /// The items of list and map literals whose type is not the first
    /// item's (`[1, 'a']`), which cel-go's homogeneous aggregate literal
    /// validator refuses (Kubernetes turns it on) after a clean check:
    /// each item's node id and cel-go's words.
    pub(crate) mixed_literals: Vec<(u64, String)>,
    /// The first optional item of a list or map literal whose type is
    /// `dyn` (`[?object.x]`), outside `format` calls, by node id: that
    /// validator fails on them (cel-go v0.26 indexes the optional type's
    /// missing parameter), and kube-apiserver 1.36 answers the policy's
    /// creation with an internal error.
    pub(crate) dyn_optional_item: Option<u64>,
    /// What cel-go's string format validator refuses ([`crate::format`]):
    /// the node of each error and its words.
    pub(crate) format_errors: Vec<(u64, String)>,
}

/// `expr`'s [`Analysis`], seeing the policy's `variables`.
pub(crate) fn analyse(expr: &IdedExpr, variables: &[Variable<'_>]) -> Analysis {
    let mut walk = Output::new(variables);
    let output = walk.certain(expr).and_then(|t| result_name(&t));
    // A call none takes gives cel-go's error type, not a result to
    // judge: its own error is what is said.
    let output = output.filter(|_| walk.errors.is_empty());
    Analysis {
        output,
        overload_errors: walk.errors,
        mixed_literals: walk.mixed,
        dyn_optional_item: walk.dyn_optional_item,
        format_errors: walk.format_errors,
    }
}

/// A result's type as the API server names it where a field does not
/// take it: cel-go's name, but a duration or a timestamp by its protobuf
/// message (`must evaluate to bool but got google.protobuf.Duration`).
fn result_name(t: &DeclType) -> Option<String> {
    match t {
        DeclType::Scalar("duration") => Some("google.protobuf.Duration".to_owned()),
        DeclType::Scalar("timestamp") => Some("google.protobuf.Timestamp".to_owned()),
        DeclType::List(items) => Some(format!("list({})", result_name(items)?)),
        DeclType::Map(keys, values) => Some(format!("map({}, {})", result_name(keys)?, result_name(values)?)),
        other => other.cel_name(),
    }
}

/// The type name `expr` evaluates to, when it is certain
/// ([`Analysis::output`]).
pub(crate) fn output_type(expr: &IdedExpr, variables: &[Variable<'_>]) -> Option<String> {
    analyse(expr, variables).output
}

/// The type the API server gives a variable whose expression is `expr`,
/// where it is certain: the expression's, as its declarations convert
/// it (`convertCelTypeToDeclType`): a plain scalar, or a list or map of
/// them, keeps its type; anything else (an object, `request.userInfo`; a
/// library's value, a quantity; a list of them) is `dyn`, and so is such
/// an item of a list or map.
pub(crate) fn variable_type(expr: &IdedExpr, variables: &[Variable<'_>]) -> Option<DeclType> {
    Output::new(variables).certain(expr).map(|typed| declared(&typed))
}

/// `t` as a declaration keeps it (the API server's
/// `convertCelTypeToDeclType`, at a policy's creation and in its status
/// type check alike): see [`variable_type`].
pub(crate) fn declared(t: &DeclType) -> DeclType {
    const PLAIN: [&str; 9] = ["bool", "bytes", "double", "duration", "int", "null_type", "string", "timestamp", "uint"];
    match t {
        DeclType::Scalar(name) if PLAIN.contains(name) => t.clone(),
        DeclType::List(items) => DeclType::List(Box::new(declared(items))),
        DeclType::Map(keys, values) => DeclType::Map(Box::new(declared(keys)), Box::new(declared(values))),
        _ => DeclType::Dyn,
    }
}

/// A type, when it is certain.
type Known<'t> = Option<Cow<'t, DeclType>>;

/// The type of `expr` when it is an empty list or map literal, as cel-go
/// names it where nothing binds its type variables: `list(dyn)`,
/// `map(dyn, dyn)`.
fn empty_literal(expr: &IdedExpr) -> Option<DeclType> {
    match &expr.expr {
        Expr::List(list) if list.elements.is_empty() => Some(DeclType::List(Box::new(DeclType::Dyn))),
        Expr::Map(map) if map.entries.is_empty() => {
            Some(DeclType::Map(Box::new(DeclType::Dyn), Box::new(DeclType::Dyn)))
        }
        _ => None,
    }
}

/// What a map's field, or a list's or map's item, is: its values' type;
/// of a `dyn`, `dyn`; of a scalar nothing certain.
fn items(collection: Cow<'_, DeclType>) -> Known<'_> {
    match collection {
        Cow::Borrowed(DeclType::Map(_, values) | DeclType::List(values)) => Some(Cow::Borrowed(values)),
        Cow::Owned(DeclType::Map(_, values) | DeclType::List(values)) => Some(Cow::Owned(*values)),
        Cow::Borrowed(DeclType::Dyn | DeclType::Error) | Cow::Owned(DeclType::Dyn | DeclType::Error) => dynamic(),
        _ => None,
    }
}

/// Field `name` of `operand` (a `.?` selection when `optional`): an
/// object's field, a map's value, anything of a `dyn`; of an optional
/// (one level, as cel-go unwraps it), or by `.?`, an optional of it. A
/// list or a scalar has no fields (cel-go says so: [`crate::typecheck`]).
fn field<'t>(operand: Cow<'t, DeclType>, name: &str, optional: bool) -> Known<'t> {
    let (target, optional) = match operand {
        Cow::Borrowed(DeclType::Optional(inner)) => (Cow::Borrowed(&**inner), true),
        Cow::Owned(DeclType::Optional(inner)) => (Cow::Owned(*inner), true),
        operand => (operand, optional),
    };
    let found = match target {
        Cow::Borrowed(DeclType::Object { fields, .. }) => DeclType::field(fields, name).map(Cow::Borrowed),
        Cow::Owned(DeclType::Object { fields, .. }) => DeclType::field(&fields, name).cloned().map(Cow::Owned),
        target if matches!(*target, DeclType::Map(..) | DeclType::Dyn | DeclType::Error) => items(target),
        _ => None,
    }?;
    if optional { Some(Cow::Owned(DeclType::Optional(Box::new(found.into_owned())))) } else { Some(found) }
}

/// An optional's value.
fn value(optional: Cow<'_, DeclType>) -> Known<'_> {
    match optional {
        Cow::Borrowed(DeclType::Optional(value)) => Some(Cow::Borrowed(value)),
        Cow::Owned(DeclType::Optional(value)) => Some(Cow::Owned(*value)),
        _ => None,
    }
}

fn scalar(name: &'static str) -> Known<'static> {
    Some(Cow::Owned(DeclType::Scalar(name)))
}

fn dynamic() -> Known<'static> {
    Some(Cow::Owned(DeclType::Dyn))
}

struct Output<'e, 't> {
    /// The loops' variables: each name, its type, and whether that holds
    /// a type variable ([`Output::type_variables`]), met again where the
    /// variable is read.
    scope: Vec<(&'e str, Known<'t>, bool)>,
    variables: &'t [Variable<'t>],
    errors: Vec<(u64, String)>,
    /// See [`Analysis::mixed_literals`].
    mixed: Vec<(u64, String)>,
    /// See [`Analysis::dyn_optional_item`].
    dyn_optional_item: Option<u64>,
    /// The certain types of the nodes inside `format` calls, by node id,
    /// for the format validator.
    format_types: HashMap<u64, DeclType>,
    /// See [`Analysis::format_errors`].
    format_errors: Vec<(u64, String)>,
    /// How many `format` calls the walk is in: cel-go's validator exempts
    /// the literals anywhere in their arguments.
    formatting: usize,
    /// How many type variables nothing bound the walk has met: empty list
    /// and map literals, whose items' type is one in cel-go, and calls
    /// whose result holds one ([`crate::overloads::leaves_variable`]:
    /// `optional.none()`). cel-go binds them to what they meet (`[[],
    /// [1]]` is a `list(list(int))`); here they are `dyn`, so a type that
    /// holds one is not compared, and a `dyn` in a result is not certain.
    type_variables: usize,
}

impl<'e, 't> Output<'e, 't> {
    fn new(variables: &'t [Variable<'t>]) -> Self {
        Self {
            scope: Vec::new(),
            variables,
            errors: Vec::new(),
            mixed: Vec::new(),
            dyn_optional_item: None,
            format_types: HashMap::new(),
            format_errors: Vec::new(),
            formatting: 0,
            type_variables: 0,
        }
    }

    /// `expr`'s type, and the same again where it is exactly cel-go's, as
    /// the homogeneous literal validator compares it: named (not an
    /// object), not optional, and holding no empty literal.
    ///
    /// An optional item (`[?x]`, `{?k: x}`) must be an optional value, or
    /// `dyn`: cel-go's checker refuses one of a certain other type.
    fn item(&mut self, expr: &'e IdedExpr, optional: bool) -> (Known<'t>, Known<'t>) {
        let type_variables = self.type_variables;
        let known = self.of(expr);
        let named = known.clone().filter(|t| self.type_variables == type_variables && t.cel_name().is_some());
        let exact = named.clone().filter(|_| self.formatting == 0);
        if !optional {
            return (known, exact);
        }
        // The item is the optional's value, and so is what the validator
        // compares.
        if let Some(DeclType::Optional(_)) = known.as_deref() {
            return (known.and_then(value), exact.and_then(value));
        }
        match named.as_deref() {
            Some(DeclType::Dyn) if self.formatting == 0 => {
                self.dyn_optional_item.get_or_insert(expr.id);
            }
            Some(DeclType::Dyn) | None => {}
            Some(t) => {
                let found = crate::overloads::name(t);
                self.errors.push((expr.id, format!("expected type 'optional_type({found})' but found '{found}'")));
            }
        }
        (known, exact)
    }

    /// Says where an item's exact type is not the first's, as cel-go's
    /// homogeneous literal validator does; whether it said so.
    fn mixed(&mut self, first: &Known<'_>, item: &IdedExpr, found: &Known<'_>) -> bool {
        let (Some(expected), Some(found)) = (first, found) else { return false };
        if expected == found {
            return false;
        }
        let (expected, found) = (crate::overloads::name(expected), crate::overloads::name(found));
        self.mixed.push((item.id, format!("expected type '{expected}' but found '{found}'")));
        true
    }

    /// `expr`'s type where it is cel-go's: a `dyn` in it may be a type
    /// variable cel-go bound ([`Output::type_variables`]).
    fn certain(&mut self, expr: &'e IdedExpr) -> Known<'t> {
        self.of(expr).filter(|t| self.type_variables == 0 || !t.holds_dyn())
    }

    /// A call's argument's type, and in `unsure` whether it is not
    /// certain, is an object whose name Portcullis does not give, or is a
    /// `dyn` that stands for a type variable ([`Output::type_variables`]):
    /// a type in which a parameter nested in it (`optional_type(A)`)
    /// finds nothing to bind, where the real type would bind it.
    fn argument(&mut self, expr: &'e IdedExpr, unsure: &mut Vec<bool>) -> Known<'t> {
        let type_variables = self.type_variables;
        let known = self.of(expr);
        let unbinding = match known.as_deref() {
            None => true,
            Some(DeclType::Dyn | DeclType::Error) => self.type_variables != type_variables,
            Some(t) => t.cel_name().is_none(),
        };
        unsure.push(unbinding);
        known
    }

    /// `expr`'s type, kept where a format call's validator may ask for it.
    fn of(&mut self, expr: &'e IdedExpr) -> Known<'t> {
        let known = self.typed(expr);
        if let (true, Some(t)) = (self.formatting > 0, &known) {
            self.format_types.insert(expr.id, t.clone().into_owned());
        }
        known
    }

    fn typed(&mut self, expr: &'e IdedExpr) -> Known<'t> {
        match &expr.expr {
            Expr::Literal(literal) => scalar(match literal {
                LiteralValue::Boolean(_) => "bool",
                LiteralValue::Bytes(_) => "bytes",
                LiteralValue::Double(_) => "double",
                LiteralValue::Int(_) => "int",
                LiteralValue::Null => "null_type",
                LiteralValue::String(_) => "string",
                LiteralValue::UInt(_) => "uint",
            }),
            Expr::Ident(name) => {
                if let Some((_, known, variable)) = self.scope.iter().rev().find(|(n, ..)| n == name) {
                    self.type_variables += usize::from(*variable);
                    return known.clone();
                }
                match name.as_str() {
                    "object" | "oldObject" | "params" => dynamic(),
                    "request" => Some(Cow::Borrowed(&*REQUEST)),
                    "namespaceObject" => Some(Cow::Borrowed(&*NAMESPACE)),
                    _ => None,
                }
            }
            Expr::Select(select) if select.test => {
                self.of(&select.operand);
                scalar("bool")
            }
            // The policy's variables, unless a loop's variable is named so.
            Expr::Select(select)
                if matches!(&select.operand.expr, Expr::Ident(v) if v == "variables")
                    && !self.scope.iter().any(|(n, ..)| *n == "variables") =>
            {
                let variable = self.variables.iter().find(|v| v.name == select.field)?;
                variable.value.as_ref().map(Cow::Borrowed)
            }
            Expr::Select(select) => field(self.of(&select.operand)?, &select.field, false),
            Expr::Call(call) => self.call(expr, call),
            Expr::Comprehension(c) => {
                let type_variables = self.type_variables;
                let range = self.of(&c.iter_range);
                let range_variable = self.type_variables != type_variables;
                if let Some(t) = range.as_deref().filter(|_| !range_variable)
                    && !matches!(t, DeclType::List(_) | DeclType::Map(..) | DeclType::Dyn | DeclType::Error)
                    && t.cel_name().is_some()
                {
                    let found = crate::overloads::name(t);
                    let why = "cannot be range of a comprehension (must be list, map, or dynamic)";
                    self.errors.push((c.iter_range.id, format!("expression of type '{found}' {why}")));
                }
                // The accumulator has its first value's type (a macro's
                // list or map is an empty literal, whose items' type is a
                // type variable: see `type_variables`).
                let type_variables = self.type_variables;
                let accumulator = self.of(&c.accu_init);
                let accumulator_variable = self.type_variables != type_variables;
                // As cel-go binds them: a list's items (its indexes first,
                // with two variables), a map's keys (and then its values),
                // anything of a `dyn`.
                let is_map = matches!(range.as_deref(), Some(DeclType::Map(..)));
                let key = match range.as_deref() {
                    Some(DeclType::Map(keys, _)) => Some(Cow::Owned((**keys).clone())),
                    Some(DeclType::List(_)) => scalar("int"),
                    Some(DeclType::Dyn | DeclType::Error) => dynamic(),
                    _ => None,
                };
                // An index is certain; a key or an item of a range that
                // holds a type variable holds it too.
                let key = (key, is_map && range_variable);
                let (first, second) = match &c.iter_var2 {
                    None if is_map => (key, None),
                    None => ((range.and_then(items), range_variable), None),
                    Some(second) => (key, Some((second.as_str(), range.and_then(items), range_variable))),
                };
                let outer = self.scope.len();
                self.scope.push((c.iter_var.as_str(), first.0, first.1));
                self.scope.extend(second);
                self.scope.push((c.accu_var.as_str(), accumulator, accumulator_variable));
                self.of(&c.loop_cond);
                self.of(&c.loop_step);
                let result = self.of(&c.result);
                self.scope.truncate(outer);
                result
            }
            // An empty list holds anything.
            Expr::List(list) if list.elements.is_empty() => {
                self.type_variables += 1;
                Some(Cow::Owned(DeclType::List(Box::new(DeclType::Dyn))))
            }
            Expr::List(list) => {
                let mut items = Vec::with_capacity(list.elements.len());
                let mut exact = Vec::with_capacity(list.elements.len());
                for (i, element) in list.elements.iter().enumerate() {
                    let (known, certain) = self.item(element, list.optional_indices.contains(&i));
                    items.push(known);
                    exact.push(certain);
                }
                // The first item whose type is not the first's is said
                // (cel-go says only the first in a list). An empty literal
                // beside an item of another kind is said too: its items'
                // type variable binds to nothing there, and cel-go names it
                // `dyn`.
                let mut first_exact = exact[0].clone();
                if first_exact.is_none() && !list.optional_indices.contains(&0) {
                    first_exact =
                        empty_literal(&list.elements[0]).filter(|_| list.elements.len() > 1).and_then(|empty| {
                            exact[1]
                                .as_deref()
                                .filter(|t| !crate::overloads::unify(&empty, t))
                                .map(|_| Cow::Owned(empty))
                        });
                }
                for (i, (element, found)) in list.elements.iter().zip(&exact).enumerate().skip(1) {
                    let found = match (found, &exact[0]) {
                        (None, Some(first)) if !list.optional_indices.contains(&i) => empty_literal(element)
                            .filter(|empty| !crate::overloads::unify(first, empty))
                            .map(Cow::Owned),
                        _ => found.clone(),
                    };
                    if self.mixed(&first_exact, element, &found) {
                        break;
                    }
                }
                // Items of one certain type: a list of it. Of items of
                // different types, whose type is exactly cel-go's: a list
                // of what its checker joins them to.
                let first = items.first().cloned().flatten()?;
                if items.iter().all(|t| t.as_deref() == Some(&*first)) {
                    return Some(Cow::Owned(DeclType::List(Box::new(first.into_owned()))));
                }
                // An empty literal that is of no other item's kind joins
                // as what cel-go names it: its type variable never binds.
                let lone_empty = |i: usize| {
                    let empty = empty_literal(&list.elements[i]).filter(|_| !list.optional_indices.contains(&i))?;
                    let others = exact.iter().enumerate().filter(|(j, _)| *j != i);
                    let apart = others.clone().all(|(j, other)| match other {
                        Some(other) => !crate::overloads::unify(other, &empty),
                        None => empty_literal(&list.elements[j]).is_some_and(|o| !crate::overloads::unify(&o, &empty)),
                    });
                    apart.then_some(Cow::Owned(empty))
                };
                let exact: Option<Vec<Cow<'t, DeclType>>> =
                    exact.iter().enumerate().map(|(i, t)| t.clone().or_else(|| lone_empty(i))).collect();
                let joined = exact?.iter().try_fold(None, |joined: Option<DeclType>, item| match joined {
                    None => Some(Some(item.clone().into_owned())),
                    Some(joined) => crate::types::join(&joined, item).map(Some),
                });
                joined.flatten().map(|t| Cow::Owned(DeclType::List(Box::new(t))))
            }
            Expr::Map(map) => {
                // Keys of one scalar type and values of one certain type
                // (not `dyn`): a map of them; values of several types
                // whose types are exactly cel-go's: a map of what its
                // checker joins them to, as a list's items. An empty
                // map's keys and values are type variables.
                if map.entries.is_empty() {
                    self.type_variables += 1;
                    return Some(Cow::Owned(DeclType::Map(Box::new(DeclType::Dyn), Box::new(DeclType::Dyn))));
                }
                let mut keys = Vec::new();
                let mut values = Vec::new();
                let mut exact_values = Vec::new();
                let mut first: Option<(Known<'t>, Known<'t>)> = None;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else { return None };
                    let (key, exact_key) = self.item(&entry.key, false);
                    let (value, exact_value) = self.item(&entry.value, entry.optional);
                    // Every key and value whose type is not the first's
                    // is said.
                    exact_values.push(exact_value.clone());
                    if let Some((first_key, first_value)) = &first {
                        self.mixed(first_key, &entry.key, &exact_key);
                        let exact_value = match (exact_value, first_value) {
                            (None, Some(first)) if !entry.optional => empty_literal(&entry.value)
                                .filter(|empty| !crate::overloads::unify(first, empty))
                                .map(Cow::Owned),
                            (exact_value, _) => exact_value,
                        };
                        self.mixed(first_value, &entry.value, &exact_value);
                    } else {
                        first = Some((exact_key, exact_value));
                    }
                    keys.push(key.filter(|k| matches!(**k, DeclType::Scalar(_))));
                    values.push(value);
                }
                let one = |types: Vec<Known<'t>>| {
                    let types: Vec<Cow<'t, DeclType>> = types.into_iter().collect::<Option<_>>()?;
                    let first = types.first()?;
                    let one = types.iter().all(|t| !matches!(**t, DeclType::Dyn | DeclType::Error) && t == first);
                    one.then(|| Box::new(first.clone().into_owned()))
                };
                let keys = one(keys)?;
                let values = one(values).or_else(|| {
                    let exact: Vec<Cow<'t, DeclType>> = exact_values.into_iter().collect::<Option<_>>()?;
                    let (first, rest) = exact.split_first()?;
                    let joined = rest
                        .iter()
                        .try_fold(first.clone().into_owned(), |joined, value| crate::types::join(&joined, value))?;
                    Some(Box::new(joined))
                })?;
                Some(Cow::Owned(DeclType::Map(keys, values)))
            }
            Expr::Struct(structure) => {
                self.entries(&structure.entries);
                None
            }
            Expr::Unspecified => None,
        }
    }

    fn entries(&mut self, entries: &'e [IdedEntryExpr]) {
        for entry in entries {
            match &entry.expr {
                EntryExpr::StructField(field) => {
                    self.of(&field.value);
                }
                EntryExpr::MapEntry(entry) => {
                    self.of(&entry.key);
                    self.of(&entry.value);
                }
            }
        }
    }

    fn call(&mut self, expr: &IdedExpr, call: &'e CallExpr) -> Known<'t> {
        let formatting = call.func_name == "format";
        self.formatting += usize::from(formatting);
        let result = self.resolved(expr, call);
        self.formatting -= usize::from(formatting);
        if formatting {
            let checked = crate::format::check(call, expr.id, |id| self.format_types.get(&id));
            self.format_errors.extend(checked);
            if self.formatting == 0 {
                self.format_types.clear();
            }
        }
        result
    }

    /// What `call` gives, by the overload tables.
    fn resolved(&mut self, expr: &IdedExpr, call: &'e CallExpr) -> Known<'t> {
        // A function in a namespace (`sets.contains(a, b)`) is a global
        // named so, even where a loop's variable has the namespace's name.
        let qualified = crate::declared::qualified(call);
        // Which arguments (the receiver first) are not certain, or hold a
        // type variable: see `binds_through` below.
        let mut unsure = Vec::with_capacity(call.args.len() + 1);
        let target = match (&qualified, call.target.as_deref()) {
            (None, Some(target)) => Some(self.argument(target, &mut unsure)),
            _ => None,
        };
        let function = qualified.as_deref().unwrap_or(&call.func_name);
        if let ("_&&_" | "_||_", None) = (function, &target) {
            // Each side must be a bool: cel-go says so where it is not,
            // and the call is then of its error type.
            let mut mismatched = false;
            for operand in &call.args {
                // An object's name cel-go gives and Portcullis does not:
                // nothing is said of it.
                let found = self.of(operand).filter(|t| t.cel_name().is_some());
                if let Some(t) =
                    found.filter(|t| !matches!(**t, DeclType::Dyn | DeclType::Error | DeclType::Scalar("bool")))
                {
                    let found = crate::overloads::name(&t);
                    self.errors.push((operand.id, format!("expected type 'bool' but found '{found}'")));
                    mismatched = true;
                }
            }
            return if mismatched { Some(Cow::Owned(DeclType::Error)) } else { scalar("bool") };
        }
        if let ("_?._", None, [operand, IdedExpr { expr: Expr::Literal(LiteralValue::String(name)), .. }]) =
            (function, &target, call.args.as_slice())
        {
            return field(self.of(operand)?, name, true);
        }
        let known: Vec<Known<'t>> = call.args.iter().map(|a| self.argument(a, &mut unsure)).collect();
        if function == "@not_strictly_false" {
            return scalar("bool");
        }
        // The overload table, where every argument's type is certain.
        let args: Vec<Option<&DeclType>> = known.iter().map(|a| a.as_deref()).collect();
        let target = target.as_ref().map(|t| t.as_deref());
        let certain: Option<Vec<&DeclType>> = args.iter().copied().collect();
        let call_types = match (certain, target) {
            (Some(args), None) => Some((None, args)),
            (Some(args), Some(Some(target))) => Some((Some(target), args)),
            _ => None,
        };
        let resolved = call_types.and_then(|(target, args)| {
            let resolved = resolve(function, target, &args)?;
            if matches!(resolved, Resolved::Gives(Some(_))) && leaves_variable(function, target, &args) {
                self.type_variables += 1;
            }
            Some(resolved)
        });
        // A result bound through an argument that is not certain (whose
        // real type, `optional_type(dyn)` say, would have bound the type
        // parameter where a `dyn` leaves it to the next argument: `x.orValue('a')`
        // is a `string` of a `dyn` `x`, a `dyn` of an optional one) is
        // not certain either.
        let bound_through = crate::libraries::binds_through(function, target.is_some(), &unsure);
        match resolved {
            Some(Resolved::Gives(t)) => t.filter(|_| !bound_through).map(Cow::Owned),
            // cel-go's error type, which any parameter takes.
            Some(Resolved::NoOverload(message)) => {
                self.errors.push((expr.id, message));
                Some(Cow::Owned(DeclType::Error))
            }
            None if bound_through => None,
            // An index of an object's list or map (whose type cel-go
            // names and Portcullis does not) or of one not certain.
            None if function == "_[_]" => match known.as_slice() {
                [operand, _] => items(operand.clone()?),
                _ => None,
            },
            // An argument not certain: what every overload gives alike.
            None => whatever(function, target, &args).map(Cow::Owned),
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

    fn compiled(source: &str) -> Program {
        Program::compile_with(Parser::new().enable_optional_syntax(true), source).expect("CEL")
    }

    fn output_with(source: &str, variables: &[Variable<'_>]) -> Option<String> {
        output_type(compiled(source).expression(), variables)
    }

    fn variable(source: &str, variables: &[Variable<'_>]) -> Option<DeclType> {
        variable_type(compiled(source).expression(), variables)
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
            ("request.userInfo", Some("kubernetes.UserInfo")),
            ("namespaceObject.status.conditions", Some("list(kubernetes.NamespaceCondition)")),
        ];
        for (source, expected) in cases {
            assert_eq!(output(source).as_deref(), expected, "{source}");
        }
    }

    #[test]
    fn what_is_not_certain_is_not_said() {
        for source in ["variables.s", "[1].map(x, x)", "variables.a + object.b", "f(1)", "x"] {
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
            ("[object.x]", Some("list(dyn)")),
            ("object.?spec", Some("dyn")),
            ("optional.of(1)", Some("dyn")),
            ("[optional.of(1)]", Some("list(dyn)")),
            ("optional.of(1).value()", Some("int")),
            ("{1: 'a'}", Some("map(int, string)")),
            ("{'a': [1]}", Some("map(string, list(int))")),
            // Its keys and values are type variables, which cel-go binds
            // where they meet a type: not followed.
            ("{}", None),
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
