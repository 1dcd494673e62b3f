//! Compiling an expression once, at load: parsed with Kubernetes' syntax,
//! checked for variables Portcullis does not bind, for names and for
//! fields of `request` and `namespaceObject` that Kubernetes' environment
//! does not declare, and refused when its estimated worst-case cost is
//! over the limit.

use cel::Program;
use cel::parser::Parser;

use crate::cost;
use crate::declared::Undeclared;

/// The longest expression accepted: a bound on compile and evaluation cost
/// alongside the evaluation deadline.
pub const MAX_EXPRESSION_LEN: usize = 5_000;

/// The longest expression the API server's CEL parser takes, in code
/// points.
pub const API_SERVER_MAX_LEN: usize = 100_000;

/// What bounds an expression at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBounds {
    /// Portcullis' own, for its policies and configurations: at most
    /// [`MAX_EXPRESSION_LEN`] bytes, and an estimated cost beyond work
    /// linear in the object of at most `cost` (`--cel-cost-limit`).
    Portcullis {
        /// The cost limit.
        cost: u64,
    },
    /// The API server's, for a native policy's expressions: at most
    /// [`API_SERVER_MAX_LEN`] code points; the cost is bounded when it
    /// runs, not at load.
    ApiServer,
}

/// A compiled expression with its source.
#[derive(Debug)]
pub struct Expression {
    source: String,
    pub(crate) program: Program,
    /// The names of the variables it reads (`variables.<name>`); `None`:
    /// it reads `variables` whole.
    variables: Option<Vec<String>>,
}

impl Expression {
    /// The source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The names of the policy variables it reads (`variables.<name>`), or
    /// `None` when it reads `variables` whole (every one of them).
    pub fn variables_read(&self) -> Option<&[String]> {
        self.variables.as_deref()
    }

    /// The type it evaluates to, as the API server names it where a field
    /// does not take it (`bool`, `dyn`, `google.protobuf.Duration`), where
    /// that is certain in Kubernetes' environment (`object.x` is `dyn`,
    /// `object.x == 1` a `bool`, `quantity(s).asInteger()` an `int`);
    /// `None` where it is not (a macro's result, a variable's value).
    pub fn evaluates_to(&self) -> Option<String> {
        crate::output::output_type(self.program.expression(), &[])
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
    /// Longer than its bounds allow ([`LoadBounds`]).
    #[error("expression is {length} characters; the limit is {limit}")]
    TooLong {
        /// Its length.
        length: usize,
        /// The limit.
        limit: usize,
    },
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
    /// Uses a name Kubernetes' CEL does not declare (a misspelt variable,
    /// a namespace of functions it lacks): the API server refuses such a
    /// policy when it is created.
    #[error(
        "{expression:?} uses `{name}`, which Kubernetes' CEL does not declare (the API server refuses it: \
         undeclared reference to '{name}' (in container ''))"
    )]
    Undeclared {
        /// The expression.
        expression: String,
        /// The name.
        name: String,
    },
    /// Selects a field that `request` or `namespaceObject` does not have
    /// (or one of a scalar), as the API server's environment types them:
    /// it refuses such a policy when it is created.
    #[error(
        "{expression:?}: {message}, as the API server's environment types `request` and `namespaceObject` (it \
         refuses the policy; `request` has no `uid`, `object` or `oldObject`, which are variables of their own)"
    )]
    Field {
        /// The expression.
        expression: String,
        /// cel-go's message (`undefined field 'uid'`).
        message: String,
    },
    /// Constructs a message (`Name{...}`) its environment does not declare:
    /// none in validations, `Object`, `Object.<path>` and `JSONPatch` in
    /// mutations, as in the API server's environments.
    #[error("{expression:?} constructs `{type_name}{{...}}`, which {environment} does not declare{}", environment.declares())]
    UndeclaredType {
        /// The expression.
        expression: String,
        /// The type it constructs.
        type_name: String,
        /// Where it was compiled.
        environment: Environment,
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

/// Which of Kubernetes' CEL environments an expression is compiled in: they
/// differ in the message types an expression may construct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    /// Validations, match conditions, variables and messages: no message
    /// types.
    Validation,
    /// MutatingAdmissionPolicy's mutations and their variables: `Object`,
    /// `Object.<field path>` (the apply configuration and its parts) and
    /// `JSONPatch`.
    Mutation,
}

/// `(variable, why)`: Kubernetes' admission CEL variable that Portcullis
/// does not bind, and why.
type Unbound = (&'static str, &'static str);

const AUTHORIZER: Unbound =
    ("authorizer", "authorization checks are not supported (a webhook would need a SubjectAccessReview per request)");

impl Environment {
    /// The variables of Kubernetes' admission CEL not bound here, with why:
    /// an expression using one is refused at load rather than failing on
    /// every request.
    fn unbound(self) -> &'static [Unbound] {
        match self {
            Self::Validation | Self::Mutation => &[AUTHORIZER],
        }
    }

    pub(crate) fn declares_type(self, name: &str) -> bool {
        match self {
            Self::Validation => false,
            Self::Mutation => name == "JSONPatch" || name == "Object" || name.starts_with("Object."),
        }
    }

    fn declares(self) -> &'static str {
        match self {
            Self::Validation => " (message types are for mutations)",
            Self::Mutation => " (it has `Object`, `Object.<field path>` and `JSONPatch`)",
        }
    }
}

