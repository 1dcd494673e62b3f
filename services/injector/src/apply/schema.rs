//! The part of an OpenAPI v3 schema that server-side apply's merge reads:
//! object properties, list and map types, list-map keys, patch strategies,
//! defaults of key fields. The built-in kinds' schemas come with the binary
//! (`shared/cel/schemas/builtin.json`, written by `scripts/openapi-schemas`
//! from a real API server); any other kind's come from its API server's
//! `/openapi/v3` document, which has the same shape, or from its
//! CustomResourceDefinition, read as the API server publishes it: both
//! read by `portcullis_cel::schemas::Schemas`, which the CEL type checker
//! reads too, and viewed here as the merge reads them.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::Value;

/// One schema node, as OpenAPI v3 writes it (other keywords ignored).
#[derive(Debug, Default, Deserialize)]
pub struct Node {
    #[serde(rename = "$ref")]
    reference: Option<String>,
    #[serde(rename = "allOf", default)]
    all_of: Vec<Node>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    properties: HashMap<String, Node>,
    items: Option<Box<Node>>,
    #[serde(rename = "additionalProperties")]
    additional: Option<Additional>,
    #[serde(rename = "x-kubernetes-list-type")]
    list_type: Option<String>,
    #[serde(rename = "x-kubernetes-list-map-keys")]
    list_map_keys: Option<Vec<String>>,
    #[serde(rename = "x-kubernetes-map-type")]
    map_type: Option<String>,
    #[serde(rename = "x-kubernetes-patch-strategy")]
    patch_strategy: Option<String>,
    #[serde(rename = "x-kubernetes-patch-merge-key")]
    patch_merge_key: Option<String>,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields", default)]
    preserve_unknown: bool,
    default: Option<Value>,
}

impl Node {
    /// Whether the schema says this is a list.
    pub fn is_list(&self) -> bool {
        self.kind.as_deref() == Some("array") || self.items.is_some()
    }
}

/// `additionalProperties`: a schema or a boolean.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Additional {
    Allowed(bool),
    Schema(Box<Node>),
}

/// A set of named schemas (`components.schemas`) and the kinds they are.
#[derive(Debug, Default, Deserialize)]
pub struct Schemas {
    /// `group/version/Kind` (core group empty) to schema name.
    #[serde(default)]
    kinds: HashMap<String, String>,
    schemas: HashMap<String, Node>,
}

/// The schemas of the built-in kinds that come with the binary.
pub static BUILTIN: LazyLock<Schemas> =
    LazyLock::new(|| Schemas::of(&portcullis_cel::schemas::BUILTIN).expect("the built-in schemas are the merge's"));

/// How a list's items are merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole.
    Atomic,
    /// Items are scalars, merged as a set.
    Set,
    /// Items are objects identified by these fields.
    Map(Vec<String>),
}

/// What a value is, for the merge.
#[derive(Debug, Clone, Copy)]
pub enum Shape<'a> {
    /// A schema node; `atomic` when the place that refers to it says
    /// `x-kubernetes-map-type: atomic`.
    Typed {
        /// The schema.
        node: &'a Node,
        /// The map type the referring place says, if it says one.
        atomic_here: Option<bool>,
    },
    /// No schema: maps are merged key by key, lists replaced (the API
    /// server's "deduced" type).
    Deduced,
    /// No schema, everything replaced whole (a list without `items`).
    Untyped,
}

impl Schemas {
    /// The merge's view of `raw` (`portcullis_cel::schemas::Schemas`: the
    /// built-in kinds' and those `--schema` added), every schema read.
    pub fn of(raw: &portcullis_cel::schemas::Schemas) -> Result<Self, serde_json::Error> {
        let kinds = raw.kind_names().map(|(gvk, name)| (gvk.to_owned(), name.to_owned())).collect();
        let mut schemas = HashMap::with_capacity(raw.named().len());
        for (name, schema) in raw.named() {
            schemas.insert(name.clone(), Node::deserialize(schema)?);
        }
        Ok(Self { kinds, schemas })
    }

    /// The schema of objects of `group/version/kind`.
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<Shape<'_>> {
        let name = self.kinds.get(&format!("{group}/{version}/{kind}"))?;
        self.schemas.get(name).map(|node| Shape::Typed { node, atomic_here: None })
    }

    /// The node `node` stands for (through `$ref` or a one-element
    /// `allOf`), and the map type said where it is referred to.
    fn resolve<'a>(&'a self, node: &'a Node) -> Shape<'a> {
        let reference = node.reference.as_deref().or(match node.all_of.as_slice() {
            [only] => only.reference.as_deref(),
            _ => None,
        });
        let atomic_here = node.map_type.as_deref().map(|t| t == "atomic");
        match reference.and_then(|r| r.rsplit('/').next()).and_then(|name| self.schemas.get(name)) {
            Some(target) => Shape::Typed { node: target, atomic_here },
            None if reference.is_some() => Shape::Deduced,
            None => Shape::Typed { node, atomic_here },
        }
    }

    /// The shape of field `name` of an object of shape `shape`; `None`
    /// when the schema has no such field and allows no others.
    pub fn field<'a>(&'a self, shape: Shape<'a>, name: &str) -> Option<Shape<'a>> {
        let Shape::Typed { node, .. } = shape else {
            return Some(if matches!(shape, Shape::Deduced) { Shape::Deduced } else { Shape::Untyped });
        };
        if let Some(field) = node.properties.get(name) {
            return Some(self.resolve(field));
        }
        match &node.additional {
            Some(Additional::Schema(element)) => Some(self.resolve(element)),
            Some(Additional::Allowed(true)) => Some(Shape::Deduced),
            Some(Additional::Allowed(false)) => None,
            None if node.properties.is_empty() || node.preserve_unknown => Some(Shape::Deduced),
            None => None,
        }
    }

    /// The shape of field `name` where the schema declares it by name
    /// (not through `additionalProperties`).
    pub fn declared<'a>(&'a self, shape: Shape<'a>, name: &str) -> Option<Shape<'a>> {
        let Shape::Typed { node, .. } = shape else { return None };
        node.properties.get(name).map(|field| self.resolve(field))
    }

    /// The shape of the items of a list of shape `shape`.
    pub fn items<'a>(&'a self, shape: Shape<'a>) -> Shape<'a> {
        match shape {
            Shape::Typed { node, .. } => node.items.as_deref().map_or(Shape::Untyped, |items| self.resolve(items)),
            Shape::Deduced | Shape::Untyped => Shape::Untyped,
        }
    }

    /// The default of a field, where its schema has a scalar one (list-map
    /// keys such as a port's `protocol`).
    pub fn default_of<'a>(&'a self, shape: Shape<'a>) -> Option<&'a Value> {
        match shape {
            Shape::Typed { node, .. } => node.default.as_ref(),
            Shape::Deduced | Shape::Untyped => None,
        }
    }
}

