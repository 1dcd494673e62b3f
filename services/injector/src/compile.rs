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
use crate::native::Problem;
use crate::native::own::CompiledMutation;
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
    /// Its CEL mutations, compiled, in order.
    pub mutations: Vec<CompiledMutation>,
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
    /// A volume mount without a path (the API server would refuse every
    /// pod it was added to).
    #[error("template {template:?}: volumeMounts[{index}] ({mount}) has no mountPath")]
    NoMountPath {
        /// The template.
        template: String,
        /// The entry's index.
        index: usize,
        /// The mount's name.
        mount: String,
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
    /// One of its CEL mutations.
    #[error("mutations[{index}] ({name:?}): {problem}")]
    Mutation {
        /// The mutation's index.
        index: usize,
        /// Its name.
        name: String,
        /// Why, the field relative to the mutation.
        #[source]
        problem: Box<Problem>,
    },
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
    if !spec.mutations.is_empty() {
        // Parse the built-in kinds' schemas now, not in the first request
        // an apply configuration merges (about half a millisecond).
        std::sync::LazyLock::force(&crate::apply::BUILTIN);
    }
    let mut mutations = Vec::with_capacity(spec.mutations.len());
    for (index, mutation) in spec.mutations.iter().enumerate() {
        // The estimate's limit is Kubernetes' own, as for the API server's
        // MAPs; the runtime limits are the `--cel-*` flags.
        let compiled = mutation.compile(portcullis_cel::cost::DEFAULT_LIMIT);
        mutations.push(compiled.map_err(|problem| PartError::Mutation {
            index,
            name: mutation.name.clone(),
            problem,
        })?);
    }
    Ok(ConfigPart {
        templates: spec.templates.clone(),
        default_templates: spec.default_templates.clone(),
        image_rewrites: spec.image_rewrites.clone(),
        defaults: spec.defaults.clone(),
        mutations,
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
        let m: VolumeMount = parse(t, "volumeMounts", index, m)?;
        if m.mount_path.is_empty() {
            return Err(TemplateError::NoMountPath { template: t.name.clone(), index, mount: m.name });
        }
    }
    let named = t.containers.iter().chain(&t.init_containers).chain(&t.volumes).chain(&t.volume_mounts);
    if named.into_iter().any(|v| object_name(v).is_empty()) {
        return Err(TemplateError::Unnamed(t.name.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn template(spec: Value) -> Result<Template, Refusal> {
        compile_template("proxy", &serde_json::from_value(spec).expect("a spec"))
    }

    fn config(spec: Value) -> Result<ConfigPart, Refusal> {
        compile_config(&serde_json::from_value(spec).expect("a spec"))
    }

    #[test]
    fn a_valid_template_is_named_after_its_object() {
        let t = template(json!({"containers": [{"name": "c", "image": "x"}], "skipHostNetwork": true})).expect("valid");
        assert_eq!(t.name, "proxy");
        assert!(t.skip_host_network);
        assert_eq!(t.containers, [json!({"name": "c", "image": "x"})]);
    }

    #[rstest]
    #[case::no_image(json!({"containers": [{"name": "c"}]}), "template \"proxy\": containers[0] (c) has no image")]
    #[case::init_no_image(
        json!({"initContainers": [{"name": "ok", "image": "x"}, {"name": "i", "image": ""}]}),
        "template \"proxy\": initContainers[1] (i) has no image"
    )]
    #[case::unnamed_volume(
        json!({"volumes": [{"emptyDir": {}}]}),
        "template \"proxy\": every container, volume and volume mount needs a name"
    )]
    #[case::not_a_container(json!({"containers": [{"name": "c", "image": 3}]}), "template \"proxy\": containers[0]: ")]
    #[case::mount_without_path(
        json!({"volumeMounts": [{"name": "m"}]}),
        "template \"proxy\": volumeMounts[0] (m) has no mountPath"
    )]
    fn refuses_a_bad_template_naming_the_field(#[case] spec: Value, #[case] expected: &str) {
        let refusal = template(spec).expect_err("refused");
        assert_eq!(refusal.reason, "Invalid");
        assert!(refusal.message.starts_with(expected), "{}", refusal.message);
    }

    #[test]
    fn an_object_without_a_name_is_refused() {
        let refusal = compile_template(" ", &InjectionTemplateSpec::default()).expect_err("refused");
        assert_eq!(refusal.message, "a template has an empty name");
    }

    #[rstest]
    #[case::inline_template(
        json!({"templates": [{"name": "t", "containers": [{"name": "c"}]}]}),
        "template \"t\": containers[0] (c) has no image"
    )]
    #[case::empty_rule(
        json!({"imageRewrites": [{"prefix": " ", "replacement": "x"}]}),
        "imageRewrites: \" \" -> \"x\": prefix and replacement must not be empty"
    )]
    #[case::digest_rule(
        json!({"imageRewrites": [{"prefix": "a@sha256", "replacement": "x"}]}),
        "a prefix names a repository, without spaces, tag or digest"
    )]
    fn refuses_a_bad_config_naming_the_field(#[case] spec: Value, #[case] expected: &str) {
        let refusal = config(spec).expect_err("refused");
        assert_eq!(refusal.reason, "Invalid");
        assert!(refusal.message.contains(expected), "{}", refusal.message);
    }

    #[test]
    fn a_config_contributes_all_it_says() {
        let part = config(json!({
            "templates": [{"name": "t", "containers": [{"name": "c", "image": "x"}]}],
            "defaultTemplates": ["t"],
            "imageRewrites": [{"prefix": "docker.io/", "replacement": "mirror/"}],
            "defaults": {"imagePullPolicy": "IfNotPresent", "labels": {"a": "b"}},
        }))
        .expect("valid");
        assert_eq!(part.templates[0].name, "t");
        assert_eq!(part.default_templates, ["t"]);
        assert_eq!(part.image_rewrites[0].replacement, "mirror/");
        assert_eq!(part.defaults.image_pull_policy, Some(crate::config::PullPolicy::IfNotPresent));
    }
}
