//! `InjectorConfig`: the documents that say what to inject, rewrite and
//! default, parsed and checked as a whole before any of it is used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use portcullis_cel::args::CelArgs;
use portcullis_cel::budget::Limits;

use portcullis_admission::documents::{self, DocumentError};
use portcullis_known::params::ParamKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assemble::{Unit, assemble_in_order};
use crate::compile::{self, ConfigPart, check_template};
use crate::images::RewriteRule;
use crate::native::own::CompiledMutation;
use crate::resources::{InjectionTemplateSpec, InjectorConfigSpec};

/// `kind` of the documents (and objects) that configure the injector.
pub const CONFIG_KIND: &str = "InjectorConfig";
/// The default of `--cel-timeout`.
const DEFAULT_CEL_TIMEOUT: Duration = Duration::from_millis(250);

/// `kind` of the documents (and objects) that define one template.
pub const TEMPLATE_KIND: &str = "InjectionTemplate";

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

/// A named set of things to add to a pod: an `InjectionTemplate` object,
/// or an entry of an `InjectorConfig`'s `templates`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Template {
    /// The name pods (in the portcullis.dev/templates annotation) and
    /// defaultTemplates refer to.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Containers appended to the pod's spec.containers. A container the
    /// pod already has (same name) is left as the pod has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::resources::containers")]
    pub containers: Vec<Value>,
    /// Containers inserted, in order, at the front of the pod's
    /// spec.initContainers (native sidecars with restartPolicy: Always
    /// included), so they run before the pod's own init containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::resources::containers")]
    pub init_containers: Vec<Value>,
    /// Volumes appended to the pod's spec.volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::resources::volumes")]
    pub volumes: Vec<Value>,
    /// Mounts added to each of the pod's own containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::resources::volume_mounts")]
    pub volume_mounts: Vec<Value>,
    /// Secret names appended to the pod's spec.imagePullSecrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// Leave pods with hostNetwork: true alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_host_network: bool,
}

impl Template {
    /// The template an `InjectionTemplate` called `name` defines.
    pub fn named(name: &str, spec: &InjectionTemplateSpec) -> Self {
        let InjectionTemplateSpec {
            containers,
            init_containers,
            volumes,
            volume_mounts,
            image_pull_secrets,
            skip_host_network,
        } = spec.clone();
        Self {
            name: name.to_owned(),
            containers,
            init_containers,
            volumes,
            volume_mounts,
            image_pull_secrets,
            skip_host_network,
        }
    }
}

/// The `imagePullPolicy` to force on every container.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    /// imagePullPolicy forced on every container, init container and
    /// ephemeral container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
    /// Labels added when the pod does not have them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added when the pod does not have them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Forced value of the pod's spec.enableServiceLinks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_service_links: Option<bool>,
}

impl Defaults {
    /// Whether no default is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
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
    /// CEL mutations, in order.
    pub mutations: Vec<CompiledMutation>,
}

/// The runtime bounds of the CEL mutations (`--cel-*`): the injector's
/// settings, not part of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelBounds {
    /// The cost limits.
    pub limits: Limits,
    /// The wall time all of one request's CEL may take.
    pub timeout: Duration,
}

impl Default for CelBounds {
    fn default() -> Self {
        Self { limits: Limits::default(), timeout: DEFAULT_CEL_TIMEOUT }
    }
}

impl CelBounds {
    /// The bounds the flags set.
    pub fn from_args(args: &CelArgs) -> Self {
        Self { limits: args.limits(), timeout: args.cel_timeout }
    }
}

