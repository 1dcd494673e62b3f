//! `PolicyException` documents: named policies do not apply to the objects
//! an exception selects, until it expires (which objects:
//! [`crate::matching`]). Admission honours them (the
//! policy is skipped, counted and traced) and the audit reports them as
//! `skip` with the reason, so an exception is visible, never silent.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;
use portcullis_admission::selector::LabelSelector;
use portcullis_resources::Refusal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `kind` of an exception document.
pub const KIND: &str = "PolicyException";

/// What an exception document says.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// The policies it exempts from, by name: a ValidatorPolicy, or a
    /// NamespacedValidatorPolicy of the exception's own namespace. At least
    /// one.
    #[schemars(length(min = 1))]
    pub policies: Vec<String>,
    /// Namespaces of the objects; empty: any (cluster-scoped objects too).
    /// An exception that lives in a namespace applies only there: empty or
    /// that namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Kinds of the objects (`Deployment`); empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Object names, exact or with one trailing `*` (`legacy-*`); empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// Labels the objects must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::resources::schema::label_selector")]
    pub object_selector: Option<LabelSelector>,
    /// Why; shown in logs, traces and reports. Required.
    #[schemars(length(min = 1))]
    pub reason: String,
    /// When it stops applying (RFC 3339), so that exceptions do not become
    /// permanent by being forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::resources::schema::timestamp")]
    pub expires: Option<Timestamp>,
}

/// Why an exception document was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExceptionError {
    /// `spec.policies` is empty.
    #[error("spec.policies names no policy")]
    NoPolicy,
    /// `spec.policies` names a policy that does not exist (files only: in
    /// a cluster, the policy may come later).
    #[error("spec.policies names {0:?}, which no ValidatorPolicy defines")]
    UnknownPolicy(String),
    /// `spec.reason` is empty.
    #[error("spec.reason is required: say why the exception exists")]
    NoReason,
    /// `spec.objectSelector` is one the API server would refuse.
    #[error("spec.objectSelector")]
    Selector(#[from] portcullis_admission::selector::SelectorError),
    /// A `spec.names` pattern with a `*` elsewhere than at its end.
    #[error("spec.names: {0:?} may only end with *")]
    BadName(String),
    /// `spec.namespaces` reaches beyond the namespace the exception lives in.
    #[error("spec.namespaces: an exception in namespace {own} applies only there, not in {other}")]
    OtherNamespace {
        /// Where the exception lives.
        own: String,
        /// The namespace it may not name.
        other: String,
    },
    /// The cluster admin does not let this namespace hold exceptions.
    #[error("namespace {0} may not hold policy exceptions (--exception-namespaces); the exception is ignored")]
    NamespaceNotAllowed(String),
}

impl ExceptionError {
    /// The `Ready=False` reason: `NamespaceNotAllowed`, else `Invalid`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NamespaceNotAllowed(_) => "NamespaceNotAllowed",
            _ => "Invalid",
        }
    }
}

/// Which namespaces may hold `PolicyException`s: the cluster admin's
/// setting (`--exception-namespaces`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ExceptionNamespaces {
    /// Every namespace.
    #[default]
    Any,
    /// These only.
    Only(BTreeSet<String>),
}

impl ExceptionNamespaces {
    /// From the flag's list: empty (or `*` among them) means any.
    pub fn from_list(names: &[String]) -> Self {
        let names: BTreeSet<String> =
            names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).map(str::to_owned).collect();
        if names.is_empty() || names.contains("*") { Self::Any } else { Self::Only(names) }
    }

    /// Whether an exception may live in `namespace`.
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(names) => names.contains(namespace),
        }
    }
}

/// A checked exception.
#[derive(Debug)]
pub struct Exception {
    /// Its identity, as logs, metrics and reports show it: `metadata.name`,
    /// or `namespace/name` when it lives in a namespace.
    pub name: String,
    /// `metadata.namespace`: it applies only to objects there. `None`
    /// (files): as its `spec.namespaces` say.
    pub namespace: Option<String>,
    /// What it selects.
    pub spec: Spec,
}

impl Exception {
    /// Checks the document on its own, `name` (`metadata.name`) living in
    /// `namespace`, where `allowed` says exceptions may live. Whether the
    /// policies it names exist is not its concern: in a cluster they may
    /// come later.
    pub fn check(
        name: &str,
        namespace: Option<String>,
        spec: Spec,
        allowed: &ExceptionNamespaces,
    ) -> Result<Self, ExceptionError> {
        if let Some(own) = &namespace {
            if !allowed.allows(own) {
                return Err(ExceptionError::NamespaceNotAllowed(own.clone()));
            }
            if let Some(other) = spec.namespaces.iter().find(|n| *n != own) {
                return Err(ExceptionError::OtherNamespace { own: own.clone(), other: other.clone() });
            }
        }
        if spec.policies.is_empty() {
            return Err(ExceptionError::NoPolicy);
        }
        if spec.reason.trim().is_empty() {
            return Err(ExceptionError::NoReason);
        }
        if let Some(selector) = &spec.object_selector {
            selector.check()?;
        }
        if let Some(bad) = spec.names.iter().find(|n| n.trim_end_matches('*').contains('*')) {
            return Err(ExceptionError::BadName(bad.clone()));
        }
        let name = match &namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_owned(),
        };
        if let Some(expires) = spec.expires.filter(|e| *e <= Timestamp::now()) {
            tracing::warn!(exception = %name, %expires, "policy exception has expired and no longer applies");
        }
        Ok(Self { name, namespace, spec })
    }

    /// [`Exception::check`], refused as the object's status says it: the
    /// reason and the message `check` prints.
    pub fn compile(
        name: &str,
        namespace: Option<String>,
        spec: Spec,
        allowed: &ExceptionNamespaces,
    ) -> Result<Self, Refusal> {
        Self::check(name, namespace, spec, allowed)
            .map_err(|e| Refusal::new(e.reason(), portcullis_telemetry::error_chain(&e)))
    }

    /// Whether it names the policy whose identity is `policy` (`name`, or
    /// `namespace/name` for a namespaced policy): by identity, or by name
    /// for a policy of its own namespace.
    pub fn names(&self, policy: &str) -> bool {
        self.spec.policies.iter().any(|entry| self.entry_names(entry, policy))
    }

    /// Whether one `spec.policies` entry names `policy`.
    pub fn entry_names(&self, entry: &str, policy: &str) -> bool {
        entry == policy
            || self
                .namespace
                .as_deref()
                .is_some_and(|own| policy.strip_prefix(own).and_then(|rest| rest.strip_prefix('/')) == Some(entry))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An exception named `legacy` from its spec's YAML, in no namespace.
    pub(crate) fn exception(yaml: &str) -> Result<Exception, String> {
        let spec: Spec = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        Exception::check("legacy", None, spec, &ExceptionNamespaces::Any).map_err(|e| e.to_string())
    }

    #[test]
    fn refuses_what_would_be_a_silent_mistake() {
        let err = |yaml| exception(yaml).err().unwrap_or_default();
        assert!(err("policies: [replicas]\nreason: ' '\n").contains("reason is required"));
        assert!(err("policies: []\nreason: x\n").contains("names no policy"));
        assert!(err("policies: [replicas]\nnames: ['a*b']\nreason: x\n").contains("may only end with *"));
    }
}
