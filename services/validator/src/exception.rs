//! `PolicyException` documents: named policies do not apply to the objects
//! an exception selects, until it expires. Admission honours them (the
//! policy is skipped, counted and traced) and the audit reports them as
//! `skip` with the reason, so an exception is visible, never silent.

use k8s_openapi::jiff::Timestamp;
use portcullis_admission::json;
use portcullis_admission::selector::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

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

    /// Whether it exempts the object (`kind`, `namespace`, `name`) from
    /// `policy` at `now`.
    pub fn exempts(
        &self,
        policy: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        object: Option<&Value>,
        now: Timestamp,
    ) -> bool {
        let spec = &self.spec;
        let any_or = |list: &[String], value: &str| list.is_empty() || list.iter().any(|x| x == value);
        let name_ok = spec.names.is_empty()
            || spec.names.iter().any(|n| match n.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => n == name,
            });
        spec.policies.iter().any(|p| p == policy)
            && spec.expires.is_none_or(|e| now < e)
            && any_or(&spec.namespaces, namespace)
            && any_or(&spec.kinds, kind)
            && name_ok
            && spec.object_selector.as_ref().is_none_or(|selector| {
                let labels = object.and_then(|o| json::at(o, &["metadata", "labels"]));
                selector.matches(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
            })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn exception(yaml: &str) -> Result<Exception, String> {
        let spec: Spec = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
        Exception::new("legacy".into(), spec, &["replicas", "team-label"]).map_err(|e| e.to_string())
    }

    #[test]
    fn selects_by_policy_namespace_kind_name_and_labels_until_it_expires() {
        let ex = exception(
            "policies: [replicas]\nnamespaces: [billing]\nkinds: [Deployment]\nnames: ['legacy-*']\n\
             objectSelector: {matchLabels: {tier: old}}\nreason: migrating in Q3\nexpires: '2030-01-01T00:00:00Z'\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let object = json!({"metadata": {"labels": {"tier": "old"}}});
        let now: Timestamp = "2029-06-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        let exempts =
            |policy, kind, ns, name, object: &Value, now| ex.exempts(policy, kind, ns, name, Some(object), now);
        assert!(exempts("replicas", "Deployment", "billing", "legacy-api", &object, now));
        assert!(!exempts("team-label", "Deployment", "billing", "legacy-api", &object, now), "another policy");
        assert!(!exempts("replicas", "Deployment", "shop", "legacy-api", &object, now), "another namespace");
        assert!(!exempts("replicas", "StatefulSet", "billing", "legacy-api", &object, now), "another kind");
        assert!(!exempts("replicas", "Deployment", "billing", "api", &object, now), "another name");
        assert!(!exempts("replicas", "Deployment", "billing", "legacy-api", &json!({}), now), "no label");
        let later: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        assert!(!exempts("replicas", "Deployment", "billing", "legacy-api", &object, later), "expired");
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
