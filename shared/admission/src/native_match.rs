//! Which requests a native admission policy (ValidatingAdmissionPolicy,
//! MutatingAdmissionPolicy) applies to, as the API server decides it: the policy's `matchConstraints` and, when the binding
//! has them, the binding's `matchResources`, each with its resource rules
//! (operations, scope, resource names per rule), excluded rules and
//! selectors. Unlike a `ValidatorPolicy`'s `match`, no namespace is left
//! out by default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations};
use serde_json::{Value, json};

use crate::selector::LabelSelector;
use crate::{Request, json, operation_name};

/// The cluster's namespaces, as far as they are known: their labels, for
/// `namespaceSelector`, and the objects, for CEL's `namespaceObject`.
pub trait KnownNamespaces: Send + Sync {
    /// The labels of namespace `name`, or `None` when it is not known.
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>>;

    /// Namespace `name` as CEL's `namespaceObject` is bound to it
    /// ([`namespace_object`]), or `None` when it is not known. Shared: a
    /// source reduces each namespace once, not once per request.
    fn object(&self, name: &str) -> Option<Arc<Value>>;

    /// Waits, at most `within`, for namespace `name` to be known: for a
    /// request that reached the webhook before its source learned of the
    /// namespace (created just before, on a watch that has not delivered
    /// it yet; the API server would look it up). `true` once known. The
    /// default, for sources that learn of no namespace beyond those they
    /// hold, answers at once.
    fn arrival<'a>(&'a self, name: &'a str, within: Duration) -> BoxFuture<'a, bool> {
        let _ = within;
        Box::pin(std::future::ready(self.object(name).is_some()))
    }
}

/// Namespaces known by their labels alone, a function of the name (tests
/// and fuzzing): `namespaceObject` is the name and the labels, no spec and
/// no status.
#[derive(Debug, Clone, Copy)]
pub struct NamespacesByLabels<F>(pub F);

impl<F: Fn(&str) -> Option<BTreeMap<String, String>> + Send + Sync> KnownNamespaces for NamespacesByLabels<F> {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        (self.0)(name)
    }

    fn object(&self, name: &str) -> Option<Arc<Value>> {
        Some(Arc::new(json!({"metadata": {"name": name, "labels": self.labels(name)?}})))
    }
}

/// A namespace that has not been seen (yet).
#[derive(Debug, thiserror::Error)]
pub enum UnknownNamespace {
    /// Its labels were needed.
    #[error("the labels of namespace {0} are not known, so namespaceSelector cannot be evaluated")]
    Labels(String),
    /// The object was needed.
    #[error("namespace {0} is not known, so namespaceObject cannot be bound")]
    Object(String),
}

/// What CEL's `namespaceObject` is for `req`, as the API server binds it:
/// `None` (`null`) for a cluster-scoped object and for a Namespace itself,
/// else its namespace ([`namespace_object`]); `Err` when that is not known.
pub fn namespace_object_for(
    namespaces: &dyn KnownNamespaces,
    req: &Request,
) -> Result<Option<Arc<Value>>, UnknownNamespace> {
    let kind = &req.inner.kind;
    // The API server gives a Namespace its own name as its namespace, and
    // unsets it here.
    let is_namespace = kind.group.is_empty() && kind.version == "v1" && kind.kind == "Namespace";
    match req.inner.namespace.as_deref().filter(|n| !n.is_empty() && !is_namespace) {
        None => Ok(None),
        Some(name) => namespaces.object(name).map(Some).ok_or_else(|| UnknownNamespace::Object(name.to_owned())),
    }
}

/// `namespace` (a Namespace object) reduced to what the API server binds to
/// `namespaceObject`: its `spec`, its `status`, and of its metadata the
/// name, generateName, namespace, uid, resourceVersion, generation,
/// creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
/// labels, annotations and finalizers (no managedFields, no owners, no
/// `apiVersion` or `kind`).
pub fn namespace_object(namespace: &Value) -> Value {
    const METADATA: [&str; 12] = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ];
    let mut reduced = serde_json::Map::new();
    if let Some(metadata) = namespace.get("metadata").and_then(Value::as_object) {
        let kept = METADATA.iter().filter_map(|&k| Some((k.to_owned(), metadata.get(k)?.clone())));
        reduced.insert("metadata".to_owned(), Value::Object(kept.collect()));
    }
    for part in ["spec", "status"] {
        if let Some(value) = namespace.get(part) {
            reduced.insert(part.to_owned(), value.clone());
        }
    }
    Value::Object(reduced)
}

/// The namespaces declared among manifests, for `namespaceSelector` and
/// `namespaceObject` offline (`check`, `mutate`).
#[derive(Debug, Default)]
pub struct ManifestNamespaces(BTreeMap<String, Arc<Value>>);

