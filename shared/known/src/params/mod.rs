//! Policy parameters, as ValidatingAdmissionPolicy's and
//! MutatingAdmissionPolicy's `paramKind` and their binding's `paramRef`:
//! CEL reads `params`, an object of the cluster (a ConfigMap, or any kind),
//! so one policy serves many teams with their own values. The validator's
//! policies and the injector's CEL mutations, native or in their own form,
//! check them here ([`Params`]) and find them by the API server's rules
//! ([`Params::objects`]). Where the objects come from is a
//! [`ParamSource`]: watched in memory for the webhooks and the audit
//! ([`WatchedParams`]), files for `check` and `mutate` ([`FileParams`]).
//! The admission path never calls the API.

mod files;
mod watched;

use portcullis_admission::json;
use portcullis_admission::selector::LabelSelector;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use files::FileParams;
pub use watched::{KindRemark, WatchedParams};

/// The kind of the parameter objects: `paramKind`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamKind {
    /// `v1`, `example.com/v1`.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// `ConfigMap`.
    #[schemars(length(min = 1))]
    pub kind: String,
}

impl std::fmt::Display for ParamKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.kind, self.api_version)
    }
}

/// Which objects of the kind: `paramRef`, as written in a policy (its
/// schema is the CRDs'; the policy reads it as a raw value so that a
/// mistake in it is the policy's refusal, with the field named).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamRefSpec {
    /// One object by name (not with `selector`).
    name: Option<String>,
    /// The namespace of the objects of a namespaced kind; unset: the
    /// namespace of the object judged.
    namespace: Option<String>,
    /// Every object with these labels (not with `name`).
    #[serde(default)]
    #[schemars(schema_with = "label_selector_schema")]
    selector: Option<LabelSelector>,
    /// What the policy does when no object is found: Allow or Deny.
    parameter_not_found_action: Option<NotFoundAction>,
}

/// `paramRef`'s schema, for a field that keeps it as a raw value (so that
/// a mistake in it is refused with the field named) but describes it as
/// what it is.
pub fn param_ref_schema(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<ParamRefSpec>()
}

/// `metav1.LabelSelector`, as the API server describes it.
fn label_selector_schema(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>()
}

/// What a policy does when no parameter object is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum NotFoundAction {
    /// The policy passes.
    Allow,
    /// The policy fails, under its failure policy.
    Deny,
}

/// One object by name, or every object a label selector matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// `paramRef.name`.
    Name(String),
    /// `paramRef.selector` (the empty selector matches every object).
    Labels(LabelSelector),
}

/// A checked `paramKind` with its `paramRef`: both or neither, exactly one
/// of name and selector, the not-found action stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// The objects' kind.
    pub kind: ParamKind,
    /// `paramRef.namespace`; unset: the request's namespace for a
    /// namespaced kind.
    pub namespace: Option<String>,
    /// Which objects.
    pub selection: Selection,
    /// When none is found.
    pub not_found: NotFoundAction,
}

impl Params {
    /// Checks a policy's `paramKind` and `paramRef` (raw YAML values).
    pub fn from_spec(kind: Option<ParamKind>, reference: Option<Value>) -> Result<Option<Self>, ParamSpecError> {
        let (kind, reference) = match (kind, reference) {
            (None, None) => return Ok(None),
            (Some(_), None) => return Err(ParamSpecError::NoRef),
            (None, Some(_)) => return Err(ParamSpecError::NoKind),
            (Some(kind), Some(reference)) => (kind, reference),
        };
        let spec: ParamRefSpec = serde_json::from_value(reference).map_err(ParamSpecError::Ref)?;
        if kind.api_version.trim().is_empty() || kind.kind.trim().is_empty() {
            return Err(ParamSpecError::IncompleteKind);
        }
        let selection = match (spec.name.filter(|n| !n.is_empty()), spec.selector) {
            (Some(name), None) => Selection::Name(name),
            (None, Some(selector)) => {
                selector.check()?;
                Selection::Labels(selector)
            }
            _ => return Err(ParamSpecError::NameOrSelector),
        };
        let not_found = spec.parameter_not_found_action.ok_or(ParamSpecError::NoNotFoundAction)?;
        Ok(Some(Self { kind, namespace: spec.namespace.filter(|n| !n.is_empty()), selection, not_found }))
    }

