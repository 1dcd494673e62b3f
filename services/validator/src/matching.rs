//! Which requests and objects a policy judges: its `match` (resource
//! rules, operations, system and excluded namespaces, object and namespace
//! selectors) and the `PolicyException`s that exempt objects from it. In
//! one place so that admission, the offline `check` and the audit agree on
//! it; nothing here evaluates a rule.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use portcullis_admission::selector::LabelSelector;
use portcullis_admission::{Request, operation_name};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evaluate::KnownNamespaces;
use crate::exception::Exception;
pub use portcullis_admission::native_match::{NativeMatch, UnknownNamespace, label_lookup};

/// Which requests a policy looks at.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Resources by group, version and kind or resource; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceRule>,
    /// Operations (CREATE, UPDATE, DELETE, CONNECT, `*`); empty: CREATE
    /// and UPDATE.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    /// Labels the object's namespace must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::resources::schema::label_selector")]
    pub namespace_selector: Option<LabelSelector>,
    /// Labels the object must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::resources::schema::label_selector")]
    pub object_selector: Option<LabelSelector>,
    /// Namespaces the policy never applies to (not in a
    /// NamespacedValidatorPolicy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_namespaces: Vec<String>,
    /// Apply in kube-system, kube-public, kube-node-lease and the
    /// Portcullis namespace too (not in a NamespacedValidatorPolicy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_system_namespaces: bool,
    /// The namespace of a NamespacedValidatorPolicy: the only one it
    /// applies in (never to cluster-scoped objects). Set from the object's
    /// `metadata.namespace`, never written in a spec.
    #[serde(skip)]
    #[schemars(skip)]
    pub namespace: Option<String>,
}

/// One resource rule, like a webhook's `rules` entry.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRule {
    /// API groups (`""` is the core group, `"*"` any).
    #[serde(default = "any")]
    pub api_groups: Vec<String>,
    /// API versions (`"*"` any).
    #[serde(default = "any")]
    pub api_versions: Vec<String>,
    /// Kinds (`Deployment`, `Scale`, `"*"`); empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Resources, with subresources as `deployments/scale` (`"*"`,
    /// `"*/scale"`); empty: any resource without a subresource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
}

impl ResourceRule {
    /// Whether the rule selects requests for `resource` (and `sub`
    /// resource) of `group/version`, whose objects are of `kind`.
    pub fn selects(&self, group: &str, version: &str, kind: &str, resource: &str, sub: Option<&str>) -> bool {
        let rule = self;
        let any_or = |list: &[String], value: &str| list.iter().any(|x| x == "*" || x == value);
        if !any_or(&rule.api_groups, group) || !any_or(&rule.api_versions, version) {
            return false;
        }
        if !rule.kinds.is_empty() && !any_or(&rule.kinds, kind) {
            return false;
        }
        match sub.filter(|s| !s.is_empty()) {
            None => rule.resources.is_empty() || any_or(&rule.resources, resource),
            Some(sub) => rule.resources.iter().any(|r| {
                r == "*/*"
                    || *r == format!("{resource}/{sub}")
                    || *r == format!("*/{sub}")
                    || *r == format!("{resource}/*")
            }),
        }
    }
}

fn any() -> Vec<String> {
    vec!["*".to_owned()]
}

/// How a policy selects requests: a `ValidatorPolicy`'s `match`, or a
/// native ValidatingAdmissionPolicy's constraints with one binding.
#[derive(Debug, Clone)]
pub enum Matching {
    /// A `ValidatorPolicy` or `NamespacedValidatorPolicy`.
    Portcullis(Match),
    /// A native policy through one binding (no system namespace left out).
    Native(Box<NativeMatch>),
}

impl Matching {
    /// Whether matching reads the namespaces (a `namespaceSelector`).
    pub fn reads_namespaces(&self) -> bool {
        match self {
            Self::Portcullis(m) => m.namespace_selector.is_some(),
            Self::Native(n) => n.reads_namespaces(),
        }
    }

    /// Whether the policy applies to `req` (see [`Match::applies`] and
    /// [`NativeMatch::applies`]).
    pub fn applies(
        &self,
        system_namespaces: &[String],
        namespaces: &dyn KnownNamespaces,
        req: &Request,
    ) -> Result<bool, UnknownNamespace> {
        match self {
            Self::Portcullis(m) => m.applies(system_namespaces, namespaces, req),
            Self::Native(m) => m.applies(namespaces, req),
        }
    }

    /// Whether the stored objects of a resource can be judged; `None` when
    /// every resource is selected (see [`Match::selects_resource`]).
    pub fn selects_resource(&self, group: &str, version: &str, kind: &str, plural: &str) -> Option<bool> {
        match self {
            Self::Portcullis(m) => m.selects_resource(group, version, kind, plural),
            Self::Native(m) => Some(m.selects_resource(group, version, plural)),
        }
    }

    /// The binding of a native policy.
    pub fn binding(&self) -> Option<&str> {
        match self {
            Self::Portcullis(_) => None,
            Self::Native(m) => Some(&m.binding),
        }
    }
}

