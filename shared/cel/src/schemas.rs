//! Kinds' OpenAPI v3 schemas as the API server's CEL type checker reads
//! them, into [`DeclType`]s: the built-in kinds' ([`BUILTIN_SCHEMAS`]:
//! core/v1, apps/v1, batch/v1, networking.k8s.io/v1,
//! rbac.authorization.k8s.io/v1, policy/v1, autoscaling/v2,
//! storage.k8s.io/v1, coordination.k8s.io/v1, discovery.k8s.io/v1,
//! scheduling.k8s.io/v1 and node.k8s.io/v1, written by
//! `scripts/openapi-schemas` from a real API server, which come with the
//! binary and which the injector's server-side apply merge reads too), and
//! any other kind's from its API server's OpenAPI v3 document or its
//! CustomResourceDefinition (`--schema`), references resolved as the API
//! server's schema resolver resolves them
//! (`k8s.io/apiserver/pkg/cel/common.SchemaDeclType`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::types::{BOOL, DeclType, INT, RESERVED, STRING, TIMESTAMP};

/// The built-in kinds' OpenAPI v3 schemas, trimmed to what the merge and
/// the type checker read: `{"kinds": {"group/version/Kind": name},
/// "schemas": {name: schema}}`.
pub const BUILTIN_SCHEMAS: &str = include_str!("../schemas/builtin.json");

/// Schemas by name (OpenAPI's `components.schemas`) and the kinds they
/// are: the built-in kinds', and any other kind's read from its API
/// server's OpenAPI v3 document or its CustomResourceDefinition
/// (`--schema`).
#[derive(Debug, Default, Clone)]
pub struct Schemas {
    kinds: BTreeMap<String, String>,
    schemas: Map<String, Value>,
    /// `group/version/resource` to the kind it serves: every resource of
    /// the built-in groups (discovery), a CRD's plural, an OpenAPI
    /// document's kinds by the usual plural.
    resources: BTreeMap<String, String>,
}

/// The built-in kinds' schemas ([`BUILTIN_SCHEMAS`]).
pub static BUILTIN: LazyLock<Schemas> = LazyLock::new(|| {
    let document: Value = serde_json::from_str(BUILTIN_SCHEMAS).unwrap_or_default();
    let part = |key: &str| document.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
    let strings = |key: &str| -> BTreeMap<String, String> {
        part(key).into_iter().filter_map(|(k, v)| Some((k, v.as_str()?.to_owned()))).collect()
    };
    Schemas { kinds: strings("kinds"), schemas: part("schemas"), resources: strings("resources") }
});

/// Where the API server's OpenAPI puts every object's metadata.
const OBJECT_META: &str = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

impl Schemas {
    /// A copy of the built-in kinds' schemas ([`BUILTIN`] is shared), to
    /// add others to.
    pub fn builtin() -> Self {
        BUILTIN.clone()
    }

    /// The schemas by name, as OpenAPI writes them.
    pub fn named(&self) -> &Map<String, Value> {
        &self.schemas
    }

