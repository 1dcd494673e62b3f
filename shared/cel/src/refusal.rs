//! The API server's words for an expression its CEL compiler refuses when
//! a policy is created: `compilation failed: ERROR: <input>:1:25:
//! undeclared reference to 'foo' (in container '')`, followed by the line
//! and a caret under the column, each error so, in the order of their
//! positions, as cel-go prints its issues. Syntax errors come from the
//! parser (the same ANTLR grammar as cel-go's, with its messages);
//! undeclared names from the walk that [`crate::compile`] refuses them
//! with. Types are not checked, so what only cel-go's type checker finds
//! (an undefined field, an overload) is not said here.

use cel::Program;
use cel::parser::Parser;

use crate::compile::Environment;
use crate::declared::find_all;

/// Which of Kubernetes' admission variables an expression's field
/// declares besides `object`, `oldObject`, `request`, `namespaceObject`
/// and `variables`, as the API server declares them for that field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declarations {
    /// `params`: the policy has a `paramKind`.
    pub params: bool,
    /// `authorizer`: every field but a message expression.
    pub authorizer: bool,
}

/// What the API server says of `source` in a validating policy's field
/// that declares `declarations`, when its compiler refuses it:
/// `compilation failed: ...`; `None` when it takes it (as far as syntax
/// and names go).
pub fn compilation_failed(source: &str, declarations: Declarations) -> Option<String> {
    let hidden: Vec<&str> =
        [(!declarations.params).then_some("params"), (!declarations.authorizer).then_some("authorizer")]
            .into_iter()
            .flatten()
            .collect();
    let parser = Parser::new().enable_optional_syntax(true);
    let mut issues: Vec<(isize, isize, String)> = match Program::compile_with_info(parser, source) {
        Err(errors) => errors.errors.into_iter().map(|e| (e.pos.0, e.pos.1, e.msg)).collect(),
        Ok((program, info)) => find_all(program.expression(), Environment::Validation, &hidden)
            .into_iter()
            .map(|(id, undeclared)| {
                let (line, column) = info.pos_for(id).unwrap_or((1, 1));
                (line, column, format!("undeclared reference to '{}' (in container '')", undeclared.name()))
            })
            .collect(),
    };
    if issues.is_empty() {
        return None;
    }
    issues.sort_by_key(|&(line, column, _)| (line, column));
    let printed: Vec<String> =
        issues.iter().map(|(line, column, message)| issue(source, *line, *column, message)).collect();
    Some(format!("compilation failed: {}", printed.join("\n")))
}

/// One issue as cel-go prints it: where, what, and the line with a caret.
fn issue(source: &str, line: isize, column: isize, message: &str) -> String {
    let mut printed = format!("ERROR: <input>:{line}:{column}: {message}");
    let snippet = usize::try_from(line - 1).ok().and_then(|l| source.split('\n').nth(l));
    if let Some(snippet) = snippet {
        let before = usize::try_from(column - 1).unwrap_or_default();
        let dots: String = snippet.chars().take(before).map(|_| '.').collect();
        printed.push_str(&format!("\n | {snippet}\n | {dots}^"));
    }
    printed
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Declarations = Declarations { params: true, authorizer: true };

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
        let no_params = compilation_failed("params.x", Declarations { params: false, authorizer: true });
        assert!(no_params.is_some_and(|m| m.contains("undeclared reference to 'params'")));
        let message = compilation_failed("string(authorizer)", Declarations { params: true, authorizer: false });
        assert!(message.is_some_and(|m| m.contains("undeclared reference to 'authorizer'")));
        assert_eq!(compilation_failed("object.spec.containers.all(i, c, c.name != '' && i >= 0)", ALL), None);
    }
}