impl Match {
    /// Whether a policy with this `match` applies to `req`, outside
    /// `system_namespaces` unless it includes them; `Err` when that cannot
    /// be known.
    pub fn applies(
        &self,
        system_namespaces: &[String],
        namespaces: &dyn KnownNamespaces,
        req: &Request,
    ) -> Result<bool, UnknownNamespace> {
        let m = self;
        let inner = &req.inner;
        let old = req.old_object.as_ref();
        let op = operation_name(&inner.operation);
        let op_ok = if m.operations.is_empty() {
            matches!(op, "CREATE" | "UPDATE")
        } else {
            m.operations.iter().any(|o| o == op || o == "*")
        };
        if !op_ok || !(m.resources.is_empty() || m.resources.iter().any(|r| resource_matches(r, req))) {
            return Ok(false);
        }
        let namespace = inner.namespace.as_deref().unwrap_or_default();
        if let Some(own) = &m.namespace {
            // A namespaced policy: its namespace only, never a cluster-scoped
            // object (a Namespace's request carries its own name as namespace).
            let cluster_scoped = inner.resource.resource == "namespaces" && inner.resource.group.is_empty();
            if cluster_scoped || namespace != own {
                return Ok(false);
            }
        }
        if !namespace.is_empty() {
            let system = system_namespaces.iter().any(|s| s == namespace);
            if (system && !m.include_system_namespaces) || m.exclude_namespaces.iter().any(|n| n == namespace) {
                return Ok(false);
            }
        }
        if let Some(selector) = &m.object_selector {
            // As the API server does: a match on either the new or the old object.
            let new_ok = req.object.is_some() && selector.matches(label_lookup(req.object.as_ref()));
            let old_ok = old.is_some() && selector.matches(label_lookup(old));
            if !new_ok && !old_ok {
                return Ok(false);
            }
        }
        if let Some(selector) = &m.namespace_selector {
            if inner.kind.kind == "Namespace" && inner.kind.group.is_empty() {
                return Ok(selector.matches(label_lookup(req.object.as_ref().or(old))));
            }
            if namespace.is_empty() {
                return Ok(true); // other cluster-scoped objects are never skipped by a namespaceSelector
            }
            let labels = namespaces.labels(namespace).ok_or_else(|| UnknownNamespace::Labels(namespace.to_owned()))?;
            return Ok(selector.matches(|k| labels.get(k).map(String::as_str)));
        }
        Ok(true)
    }

    /// Whether the resource rules select the objects of a resource (no
    /// subresource) of `group/version`, of `kind`, named `plural`; `None`
    /// when there are none, so every resource is selected.
    pub fn selects_resource(&self, group: &str, version: &str, kind: &str, plural: &str) -> Option<bool> {
        if self.resources.is_empty() {
            return None;
        }
        Some(self.resources.iter().any(|r| r.selects(group, version, kind, plural, None)))
    }
}

/// Looks a label up in `object`'s `metadata.labels`.
fn resource_matches(rule: &ResourceRule, req: &Request) -> bool {
    let inner = &req.inner;
    let (group, version) = (&inner.resource.group, &inner.resource.version);
    rule.selects(group, version, &inner.kind.kind, &inner.resource.resource, inner.sub_resource.as_deref())
}

/// The first of `exceptions` that exempts the object of `req` from
/// `policy` (its identity: `name` or `namespace/name`) now.
pub fn exception_for<'a>(exceptions: &'a [Arc<Exception>], policy: &str, req: &Request) -> Option<&'a Exception> {
    // On the admission path for every matching policy: no clock read
    // and no work at all when no exception is defined.
    if exceptions.is_empty() {
        return None;
    }
    let inner = &req.inner;
    let object = req.object.as_ref().or(req.old_object.as_ref());
    let namespace = inner.namespace.as_deref().unwrap_or_default();
    let now = Timestamp::now();
    exceptions
        .iter()
        .map(Arc::as_ref)
        .find(|e| exempts(e, policy, &inner.kind.kind, namespace, &inner.name, object, now))
}

/// Whether `exception` exempts the object (`kind`, `namespace`, `name`)
/// from `policy` (its identity) at `now`. An exception that lives in a
/// namespace exempts objects of that namespace only.
pub fn exempts(
    exception: &Exception,
    policy: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    object: Option<&Value>,
    now: Timestamp,
) -> bool {
    let spec = &exception.spec;
    let any_or = |list: &[String], value: &str| list.is_empty() || list.iter().any(|x| x == value);
    let name_ok = spec.names.is_empty()
        || spec.names.iter().any(|n| match n.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => n == name,
        });
    exception.names(policy)
        && exception.namespace.as_deref().is_none_or(|own| own == namespace)
        && spec.expires.is_none_or(|e| now < e)
        && any_or(&spec.namespaces, namespace)
        && any_or(&spec.kinds, kind)
        && name_ok
        && spec.object_selector.as_ref().is_none_or(|selector| selector.matches(label_lookup(object)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::exception::tests::exception;

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
            |policy, kind, ns, name, object: &Value, now| exempts(&ex, policy, kind, ns, name, Some(object), now);
        assert!(exempts("replicas", "Deployment", "billing", "legacy-api", &object, now));
        assert!(!exempts("team-label", "Deployment", "billing", "legacy-api", &object, now), "another policy");
        assert!(!exempts("replicas", "Deployment", "shop", "legacy-api", &object, now), "another namespace");
        assert!(!exempts("replicas", "StatefulSet", "billing", "legacy-api", &object, now), "another kind");
        assert!(!exempts("replicas", "Deployment", "billing", "api", &object, now), "another name");
        assert!(!exempts("replicas", "Deployment", "billing", "legacy-api", &json!({}), now), "no label");
        let later: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap_or(Timestamp::UNIX_EPOCH);
        assert!(!exempts("replicas", "Deployment", "billing", "legacy-api", &object, later), "expired");
    }
}