impl ManifestNamespaces {
    /// No namespace known.
    pub const EMPTY: Self = Self(BTreeMap::new());

    /// The `Namespace` objects (`v1`) among `documents`, reduced as
    /// [`namespace_object`] reduces them, each labelled
    /// `kubernetes.io/metadata.name` and, unless it says otherwise, with
    /// the `kubernetes` finalizer and the `Active` phase, as the API server
    /// stores every new namespace.
    pub fn from_documents<'a>(documents: impl IntoIterator<Item = &'a Value>) -> Self {
        let namespaces = documents
            .into_iter()
            .filter(|o| o["kind"] == "Namespace" && o["apiVersion"] == "v1")
            .filter_map(|o| {
                let name = o.pointer("/metadata/name")?.as_str()?.to_owned();
                let mut object = namespace_object(o);
                // What the API server stores for a new namespace: the
                // `kubernetes` finalizer, added when missing, and a phase,
                // `Active` unless the document has one.
                let fields = object.as_object_mut()?;
                let finalizers = object_at(fields, "spec")?.entry("finalizers").or_insert_with(|| json!([]));
                if let Some(finalizers) = finalizers.as_array_mut().filter(|f| !f.contains(&json!("kubernetes"))) {
                    finalizers.push(json!("kubernetes"));
                }
                object_at(fields, "status")?.entry("phase").or_insert_with(|| json!("Active"));
                let labels = object_at(object_at(fields, "metadata")?, "labels")?;
                labels.insert("kubernetes.io/metadata.name".to_owned(), json!(name));
                Some((name, Arc::new(object)))
            })
            .collect();
        Self(namespaces)
    }
}

/// The object at `key` of `fields`, made an empty one when it is missing
/// or not an object (`null`); always `Some`.
fn object_at<'v>(
    fields: &'v mut serde_json::Map<String, Value>,
    key: &str,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let entry = fields.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

impl KnownNamespaces for ManifestNamespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let labels = self.0.get(name)?.pointer("/metadata/labels")?.as_object()?;
        Some(labels.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
    }

    fn object(&self, name: &str) -> Option<Arc<Value>> {
        self.0.get(name).cloned()
    }
}

