//! Several objects (or file documents), each valid on its own, into the one
//! [`Config`] the injector runs with. What they say together is checked
//! here: a template name defined twice, a container or volume injected by
//! two templates, a default set twice, a `defaultTemplates` entry that names
//! no template. For API objects such a conflict refuses only the later
//! object and the rest stays in force; for files it refuses the whole set,
//! as before (the caller decides, from the same answer).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use portcullis_resources::Refusal;

use crate::compile::ConfigPart;
use crate::config::{Config, Defaults, Template, object_name};
use crate::images::RewriteRule;
use crate::native::own::CompiledMutation;

/// The `Ready=False` reason of an object that contradicts an earlier one.
pub const CONFLICT: &str = "Conflict";

/// The object a refusal is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// An `InjectionTemplate`, by name.
    Template(String),
    /// An `InjectorConfig`, by name.
    Config(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Template(name) => write!(f, "InjectionTemplate {name:?}"),
            Self::Config(name) => write!(f, "InjectorConfig {name:?}"),
        }
    }
}

impl Config {
    /// The configuration that the `InjectionTemplate`s (`templates`, each
    /// from [`compile_template`]) and the `InjectorConfig`s (`configs`, by
    /// name, each from [`compile_config`]) make together, and the objects
    /// refused for contradicting another (reason [`CONFLICT`]).
    ///
    /// Objects are taken in the order given (the cluster gives them oldest
    /// first), `InjectionTemplate`s first; of two that contradict each
    /// other the later one is refused, whole, and the earlier one stays in
    /// force: a newcomer cannot displace what is in force. An `InjectorConfig` whose
    /// `defaultTemplates` names a template no accepted object defines is
    /// refused too.
    ///
    /// [`compile_template`]: crate::compile::compile_template
    /// [`compile_config`]: crate::compile::compile_config
    pub fn assemble(
        templates: Vec<Arc<Template>>,
        configs: Vec<(String, Arc<ConfigPart>)>,
    ) -> (Config, Vec<(Source, Refusal)>) {
        let units = templates
            .iter()
            .map(|t| Unit::template(Source::Template(t.name.clone()), t))
            .chain(configs.iter().map(|(name, part)| Unit::part(Source::Config(name.clone()), part)))
            .collect();
        let (config, refused) = assemble_in_order(units);
        (config, refused.into_iter().map(|(source, message)| (source, Refusal::new(CONFLICT, message))).collect())
    }
}

/// One object's (or document's) contribution, as [`assemble_in_order`]
/// reads it.
#[derive(Debug)]
pub(crate) struct Unit<'a, K> {
    /// What a refusal is reported against.
    pub(crate) key: K,
    /// How messages name it: `InjectorConfig "a"`, `config.yaml#2`.
    pub(crate) label: String,
    templates: &'a [Template],
    default_templates: &'a [String],
    image_rewrites: &'a [RewriteRule],
    defaults: Option<&'a Defaults>,
    mutations: &'a [CompiledMutation],
}

impl<'a, K: fmt::Display> Unit<'a, K> {
    /// An `InjectionTemplate`'s template, labelled by `key`.
    pub(crate) fn template(key: K, template: &'a Template) -> Self {
        let label = key.to_string();
        Self::labelled(key, label, std::slice::from_ref(template), None)
    }

    /// An `InjectorConfig`'s part, labelled by `key`.
    pub(crate) fn part(key: K, part: &'a ConfigPart) -> Self {
        let label = key.to_string();
        Self::labelled(key, label, &[], Some(part))
    }
}

impl<'a, K> Unit<'a, K> {
    /// A unit named `label` in messages: `templates`, plus `part`'s content.
    pub(crate) fn labelled(key: K, label: String, templates: &'a [Template], part: Option<&'a ConfigPart>) -> Self {
        match part {
            Some(part) => Self {
                key,
                label,
                templates: &part.templates,
                default_templates: &part.default_templates,
                image_rewrites: &part.image_rewrites,
                defaults: Some(&part.defaults),
                mutations: &part.mutations,
            },
            None => Self {
                key,
                label,
                templates,
                default_templates: &[],
                image_rewrites: &[],
                defaults: None,
                mutations: &[],
            },
        }
    }
}

