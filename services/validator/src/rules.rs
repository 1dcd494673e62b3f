//! Built-in rule kinds: plain functions from an object to the violations
//! they find, each naming the object and the offending field.

use std::collections::BTreeMap;

use portcullis_admission::{image, json};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pods::{Container, containers, pod_spec};

/// A regular expression a label or annotation value must match in full;
/// empty: any value.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// As written, for messages and to write the policy back.
    text: String,
    regex: Option<regex::Regex>,
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(Self { text, regex: None });
        }
        regex::Regex::new(&format!("^(?:{text})$"))
            .map(|r| Self { text: text.clone(), regex: Some(r) })
            .map_err(|e| serde::de::Error::custom(format!("pattern {text:?}: {e}")))
    }
}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl JsonSchema for Pattern {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Pattern".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A regular expression the whole value must match; empty: any value."
        })
    }

    fn inline_schema() -> bool {
        true
    }
}

impl Pattern {
    fn matches(&self, value: &str) -> bool {
        self.regex.as_ref().is_none_or(|r| r.is_match(value))
    }

    fn describe(&self) -> &str {
        &self.text
    }

    /// The pattern as written; empty: any value.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The built-in rules of one policy; every rule set is checked.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rules {
    /// Labels the object must have, with value patterns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub required_labels: BTreeMap<String, Pattern>,
    /// Annotations the object must have, with value patterns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub required_annotations: BTreeMap<String, Pattern>,
    /// Replica bounds for Deployments, StatefulSets, ReplicaSets and `scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Replicas>,
    /// Service restrictions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Services>,
    /// Image restrictions for every container of a pod or pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Images>,
    /// Resource requests and limits every container must set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Pod security restrictions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<PodSecurity>,
}

/// Replica bounds.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Replicas {
    /// Minimum replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    /// Maximum replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
}

/// Service restrictions.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Services {
    /// `LoadBalancer`, `NodePort`, `ExternalName`, `ClusterIP`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden_types: Vec<String>,
    /// Refuse `spec.externalIPs`.
    #[serde(default, rename = "forbidExternalIPs", skip_serializing_if = "std::ops::Not::not")]
    pub forbid_external_ips: bool,
}

/// Image restrictions.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Images {
    /// Registries images may come from (`registry.example.com`,
    /// `docker.io`); empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_registries: Vec<String>,
    /// Refuse `:latest` and images without a tag or digest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbid_latest: bool,
    /// Require a digest (`@sha256:...`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_digest: bool,
}

/// Resources every container (init containers included) must declare.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Resource names that must be in `resources.requests`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// Resource names that must be in `resources.limits`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<String>,
}

/// Pod security restrictions, for Pods and pod templates.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSecurity {
    /// Refuse `securityContext.privileged: true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbid_privileged: bool,
    /// Refuse `hostNetwork`, `hostPID`, `hostIPC`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbid_host_namespaces: bool,
    /// Refuse `hostPath` volumes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbid_host_path: bool,
    /// Capabilities containers may add; others are refused. Absent: no check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_capabilities: Option<Vec<String>>,
    /// Require `runAsNonRoot: true` on each container or on the pod.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_run_as_non_root: bool,
}

const SERVICE_TYPES: [&str; 4] = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];

/// Built-in rules that contradict themselves or name nothing real.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    /// `rules.replicas.min` above `max`.
    #[error("rules.replicas: min {min} is above max {max}")]
    ReplicasRange {
        /// The minimum.
        min: i64,
        /// The maximum.
        max: i64,
    },
    /// `rules.services.forbiddenTypes` names no Service type.
    #[error("rules.services.forbiddenTypes: {0:?} is not a Service type ({SERVICE_TYPES:?})")]
    ServiceType(String),
}

impl Rules {
    /// Whether no built-in rule is configured.
    pub fn is_empty(&self) -> bool {
        self.required_labels.is_empty()
            && self.required_annotations.is_empty()
            && self.replicas.is_none()
            && self.services.is_none()
            && self.images.is_none()
            && self.resources.is_none()
            && self.pod_security.is_none()
    }

