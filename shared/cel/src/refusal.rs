//! The API server's words for an expression its CEL compiler refuses when
//! a policy is created: `compilation failed: ERROR: <input>:1:25:
//! undeclared reference to 'foo' (in container '')`, followed by the line
//! and a caret under the column, each error so, in the order of their
//! positions, as cel-go prints its issues. Syntax errors come from the
//! parser (the same ANTLR grammar as cel-go's, with its messages);
//! undeclared names from the walk that [`crate::compile`] refuses them
//! with; undefined fields of `request`, `namespaceObject` and `variables`,
//! which the API server's environment types, from [`crate::typecheck`];
//! calls no overload of the standard operators and functions takes
//! (`'a' > 1`), from [`crate::overloads`]; and, when none of those, what
//! cel-go's validators refuse: unreadable literals ([`crate::literals`]),
//! list and map literals of mixed items ([`crate::output`]) and format
//! strings that do not fit their arguments ([`crate::format`]).
//!
//! Two inputs make the API server's compiler itself fail, and it answers
//! their policy with an internal error and no words: an optional item of
//! type `dyn` (`[?object.x]`, cel-go's literal validator panics) and a
//! map literal of constants with a `bytes` key (its planner panics,
//! [`crate::planner`]). Those are refused in Portcullis' own words.
//!
//! [`type_checked`] is what the
//! API server's status controller says afterwards, with `object` and
//! `params` typed by their schemas.

use cel::Program;
use cel::common::ast::SourceInfo;
use cel::parser::Parser;

use crate::compile::Environment;
use crate::declared::find_all;
use crate::typecheck::{Typed, Variable, field_errors};
use crate::types::DeclType;

/// Which of Kubernetes' admission variables an expression's field
/// declares besides `object`, `oldObject`, `request`, `namespaceObject`
/// and `variables`, as the API server declares them for that field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declarations<'a> {
    /// `params`: the policy has a `paramKind`.
    pub params: bool,
    /// `authorizer`: every field but a message expression.
    pub authorizer: bool,
    /// The policy's variables the field sees, each with its value's type
    /// where it is certain ([`compiled_variable`]): every one, but for a
    /// variable those before it; `None`: `variables` is not declared (a
    /// match condition).
    pub variables: Option<&'a [Variable<'a>]>,
    /// What the field must evaluate to.
    pub returns: Returns,
}

/// What a field's expression must evaluate to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// A validation, a match condition: `bool`.
    Bool,
    /// A message expression: `string`.
    String,
    /// An audit annotation's value: `string` or `null`.
    StringOrNull,
    /// A variable: anything.
    Any,
}

impl Returns {
    /// The API server's words when `got` (a type, as cel-go names it) is
    /// not what the field takes: `must evaluate to bool but got dyn`.
    pub fn refuses(self, got: &str) -> Option<String> {
        let (taken, wanted): (&[&str], &str) = match self {
            Self::Bool => (&["bool"], "bool"),
            Self::String => (&["string"], "string"),
            Self::StringOrNull => (&["string", "null_type"], "one of [string null_type]"),
            Self::Any => return None,
        };
        (!taken.contains(&got)).then(|| format!("must evaluate to {wanted} but got {got}"))
    }
}

/// What the API server says of `source` in a validating policy's field
/// that declares `declarations`, when its compiler refuses it:
/// `compilation failed: ...`, or `must evaluate to bool but got dyn`;
/// `None` when it takes it (as far as syntax, names, fields and the
/// certain result types go).
pub fn compilation_failed(source: &str, declarations: Declarations<'_>) -> Option<String> {
    compiled(source, declarations).err()
}

/// What the API server says of `source`, a policy variable's expression,
/// seeing `declarations` (the variables before it): the type it gives the
/// variable's value where it is certain (the expression's type,
/// `string`, `list(string)`; `dyn` for an object, `request.userInfo`), or
/// its refusal, as [`compilation_failed`] words it. Compiled once.
pub fn compiled_variable(source: &str, declarations: Declarations<'_>) -> Result<Option<DeclType>, String> {
    let program = compiled(source, Declarations { returns: Returns::Any, ..declarations })?;
    Ok(crate::output::variable_type(program.expression(), declarations.variables.unwrap_or_default()))
}