impl std::fmt::Display for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Validation => "a validation",
            Self::Mutation => "a mutation",
        })
    }
}

/// Compiles `source` in the validation environment within Portcullis' own
/// bounds ([`LoadBounds::Portcullis`]), refusing it when it is longer than
/// [`MAX_EXPRESSION_LEN`] or its estimated cost beyond work linear in the
/// object ([`cost::Cost::superlinear`]) is over `cost_limit`.
pub fn compile(source: &str, cost_limit: u64) -> Result<Expression, CompileError> {
    compile_in(Environment::Validation, source, LoadBounds::Portcullis { cost: cost_limit })
}

/// Compiles `source` in `environment` within `bounds`.
pub fn compile_in(environment: Environment, source: &str, bounds: LoadBounds) -> Result<Expression, CompileError> {
    let (length, limit, cost_limit) = match bounds {
        LoadBounds::Portcullis { cost } => (source.len(), MAX_EXPRESSION_LEN, cost),
        LoadBounds::ApiServer => (source.chars().count(), API_SERVER_MAX_LEN, u64::MAX),
    };
    if length > limit {
        return Err(CompileError::TooLong { length, limit });
    }
    // Kubernetes' CEL environment has the optional syntax (`a.?b`, `[?x]`).
    let parser = Parser::new().enable_optional_syntax(true);
    let program = Program::compile_with(parser, source)
        .map_err(|error| CompileError::Syntax { expression: source.to_owned(), error })?;
    let references = program.references();
    if let Some(&(variable, why)) = environment.unbound().iter().find(|(v, _)| references.has_variable(v)) {
        return Err(CompileError::Unsupported { expression: source.to_owned(), variable, why });
    }
    match crate::declared::find(program.expression(), environment) {
        None => {}
        Some(Undeclared::Name(name)) => {
            return Err(CompileError::Undeclared { expression: source.to_owned(), name });
        }
        Some(Undeclared::Type(type_name)) => {
            return Err(CompileError::UndeclaredType { expression: source.to_owned(), type_name, environment });
        }
    }
    let fields = crate::typecheck::field_errors(program.expression(), crate::typecheck::Typed::default());
    if let Some((_, message)) = fields.into_iter().next() {
        return Err(CompileError::Field { expression: source.to_owned(), message });
    }
    let cost = cost::of(program.expression()).superlinear;
    if cost > cost_limit {
        return Err(CompileError::TooCostly { expression: source.to_owned(), cost, limit: cost_limit });
    }
    let mut reads = crate::reads::DataReads::default();
    reads.add_program(&program);
    let variables = match reads.variables {
        None => Some(Vec::new()),
        Some(crate::reads::Reads::Fields(fields)) => Some(fields.into_keys().collect()),
        Some(_) => None,
    };
    Ok(Expression { source: source.to_owned(), program, variables })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_would_fail_on_every_request() {
        assert!(matches!(compile("object.", u64::MAX), Err(CompileError::Syntax { .. })));
        let unsupported = compile("authorizer.requestResource.check('get').allowed()", u64::MAX);
        assert!(matches!(unsupported, Err(CompileError::Unsupported { variable: "authorizer", .. })));
        let namespace = "namespaceObject.metadata.name == 'x'";
        assert!(compile(namespace, u64::MAX).is_ok(), "the validator binds namespaceObject");
        assert!(compile_in(Environment::Mutation, namespace, LoadBounds::ApiServer).is_ok(), "and the injector");
        let long = format!("'{}' != ''", "a".repeat(MAX_EXPRESSION_LEN));
        assert!(matches!(compile(&long, u64::MAX), Err(CompileError::TooLong { limit: MAX_EXPRESSION_LEN, .. })));
        assert!(compile_in(Environment::Validation, &long, LoadBounds::ApiServer).is_ok(), "as the API server");
        let longer = format!("'{}' != ''", "é".repeat(API_SERVER_MAX_LEN));
        let refused = compile_in(Environment::Validation, &longer, LoadBounds::ApiServer);
        assert!(matches!(refused, Err(CompileError::TooLong { length, .. }) if length == API_SERVER_MAX_LEN + 8));
        assert!(compile("object.?metadata.?name.orValue('') != ''", u64::MAX).is_ok(), "optional syntax");
        let uid = compile("request.uid != ''", u64::MAX);
        assert!(
            matches!(uid, Err(CompileError::Field { message, .. }) if message == "undefined field 'uid'"),
            "as the API server"
        );
        assert!(compile("request.userInfo.uid != '' && namespaceObject.metadata.labels.a == 'b'", u64::MAX).is_ok());
    }

    #[test]
    fn message_types_belong_to_mutations() {
        let object = "Object{metadata: Object.metadata{labels: {'a': 'b'}}}";
        assert!(matches!(compile(object, u64::MAX), Err(CompileError::UndeclaredType { .. })));
        assert!(compile_in(Environment::Mutation, object, LoadBounds::ApiServer).is_ok());
        let patch = "[JSONPatch{op: 'add', path: '/x', value: 1}]";
        assert!(compile_in(Environment::Mutation, patch, LoadBounds::ApiServer).is_ok());
        let other = compile_in(Environment::Mutation, "[1].map(x, Foo{a: x})", LoadBounds::ApiServer);
        assert!(matches!(other, Err(CompileError::UndeclaredType { type_name, .. }) if type_name == "Foo"));
    }
}
