//! The injector's CustomResourceDefinitions: the shipped file is what
//! `portcullis-injector crds` prints, the schemas are structural, and the
//! shipped configuration read as API objects is the configuration read
//! from files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use portcullis_injector::compile::{compile_config, compile_template};
use portcullis_injector::config::Config;
use portcullis_injector::resources::{self, InjectionTemplate, InjectorConfig};
use serde::Deserialize as _;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_shipped_crds_are_the_generated_ones() {
    let path = repo().join("deploy/base/crds/injector.yaml");
    let shipped = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = resources::crds_yaml().expect("the CRDs serialize");
    assert!(
        shipped == generated,
        "{} is not what `portcullis-injector crds` prints; regenerate it with\n  \
         cargo run -p portcullis-injector -- crds > deploy/base/crds/injector.yaml",
        path.display()
    );
}

/// Every schema node the API server will see, with its path.
fn walk<'a>(path: String, schema: &'a JSONSchemaProps, out: &mut Vec<(String, &'a JSONSchemaProps)>) {
    out.push((path.clone(), schema));
    for (name, property) in schema.properties.iter().flatten() {
        walk(format!("{path}.{name}"), property, out);
    }
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(items)) => walk(format!("{path}[]"), items, out),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => list.iter().for_each(|s| walk(format!("{path}[]"), s, out)),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
        walk(format!("{path}{{}}"), values, out);
    }
}

#[test]
fn every_schema_is_structural_and_described() {
    for crd in resources::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        assert_eq!(crd.spec.scope, "Cluster", "{name}");
        assert_eq!(crd.spec.names.categories.as_deref(), Some(&["portcullis".to_owned()][..]), "{name}");
        let version = &crd.spec.versions[0];
        let columns: Vec<&str> = version.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["Ready", "Replicas", "Reason", "Age", "Message"], "{name}");
        let root = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("a schema");
        let mut nodes = Vec::new();
        walk(String::new(), root, &mut nodes);
        assert!(nodes.len() > 100, "{name}: the Pod API's schemas are in");
        for (path, node) in &nodes {
            let typed = node.type_.is_some() || node.x_kubernetes_int_or_string == Some(true);
            assert!(typed, "{name}: {path} has no type");
            for forbidden in [&node.one_of, &node.any_of, &node.all_of] {
                assert!(forbidden.is_none(), "{name}: {path} is not structural");
            }
            let ours = path.starts_with(".spec") && !path.contains("ontainers[]") && !path.contains("olume");
            if ours && !path.ends_with("[]") && !path.ends_with("{}") {
                assert!(node.description.as_deref().is_some_and(|d| !d.is_empty()), "{name}: {path} undescribed");
            }
        }
        let containers = nodes.iter().find(|(p, _)| p.ends_with(".containers[]")).expect("containers").1;
        assert_eq!(containers.required.as_deref(), Some(&["name".to_owned()][..]), "{name}");
        assert!(containers.x_kubernetes_validations.is_some(), "{name}: an image is required");
    }
}

/// The documents of a YAML file.
fn documents(path: &Path) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(path).expect("readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).expect("YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

#[test]
fn the_shipped_configuration_as_objects_is_the_configuration_from_files() {
    for path in
        [repo().join("deploy/base/policies/injector.yaml"), repo().join("services/injector/tests/data/config.yaml")]
    {
        let contents = portcullis_server::watch::read_all(std::slice::from_ref(&path)).expect("readable");
        let from_files = portcullis_injector::serve::parse(&contents).expect("valid");
        let mut templates = Vec::new();
        let mut configs = Vec::new();
        for (index, document) in documents(&path).into_iter().enumerate() {
            match document["kind"].as_str() {
                Some("InjectorConfig") => {
                    let object: InjectorConfig = serde_yaml::from_value(document).expect("an InjectorConfig");
                    // Named in file order, as the objects will be ordered by name.
                    let name = format!("{index:02}-{}", object.metadata.name.clone().unwrap_or_default());
                    configs.push((name, Arc::new(compile_config(&object.spec).expect("valid"))));
                }
                Some("InjectionTemplate") => {
                    let object: InjectionTemplate = serde_yaml::from_value(document).expect("an InjectionTemplate");
                    let name = object.metadata.name.clone().unwrap_or_default();
                    templates.push(Arc::new(compile_template(&name, &object.spec).expect("valid")));
                }
                other => panic!("{}: unexpected kind {other:?}", path.display()),
            }
        }
        let (from_objects, refusals) = Config::assemble(templates, configs);
        assert!(refusals.is_empty(), "{refusals:?}");
        assert_eq!(from_objects, from_files, "{}", path.display());
    }
}