    /// `group/version/Kind` (the core group empty) to the name of its
    /// schema.
    pub fn kind_names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kinds.iter().map(|(gvk, name)| (gvk.as_str(), name.as_str()))
    }

    /// Adds every document of a `--schema` file (YAML or JSON, several
    /// documents, a `List` of CRDs as `kubectl get -o yaml` writes it),
    /// each as [`Self::add_document`] does.
    pub fn add_file(&mut self, input: &[u8]) -> Result<(), String> {
        for document in portcullis_admission::manifest::documents(input).map_err(|e| e.to_string())? {
            self.add_document(&document)?;
        }
        Ok(())
    }

    /// Adds a `--schema` document: a CustomResourceDefinition
    /// ([`Self::add_crd`]) or an API server's OpenAPI v3 document for a
    /// group version (`kubectl get --raw /openapi/v3/apis/GROUP/VERSION`).
    pub fn add_document(&mut self, document: &Value) -> Result<(), String> {
        match (document.get("kind").and_then(Value::as_str), document.get("components")) {
            (Some("CustomResourceDefinition"), _) => self.add_crd(document),
            (_, Some(components)) => {
                let schemas = components.get("schemas").and_then(Value::as_object);
                let schemas = schemas.ok_or("components.schemas is not an object")?;
                for (name, schema) in schemas {
                    let kinds = schema.get("x-kubernetes-group-version-kind").and_then(Value::as_array);
                    for gvk in kinds.into_iter().flatten() {
                        let part = |k: &str| gvk.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                        let (group, version, kind) = (part("group"), part("version"), part("kind"));
                        // The document does not name resources: the usual
                        // plural, unless the kind is served already.
                        let resource = format!("{group}/{version}/{}", portcullis_admission::manifest::plural(&kind));
                        if !self.resources.values().any(|k| *k == kind) {
                            self.resources.entry(resource).or_insert_with(|| kind.clone());
                        }
                        self.kinds.insert(format!("{group}/{version}/{kind}"), name.clone());
                    }
                    self.schemas.insert(name.clone(), schema.clone());
                }
                Ok(())
            }
            (kind, None) => Err(format!(
                "{} is neither a CustomResourceDefinition nor an OpenAPI v3 document",
                kind.unwrap_or("a document without a kind")
            )),
        }
    }

    /// Adds a CustomResourceDefinition's kind (apiextensions.k8s.io/v1):
    /// each served version's `openAPIV3Schema`, as the API server publishes
    /// it in its OpenAPI v3 (which its type checker and its apply merge
    /// read): `metadata` is ObjectMeta (the built-in one), `apiVersion`
    /// and `kind` are strings, at the root and in every
    /// `x-kubernetes-embedded-resource` that does not declare them.
    pub fn add_crd(&mut self, crd: &Value) -> Result<(), String> {
        let text = |pointer: &str| {
            crd.pointer(pointer)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{} is required", pointer[1..].replace('/', ".")))
        };
        let (group, kind) = (text("/spec/group")?, text("/spec/names/kind")?);
        // The API server requires a plural; without one, the usual.
        let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).map(str::to_owned);
        let plural = plural.unwrap_or_else(|| portcullis_admission::manifest::plural(kind));
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array).ok_or("spec.versions is required")?;
        let prefix: Vec<&str> = group.split('.').rev().collect();
        for version in versions {
            let name = version.get("name").and_then(Value::as_str).ok_or("spec.versions[].name is required")?;
            if version.get("served") == Some(&Value::Bool(false)) {
                continue;
            }
            let mut schema = version
                .pointer("/schema/openAPIV3Schema")
                .cloned()
                .ok_or_else(|| format!("version {name}: schema.openAPIV3Schema is required"))?;
            let Some(root) = schema.as_object_mut() else {
                return Err(format!("version {name}: openAPIV3Schema is not an object"));
            };
            object_properties(root, true);
            embedded_properties(&mut schema);
            let schema_name = format!("{}.{name}.{kind}", prefix.join("."));
            self.kinds.insert(format!("{group}/{name}/{kind}"), schema_name.clone());
            self.schemas.insert(schema_name, schema);
            self.resources.insert(format!("{group}/{name}/{plural}"), kind.to_owned());
        }
        Ok(())
    }

    /// The kinds served as `resource` of `group/version`, as the API
    /// server's RESTMapper finds them (`KindsFor`): an empty `group` is
    /// any group, the name is taken in lower case, plural or singular.
    pub fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<(&str, &str, &str)> {
        let resource = resource.to_lowercase();
        let mut found = Vec::new();
        for (key, kind) in &self.resources {
            let mut parts = key.splitn(3, '/');
            let (Some(g), Some(v), Some(r)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let named = r == resource || kind.to_lowercase() == resource;
            if (group.is_empty() || g == group) && v == version && named {
                found.push((g, v, kind.as_str()));
            }
        }
        found
    }

    /// The type of objects of `group/version/kind`, `None` when its schema
    /// is not here (the API server then checks nothing for it).
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<DeclType> {
        let name = self.kinds.get(&format!("{group}/{version}/{kind}"))?;
        let root = self.schemas.get(name)?;
        let mut visited = BTreeSet::from([name.as_str()]);
        self.decl(root, true, &mut visited)
    }

    /// `common.SchemaDeclType` of a node whose references
    /// `resolver.PopulateRefs` resolved: a reference (or an `allOf`
    /// wrapping one) is replaced by what it names; one already being
    /// resolved further up is an object without fields. `None`: a node the
    /// API server gives no type (no `type`), whose field it leaves out.
    fn decl<'s>(&'s self, node: &'s Value, root: bool, visited: &mut BTreeSet<&'s str>) -> Option<DeclType> {
        if let Some(name) = reference(node) {
            if visited.contains(name) {
                return Some(DeclType::unnamed(BTreeMap::new()));
            }
            let resolved = self.schemas.get(name)?;
            visited.insert(name);
            let decl = self.decl(resolved, root, visited);
            visited.remove(name);
            return decl;
        }
        let text = |key: &str| node.get(key).and_then(Value::as_str);
        let flag = |node: &Value, key: &str| node.get(key).and_then(Value::as_bool) == Some(true);
        if text("format") == Some("int-or-string") || flag(node, "x-kubernetes-int-or-string") {
            return Some(DeclType::Dyn);
        }
        let embedded = |node: &Value| flag(node, "x-kubernetes-embedded-resource");
        match text("type")? {
            "array" => {
                let items = node.get("items")?;
                Some(DeclType::List(Box::new(self.decl(items, embedded(items), visited)?)))
            }
            "object" => {
                if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
                    return Some(DeclType::string_map(self.decl(values, embedded(values), visited)?));
                }
                let mut fields = BTreeMap::new();
                for (name, property) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
                    if let (Some(t), Some(name)) = (self.decl(property, embedded(property), visited), escape(name)) {
                        fields.insert(name, t);
                    }
                }
                if root {
                    with_type_and_object_meta(&mut fields);
                }
                Some(DeclType::unnamed(fields))
            }
            "string" => Some(match text("format") {
                Some("byte") => DeclType::Scalar("bytes"),
                Some("duration") => DeclType::Scalar("duration"),
                Some("date" | "date-time") => TIMESTAMP,
                _ => STRING,
            }),
            "boolean" => Some(BOOL),
            "number" => Some(DeclType::Scalar("double")),
            "integer" => Some(INT),
            _ => None,
        }
    }
}