/// The labels of `object` (none when it is `None` or has none), by key.
pub fn label_lookup<'a>(object: Option<&'a Value>) -> impl Fn(&str) -> Option<&'a str> + 'a {
    let labels = object.and_then(|o| json::at(o, &["metadata", "labels"]));
    move |key| labels.and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// The admission policy resources no admission policy judges (the API
/// server's `isPolicyResource`).
const POLICY_RESOURCES: [&str; 4] = [
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// One resource rule of a native policy or binding.
#[derive(Debug, Clone)]
pub struct NativeRule {
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    operations: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    scope: Scope,
}

/// A rule's `scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    All,
    Cluster,
    Namespaced,
}

/// One `MatchResources`: the policy's constraints or a binding's.
#[derive(Debug, Clone, Default)]
pub struct Constraints {
    rules: Vec<NativeRule>,
    excluded: Vec<NativeRule>,
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
    /// `matchPolicy: Equivalent` (the default): a rule matches the same
    /// resource in any version.
    equivalent: bool,
}

/// The native policy's constraints and, when the binding narrows them,
/// the binding's.
#[derive(Debug, Clone)]
pub struct NativeMatch {
    /// The binding's name, as the API server's messages say it.
    pub binding: String,
    policy: Constraints,
    binding_constraints: Option<Constraints>,
}

/// A `matchResources` field the API server would refuse.
#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    /// A selector that does not parse.
    #[error("{0}: {1}")]
    Selector(&'static str, String),
    /// An unknown `scope` or `matchPolicy`.
    #[error("{field}: unsupported value {value:?}")]
    Unsupported {
        /// The field.
        field: &'static str,
        /// What it said.
        value: String,
    },
    /// `resourceRules` missing from the policy's constraints.
    #[error("spec.matchConstraints.resourceRules: Required value")]
    NoRules,
}

impl NativeMatch {
    /// The match of a policy's `matchConstraints` with a binding (`binding`)
    /// and its `matchResources`.
    pub fn new(
        constraints: Option<&MatchResources>,
        binding: &str,
        narrowed: Option<&MatchResources>,
    ) -> Result<Self, MatchError> {
        let policy = Constraints::from_spec(constraints.ok_or(MatchError::NoRules)?)?;
        if policy.rules.is_empty() {
            return Err(MatchError::NoRules);
        }
        let binding_constraints = narrowed.map(Constraints::from_spec).transpose()?;
        Ok(Self { binding: binding.to_owned(), policy, binding_constraints })
    }

    /// Whether deciding if the policy applies reads the namespaces (a
    /// `namespaceSelector` on the policy or the binding).
    pub fn reads_namespaces(&self) -> bool {
        std::iter::once(&self.policy)
            .chain(&self.binding_constraints)
            .any(|c| c.namespace_selector != LabelSelector::default())
    }

    /// Whether the policy, through this binding, judges `req`; `Err` when
    /// the namespace's labels are needed and not known.
    pub fn applies(&self, namespaces: &dyn KnownNamespaces, req: &Request) -> Result<bool, UnknownNamespace> {
        let resource = &req.inner.resource;
        // The API server never runs a policy on the policies themselves.
        if resource.group == "admissionregistration.k8s.io" && POLICY_RESOURCES.contains(&resource.resource.as_str()) {
            return Ok(false);
        }
        Ok(self.policy.matches(namespaces, req)?
            && self.binding_constraints.as_ref().map_or(Ok(true), |b| b.matches(namespaces, req))?)
    }

    /// Whether the stored objects of `group/version` `plural` can be
    /// judged (the audit's question: a create of one of them would match
    /// the rules).
    pub fn selects_resource(&self, group: &str, version: &str, plural: &str) -> bool {
        if group == "admissionregistration.k8s.io" && POLICY_RESOURCES.contains(&plural) {
            return false;
        }
        let selects = |c: &Constraints| {
            // An excluded rule with resourceNames leaves the rest of the resource in.
            let excludes_all =
                |r: &NativeRule| r.resource_names.is_empty() && r.selects(c.equivalent, group, version, plural);
            (c.rules.is_empty() || c.rules.iter().any(|r| r.selects(c.equivalent, group, version, plural)))
                && !c.excluded.iter().any(excludes_all)
        };
        selects(&self.policy) && self.binding_constraints.as_ref().is_none_or(selects)
    }
}

impl Constraints {
    fn from_spec(spec: &MatchResources) -> Result<Self, MatchError> {
        let selector =
            |which: &'static str, s: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
                let Some(s) = s else { return Ok(LabelSelector::default()) };
                let parsed: LabelSelector = serde_json::to_value(s)
                    .and_then(serde_json::from_value)
                    .map_err(|e| MatchError::Selector(which, e.to_string()))?;
                parsed.check().map_err(|e| MatchError::Selector(which, e.to_string()))?;
                Ok(parsed)
            };
        let equivalent = match spec.match_policy.as_deref() {
            None | Some("Equivalent") => true,
            Some("Exact") => false,
            Some(other) => return Err(MatchError::Unsupported { field: "matchPolicy", value: other.to_owned() }),
        };
        let rules = |list: &Option<Vec<NamedRuleWithOperations>>| {
            list.iter().flatten().map(NativeRule::from_spec).collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            rules: rules(&spec.resource_rules)?,
            excluded: rules(&spec.exclude_resource_rules)?,
            namespace_selector: selector("namespaceSelector", &spec.namespace_selector)?,
            object_selector: selector("objectSelector", &spec.object_selector)?,
            equivalent,
        })
    }

    /// The API server's matcher: namespace selector, object selector,
    /// excluded rules, then the rules (none: every request); a namespace
    /// whose labels are not known is an error only for a request the rest
    /// matches, as the API server postpones its lookup error.
    fn matches(&self, namespaces: &dyn KnownNamespaces, req: &Request) -> Result<bool, UnknownNamespace> {
        let namespace = req.inner.namespace.as_deref().unwrap_or_default();
        let is_namespace = is_namespace_resource(req);
        let mut unknown = None;
        if (is_namespace || !namespace.is_empty()) && self.namespace_selector != LabelSelector::default() {
            let matched = if is_namespace {
                let object = req.object.as_ref().or(req.old_object.as_ref());
                Some(self.namespace_selector.matches(label_lookup(object)))
            } else {
                match namespaces.labels(namespace) {
                    Some(known) => Some(self.namespace_selector.matches(|k| known.get(k).map(String::as_str))),
                    None => {
                        unknown = Some(UnknownNamespace::Labels(namespace.to_owned()));
                        None
                    }
                }
            };
            if matched == Some(false) {
                return Ok(false);
            }
        }
        if self.object_selector != LabelSelector::default() {
            let on = |o: Option<&Value>| o.is_some() && self.object_selector.matches(label_lookup(o));
            if !on(req.object.as_ref()) && !on(req.old_object.as_ref()) {
                return Ok(false);
            }
        }
        if self.excluded.iter().any(|r| r.matches(self.equivalent, req)) {
            return Ok(false);
        }
        if !(self.rules.is_empty() || self.rules.iter().any(|r| r.matches(self.equivalent, req))) {
            return Ok(false);
        }
        unknown.map_or(Ok(true), Err)
    }
}