    /// Refuses contradictory or meaningless settings.
    pub fn check(&self) -> Result<(), RulesError> {
        if let Some(Replicas { min: Some(min), max: Some(max) }) = self.replicas
            && min > max
        {
            return Err(RulesError::ReplicasRange { min, max });
        }
        if let Some(services) = &self.services
            && let Some(bad) = services.forbidden_types.iter().find(|t| !SERVICE_TYPES.contains(&t.as_str()))
        {
            return Err(RulesError::ServiceType(bad.clone()));
        }
        Ok(())
    }

    /// The kinds these rules can find anything wrong with, or `None` when
    /// they judge every kind (required labels or annotations): what an
    /// audit must list for a policy that selects every resource.
    pub fn kinds(&self) -> Option<std::collections::BTreeSet<&'static str>> {
        if !self.required_labels.is_empty() || !self.required_annotations.is_empty() {
            return None;
        }
        let mut kinds = std::collections::BTreeSet::new();
        if self.replicas.is_some() {
            kinds.extend(REPLICATED_KINDS);
        }
        if self.services.is_some() {
            kinds.insert("Service");
        }
        if self.images.is_some() || self.resources.is_some() || self.pod_security.is_some() {
            kinds.extend(crate::pods::pod_kinds());
        }
        Some(kinds)
    }

    /// Every violation of every rule by `object`, a `kind`, shown to the
    /// user as `what` (`Deployment demo/web`).
    pub fn violations(&self, kind: &str, object: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let mut say = |message: String| out.push(message);
        for (field, required) in [("labels", &self.required_labels), ("annotations", &self.required_annotations)] {
            if required.is_empty() {
                continue;
            }
            let present = json::at(object, &["metadata", field]);
            for (key, pattern) in required {
                match present.and_then(|m| m.get(key)).and_then(Value::as_str) {
                    None => say(format!("{} {key:?} is required", &field[..field.len() - 1])),
                    Some(value) if !pattern.matches(value) => say(format!(
                        "{} {key:?} is {}, which does not match {:?}",
                        &field[..field.len() - 1],
                        quoted(value),
                        pattern.describe()
                    )),
                    Some(_) => {}
                }
            }
        }
        if let Some(bounds) = self.replicas {
            replicas(bounds, kind, object, &mut say);
        }
        if let (Some(services), "Service") = (&self.services, kind) {
            let kind = json::at(object, &["spec", "type"]).and_then(Value::as_str).unwrap_or("ClusterIP");
            if services.forbidden_types.iter().any(|t| t == kind) {
                say(format!("spec.type {kind} is not allowed"));
            }
            let external =
                json::at(object, &["spec", "externalIPs"]).and_then(Value::as_array).is_some_and(|a| !a.is_empty());
            if services.forbid_external_ips && external {
                say("spec.externalIPs is not allowed".into());
            }
        }
        if let Some((prefix, spec)) = pod_spec(kind, object) {
            self.pod_violations(prefix, spec, &mut say);
        }
        out
    }

    fn pod_violations(&self, prefix: &'static str, spec: &Value, say: &mut impl FnMut(String)) {
        let containers = containers(prefix, spec);
        if let Some(rule) = &self.images {
            for c in &containers {
                images(rule, c, say);
            }
        }
        if let Some(rule) = &self.resources {
            for c in containers.iter().filter(|c| c.list != "ephemeralContainers") {
                for (kind, names) in [("requests", &rule.requests), ("limits", &rule.limits)] {
                    for name in names {
                        if json::at(c.value, &["resources", kind, name]).is_none() {
                            say(format!("{c}: resources.{kind}.{name} is required"));
                        }
                    }
                }
            }
        }
        if let Some(rule) = &self.pod_security {
            pod_security(rule, prefix, spec, &containers, say);
        }
    }
}

/// How a message escapes a value read from the object (a label's or an
/// annotation's value, an image that is not a reference): a quote or a line
/// break cannot forge the message's shape, and ESC cannot start a terminal
/// escape sequence. Other characters (other controls included) are kept
/// as they are, as in the API server's own messages. The pushed-down CEL escapes by
/// the same table (`native::builtin::quoted`), one `replace` per entry in
/// this order (the backslash first, so that no escape is escaped again), so
/// that the API server's messages are the webhook's.
pub(crate) const ESCAPES: [(char, &str); 6] =
    [('\\', "\\\\"), ('"', "\\\""), ('\n', "\\n"), ('\r', "\\r"), ('\t', "\\t"), ('\u{1b}', "\\u{1b}")];

