//! One object (or file document) checked on its own: an `InjectionTemplate`
//! becomes a [`Template`], an `InjectorConfig` a [`ConfigPart`]. What
//! several of them say together is checked by [`Config::assemble`]
//! (`crate::assemble`). Files and API objects go through the same code.
//!
//! [`Config::assemble`]: crate::config::Config::assemble

use k8s_openapi::api::core::v1::{Container, Volume, VolumeMount};
use portcullis_resources::Refusal;
use serde_json::Value;

use crate::config::{Defaults, Template, object_name};
use crate::images::{RewriteError, RewriteRule};
use crate::resources::{InjectionTemplateSpec, InjectorConfigSpec};

/// The `Ready=False` reason of an object that is not valid on its own.
pub const INVALID: &str = "Invalid";

/// What one `InjectorConfig` contributes, each part valid on its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigPart {
    /// Its inline templates, in order.
    pub templates: Vec<Template>,
    /// The templates it names as default.
    pub default_templates: Vec<String>,
    /// Its image rewrite rules, in order.
    pub image_rewrites: Vec<RewriteRule>,
    /// The defaults it sets.
    pub defaults: Defaults,
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

/// Why an `InjectorConfig` was refused on its own.
#[derive(Debug, thiserror::Error)]
pub enum PartError {
    /// One of its templates.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// One of its image rewrite rules.
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
}

/// The template an `InjectionTemplate` called `name` defines, or why it
/// cannot be used (reason [`INVALID`], the message names the field).
pub fn compile_template(name: &str, spec: &InjectionTemplateSpec) -> Result<Template, Refusal> {
    let template = Template::named(name, spec);
    check_template(&template).map_err(|e| invalid(&e))?;
    Ok(template)
}

/// What one `InjectorConfig` contributes, or why it cannot be used (reason
/// [`INVALID`], the message names the field). Conflicts with other objects
/// are [`Config::assemble`]'s.
///
/// [`Config::assemble`]: crate::config::Config::assemble
pub fn compile_config(spec: &InjectorConfigSpec) -> Result<ConfigPart, Refusal> {
    part(spec).map_err(|e| invalid(&e))
}

/// [`compile_config`] with the typed error, for files.
pub(crate) fn part(spec: &InjectorConfigSpec) -> Result<ConfigPart, PartError> {
    for template in &spec.templates {
        check_template(template)?;
    }
    for rule in &spec.image_rewrites {
        rule.check()?;
    }
    Ok(ConfigPart {
        templates: spec.templates.clone(),
        default_templates: spec.default_templates.clone(),
        image_rewrites: spec.image_rewrites.clone(),
        defaults: spec.defaults.clone(),
    })
}

fn invalid(error: &dyn std::error::Error) -> Refusal {
    Refusal::new(INVALID, portcullis_telemetry::error_chain(error))
}

/// Checks one template on its own: every entry is an object of its
/// Kubernetes kind, named, and every container has an image.
pub(crate) fn check_template(t: &Template) -> Result<(), TemplateError> {
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