/// Merges `units` in order; a unit that contradicts an earlier accepted one
/// is left out whole, with the message that says why.
pub(crate) fn assemble_in_order<K: Clone>(units: Vec<Unit<'_, K>>) -> (Config, Vec<(K, String)>) {
    // A unit refused for a missing default template is left out of every
    // later round; leaving it out can make room for one it conflicted with,
    // so the merge starts over (each round leaves out one more unit).
    let mut left_out: Vec<Option<String>> = vec![None; units.len()];
    loop {
        let mut set = Set::default();
        let mut refused = Vec::new();
        let mut accepted = Vec::new();
        for (index, unit) in units.iter().enumerate() {
            if left_out[index].is_some() {
                continue;
            }
            match set.admit(unit) {
                Ok(()) => accepted.push(index),
                Err(message) => refused.push((index, message)),
            }
        }
        let missing = accepted.iter().find_map(|&index| {
            let name = units[index].default_templates.iter().find(|name| !set.templates.contains_key(name.as_str()))?;
            Some((index, name))
        });
        if let Some((index, name)) = missing {
            left_out[index] = Some(format!(
                "defaultTemplates names {name:?}, which no InjectionTemplate or InjectorConfig defines (in {})",
                units[index].label
            ));
            continue;
        }
        refused.extend(left_out.into_iter().enumerate().filter_map(|(index, m)| Some((index, m?))));
        refused.sort_by_key(|(index, _)| *index);
        let refused = refused.into_iter().map(|(index, message)| (units[index].key.clone(), message)).collect();
        return (set.config, refused);
    }
}

/// The accepted units so far: the configuration and who claimed what.
#[derive(Default)]
struct Set<'a> {
    config: Config,
    /// Template name -> the unit that defines it.
    templates: BTreeMap<&'a str, &'a str>,
    /// Container name -> the template that injects it.
    containers: BTreeMap<&'a str, &'a str>,
    /// Volume name -> the template that injects it.
    volumes: BTreeMap<&'a str, &'a str>,
    /// `defaults.<field>` (labels and annotations by key) -> the unit that
    /// sets it.
    defaults: BTreeMap<String, &'a str>,
    /// CEL mutation name -> the unit that defines it.
    mutations: BTreeMap<&'a str, &'a str>,
}

impl<'a> Set<'a> {
    /// Adds `unit` if it contradicts nothing accepted (nor itself).
    fn admit<K>(&mut self, unit: &'a Unit<'a, K>) -> Result<(), String> {
        let here = unit.label.as_str();
        let mut added = Set::default();
        for t in unit.templates {
            let name = t.name.as_str();
            if let Some(first) = self.templates.get(name).or(added.templates.get(name)) {
                return Err(format!("template {name:?} is defined twice (in {first} and in {here})"));
            }
            added.templates.insert(name, here);
            for c in t.containers.iter().chain(&t.init_containers) {
                let container = object_name(c);
                if let Some(other) = self.containers.get(container).or(added.containers.get(container)) {
                    return Err(format!(
                        "container {container:?} is injected by both template {other:?} and template {name:?}"
                    ));
                }
                added.containers.insert(container, name);
            }
            for v in &t.volumes {
                let volume = object_name(v);
                match self.volumes.get(volume).or(added.volumes.get(volume)) {
                    Some(other) if *other != name => {
                        return Err(format!(
                            "volume {volume:?} is injected by both template {other:?} and template {name:?}"
                        ));
                    }
                    _ => added.volumes.insert(volume, name),
                };
            }
        }
        if let Some(defaults) = unit.defaults {
            let fields = defaults_fields(defaults);
            for field in &fields {
                if let Some(first) = self.defaults.get(field) {
                    return Err(format!("defaults.{field} is set in both {first} and {here}"));
                }
            }
            added.defaults.extend(fields.into_iter().map(|field| (field, here)));
        }
        for m in unit.mutations {
            let name = m.spec.name.as_str();
            if let Some(first) = self.mutations.get(name).or(added.mutations.get(name)) {
                return Err(format!("mutation {name:?} is defined twice (in {first} and in {here})"));
            }
            added.mutations.insert(name, here);
        }
        self.templates.extend(added.templates);
        self.mutations.extend(added.mutations);
        self.containers.extend(added.containers);
        self.volumes.extend(added.volumes);
        self.defaults.extend(added.defaults);
        self.config.templates.extend(unit.templates.iter().cloned());
        self.config.default_templates.extend(unit.default_templates.iter().cloned());
        self.config.image_rewrites.extend(unit.image_rewrites.iter().cloned());
        self.config.mutations.extend(unit.mutations.iter().cloned());
        if let Some(defaults) = unit.defaults {
            merge(&mut self.config.defaults, defaults);
        }
        Ok(())
    }
}

