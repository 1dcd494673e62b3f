//! `InjectorConfig`: the documents that say what to inject, rewrite and
//! default, parsed and checked as a whole before any of it is used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use portcullis_admission::documents::{self, DocumentError};
use serde::Deserialize;
use serde_json::Value;

use crate::images::RewriteRule;

const KIND: &str = "InjectorConfig";

/// Why a configuration was refused. The message names the file, the
/// document and the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A document does not parse or is not valid on its own.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// The documents contradict each other or the whole is unusable.
    #[error("{0}")]
    Conflict(String),
}

/// One `InjectorConfig` document as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    templates: Vec<Template>,
    #[serde(default)]
    default_templates: Vec<String>,
    #[serde(default)]
    image_rewrites: Vec<RewriteRule>,
    #[serde(default)]
    defaults: Defaults,
}

/// A named set of things to add to a pod.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Template {
    /// The name pods and `defaultTemplates` refer to.
    pub name: String,
    /// Containers appended to `spec.containers`.
    #[serde(default)]
    pub containers: Vec<Value>,
    /// Containers inserted, in order, at the front of `spec.initContainers`
    /// (native sidecars with `restartPolicy: Always` included), so they run
    /// before the pod's own init containers.
    #[serde(default)]
    pub init_containers: Vec<Value>,
    /// Volumes appended to `spec.volumes`.
    #[serde(default)]
    pub volumes: Vec<Value>,
    /// Mounts added to each of the pod's own `spec.containers`.
    #[serde(default)]
    pub volume_mounts: Vec<Value>,
    /// Secret names appended to `spec.imagePullSecrets`.
    #[serde(default)]
    pub image_pull_secrets: Vec<String>,
    /// Leave `hostNetwork: true` pods alone.
    #[serde(default)]
    pub skip_host_network: bool,
}

/// The `imagePullPolicy` to force on every container.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum PullPolicy {
    /// Always pull (what the AlwaysPullImages admission plugin enforces).
    Always,
    /// Pull when absent from the node.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The value as the Pod API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// Defaults applied to every injected pod.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    /// Forced on every container, init container and ephemeral container.
    pub image_pull_policy: Option<PullPolicy>,
    /// Labels added when the pod does not have them.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations added when the pod does not have them.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Forced value of `spec.enableServiceLinks`.
    pub enable_service_links: Option<bool>,
}

/// The merged, checked configuration the injector runs with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// Templates in the order they were declared.
    pub templates: Vec<Template>,
    /// Templates applied to pods without the templates annotation.
    pub default_templates: Vec<String>,
    /// Image rewrite rules; the first match wins.
    pub image_rewrites: Vec<RewriteRule>,
    /// Defaults.
    pub defaults: Defaults,
}

impl Config {
    /// The template called `name`.
    pub fn template(&self, name: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.name == name)
    }

    /// Parses and merges every document of every `(file, bytes)` source.
    ///
    /// Templates, default templates and rewrite rules are concatenated in
    /// order; each default may be set by one document only.
    pub fn from_sources<'a>(sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>) -> Result<Self, ConfigError> {
        let mut config = Config::default();
        let mut seen_defaults: BTreeMap<&'static str, String> = BTreeMap::new();
        for (origin, document) in documents::parse::<Spec>(sources, KIND)? {
            let spec = document.spec;
            for template in &spec.templates {
                check_template(template).map_err(|m| origin.invalid(m))?;
            }
            for rule in &spec.image_rewrites {
                rule.check().map_err(|m| origin.invalid(m))?;
            }
            merge_defaults(&mut config.defaults, spec.defaults, &mut seen_defaults, &origin.to_string())?;
            config.templates.extend(spec.templates);
            config.default_templates.extend(spec.default_templates);
            config.image_rewrites.extend(spec.image_rewrites);
        }
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let mut names = BTreeSet::new();
        let mut containers = BTreeMap::new();
        let mut volumes = BTreeMap::new();
        for t in &self.templates {
            if !names.insert(t.name.as_str()) {
                return Err(ConfigError::Conflict(format!("template {:?} is defined twice", t.name)));
            }
            for c in t.containers.iter().chain(&t.init_containers) {
                let name = object_name(c);
                if let Some(other) = containers.insert(name, t.name.as_str()) {
                    return Err(ConfigError::Conflict(format!(
                        "container {name:?} is injected by both template {other:?} and template {:?}",
                        t.name
                    )));
                }
            }
            for v in &t.volumes {
                let name = object_name(v);
                if let Some(other) = volumes.insert(name, t.name.as_str())
                    && other != t.name
                {
                    return Err(ConfigError::Conflict(format!(
                        "volume {name:?} is injected by both template {other:?} and template {:?}",
                        t.name
                    )));
                }
            }
        }
        for name in &self.default_templates {
            if !names.contains(name.as_str()) {
                return Err(ConfigError::Conflict(format!(
                    "defaultTemplates names {name:?}, which no document defines"
                )));
            }
        }
        Ok(())
    }
}

/// The `name` of a container, volume or mount (checked to exist at load).
pub fn object_name(value: &Value) -> &str {
    value.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// Why a template was refused.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// No name.
    #[error("a template has an empty name")]
    NoName,
    /// An entry that is not a Kubernetes object of its kind.
    #[error("template {template:?}: {field}[{index}]")]
    Shape {
        /// The template.
        template: String,
        /// `containers`, `initContainers`, `volumes`, `volumeMounts`.
        field: &'static str,
        /// The entry's index.
        index: usize,
        /// What the Kubernetes type said.
        #[source]
        error: serde_json::Error,
    },
    /// A container without an image.
    #[error("template {template:?}: {field}[{index}] ({container}) has no image")]
    NoImage {
        /// The template.
        template: String,
        /// `containers` or `initContainers`.
        field: &'static str,
        /// The entry's index.
        index: usize,
        /// The container's name.
        container: String,
    },
    /// A container, volume or mount without a name.
    #[error("template {0:?}: every container, volume and volume mount needs a name")]
    Unnamed(String),
}