impl NativeRule {
    fn from_spec(spec: &NamedRuleWithOperations) -> Result<Self, MatchError> {
        let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
        let scope = match spec.scope.as_deref() {
            None | Some("*") => Scope::All,
            Some("Cluster") => Scope::Cluster,
            Some("Namespaced") => Scope::Namespaced,
            Some(other) => return Err(MatchError::Unsupported { field: "scope", value: other.to_owned() }),
        };
        Ok(Self {
            api_groups: list(&spec.api_groups),
            api_versions: list(&spec.api_versions),
            operations: list(&spec.operations),
            resources: list(&spec.resources),
            resource_names: list(&spec.resource_names),
            scope,
        })
    }

    /// `rules.Matcher` of the API server, then `resourceNames`.
    fn matches(&self, equivalent: bool, req: &Request) -> bool {
        let inner = &req.inner;
        let namespace = inner.namespace.as_deref().unwrap_or_default();
        let is_namespace = is_namespace_resource(req);
        let scope_ok = match self.scope {
            Scope::All => true,
            Scope::Namespaced => !is_namespace && !namespace.is_empty(),
            Scope::Cluster => is_namespace || namespace.is_empty(),
        };
        let op = operation_name(&inner.operation);
        let op_ok = self.operations.iter().any(|o| o == "*" || o == op);
        let sub = inner.sub_resource.as_deref().unwrap_or_default();
        let version_ok = equivalent || any(&self.api_versions, &inner.resource.version);
        scope_ok
            && op_ok
            && any(&self.api_groups, &inner.resource.group)
            && version_ok
            && self.resource_ok(&inner.resource.resource, sub)
            && (self.resource_names.is_empty() || self.resource_names.contains(&inner.name))
    }

    /// Whether the rule selects (some of) the objects of a resource, with
    /// no subresource, as the audit lists and judges them (as creates):
    /// which names, matching decides object by object.
    fn selects(&self, equivalent: bool, group: &str, version: &str, plural: &str) -> bool {
        let creates = self.operations.iter().any(|o| matches!(o.as_str(), "*" | "CREATE"));
        creates
            && any(&self.api_groups, group)
            && (equivalent || any(&self.api_versions, version))
            && self.resource_ok(plural, "")
    }

    fn resource_ok(&self, resource: &str, sub: &str) -> bool {
        self.resources.iter().any(|r| {
            let (res, rsub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == resource) && (rsub == "*" || rsub == sub)
        })
    }
}

fn any(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// A request for a Namespace object: cluster-scoped, though the API server
/// sets its namespace to its name.
fn is_namespace_resource(req: &Request) -> bool {
    let resource = &req.inner.resource;
    resource.resource == "namespaces" && resource.group.is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(object: Value) -> Request {
        let review = crate::manifest::as_review(object).expect("a review");
        crate::decode(&serde_json::to_vec(&review).expect("json")).expect("a request")
    }

    #[test]
    fn namespace_object_keeps_what_the_api_server_keeps() {
        let stored = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "uid": "u", "labels": {"env": "prod"},
                         "managedFields": [{"manager": "kubectl"}], "ownerReferences": []},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
        });
        assert_eq!(
            namespace_object(&stored),
            json!({"metadata": {"name": "shop", "uid": "u", "labels": {"env": "prod"}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
    }

    #[test]
    fn a_manifest_namespace_is_what_the_api_server_would_store() {
        let documents = [json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})];
        let namespaces = ManifestNamespaces::from_documents(&documents);
        assert_eq!(
            namespaces.object("shop").as_deref(),
            Some(&json!({"metadata": {"name": "shop", "labels": {"kubernetes.io/metadata.name": "shop"}},
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}))
        );
        assert_eq!(namespaces.labels("shop").map(|l| l.len()), Some(1));
        let sparse = [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab", "labels": null}, "spec": null,
                             "status": {"phase": "Terminating"}}),
        ];
        let sparse = ManifestNamespaces::from_documents(&sparse).object("lab").expect("kept");
        assert_eq!(sparse["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(sparse["status"], json!({"phase": "Terminating"}));
        assert_eq!(sparse["metadata"]["labels"], json!({"kubernetes.io/metadata.name": "lab"}));
    }

    #[test]
    fn namespace_object_is_null_for_cluster_scoped_objects_and_namespaces() {
        let documents = [json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})];
        let namespaces = ManifestNamespaces::from_documents(&documents);
        let cm =
            |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}});
        let found = namespace_object_for(&namespaces, &request(cm("shop"))).expect("known");
        assert_eq!(found.as_ref().and_then(|n| n.pointer("/metadata/name")), Some(&json!("shop")));
        let unknown = namespace_object_for(&namespaces, &request(cm("lab")));
        assert!(matches!(unknown, Err(UnknownNamespace::Object(name)) if name == "lab"));
        let role =
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        assert!(namespace_object_for(&namespaces, &request(role)).expect("cluster-scoped").is_none());
        let itself = request(documents[0].clone());
        assert!(namespace_object_for(&namespaces, &itself).expect("a namespace").is_none());
    }
}