/// `value` in double quotes, escaped by [`ESCAPES`].
pub(crate) fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match ESCAPES.iter().find(|(escaped, _)| *escaped == c) {
            Some((_, by)) => out.push_str(by),
            None => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Kinds with `spec.replicas` (default 1) that `replicas` bounds, besides `Scale`.
pub(crate) const REPLICATED_KINDS: [&str; 4] = ["Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"];

fn replicas(bounds: Replicas, kind: &str, object: &Value, say: &mut impl FnMut(String)) {
    let default = match kind {
        "Scale" => 0,
        _ if REPLICATED_KINDS.contains(&kind) => 1,
        _ => return,
    };
    let replicas = json::at(object, &["spec", "replicas"]).and_then(Value::as_i64).unwrap_or(default);
    if let Some(min) = bounds.min.filter(|min| replicas < *min) {
        say(format!("spec.replicas is {replicas}, below the minimum of {min}"));
    }
    if let Some(max) = bounds.max.filter(|max| replicas > *max) {
        say(format!("spec.replicas is {replicas}, above the maximum of {max}"));
    }
}

fn images(rule: &Images, container: &Container<'_>, say: &mut impl FnMut(String)) {
    let Some(text) = container.value.get("image").and_then(Value::as_str) else {
        return;
    };
    let Some(image) = image::parse(text) else {
        say(format!("{container}: image {} is not a valid image reference", quoted(text)));
        return;
    };
    if !rule.allowed_registries.is_empty() && !rule.allowed_registries.iter().any(|r| r == image.registry()) {
        say(format!(
            "{container}: image {text} is not from an allowed registry ({})",
            rule.allowed_registries.join(", ")
        ));
    }
    if rule.forbid_latest {
        match (image.tag(), image.digest()) {
            (Some("latest"), _) => say(format!("{container}: image {text} uses the latest tag")),
            (None, None) => say(format!("{container}: image {text} has no tag (it means latest)")),
            _ => {}
        }
    }
    if rule.require_digest && image.digest().is_none() {
        say(format!("{container}: image {text} is not pinned by digest (@sha256:...)"));
    }
}

fn pod_security(
    rule: &PodSecurity,
    prefix: &str,
    spec: &Value,
    containers: &[Container<'_>],
    say: &mut impl FnMut(String),
) {
    let flag = |v: &Value, path: &[&str]| json::at(v, path).and_then(Value::as_bool);
    if rule.forbid_host_namespaces {
        for field in ["hostNetwork", "hostPID", "hostIPC"] {
            if flag(spec, &[field]) == Some(true) {
                say(format!("{prefix}.{field} is true"));
            }
        }
    }
    if rule.forbid_host_path {
        for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if v.get("hostPath").is_some() {
                let name = v.get("name").and_then(Value::as_str).unwrap_or("?");
                say(format!("{prefix}.volumes[{i}] ({name}): hostPath volumes are not allowed"));
            }
        }
    }
    let pod_non_root = flag(spec, &["securityContext", "runAsNonRoot"]);
    for c in containers {
        if rule.forbid_privileged && flag(c.value, &["securityContext", "privileged"]) == Some(true) {
            say(format!("{c}: securityContext.privileged is true"));
        }
        if let Some(allowed) = &rule.allowed_capabilities {
            let added = json::at(c.value, &["securityContext", "capabilities", "add"]).and_then(Value::as_array);
            for cap in added.into_iter().flatten().filter_map(Value::as_str) {
                if !allowed.iter().any(|a| a == cap) {
                    let allowed = if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") };
                    say(format!("{c}: capability {cap} may not be added (allowed: {allowed})"));
                }
            }
        }
        if rule.require_run_as_non_root {
            let effective = flag(c.value, &["securityContext", "runAsNonRoot"]).or(pod_non_root);
            if effective != Some(true) {
                say(format!("{c}: runAsNonRoot must be true (on the container or in the pod securityContext)"));
            }
        }
    }
}
