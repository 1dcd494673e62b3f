//! Compiling an expression once, at load: parsed with Kubernetes' syntax,
//! checked for variables Portcullis does not bind, and refused when its
//! estimated worst-case cost is over the limit.

use cel::Program;
use cel::parser::Parser;

use crate::cost;

/// The longest expression accepted: a bound on compile and evaluation cost
/// alongside the evaluation deadline.
pub const MAX_EXPRESSION_LEN: usize = 5_000;

/// Variables of Kubernetes' admission CEL that Portcullis does not bind,
/// and why: an expression using one is refused at load rather than failing
/// on every request.
const UNSUPPORTED_VARIABLES: [(&str, &str); 2] = [
    (
        "namespaceObject",
        "the namespace object is not bound; select on its labels with the policy's `namespaceSelector`",
    ),
    ("authorizer", "authorization checks are not supported (a webhook would need a SubjectAccessReview per request)"),
];

/// A compiled expression with its source.
#[derive(Debug)]
pub struct Expression {
    source: String,
    pub(crate) program: Program,
}

impl Expression {
    /// The source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression reads `variable` (`params`, `variables`...).
    pub fn reads(&self, variable: &str) -> bool {
        self.program.references().has_variable(variable)
    }
}

/// Why an expression was refused at load.
///
/// The messages name the flags by which every Portcullis service that
/// evaluates CEL sets these limits (`--cel-cost-limit`).
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Longer than [`MAX_EXPRESSION_LEN`].
    #[error("expression is {0} characters; the limit is {MAX_EXPRESSION_LEN}")]
    TooLong(usize),
    /// Not CEL.
    #[error("{expression:?} does not compile")]
    Syntax {
        /// The expression.
        expression: String,
        /// What the parser said.
        #[source]
        error: cel::ParseErrors,
    },
    /// Reads a variable Portcullis does not provide.
    #[error("{expression:?} uses `{variable}`, which Portcullis does not provide: {why}")]
    Unsupported {
        /// The expression.
        expression: String,
        /// The variable.
        variable: &'static str,
        /// Why it is not provided.
        why: &'static str,
    },
    /// Its worst-case cost is over the limit.
    #[error(
        "{expression:?} has an estimated worst-case cost of {}, over the limit of {limit} (--cel-cost-limit): \
         its work grows faster than the object it reads (a loop over the object inside a loop over the object, \
         or a scan of the whole object per element)",
        if *cost == u64::MAX { "unbounded".to_owned() } else { cost.to_string() }
    )]
    TooCostly {
        /// The expression.
        expression: String,
        /// Its estimated cost (`u64::MAX`: unbounded).
        cost: u64,
        /// The limit.
        limit: u64,
    },
}

/// Compiles `source`, refusing it when its estimated cost beyond work
/// linear in the object ([`cost::Cost::superlinear`]) is over `cost_limit`.
pub fn compile(source: &str, cost_limit: u64) -> Result<Expression, CompileError> {
    if source.len() > MAX_EXPRESSION_LEN {
        return Err(CompileError::TooLong(source.len()));
    }
    // Kubernetes' CEL environment has the optional syntax (`a.?b`, `[?x]`).
    let parser = Parser::new().enable_optional_syntax(true);
    let program = Program::compile_with(parser, source)
        .map_err(|error| CompileError::Syntax { expression: source.to_owned(), error })?;
    let references = program.references();
    if let Some((variable, why)) = UNSUPPORTED_VARIABLES.into_iter().find(|(v, _)| references.has_variable(v)) {
        return Err(CompileError::Unsupported { expression: source.to_owned(), variable, why });
    }
    let cost = cost::of(program.expression()).superlinear;
    if cost > cost_limit {
        return Err(CompileError::TooCostly { expression: source.to_owned(), cost, limit: cost_limit });
    }
    Ok(Expression { source: source.to_owned(), program })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_would_fail_on_every_request() {
        assert!(matches!(compile("object.", u64::MAX), Err(CompileError::Syntax { .. })));
        let unsupported = compile("namespaceObject.metadata.name == 'x'", u64::MAX);
        assert!(matches!(unsupported, Err(CompileError::Unsupported { variable: "namespaceObject", .. })));
        let long = "1 + ".repeat(MAX_EXPRESSION_LEN) + "1";
        assert!(matches!(compile(&long, u64::MAX), Err(CompileError::TooLong(_))));
        assert!(compile("object.?metadata.?name.orValue('') != ''", u64::MAX).is_ok(), "optional syntax");
    }
}