    /// A native policy's `paramKind` with its binding's `paramRef`. A
    /// reference without a kind is not read (`params` is null), as in the
    /// API server.
    pub fn of_native(
        kind: Option<&k8s_openapi::api::admissionregistration::v1::ParamKind>,
        reference: Option<&k8s_openapi::api::admissionregistration::v1::ParamRef>,
    ) -> Result<Option<Self>, ParamSpecError> {
        let Some(kind) = kind else { return Ok(None) };
        let kind = ParamKind {
            api_version: kind.api_version.clone().unwrap_or_default(),
            kind: kind.kind.clone().unwrap_or_default(),
        };
        let reference = reference.map(|r| serde_json::to_value(r).unwrap_or_default());
        Self::from_spec(Some(kind), reference)
    }

    /// The parameter objects for a request in `request_namespace` (empty
    /// for a cluster-scoped object), by the API server's rules ([`collect`]);
    /// none found is an error when the reference says `Deny`. `Err` is a
    /// configuration error, handled by the policy's failure policy.
    pub fn objects(&self, source: &dyn ParamSource, request_namespace: &str) -> Result<Vec<Value>, ParamsError> {
        let found = collect(source, self, request_namespace)?;
        if found.is_empty() && self.not_found == NotFoundAction::Deny {
            return Err(ParamsError::NotFound);
        }
        Ok(found)
    }
}

/// Why a policy's `paramKind` and `paramRef` were refused at load.
#[derive(Debug, thiserror::Error)]
pub enum ParamSpecError {
    /// A kind and no reference.
    #[error("paramKind is set but paramRef is not: say which objects to read")]
    NoRef,
    /// A reference and no kind.
    #[error("paramRef is set but paramKind is not")]
    NoKind,
    /// `paramRef` does not parse.
    #[error("paramRef")]
    Ref(#[source] serde_json::Error),
    /// `paramKind` without apiVersion or kind.
    #[error("paramKind needs apiVersion and kind")]
    IncompleteKind,
    /// `paramRef.selector` is one the API server would refuse.
    #[error("paramRef.selector")]
    Selector(#[from] portcullis_admission::selector::SelectorError),
    /// Both or neither of `name` and `selector`.
    #[error("paramRef needs exactly one of name and selector")]
    NameOrSelector,
    /// No `parameterNotFoundAction`.
    #[error("paramRef.parameterNotFoundAction is required (Allow or Deny): what to do when no parameter object exists")]
    NoNotFoundAction,
}

/// Why the parameters of a request cannot be found: a configuration
/// error, handled by the policy's failure policy. The messages are the API
/// server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// The API does not serve the kind.
    #[error("paramKind kind `{kind}` not known: {why}")]
    Unknown {
        /// The kind.
        kind: ParamKind,
        /// What discovery said.
        why: std::sync::Arc<str>,
    },
    /// The kind's first list has not arrived yet.
    #[error("paramKind kind `{0}` not yet synced to use for admission")]
    NotSynced(ParamKind),
    /// `paramRef.namespace` with a cluster-scoped kind.
    #[error("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")]
    NamespaceOfClusterScopedKind,
    /// No parameter object, and `parameterNotFoundAction: Deny`.
    #[error("no params found for policy binding with `Deny` parameterNotFoundAction")]
    NotFound,
    /// A namespaced kind, no `paramRef.namespace`, a cluster-scoped object.
    #[error("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")]
    NoNamespace,
}

/// Whether objects of a kind live in namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Namespaced.
    Namespaced,
    /// Cluster-scoped.
    Cluster,
}

/// Parameter objects known in memory.
pub trait ParamSource: Send + Sync {
    /// The kind's scope; `Err` when the kind cannot be read (unknown, or
    /// not yet in memory).
    fn scope(&self, kind: &ParamKind) -> Result<Scope, ParamsError>;
    /// The objects of `kind` in `namespace` (`None`: cluster-scoped) that
    /// `selection` picks, as JSON, ordered by namespace and name.
    fn find(&self, kind: &ParamKind, namespace: Option<&str>, selection: &Selection) -> Vec<Value>;
}

/// No parameter objects: every policy with `paramKind` finds none.
#[derive(Debug, Default)]
pub struct NoParams;

