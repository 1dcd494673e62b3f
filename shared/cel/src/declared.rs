//! The names an expression may use where Kubernetes' admission CEL declares
//! them: the API server's type checker refuses any other name when the
//! policy is created (`undeclared reference to 'foo' (in container '')`),
//! so an expression that uses one is refused at load here too, rather than
//! failing where evaluation reaches it, or passing offline when it never
//! does (`... || foo`).
//!
//! Only names are checked, not types or a function's overloads: a
//! variable (`objet` for `object`), a namespace of functions Kubernetes'
//! environment lacks though the interpreter has them (`math.greatest`,
//! `base64.encode`, `cel.bind`), a function no library declares
//! (`l.foo(1)`), or a macro's name called with the wrong count of
//! arguments (`l.all(x)`, `l.existsOne(x, p)`). Where in doubt a name is
//! taken: types usable as values, and every namespace Kubernetes declares
//! functions in. The functions are the ones kube-apiserver 1.36
//! declares, not the ones the interpreter has.

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr};

use crate::compile::Environment;

/// The variables of Kubernetes' admission CEL, validating and mutating
/// (`params` is declared only with a `paramKind`; it is taken here
/// whatever the policy says, and `authorizer` is refused earlier, as
/// Portcullis does not bind it).
const VARIABLES: [&str; 7] = ["object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer"];

/// Names of types, which an expression may use as values
/// (`type(x) == string`), and the roots of qualified type names
/// (`google.protobuf.Timestamp`, `net.IP`, `kubernetes.UserInfo`);
/// `Object` and `JSONPatch` are a mutation's, taken in validations too.
/// Where in doubt, a name is here: one taken wrongly only fails where
/// evaluation reaches it, as before.
const TYPES: [&str; 19] = [
    "JSONPatch",
    "Object",
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "google",
    "int",
    "kubernetes",
    "list",
    "map",
    "net",
    "null_type",
    "optional_type",
    "string",
    "timestamp",
    "type",
    "uint",
];

/// The functions Kubernetes' CEL declares in namespaces (1.36: every
/// function name with a `.` its environment declares, and a mutation's
/// `jsonpatch.escapeKey`, taken in validations too).
const QUALIFIED: [&str; 25] = [
    "format.byte",
    "format.date",
    "format.datetime",
    "format.dns1035Label",
    "format.dns1035LabelPrefix",
    "format.dns1123Label",
    "format.dns1123LabelPrefix",
    "format.dns1123Subdomain",
    "format.dns1123SubdomainPrefix",
    "format.labelValue",
    "format.named",
    "format.qualifiedName",
    "format.uri",
    "format.uuid",
    "ip.isCanonical",
    "jsonpatch.escapeKey",
    "lists.range",
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.unwrap",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "strings.quote",
];

/// The qualified name of a call `ns.f(...)` of a function Kubernetes
/// declares in a namespace: cel-go resolves it so before anything else,
/// even where a loop's variable is named `ns`.
pub(crate) fn qualified(call: &CallExpr) -> Option<String> {
    let Some(IdedExpr { expr: Expr::Ident(ns), .. }) = call.target.as_deref() else { return None };
    let name = format!("{ns}.{}", call.func_name);
    QUALIFIED.contains(&name.as_str()).then_some(name)
}