fn check_template(t: &Template) -> Result<(), TemplateError> {
    use k8s_openapi::api::core::v1::{Container, Volume, VolumeMount};
    fn parse<T: serde::de::DeserializeOwned>(
        t: &Template,
        field: &'static str,
        index: usize,
        value: &Value,
    ) -> Result<T, TemplateError> {
        T::deserialize(value).map_err(|error| TemplateError::Shape { template: t.name.clone(), field, index, error })
    }
    if t.name.trim().is_empty() {
        return Err(TemplateError::NoName);
    }
    for (field, containers) in [("containers", &t.containers), ("initContainers", &t.init_containers)] {
        for (index, c) in containers.iter().enumerate() {
            let c: Container = parse(t, field, index, c)?;
            if c.image.as_deref().is_none_or(str::is_empty) {
                return Err(TemplateError::NoImage { template: t.name.clone(), field, index, container: c.name });
            }
        }
    }
    for (index, v) in t.volumes.iter().enumerate() {
        let _: Volume = parse(t, "volumes", index, v)?;
    }
    for (index, m) in t.volume_mounts.iter().enumerate() {
        let _: VolumeMount = parse(t, "volumeMounts", index, m)?;
    }
    let named = t.containers.iter().chain(&t.init_containers).chain(&t.volumes).chain(&t.volume_mounts);
    if named.into_iter().any(|v| object_name(v).is_empty()) {
        return Err(TemplateError::Unnamed(t.name.clone()));
    }
    Ok(())
}

fn merge_defaults(
    into: &mut Defaults,
    from: Defaults,
    seen: &mut BTreeMap<&'static str, String>,
    here: &str,
) -> Result<(), ConfigError> {
    let mut claim = |field: &'static str| match seen.insert(field, here.to_owned()) {
        Some(first) => Err(ConfigError::Conflict(format!("defaults.{field} is set in both {first} and {here}"))),
        None => Ok(()),
    };
    if let Some(policy) = from.image_pull_policy {
        claim("imagePullPolicy")?;
        into.image_pull_policy = Some(policy);
    }
    if let Some(links) = from.enable_service_links {
        claim("enableServiceLinks")?;
        into.enable_service_links = Some(links);
    }
    for (key, value) in from.labels {
        if into.labels.insert(key.clone(), value).is_some() {
            return Err(ConfigError::Conflict(format!("defaults.labels.{key} is set twice (again in {here})")));
        }
    }
    for (key, value) in from.annotations {
        if into.annotations.insert(key.clone(), value).is_some() {
            return Err(ConfigError::Conflict(format!("defaults.annotations.{key} is set twice (again in {here})")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_sources([(Path::new("config.yaml"), text.as_bytes())])
    }

    const GOOD: &str = r#"
apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
spec:
  templates:
    - name: proxy
      containers: [{name: proxy, image: envoyproxy/envoy:v1.31.0}]
  defaultTemplates: [proxy]
---
apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
spec:
  imageRewrites: [{prefix: docker.io/, replacement: mirror.example.com/hub/}]
  defaults: {imagePullPolicy: Always, labels: {team: unknown}}
"#;

    #[test]
    fn merges_documents_in_order() {
        let config = load(GOOD).expect("valid");
        assert_eq!(config.templates.len(), 1);
        assert_eq!(config.default_templates, ["proxy"]);
        assert_eq!(config.image_rewrites.len(), 1);
        assert_eq!(config.defaults.image_pull_policy, Some(PullPolicy::Always));
    }

    #[rstest]
    #[case::wrong_kind("apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\n", "expected apiVersion")]
    #[case::unknown_field(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {templatez: []}\n",
        "unknown field `templatez`"
    )]
    #[case::not_yaml("apiVersion: [", "document 1")]
    #[case::missing_default(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {defaultTemplates: [nope]}\n",
        "defaultTemplates names \"nope\""
    )]
    #[case::container_without_image(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {templates: [{name: t, containers: [{name: c}]}]}\n",
        "containers[0] (c) has no image"
    )]
    #[case::duplicate_template(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {templates: [{name: t}, {name: t}]}\n",
        "template \"t\" is defined twice"
    )]
    #[case::same_container_twice(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {templates: [{name: a, containers: [{name: c, image: x}]}, {name: b, containers: [{name: c, image: y}]}]}\n",
        "container \"c\" is injected by both"
    )]
    #[case::bad_rule(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {imageRewrites: [{prefix: '', replacement: x}]}\n",
        "prefix"
    )]
    #[case::defaults_twice(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {defaults: {imagePullPolicy: Always}}\n---\napiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {defaults: {imagePullPolicy: Never}}\n",
        "defaults.imagePullPolicy is set in both"
    )]
    fn refuses_bad_configs_with_a_clear_message(#[case] text: &str, #[case] expected: &str) {
        let err = load(text).expect_err("must be refused");
        let said = portcullis_telemetry::error_chain(&err);
        assert!(said.contains(expected), "{said}");
    }

    #[test]
    fn empty_documents_are_skipped() {
        let config = load("---\n---\n").expect("valid");
        assert_eq!(config, Config::default());
    }
}
