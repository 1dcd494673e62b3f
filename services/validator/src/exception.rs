//! `PolicyException` documents: named policies do not apply to the objects
//! an exception selects, until it expires (which objects:
//! [`crate::matching`]). Admission honours them (the
//! policy is skipped, counted and traced) and the audit reports them as
//! `skip` with the reason, so an exception is visible, never silent.

use k8s_openapi::jiff::Timestamp;
use portcullis_admission::selector::LabelSelector;
use serde::Deserialize;

/// The `kind` of an exception document.
pub const KIND: &str = "PolicyException";

/// What an exception document says.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// The policies it exempts from; at least one, each defined.
    pub policies: Vec<String>,
    /// Namespaces of the objects; empty: any (cluster-scoped objects too).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Kinds of the objects (`Deployment`); empty: any.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Object names, exact or with one trailing `*` (`legacy-*`); empty: any.
    #[serde(default)]
    pub names: Vec<String>,
    /// Labels the objects must have.
    pub object_selector: Option<LabelSelector>,
    /// Why; shown in logs, traces and reports. Required.
    pub reason: String,
    /// When it stops applying (RFC 3339), so that exceptions do not become
    /// permanent by being forgotten.
    pub expires: Option<Timestamp>,
}

/// Why an exception document was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExceptionError {
    /// `spec.policies` is empty.
    #[error("spec.policies names no policy")]
    NoPolicy,
    /// `spec.policies` names a policy that does not exist.
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
}

/// A checked exception.
#[derive(Debug)]
pub struct Exception {
    /// `metadata.name`.
    pub name: String,
    /// What it selects.
    pub spec: Spec,
}

impl Exception {
    /// Checks the document on its own; `policies` are the names defined.
    pub fn new(name: String, spec: Spec, policies: &[&str]) -> Result<Self, ExceptionError> {
        if spec.policies.is_empty() {
            return Err(ExceptionError::NoPolicy);
        }
        if let Some(unknown) = spec.policies.iter().find(|p| !policies.contains(&p.as_str())) {
            return Err(ExceptionError::UnknownPolicy(unknown.clone()));
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
        if let Some(expires) = spec.expires.filter(|e| *e <= Timestamp::now()) {
            tracing::warn!(exception = %name, %expires, "policy exception has expired and no longer applies");
        }
        Ok(Self { name, spec })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An exception named `legacy` from its spec's YAML, with the policies
    /// `replicas` and `team-label` defined.
    pub(crate) fn exception(yaml: &str) -> Result<Exception, String> {
        let spec: Spec = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        Exception::new("legacy".into(), spec, &["replicas", "team-label"]).map_err(|e| e.to_string())
    }

    #[test]
    fn refuses_what_would_be_a_silent_mistake() {
        let err = |yaml| exception(yaml).err().unwrap_or_default();
        assert!(err("policies: [replica]\nreason: x\n").contains("no ValidatorPolicy defines"));
        assert!(err("policies: [replicas]\nreason: ' '\n").contains("reason is required"));
        assert!(err("policies: []\nreason: x\n").contains("names no policy"));
        assert!(err("policies: [replicas]\nnames: ['a*b']\nreason: x\n").contains("may only end with *"));
    }
}