/// The functions kube-apiserver 1.36's admission CEL declares, by name,
/// outside a namespace: cel-go's standard library and the extensions
/// Kubernetes enables (strings, lists, sets, optionals, two-variable
/// comprehensions), and Kubernetes' own libraries (quantities, semantic
/// versions, URLs, IPs and CIDRs, regular expressions, lists, formats,
/// the authorizer's), as the 1.36 environment lists its declarations
/// (`k8s.io/apiserver` v0.36.3). A name the interpreter has and Kubernetes
/// lacks is undeclared there, and here.
const FUNCTIONS: [&str; 107] = [
    "add",
    "allowed",
    "asApproximateFloat",
    "asInteger",
    "bool",
    "bytes",
    "charAt",
    "check",
    "cidr",
    "compareTo",
    "contains",
    "containsCIDR",
    "containsIP",
    "distinct",
    "double",
    "duration",
    "dyn",
    "endsWith",
    "error",
    "errored",
    "family",
    "fieldSelector",
    "find",
    "findAll",
    "first",
    "flatten",
    "format",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getEscapedPath",
    "getFullYear",
    "getHost",
    "getHostname",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getPort",
    "getQuery",
    "getScheme",
    "getSeconds",
    "group",
    "hasValue",
    "indexOf",
    "int",
    "ip",
    "isCIDR",
    "isGlobalUnicast",
    "isGreaterThan",
    "isIP",
    "isInteger",
    "isLessThan",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isLoopback",
    "isQuantity",
    "isSemver",
    "isSorted",
    "isURL",
    "isUnspecified",
    "join",
    "labelSelector",
    "last",
    "lastIndexOf",
    "lowerAscii",
    "major",
    "masked",
    "matches",
    "max",
    "min",
    "minor",
    "name",
    "namespace",
    "or",
    "orValue",
    "patch",
    "path",
    "prefixLength",
    "quantity",
    "reason",
    "replace",
    "resource",
    "reverse",
    "semver",
    "serviceAccount",
    "sign",
    "size",
    "slice",
    "sort",
    "split",
    "startsWith",
    "string",
    "sub",
    "subresource",
    "substring",
    "sum",
    "timestamp",
    "trim",
    "type",
    "uint",
    "unwrapOpt",
    "upperAscii",
    "url",
    "validate",
    "value",
];

/// The macros of Kubernetes' CEL: a call by one of these names is left
/// only where its arguments are not the macro's (`l.all(x)`), and cel-go
/// then finds no function of that name, even where the interpreter has
/// one. `existsOne` is a macro with two variables only.
const MACROS: [&str; 13] = [
    "all",
    "exists",
    "existsOne",
    "exists_one",
    "filter",
    "has",
    "map",
    "optFlatMap",
    "optMap",
    "sortBy",
    "transformList",
    "transformMap",
    "transformMapEntry",
];

/// Whether a call of `name` (not in a namespace) finds no function in
/// Kubernetes' CEL. Operators and the functions only macros' expansions
/// call (`_+_`, `@in`, `cel.@mapInsert`) are always found.
fn undeclared_function(name: &str) -> bool {
    let internal = name.starts_with(['_', '@', '!', '-']) || name.contains('@');
    !internal && (MACROS.contains(&name) || !FUNCTIONS.contains(&name))
}

/// What [`find`] and [`find_all`] find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undeclared {
    /// A name: a variable, a loop variable out of its loop, a namespace of
    /// functions.
    Name(String),
    /// A message type the environment does not construct (`Object{...}`
    /// in a validation).
    Type(String),
}

impl Undeclared {
    /// The name the API server's checker says is undeclared.
    pub(crate) fn name(&self) -> &str {
        match self {
            Self::Name(name) | Self::Type(name) => name,
        }
    }
}

/// The first name or message type `expr` uses that Kubernetes' admission
/// CEL does not declare in `environment`, in the order of the source's
/// syntax tree. The variables of the macros (`all(c, ...)`,
/// `all(i, c, ...)`, `sortBy(x, ...)`, `optMap(x, ...)`) are the loop
/// variables of the comprehensions they expand to, in scope in their
/// bodies only.
pub(crate) fn find(expr: &IdedExpr, environment: Environment) -> Option<Undeclared> {
    find_all(expr, environment, &[]).into_iter().next().map(|(_, found)| found)
}

/// Every use [`find`] would refuse, each with the id of its node, in the
/// order of the syntax tree; the variables in `hidden` (`params` without
/// a `paramKind`, `authorizer` in a message expression) are undeclared
/// too.
pub(crate) fn find_all(expr: &IdedExpr, environment: Environment, hidden: &[&str]) -> Vec<(u64, Undeclared)> {
    let mut walk = Walk { scope: Vec::new(), environment, hidden, found: Vec::new() };
    walk.expr(expr);
    walk.found
}