impl Config {
    /// The template called `name`.
    pub fn template(&self, name: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.name == name)
    }

    /// The kinds of parameter objects the CEL mutations read, for the
    /// watch that keeps them in memory.
    pub fn param_kinds(&self) -> BTreeSet<ParamKind> {
        self.mutations.iter().filter_map(|m| m.spec.param_kind.clone()).collect()
    }

    /// Parses and merges every document of every `(file, bytes)` source:
    /// `InjectorConfig` and `InjectionTemplate` documents, as `kubectl
    /// apply` takes them.
    ///
    /// Templates, default templates and rewrite rules are concatenated in
    /// document order; each default may be set by one document only. Any
    /// invalid document or conflict refuses the whole set: the files are
    /// one unit, and the last good set stays in force.
    pub fn from_sources<'a>(sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>) -> Result<Self, ConfigError> {
        let mut parts = Vec::new();
        for raw in documents::parse_kinds(sources, &[CONFIG_KIND, TEMPLATE_KIND])? {
            let origin = raw.origin.clone();
            let part = if raw.kind == TEMPLATE_KIND {
                let document = raw.into_document::<InjectionTemplateSpec>()?;
                let template = Template::named(&document.metadata.name, &document.spec);
                check_template(&template).map_err(|e| origin.invalid(e))?;
                ConfigPart { templates: vec![template], ..ConfigPart::default() }
            } else {
                let document = raw.into_document::<InjectorConfigSpec>()?;
                compile::part(&document.spec).map_err(|e| origin.invalid(e))?
            };
            parts.push((origin, part));
        }
        let units =
            parts.iter().map(|(origin, part)| Unit::labelled((), origin.to_string(), &[], Some(part))).collect();
        let (config, refused) = assemble_in_order(units);
        match refused.into_iter().next() {
            None => Ok(config),
            Some(((), message)) => Err(ConfigError::Conflict(message)),
        }
    }
}

/// The `name` of a container, volume or mount (checked to exist at load).
pub fn object_name(value: &Value) -> &str {
    value.get("name").and_then(Value::as_str).unwrap_or_default()
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

    const BOTH_KINDS: &str = r#"
apiVersion: portcullis.dev/v1alpha1
kind: InjectionTemplate
metadata: {name: proxy, labels: {team: platform}}
spec:
  initContainers: [{name: proxy, image: envoyproxy/envoy:v1.31.0, restartPolicy: Always}]
  skipHostNetwork: true
---
apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
metadata: {name: defaults}
spec:
  templates: [{name: log, containers: [{name: shipper, image: fluent/fluent-bit:3.1}]}]
  defaultTemplates: [proxy, log]
"#;

    #[test]
    fn files_mix_templates_and_configs() {
        let config = load(BOTH_KINDS).expect("valid");
        let proxy = config.template("proxy").expect("the InjectionTemplate's template");
        assert!(proxy.skip_host_network);
        assert_eq!(object_name(&proxy.init_containers[0]), "proxy");
        assert!(config.template("log").is_some());
        assert_eq!(config.default_templates, ["proxy", "log"]);
    }

    #[rstest]
    #[case::template_without_name(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectionTemplate\nspec: {containers: [{name: c, image: x}]}\n",
        "config.yaml: document 1: a template has an empty name"
    )]
    #[case::template_unknown_field(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectionTemplate\nmetadata: {name: t}\nspec: {name: t}\n",
        "unknown field `name`"
    )]
    #[case::template_without_image(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectionTemplate\nmetadata: {name: t}\nspec: {containers: [{name: c}]}\n",
        "config.yaml: document 1: template \"t\": containers[0] (c) has no image"
    )]
    #[case::template_object_and_inline(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectionTemplate\nmetadata: {name: t}\nspec: {}\n---\napiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nspec: {templates: [{name: t}]}\n",
        "template \"t\" is defined twice (in config.yaml#1 and in config.yaml#2)"
    )]
    fn refuses_bad_template_documents(#[case] text: &str, #[case] expected: &str) {
        let said = portcullis_telemetry::error_chain(&load(text).expect_err("must be refused"));
        assert!(said.contains(expected), "{said}");
    }

    #[test]
    fn the_default_cel_bounds_are_the_flags_defaults() {
        #[derive(clap::Parser)]
        struct Flags {
            #[clap(flatten)]
            cel: CelArgs,
        }
        let flags = <Flags as clap::Parser>::parse_from(["injector"]);
        assert_eq!(CelBounds::from_args(&flags.cel), CelBounds::default());
    }

    #[test]
    fn empty_documents_are_skipped() {
        let config = load("---\n---\n").expect("valid");
        assert_eq!(config, Config::default());
    }
}
