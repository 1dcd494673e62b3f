//! The injector's configuration as API objects in `portcullis.dev/v1alpha1`:
//! `InjectionTemplate` (one template, named by `metadata.name`) and
//! `InjectorConfig` (today's document: inline templates, default templates,
//! image rewrites, defaults). The same YAML is read from files offline.
//!
//! The schemas come from these types: doc comments are what `kubectl
//! explain` shows; containers, volumes and mounts keep whatever the user
//! wrote (`serde_json::Value`) but are described to the API server by the
//! Pod API's own schemas, so it refuses a container without a name or an
//! image before the injector ever sees it. Nothing here watches anything.

use k8s_openapi::api::core::v1::{Container, Volume, VolumeMount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
};
use kube::{CustomResource, CustomResourceExt as _};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::{Defaults, Template};
use crate::images::RewriteRule;
use crate::native::own::CelMutation;

/// Most containers (or init containers) one template may inject. It bounds
/// the API server's cost estimate of the per-container validation rule.
pub const MAX_CONTAINERS: u32 = 32;
/// Most templates one `InjectorConfig` may define inline.
pub const MAX_TEMPLATES: u32 = 128;
/// The most CEL mutations one `InjectorConfig` holds.
pub const MAX_MUTATIONS: u32 = 64;

/// What one template adds to a pod. Pods choose templates by name in the
/// `portcullis.dev/templates` annotation; `defaultTemplates` of an
/// `InjectorConfig` names the ones every other injected pod gets.
// kube's `printcolumn(..)` repeats keys, which clippy takes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "portcullis.dev",
    version = "v1alpha1",
    kind = "InjectionTemplate",
    shortname = "itpl",
    category = "portcullis",
    status = "portcullis_resources::ResourceStatus",
    derive = "PartialEq",
    doc = "A named set of containers, init containers, volumes, mounts and pull secrets the Portcullis injector adds to pods; the template's name is metadata.name.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        description = "Whether this generation is in force in every ready injector replica.",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Replicas",
        type_ = "string",
        description = "Replicas enforcing this generation, of all live replicas.",
        json_path = ".status.replicas"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        description = "Why it is (not) ready.",
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        description = "What is wrong and where, when not ready.",
        json_path = r#".status.conditions[?(@.type=="Ready")].message"#
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InjectionTemplateSpec {
    /// Containers appended to the pod's spec.containers. A container the
    /// pod already has (same name) is left as the pod has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "containers")]
    pub containers: Vec<Value>,
    /// Containers inserted, in order, at the front of the pod's
    /// spec.initContainers (native sidecars with restartPolicy: Always
    /// included), so they run before the pod's own init containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "containers")]
    pub init_containers: Vec<Value>,
    /// Volumes appended to the pod's spec.volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "volumes")]
    pub volumes: Vec<Value>,
    /// Mounts added to each of the pod's own containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "volume_mounts")]
    pub volume_mounts: Vec<Value>,
    /// Secret names appended to the pod's spec.imagePullSecrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// Leave pods with hostNetwork: true alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_host_network: bool,
}

/// What the injector injects by default, how it rewrites images and which
/// defaults it sets. Several InjectorConfigs are merged; each template
/// name and each default may be defined by one object only.
// kube's `printcolumn(..)` repeats keys, which clippy takes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "portcullis.dev",
    version = "v1alpha1",
    kind = "InjectorConfig",
    shortname = "icfg",
    category = "portcullis",
    status = "portcullis_resources::ResourceStatus",
    derive = "PartialEq",
    doc = "Configuration of the Portcullis injector: templates, the templates injected by default, image rewrites and pod defaults.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        description = "Whether this generation is in force in every ready injector replica.",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Replicas",
        type_ = "string",
        description = "Replicas enforcing this generation, of all live replicas.",
        json_path = ".status.replicas"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        description = "Why it is (not) ready.",
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        description = "What is wrong and where, when not ready.",
        json_path = r#".status.conditions[?(@.type=="Ready")].message"#
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InjectorConfigSpec {
    /// Templates defined inline, each with a name (InjectionTemplate
    /// objects define one each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_TEMPLATES, "x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub templates: Vec<Template>,
    /// Templates injected into pods that do not name theirs in the
    /// portcullis.dev/templates annotation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_templates: Vec<String>,
    /// Image rewrite rules, for every container of every injected pod; the
    /// first rule that matches wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_rewrites: Vec<RewriteRule>,
    /// Defaults set on every injected pod.
    #[serde(default, skip_serializing_if = "Defaults::is_empty")]
    pub defaults: Defaults,
    /// Mutations written in MutatingAdmissionPolicy's CEL language (match
    /// conditions, variables, `ApplyConfiguration` and `JSONPatch`
    /// mutations, failurePolicy), plus what MAP refuses: atomic lists and
    /// structs replaced whole, and `JSONMergePatch`, which removes list
    /// items. They run on every pod the injector mutates, after its
    /// templates and before its image rewrites and defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_MUTATIONS, "x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub mutations: Vec<CelMutation>,
}

/// Fields whose items are the Pod API's (or metav1's) own types: their
/// descriptions are Kubernetes', written to be read as they are.
const FOREIGN: [&str; 5] = ["containers", "initContainers", "volumes", "volumeMounts", "conditions"];

/// Both CustomResourceDefinitions, `InjectionTemplate` first.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [InjectionTemplate::crd(), InjectorConfig::crd()]
        .into_iter()
        .map(|mut crd| {
            for version in &mut crd.spec.versions {
                if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
                    unwrap_descriptions(schema);
                }
            }
            crd
        })
        .collect()
}

/// Our descriptions come from doc comments, wrapped at 120 columns: join
/// their lines (paragraphs stay), so `kubectl explain` wraps them itself.
fn unwrap_descriptions(schema: &mut JSONSchemaProps) {
    if let Some(text) = schema.description.as_mut() {
        *text = text.split("\n\n").map(|p| p.replace('\n', " ")).collect::<Vec<_>>().join("\n\n");
    }
    for (name, property) in schema.properties.iter_mut().flatten() {
        if FOREIGN.contains(&name.as_str()) {
            let items = property.items.take();
            unwrap_descriptions(property);
            property.items = items;
        } else {
            unwrap_descriptions(property);
        }
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        unwrap_descriptions(items);
    }
}

/// [`crds`] as multi-document YAML: what `portcullis-injector crds` prints
/// and `deploy/base/crds/injector.yaml` holds.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::from("# Generated by `portcullis-injector crds`; do not edit.\n");
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// A list of the Pod API's containers, each of which must have an image.
pub(crate) fn containers(generator: &mut SchemaGenerator) -> Schema {
    let mut item = generator.subschema_for::<Container>();
    item.insert(
        "x-kubernetes-validations".into(),
        json!([{
            "rule": "has(self.image) && size(self.image) > 0",
            "message": "an injected container needs an image",
            "fieldPath": ".image",
            "reason": "FieldValueRequired",
        }]),
    );
    list_by_name(item, Some(MAX_CONTAINERS))
}

/// A list of the Pod API's volumes.
pub(crate) fn volumes(generator: &mut SchemaGenerator) -> Schema {
    list_by_name(generator.subschema_for::<Volume>(), None)
}

/// A list of the Pod API's volume mounts (a volume may be mounted twice,
/// so the name is no key).
pub(crate) fn volume_mounts(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<VolumeMount>();
    json_schema!({"type": "array", "items": item})
}

fn list_by_name(item: Schema, max: Option<u32>) -> Schema {
    let mut list = json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
    });
    if let Some(max) = max {
        list.insert("maxItems".into(), max.into());
    }
    list
}