impl ParamSource for NoParams {
    fn scope(&self, _: &ParamKind) -> Result<Scope, ParamsError> {
        Ok(Scope::Namespaced)
    }

    fn find(&self, _: &ParamKind, _: Option<&str>, _: &Selection) -> Vec<Value> {
        Vec::new()
    }
}

/// The parameter objects for a request in `request_namespace` (empty for
/// a cluster-scoped object), by the API server's rules: a namespaced kind
/// is read in `paramRef.namespace` or else the request's namespace; a
/// cluster-scoped kind takes no namespace. `Err` is a configuration error,
/// handled by the policy's failure policy.
pub fn collect(source: &dyn ParamSource, params: &Params, request_namespace: &str) -> Result<Vec<Value>, ParamsError> {
    let namespace = match (source.scope(&params.kind)?, params.namespace.as_deref()) {
        (Scope::Cluster, None) => None,
        (Scope::Cluster, Some(_)) => return Err(ParamsError::NamespaceOfClusterScopedKind),
        (Scope::Namespaced, Some(namespace)) => Some(namespace),
        (Scope::Namespaced, None) if request_namespace.is_empty() => return Err(ParamsError::NoNamespace),
        (Scope::Namespaced, None) => Some(request_namespace),
    };
    Ok(source.find(&params.kind, namespace, &params.selection))
}

/// Whether `object` is the one `selection` picks (namespace already
/// matched).
pub(crate) fn picks(selection: &Selection, object: &Value) -> bool {
    match selection {
        Selection::Name(name) => json::at(object, &["metadata", "name"]).and_then(Value::as_str) == Some(name),
        Selection::Labels(selector) => {
            let labels = json::at(object, &["metadata", "labels"]);
            selector.matches(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind() -> ParamKind {
        ParamKind { api_version: "v1".into(), kind: "ConfigMap".into() }
    }

    #[test]
    fn a_reference_needs_exactly_one_of_name_and_selector_and_an_action() {
        let check = |r: Value| Params::from_spec(Some(kind()), Some(r));
        assert!(check(json!({"name": "a", "parameterNotFoundAction": "Deny"})).is_ok_and(|p| p.is_some()));
        assert!(check(json!({"selector": {}, "parameterNotFoundAction": "Allow"})).is_ok_and(|p| p.is_some()));
        assert!(check(json!({"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"})).is_err());
        assert!(check(json!({"parameterNotFoundAction": "Deny"})).is_err());
        assert!(check(json!({"name": "a"})).is_err_and(|e| matches!(e, ParamSpecError::NoNotFoundAction)));
        assert!(Params::from_spec(Some(kind()), None).is_err());
        assert!(Params::from_spec(None, Some(json!({"name": "a"}))).is_err());
        assert!(Params::from_spec(None, None).is_ok_and(|p| p.is_none()));
    }

    struct Fixed(Scope);

    impl ParamSource for Fixed {
        fn scope(&self, _: &ParamKind) -> Result<Scope, ParamsError> {
            Ok(self.0)
        }

        fn find(&self, _: &ParamKind, namespace: Option<&str>, _: &Selection) -> Vec<Value> {
            vec![json!(namespace)]
        }
    }

    #[test]
    fn the_namespace_follows_the_api_servers_rules() {
        let params = |namespace: Option<&str>| Params {
            kind: kind(),
            namespace: namespace.map(str::to_owned),
            selection: Selection::Name("p".into()),
            not_found: NotFoundAction::Deny,
        };
        let namespaced = Fixed(Scope::Namespaced);
        assert_eq!(collect(&namespaced, &params(None), "team-a"), Ok(vec![json!("team-a")]));
        assert_eq!(collect(&namespaced, &params(Some("shared")), "team-a"), Ok(vec![json!("shared")]));
        assert_eq!(collect(&namespaced, &params(None), ""), Err(ParamsError::NoNamespace));
        let cluster = Fixed(Scope::Cluster);
        assert_eq!(collect(&cluster, &params(None), "team-a"), Ok(vec![Value::Null]));
        assert_eq!(collect(&cluster, &params(Some("x")), "team-a"), Err(ParamsError::NamespaceOfClusterScopedKind));
    }
}