/// A walk of the tree with the comprehension variables in scope.
struct Walk<'a, 'h> {
    scope: Vec<&'a str>,
    environment: Environment,
    hidden: &'h [&'h str],
    found: Vec<(u64, Undeclared)>,
}

impl<'a> Walk<'a, '_> {
    fn declared(&self, name: &str) -> bool {
        self.scope.contains(&name)
            || (VARIABLES.contains(&name) && !self.hidden.contains(&name))
            || TYPES.contains(&name)
    }

    fn expr(&mut self, expr: &'a IdedExpr) {
        match &expr.expr {
            Expr::Ident(name) if !self.declared(name) => self.found.push((expr.id, Undeclared::Name(name.clone()))),
            Expr::Call(call) => {
                match call.target.as_deref() {
                    // A function Kubernetes declares in a namespace.
                    Some(_) if qualified(call).is_some() => {}
                    // A function in a namespace: `ns.f(...)`. Of one
                    // Kubernetes lacks (`strings.size()`, `math.abs(1)`),
                    // cel-go names the namespace, and the function too
                    // (at the call's parenthesis) when there is no
                    // function `f` at all.
                    Some(target @ IdedExpr { expr: Expr::Ident(ns), .. }) if !self.declared(ns) => {
                        self.found.push((target.id, Undeclared::Name(ns.clone())));
                        if !FUNCTIONS.contains(&call.func_name.as_str()) {
                            self.found.push((expr.id, Undeclared::Name(call.func_name.clone())));
                        }
                    }
                    // A function no library declares, or a macro's name
                    // with other arguments: at the call's parenthesis,
                    // before its arguments.
                    target => {
                        if let Some(target) = target {
                            self.expr(target);
                        }
                        if undeclared_function(&call.func_name) {
                            self.found.push((expr.id, Undeclared::Name(call.func_name.clone())));
                        }
                    }
                }
                call.args.iter().for_each(|arg| self.expr(arg));
            }
            Expr::Select(select) => self.expr(&select.operand),
            Expr::List(list) => list.elements.iter().for_each(|e| self.expr(e)),
            Expr::Map(map) => map.entries.iter().for_each(|e| self.entry(&e.expr)),
            Expr::Struct(structure) => {
                if !self.environment.declares_type(&structure.type_name) {
                    self.found.push((expr.id, Undeclared::Type(structure.type_name.clone())));
                }
                structure.entries.iter().for_each(|e| self.entry(&e.expr));
            }
            Expr::Comprehension(c) => {
                // The range and the accumulator's start are outside the loop.
                self.expr(&c.iter_range);
                self.expr(&c.accu_init);
                let outer = self.scope.len();
                self.scope.extend([c.iter_var.as_str(), c.accu_var.as_str()]);
                self.scope.extend(c.iter_var2.as_deref());
                [&c.loop_cond, &c.loop_step, &c.result].into_iter().for_each(|e| self.expr(e));
                self.scope.truncate(outer);
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entry(&mut self, entry: &'a EntryExpr) {
        match entry {
            EntryExpr::StructField(field) => self.expr(&field.value),
            EntryExpr::MapEntry(entry) => {
                self.expr(&entry.key);
                self.expr(&entry.value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use cel::Program;
    use cel::parser::Parser;
    use rstest::rstest;

    use super::Undeclared;
    use crate::compile::Environment;

    /// The undeclared name in a validation.
    fn find(source: &str) -> Option<String> {
        let program = Program::compile_with(Parser::new().enable_optional_syntax(true), source).expect("CEL");
        match super::find(program.expression(), Environment::Validation) {
            Some(Undeclared::Name(name)) => Some(name),
            Some(Undeclared::Type(name)) => panic!("{source}: a type, {name}"),
            None => None,
        }
    }

    #[rstest]
    #[case::a_misspelt_variable("objet.spec.replicas <= 5", "objet")]
    #[case::in_a_branch_never_taken("object.spec.replicas <= 4 || foo", "foo")]
    #[case::math("math.greatest(1, 2) == 2", "math")]
    #[case::base64("base64.encode(b'a') == 'YQ=='", "base64")]
    #[case::bind("cel.bind(r, object.spec.replicas, r <= 5)", "cel")]
    #[case::a_loop_variable_out_of_its_loop("object.spec.containers.all(c, c.name != '') && c.image != ''", "c")]
    #[case::in_a_map_literal("{'a': x}.size() == 1", "x")]
    #[case::in_a_loop_range("foo.all(c, c != '')", "foo")]
    #[case::a_function("[1].foo(1) == 1", "foo")]
    #[case::a_global_function("bar(1) == 1", "bar")]
    #[case::a_macro_with_other_arguments("[1].all(true)", "all")]
    #[case::exists_one_with_one_variable("[1, 2].existsOne(x, x == 1)", "existsOne")]
    fn names_kubernetes_does_not_declare_are_found(#[case] source: &str, #[case] name: &str) {
        assert_eq!(find(source), Some(name.to_owned()), "{source}");
    }

    #[rstest]
    #[case::variables("object.a == oldObject.a && request.uid != '' && params.x == variables.y")]
    #[case::namespace_object("namespaceObject.metadata.name != ''")]
    #[case::loops("object.spec.containers.all(c, c.ports.exists(p, p.containerPort > 0 && c.name != ''))")]
    #[case::map_and_filter("object.items.map(i, i.name).filter(n, n != '').size() > 0")]
    #[case::exists_one("[1, 2].exists_one(x, x == 1)")]
    #[case::has("has(object.spec) && !has(object.status)")]
    #[case::types("type(object.spec.replicas) == int || type(object.x) == string || type(1u) == uint")]
    #[case::namespaces("optional.none().orValue(1) == lists.range(3).size() && sets.contains([1], [1])")]
    #[case::strings_and_formats("strings.quote('a') != '' && format.dns1123Label().validate('a').hasValue() == false")]
    #[case::optional_syntax("object.?metadata.?name.orValue('') != '' && [?optional.none()].size() == 0")]
    #[case::ip_is_canonical("ip.isCanonical('1.2.3.4')")]
    #[case::qualified_types("type(ip('1.2.3.4')) == net.IP && type(request.userInfo) == kubernetes.UserInfo")]
    #[case::library(
        "quantity('1Gi').isGreaterThan(quantity('1Mi')) && isSemver('1.0.0') && ip('1.2.3.4').family() == 4"
    )]
    fn names_kubernetes_declares_are_taken(#[case] source: &str) {
        assert_eq!(find(source), None, "{source}");
    }

    #[rstest]
    #[case::all("object.spec.containers.all(i, c, c.name != '' && i >= 0)")]
    #[case::exists("object.data.exists(k, v, v == 'x' && k != '')")]
    #[case::exists_one("object.data.existsOne(k, v, v == 'x') || [1].exists_one(i, v, i == v)")]
    #[case::transform_list("[1].transformList(i, v, v + i) == [1] && [1].transformList(i, v, v > 0, v) == [1]")]
    #[case::transform_map("{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}")]
    #[case::transform_map_entry("{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}")]
    #[case::sort_by("[3, 1].sortBy(x, x) == [1, 3]")]
    #[case::opt_map("object.?spec.?replicas.optMap(r, r <= 5).orValue(true)")]
    #[case::opt_flat_map("params.?x.optFlatMap(v, v.?y).hasValue()")]
    fn the_variables_of_macros_are_declared_in_their_bodies(#[case] source: &str) {
        assert_eq!(find(source), None, "{source}");
    }

    #[rstest]
    #[case::two_variables("object.data.all(k, v, v != '') && k != ''", "k")]
    #[case::sort_by("[3, 1].sortBy(x, x) == [1, 3] && x > 0", "x")]
    #[case::opt_map("object.?spec.?replicas.optMap(r, r <= 5).orValue(r)", "r")]
    fn the_variables_of_macros_are_out_of_scope_after_them(#[case] source: &str, #[case] name: &str) {
        assert_eq!(find(source), Some(name.to_owned()), "{source}");
    }
}