impl Shape<'_> {
    /// Whether an object of this shape is replaced whole.
    pub fn atomic_map(self) -> bool {
        match self {
            Self::Typed { node, atomic_here } => {
                atomic_here.unwrap_or_else(|| node.map_type.as_deref() == Some("atomic"))
            }
            Self::Deduced => false,
            Self::Untyped => true,
        }
    }

    /// How a list of this shape is merged: `x-kubernetes-list-type`, else
    /// the patch strategy (merge with a key: a map; without: a set), else
    /// atomic, as the API server reads its schemas.
    pub fn list_type(self) -> ListType {
        let Self::Typed { node, .. } = self else { return ListType::Atomic };
        match node.list_type.as_deref() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(node.list_map_keys.clone().unwrap_or_default()),
            Some(_) => ListType::Atomic,
            None => match node.patch_strategy.as_deref() {
                Some("merge" | "merge,retainKeys") => match &node.patch_merge_key {
                    Some(key) => ListType::Map(vec![key.clone()]),
                    None => ListType::Set,
                },
                _ => ListType::Atomic,
            },
        }
    }

    /// Whether the schema says this is an object (`type: object`).
    pub fn is_object(self) -> bool {
        match self {
            Self::Typed { node, .. } => {
                node.kind.as_deref() == Some("object") || !node.properties.is_empty() || node.additional.is_some()
            }
            Self::Deduced => true,
            Self::Untyped => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_pod_schema_has_the_api_servers_list_types() {
        let schemas = &*BUILTIN;
        let pod = schemas.kind("", "v1", "Pod").expect("Pod is built in");
        let spec = schemas.field(pod, "spec").unwrap();
        let containers = schemas.field(spec, "containers").unwrap();
        assert_eq!(containers.list_type(), ListType::Map(vec!["name".into()]));
        let container = schemas.items(containers);
        assert_eq!(schemas.field(container, "args").unwrap().list_type(), ListType::Atomic);
        assert!(schemas.field(spec, "nodeSelector").unwrap().atomic_map());
        let metadata = schemas.field(pod, "metadata").unwrap();
        assert!(!schemas.field(metadata, "labels").unwrap().atomic_map());
        assert_eq!(schemas.field(metadata, "finalizers").unwrap().list_type(), ListType::Set);
        let ports = schemas.field(container, "ports").unwrap();
        let protocol = schemas.field(schemas.items(ports), "protocol").unwrap();
        assert_eq!(schemas.default_of(protocol), Some(&Value::from("TCP")));
    }

    #[test]
    fn a_crds_schema_is_read_as_the_api_server_publishes_it() {
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"group": "example.com", "names": {"kind": "Widget"}, "versions": [{"name": "v1",
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                  "x-kubernetes-list-map-keys": ["name"],
                                  "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                     "additionalProperties": {"type": "string"}},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true}}}}}}},
                {"name": "v0", "served": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        });
        let mut raw = portcullis_cel::schemas::Schemas::builtin();
        raw.add_crd(&crd).unwrap();
        let schemas = Schemas::of(&raw).unwrap();
        let widget = schemas.kind("example.com", "v1", "Widget").expect("the CRD's kind");
        let spec = schemas.field(widget, "spec").unwrap();
        assert_eq!(schemas.field(spec, "ports").unwrap().list_type(), ListType::Map(vec!["name".into()]));
        assert_eq!(schemas.field(spec, "args").unwrap().list_type(), ListType::Atomic);
        assert!(schemas.field(spec, "selector").unwrap().atomic_map());
        assert!(schemas.field(spec, "other").is_none(), "a structural schema declares its fields");
        // Metadata is ObjectMeta, whatever the CRD says of it.
        let metadata = schemas.field(widget, "metadata").unwrap();
        assert_eq!(schemas.field(metadata, "finalizers").unwrap().list_type(), ListType::Set);
        assert!(schemas.field(widget, "apiVersion").is_some());
        assert!(schemas.kind("", "v1", "Pod").is_some(), "the built-in kinds stay");
        // An embedded resource has ObjectMeta too, as the API server gives it.
        let template_metadata = schemas.field(schemas.field(spec, "template").unwrap(), "metadata").unwrap();
        assert_eq!(schemas.field(template_metadata, "finalizers").unwrap().list_type(), ListType::Set);
        assert!(schemas.kind("example.com", "v0", "Widget").is_none(), "a version not served is not published");

        let crd = serde_json::json!({"spec": {"group": "example.com"}});
        let err = portcullis_cel::schemas::Schemas::builtin().add_crd(&crd).unwrap_err();
        assert_eq!(err, "spec.names.kind is required");
    }
}