/// Gives an object's schema `apiVersion` and `kind` (strings) and
/// `metadata` (ObjectMeta), as the API server does for a custom resource:
/// replacing what the CRD says at its root (`replace`), adding what an
/// embedded resource does not declare.
fn object_properties(node: &mut Map<String, Value>, replace: bool) {
    let properties = node.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    let Some(properties) = properties.as_object_mut() else { return };
    let fields = [
        ("apiVersion", serde_json::json!({"type": "string"})),
        ("kind", serde_json::json!({"type": "string"})),
        ("metadata", serde_json::json!({"$ref": OBJECT_META})),
    ];
    for (field, schema) in fields {
        if replace || !properties.contains_key(field) {
            properties.insert(field.into(), schema);
        }
    }
}

/// [`object_properties`] for every `x-kubernetes-embedded-resource` below
/// `node`.
fn embedded_properties(node: &mut Value) {
    let Some(map) = node.as_object_mut() else { return };
    if map.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        object_properties(map, false);
    }
    for key in ["properties", "patternProperties"] {
        for child in map.get_mut(key).and_then(Value::as_object_mut).into_iter().flat_map(|m| m.values_mut()) {
            embedded_properties(child);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            embedded_properties(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for child in map.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten() {
            embedded_properties(child);
        }
    }
}

/// The schema a node refers to, by name: `$ref`, or the first `allOf`
/// that is one (the API server's OpenAPI wraps a reference so to keep
/// its description).
fn reference(node: &Value) -> Option<&str> {
    let own = node.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"));
    own.or_else(|| node.get("allOf")?.as_array()?.iter().find_map(reference))
}

/// A resource's root always has `apiVersion`, `kind`, `metadata.name` and
/// `metadata.generateName` (`WithTypeAndObjectMeta`); a root whose schema
/// lacks them gets exactly those. Every built-in kind has them.
fn with_type_and_object_meta(fields: &mut BTreeMap<String, DeclType>) {
    let has = |t: Option<&DeclType>, names: &[&str]| match t {
        Some(DeclType::Object { fields: f, .. }) => names.iter().all(|n| f.get(*n) == Some(&STRING)),
        _ => false,
    };
    let complete = fields.get("kind") == Some(&STRING)
        && fields.get("apiVersion") == Some(&STRING)
        && has(fields.get("metadata"), &["name", "generateName"]);
    if !complete {
        fields.insert("kind".into(), STRING);
        fields.insert("apiVersion".into(), STRING);
        fields.insert(
            "metadata".into(),
            DeclType::unnamed([("name".into(), STRING), ("generateName".into(), STRING)].into()),
        );
    }
}

/// A property's name in CEL (`k8s.io/apiserver/pkg/cel.Escape`), `None`
/// when it has none (it starts with a digit or has a character CEL cannot
/// escape): such a field cannot be read by name.
fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c)) {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(t: &DeclType) -> &BTreeMap<String, DeclType> {
        match t {
            DeclType::Object { fields, .. } => fields,
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn a_deployment_has_its_schemas_fields_with_references_resolved() {
        let deployment = BUILTIN.kind("apps", "v1", "Deployment").expect("a built-in kind");
        let spec = fields(DeclType::field(fields(&deployment), "spec").expect("spec"));
        assert_eq!(DeclType::field(spec, "replicas"), Some(&INT));
        assert_eq!(DeclType::field(spec, "replicsa"), None);
        let metadata = fields(DeclType::field(fields(&deployment), "metadata").expect("metadata"));
        assert!(matches!(DeclType::field(metadata, "labels"), Some(DeclType::Map(..))));
        assert!(DeclType::field(metadata, "namespace").is_some(), "a keyword names its escaped field");
        assert!(metadata.contains_key("__namespace__"));
    }

    #[test]
    fn int_or_string_is_dyn_and_a_node_without_a_type_is_left_out() {
        let pod = BUILTIN.kind("", "v1", "Pod").expect("a built-in kind");
        let spec = fields(DeclType::field(fields(&pod), "spec").expect("spec"));
        let Some(DeclType::List(container)) = DeclType::field(spec, "containers") else { panic!("containers") };
        let resources = fields(DeclType::field(fields(container), "resources").expect("resources"));
        // Quantity has no `type` (a oneOf in the API server's OpenAPI).
        assert_eq!(DeclType::field(resources, "limits"), None);
        let Some(DeclType::List(port)) = DeclType::field(fields(container), "ports") else { panic!("ports") };
        assert!(DeclType::field(fields(port), "containerPort").is_some());
    }

    #[test]
    fn names_are_escaped_as_kubernetes_escapes_them() {
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("a-b.c/d").as_deref(), Some("a__dash__b__dot__c__slash__d"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
        assert_eq!(escape("replicas").as_deref(), Some("replicas"));
    }
}