/// The fields `defaults` sets, as messages name them.
fn defaults_fields(defaults: &Defaults) -> Vec<String> {
    let mut fields = Vec::new();
    if defaults.image_pull_policy.is_some() {
        fields.push("imagePullPolicy".to_owned());
    }
    if defaults.enable_service_links.is_some() {
        fields.push("enableServiceLinks".to_owned());
    }
    fields.extend(defaults.labels.keys().map(|key| format!("labels.{key}")));
    fields.extend(defaults.annotations.keys().map(|key| format!("annotations.{key}")));
    fields
}

/// Adds `from` to `into`; [`defaults_fields`] says they do not overlap.
fn merge(into: &mut Defaults, from: &Defaults) {
    into.image_pull_policy = into.image_pull_policy.or(from.image_pull_policy);
    into.enable_service_links = into.enable_service_links.or(from.enable_service_links);
    into.labels.extend(from.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    into.annotations.extend(from.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{compile_config, compile_template};
    use serde_json::{Value, json};

    fn template(name: &str, container: &str) -> Arc<Template> {
        let spec = json!({"containers": [{"name": container, "image": "x"}]});
        Arc::new(compile_template(name, &serde_json::from_value(spec).expect("spec")).expect("valid"))
    }

    fn config(name: &str, spec: Value) -> (String, Arc<ConfigPart>) {
        (name.to_owned(), Arc::new(compile_config(&serde_json::from_value(spec).expect("spec")).expect("valid")))
    }

    fn names(config: &Config) -> Vec<&str> {
        config.templates.iter().map(|t| t.name.as_str()).collect()
    }

    fn refused(refusals: &[(Source, Refusal)]) -> Vec<(String, &str, &str)> {
        refusals.iter().map(|(s, r)| (s.to_string(), r.reason.as_str(), r.message.as_str())).collect()
    }

    #[test]
    fn objects_are_taken_in_the_order_given() {
        let templates = vec![template("log", "shipper"), template("proxy", "envoy")];
        let configs = vec![
            config("mirrors", json!({"imageRewrites": [{"prefix": "docker.io/", "replacement": "m/"}]})),
            config("defaults", json!({"defaultTemplates": ["proxy"], "defaults": {"imagePullPolicy": "Always"}})),
        ];
        let (config, refusals) = Config::assemble(templates.clone(), configs.clone());
        assert!(refusals.is_empty(), "{refusals:?}");
        assert_eq!(names(&config), ["log", "proxy"]);
        assert_eq!(config.default_templates, ["proxy"]);
        assert_eq!(config.image_rewrites.len(), 1);
        let (reversed, refusals) =
            Config::assemble(templates.into_iter().rev().collect(), configs.into_iter().rev().collect());
        assert!(refusals.is_empty(), "{refusals:?}");
        assert_eq!(names(&reversed), ["proxy", "log"]);
        assert_eq!(
            (reversed.default_templates, reversed.image_rewrites),
            (config.default_templates, config.image_rewrites)
        );
    }

    #[test]
    fn a_template_name_defined_twice_refuses_only_the_later_object() {
        let (config, refusals) = Config::assemble(
            vec![template("proxy", "envoy")],
            vec![
                config("a", json!({"templates": [{"name": "proxy", "containers": [{"name": "other", "image": "y"}]}]})),
                config("b", json!({"defaults": {"labels": {"team": "x"}}})),
            ],
        );
        assert_eq!(
            refused(&refusals),
            [(
                "InjectorConfig \"a\"".to_owned(),
                "Conflict",
                "template \"proxy\" is defined twice (in InjectionTemplate \"proxy\" and in InjectorConfig \"a\")"
            )]
        );
        assert_eq!(names(&config), ["proxy"]);
        assert_eq!(config.templates[0].containers[0]["name"], "envoy", "the earlier object stays in force");
        assert_eq!(config.defaults.labels["team"], "x", "objects without a conflict are in force");
    }

    #[test]
    fn a_container_injected_by_two_templates_refuses_the_later_template() {
        let (config, refusals) = Config::assemble(vec![template("b", "envoy"), template("a", "envoy")], vec![]);
        assert_eq!(names(&config), ["b"]);
        assert_eq!(
            refused(&refusals),
            [(
                "InjectionTemplate \"a\"".to_owned(),
                "Conflict",
                "container \"envoy\" is injected by both template \"b\" and template \"a\""
            )]
        );
    }

    #[test]
    fn a_default_set_twice_refuses_the_later_object_whole() {
        let (config, refusals) = Config::assemble(
            vec![template("proxy", "envoy")],
            vec![
                config("z", json!({"defaultTemplates": ["proxy"], "defaults": {"imagePullPolicy": "Never"}})),
                config("a", json!({"defaults": {"imagePullPolicy": "Always", "labels": {"k": "v"}}})),
            ],
        );
        assert_eq!(
            refused(&refusals),
            [(
                "InjectorConfig \"a\"".to_owned(),
                "Conflict",
                "defaults.imagePullPolicy is set in both InjectorConfig \"z\" and InjectorConfig \"a\""
            )]
        );
        assert_eq!(config.defaults.image_pull_policy, Some(crate::config::PullPolicy::Never));
        assert_eq!(config.default_templates, ["proxy"], "the earlier object stays in force");
        assert!(config.defaults.labels.is_empty(), "nothing of the refused object is in force");
    }

    #[test]
    fn a_default_template_that_no_object_defines_refuses_that_object() {
        let (config, refusals) = Config::assemble(
            vec![template("proxy", "envoy")],
            vec![
                config("a", json!({"defaultTemplates": ["proxy"]})),
                config("b", json!({"defaultTemplates": ["nope"]})),
            ],
        );
        assert_eq!(config.default_templates, ["proxy"]);
        assert_eq!(
            refused(&refusals),
            [(
                "InjectorConfig \"b\"".to_owned(),
                "Conflict",
                "defaultTemplates names \"nope\", which no InjectionTemplate or InjectorConfig defines (in InjectorConfig \"b\")"
            )]
        );
    }

    #[test]
    fn leaving_an_object_out_makes_room_for_the_one_it_displaced() {
        // "a" defines t but names a missing default; once it is left out,
        // "b" (whose t conflicted with a's) is in force.
        let (config, refusals) = Config::assemble(
            vec![],
            vec![
                config("a", json!({"templates": [{"name": "t"}], "defaultTemplates": ["missing"]})),
                config("b", json!({"templates": [{"name": "t", "imagePullSecrets": ["s"]}]})),
            ],
        );
        assert_eq!(config.templates[0].image_pull_secrets, ["s"]);
        let who: Vec<String> = refusals.iter().map(|(s, _)| s.to_string()).collect();
        assert_eq!(who, ["InjectorConfig \"a\""]);
    }
}