/// `source` compiled, or the API server's refusal of it in a field that
/// declares `declarations`.
fn compiled(source: &str, declarations: Declarations<'_>) -> Result<Program, String> {
    let hidden: Vec<&str> = [
        (!declarations.params).then_some("params"),
        (!declarations.authorizer).then_some("authorizer"),
        declarations.variables.is_none().then_some("variables"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let parser = Parser::new().enable_optional_syntax(true);
    let (program, info) = match Program::compile_with_info(parser, source) {
        Ok(compiled) => compiled,
        Err(errors) => {
            let issues = errors.errors.into_iter().map(|e| (e.pos.0, e.pos.1, e.msg)).collect();
            let printed = printed(source, issues).unwrap_or_default();
            return Err(format!("compilation failed: {printed}"));
        }
    };
    let at = |(id, message)| issue_at(source, &info, id, message);
    let undeclared = find_all(program.expression(), Environment::Validation, &hidden)
        .into_iter()
        .map(|(id, name)| (id, format!("undeclared reference to '{}' (in container '')", name.name())));
    let typed = Typed { variables: declarations.variables, ..Typed::default() };
    let fields = field_errors(program.expression(), typed);
    let analysis = crate::output::analyse(program.expression(), declarations.variables.unwrap_or_default());
    let checked = undeclared.chain(fields).chain(analysis.overload_errors);
    let mut issues: Vec<Issue> = checked.map(at).collect();
    // cel-go's validators run on what its checker took.
    if issues.is_empty() {
        issues = match analysis.dyn_optional_item {
            Some(item) => vec![at((item, DYN_OPTIONAL_ITEM.to_owned()))],
            None => {
                let literals = crate::literals::refused(program.expression());
                literals.into_iter().chain(analysis.mixed_literals).chain(analysis.format_errors).map(at).collect()
            }
        };
    }
    // cel-go plans the program only once it is checked and validated.
    if issues.is_empty()
        && let Some(map) = crate::planner::bytes_keyed_map(program.expression())
    {
        issues = vec![at((map, BYTES_KEYED_MAP.to_owned()))];
    }
    if let Some(issues) = printed(source, issues) {
        return Err(format!("compilation failed: {issues}"));
    }
    // Compiled: what it evaluates to, where that is certain.
    match analysis.output.and_then(|got| declarations.returns.refuses(&got)) {
        Some(refused) => Err(refused),
        None => Ok(program),
    }
}

/// The type the API server's type checking (`status.typeChecking`) gives
/// a policy's variable whose expression is `source`, with `typed` the
/// types of one kind the policy matches and the variables before it:
/// what the schemas type it, as the API server declares it
/// (`object.spec.replicas` an `int`, an object `dyn`, a list of them
/// `list(dyn)`); `None` where the type is not followed.
pub fn checked_variable_type(source: &str, typed: Typed<'_>) -> Option<DeclType> {
    let program = Program::compile_with(Parser::new().enable_optional_syntax(true), source).ok()?;
    crate::typecheck::value_type(program.expression(), typed)
}

/// What `check` says of an optional item of type `dyn` in a list or map
/// literal (`[?object.x]`), on which kube-apiserver 1.36's compiler fails
/// where its validators run, and answers with an internal error: Portcullis'
/// words, as the API server has none.
const DYN_OPTIONAL_ITEM: &str = "an optional item of type 'dyn' fails kube-apiserver's compiler (cel-go's homogeneous \
                                 literal validator panics, and the API server answers with an internal error); \
                                 select it with '.?' or wrap it in optional.of()";

/// What `check` says of a map literal of constants with a `bytes` key
/// (`{b'k': 1}`), on which kube-apiserver 1.36's compiler fails when it
/// plans the program, and answers with an internal error: Portcullis'
/// words, as the API server has none.
const BYTES_KEYED_MAP: &str = "a map literal with a bytes key fails kube-apiserver's compiler (cel-go panics hashing the \
                               key when it plans the program, and the API server answers with an internal error); \
                               CEL's map keys are int, uint, bool or string";

/// An issue as cel-go prints it: its line, its column, and what it says.
type Issue = (isize, isize, String);

/// `message`, said of node `id` of `source`, at the node's position.
fn issue_at(source: &str, info: &SourceInfo, id: u64, message: String) -> Issue {
    let (line, column) = position(source, info, id);
    (line, column, message)
}

/// Where node `id` of `source` is, as cel-go counts: its line, and its
/// column in characters from 1 (the parser's node positions count bytes;
/// its syntax errors count characters already).
fn position(source: &str, info: &SourceInfo, id: u64) -> (isize, isize) {
    let (line, column) = info.pos_for(id).unwrap_or((1, 1));
    let text = usize::try_from(line - 1).ok().and_then(|l| source.split('\n').nth(l)).unwrap_or_default();
    let bytes = usize::try_from(column - 1).unwrap_or_default();
    let characters = text.get(..bytes).and_then(|before| isize::try_from(before.chars().count()).ok());
    (line, characters.unwrap_or(column - 1) + 1)
}

/// What the API server's type checking (`status.typeChecking` of a
/// ValidatingAdmissionPolicy) says of `source`, a validation's expression
/// or message expression, with `typed` the types of one kind the policy
/// matches: its undefined fields as cel-go prints them, `None` when it
/// finds none (or `source` does not parse, which the API server refuses
/// first).
pub fn type_checked(source: &str, typed: Typed<'_>) -> Option<String> {
    let parser = Parser::new().enable_optional_syntax(true);
    let (program, info) = Program::compile_with_info(parser, source).ok()?;
    let fields = field_errors(program.expression(), typed).into_iter();
    printed(source, fields.map(|(id, message)| issue_at(source, &info, id, message)).collect())
}

/// Issues in the order of their positions, as cel-go prints them; `None`
/// for none.
fn printed(source: &str, mut issues: Vec<Issue>) -> Option<String> {
    if issues.is_empty() {
        return None;
    }
    issues.sort_by_key(|&(line, column, _)| (line, column));
    let printed: Vec<String> =
        issues.iter().map(|(line, column, message)| issue(source, *line, *column, message)).collect();
    Some(printed.join("\n"))
}

/// One issue as cel-go prints it: where, what, and the line with a caret.
fn issue(source: &str, line: isize, column: isize, message: &str) -> String {
    let mut printed = format!("ERROR: <input>:{line}:{column}: {message}");
    let snippet = usize::try_from(line - 1).ok().and_then(|l| source.split('\n').nth(l));
    if let Some(snippet) = snippet {
        // As cel-go prints it: tabs as spaces, each character beyond
        // ASCII under a wide dot, and a wide caret under one.
        let snippet = snippet.replace('\t', " ");
        let before = usize::try_from(column - 1).unwrap_or_default();
        let dots: String = snippet.chars().take(before).map(|c| if c.is_ascii() { '.' } else { '．' }).collect();
        let caret = if snippet.chars().nth(before).is_some_and(|c| !c.is_ascii()) { '＾' } else { '^' };
        printed.push_str(&format!("\n | {snippet}\n | {dots}{caret}"));
    }
    printed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typecheck::Objects;

    const ALL: Declarations<'static> =
        Declarations { params: true, authorizer: true, variables: Some(&[]), returns: Returns::Any };

    #[test]
    fn undeclared_names_are_each_said_where_they_are() {
        assert_eq!(
            compilation_failed("foo || baz || foo", ALL).as_deref(),
            Some(
                "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo || \
                 baz || foo\n | ^\nERROR: <input>:1:8: undeclared reference to 'baz' (in container '')\n | foo || baz \
                 || foo\n | .......^\nERROR: <input>:1:15: undeclared reference to 'foo' (in container '')\n | foo \
                 || baz || foo\n | ..............^"
            )
        );
    }

    #[test]
    fn columns_count_characters_and_mark_those_beyond_ascii_wide() {
        // kube-apiserver 1.36's words, dry run.
        let cases = [
            (
                "'é' == foo",
                "ERROR: <input>:1:8: undeclared reference to 'foo' (in container '')\n | 'é' == foo\n | .．.....^",
            ),
            (
                "'a😀b' == foo",
                "ERROR: <input>:1:10: undeclared reference to 'foo' (in container '')\n | 'a😀b' == foo\n | ..．......^",
            ),
            (
                "'é日' == (1",
                "ERROR: <input>:1:11: Syntax error: missing ')' at '<EOF>'\n | 'é日' == (1\n | .．．.......^",
            ),
            (
                "'é' == request.usr",
                "ERROR: <input>:1:15: undefined field 'usr'\n | 'é' == request.usr\n | .．............^",
            ),
            (
                "'é' ==\n  '日' == foo",
                "ERROR: <input>:2:10: undeclared reference to 'foo' (in container '')\n |   '日' == foo\n | ...．.....^",
            ),
        ];
        for (source, expected) in cases {
            assert_eq!(compilation_failed(source, ALL), Some(format!("compilation failed: {expected}")), "{source}");
        }
        // A wide caret under a character beyond ASCII, tabs as spaces.
        let wide = compilation_failed("1 + é", ALL).unwrap_or_default();
        assert!(wide.contains("\n | 1 + é\n | ....＾"), "{wide}");
        assert_eq!(
            compilation_failed("'a\tb' == foo", ALL).as_deref(),
            Some(
                "compilation failed: ERROR: <input>:1:10: undeclared reference to 'foo' (in container '')\n | 'a b' \
                 == foo\n | .........^"
            )
        );
    }

    #[test]
    fn a_syntax_error_is_the_parsers() {
        assert_eq!(
            compilation_failed("object.", ALL).as_deref(),
            Some(
                "compilation failed: ERROR: <input>:1:8: Syntax error: no viable alternative at input '.'\n | \
                 object.\n | .......^"
            )
        );
    }

    #[test]
    fn params_and_authorizer_are_declared_where_the_api_server_declares_them() {
        assert_eq!(compilation_failed("params.x == authorizer.path('/')", ALL), None);
        let no_params = compilation_failed("params.x", Declarations { params: false, ..ALL });
        assert!(no_params.is_some_and(|m| m.contains("undeclared reference to 'params'")));
        let message = compilation_failed("string(authorizer)", Declarations { authorizer: false, ..ALL });
        assert!(message.is_some_and(|m| m.contains("undeclared reference to 'authorizer'")));
        assert_eq!(compilation_failed("object.spec.containers.all(i, c, c.name != '' && i >= 0)", ALL), None);
    }

    #[test]
    fn undefined_fields_of_what_the_environment_types_are_refused_at_creation() {
        // The API server's words (kube-apiserver 1.36, `kubectl apply
        // --dry-run=server`).
        let source = "request.usrInfo.username == 'a' || namespaceObject.metadata.lables.a == 'b' || variables.nope \
                      == 1 || request.options.x == 1 || has(request.userInfo.foo)";
        let declared = [Variable::untyped("cs")];
        let declarations = Declarations { variables: Some(&declared), ..ALL };
        let caret = |column: usize| format!("\n | {source}\n | {}^", ".".repeat(column - 1));
        let expected = format!(
            "compilation failed: ERROR: <input>:1:8: undefined field 'usrInfo'{}\nERROR: <input>:1:60: undefined \
             field 'lables'{}\nERROR: <input>:1:89: undefined field 'nope'{}\nERROR: <input>:1:132: undefined \
             field 'foo'{}",
            caret(8),
            caret(60),
            caret(89),
            caret(132)
        );
        assert_eq!(compilation_failed(source, declarations), Some(expected));
        assert_eq!(compilation_failed("variables.cs.x == request.userInfo.username", declarations), None);
        let condition = compilation_failed("variables.cs == 1", Declarations { variables: None, ..ALL });
        assert!(condition.is_some_and(|m| m.contains("undeclared reference to 'variables'")), "in a match condition");
    }

    #[test]
    fn type_checking_finds_what_the_api_servers_status_controller_finds() {
        let deployment = crate::schemas::BUILTIN.kind("apps", "v1", "Deployment").expect("built in");
        let objects = Objects::Schemas { object: &deployment, params: None };
        let typed = Typed { objects, ..Typed::default() };
        // The API server's words (`status.typeChecking`, kube-apiserver 1.36).
        let source = "has(object.spec.foo) || object.metadata.namespace == '' || object.?spec.?bar.orValue(1) == 1";
        assert_eq!(
            type_checked(source, typed).as_deref(),
            Some(
                "ERROR: <input>:1:4: undefined field 'foo'\n | has(object.spec.foo) || object.metadata.namespace == '' \
                 || object.?spec.?bar.orValue(1) == 1\n | ...^\nERROR: <input>:1:72: undefined field 'bar'\n | \
                 has(object.spec.foo) || object.metadata.namespace == '' || object.?spec.?bar.orValue(1) == 1\n | \
                 .......................................................................^"
            )
        );
        let source = "object.spec.template.spec.containers.all(c, c.imagee != '' && has(c.resources.limits))";
        let found = type_checked(source, typed).expect("two fields");
        assert!(found.starts_with("ERROR: <input>:1:46: undefined field 'imagee'"), "{found}");
        assert!(found.contains("\nERROR: <input>:1:66: undefined field 'limits'"), "{found}");
        assert_eq!(type_checked("object.spec.replicas > 1", typed), None);
    }

    #[test]
    fn a_field_that_evaluates_to_the_wrong_type_is_refused_in_the_api_servers_words() {
        let (bool, string, value) = (
            Declarations { returns: Returns::Bool, ..ALL },
            Declarations { returns: Returns::String, ..ALL },
            Declarations { returns: Returns::StringOrNull, ..ALL },
        );
        // kube-apiserver 1.36's words, dry run.
        let cases = [
            ("object.spec.paused", bool, Some("must evaluate to bool but got dyn")),
            ("1", bool, Some("must evaluate to bool but got int")),
            ("object.metadata.name", string, Some("must evaluate to string but got dyn")),
            ("request.dryRun", string, Some("must evaluate to string but got bool")),
            ("1", value, Some("must evaluate to one of [string null_type] but got int")),
            ("null", value, None),
            ("'a' + object.metadata.name", string, None),
            ("object.spec.replicas <= 5", bool, None),
            ("variables.anything", bool, None),
            ("variables.name", string, Some("must evaluate to string but got dyn")),
            ("variables.labels", bool, Some("must evaluate to bool but got map(string, string)")),
            ("variables.name + variables.labels['a']", string, None),
        ];
        let mut variables = vec![Variable::untyped("anything")];
        for (name, source) in [("name", "object.metadata.name"), ("labels", "namespaceObject.metadata.labels")] {
            let value = compiled_variable(source, Declarations { variables: Some(&variables), ..ALL });
            variables.push(Variable { name, value: value.ok().flatten() });
        }
        for (source, declarations, expected) in cases {
            let declarations = Declarations { variables: Some(&variables), ..declarations };
            assert_eq!(compilation_failed(source, declarations).as_deref(), expected, "{source}");
        }
        // A library's value in a variable is `dyn`, and so is one in a
        // list (kube-apiserver 1.36 takes each of these).
        let mut libraries = Vec::new();
        for (name, source) in [("q", "quantity('1')"), ("qs", "[quantity('1')]"), ("u", "url('https://a')")] {
            let value = compiled_variable(source, Declarations { variables: Some(&libraries), ..ALL });
            libraries.push(Variable { name, value: value.ok().flatten() });
        }
        for source in [
            "variables.q == null",
            "variables.q == 1",
            "int(variables.q) == 1",
            "variables.qs.sort() == []",
            "variables.u == 'https://a'",
            "variables.qs + [1] == []",
        ] {
            assert_eq!(
                compilation_failed(source, Declarations { variables: Some(&libraries), ..ALL }),
                None,
                "{source}"
            );
        }
        // A variable's value typed by its expression: selecting from a
        // scalar is refused, as the API server refuses it.
        let typed = [Variable { name: "s", value: compiled_variable("'a'", ALL).ok().flatten() }];
        let refused = compilation_failed("variables.s.x == 1", Declarations { variables: Some(&typed), ..ALL });
        assert!(refused.is_some_and(|m| m.contains("type 'string' does not support field selection")));
    }
}
