//! Parameter objects from files, for `check --params` and `mutate --params`.

use serde_json::Value;

use super::{ParamKind, ParamSource, ParamsError, Scope, Selection, picks};

/// Parameter objects read from manifests. A kind is namespaced when any of
/// its objects has a namespace, cluster-scoped when all of them have none,
/// and taken as namespaced when the files hold none of it.
#[derive(Debug, Default)]
pub struct FileParams {
    objects: Vec<Value>,
}

impl FileParams {
    /// Keeps `objects` (any kinds), ordered by namespace and name.
    pub fn new(mut objects: Vec<Value>) -> Self {
        objects.sort_by(|a, b| key(a).cmp(&key(b)));
        Self { objects }
    }

    fn of_kind<'a>(&'a self, kind: &'a ParamKind) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects.iter().filter(move |o| o["apiVersion"] == *kind.api_version && o["kind"] == *kind.kind)
    }
}

fn namespace(object: &Value) -> Option<&str> {
    object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty())
}

fn key(object: &Value) -> (Option<&str>, Option<&str>) {
    (namespace(object), object.pointer("/metadata/name").and_then(Value::as_str))
}

impl ParamSource for FileParams {
    fn scope(&self, kind: &ParamKind) -> Result<Scope, ParamsError> {
        let mut objects = self.of_kind(kind).peekable();
        if objects.peek().is_some() && objects.all(|o| namespace(o).is_none()) {
            return Ok(Scope::Cluster);
        }
        Ok(Scope::Namespaced)
    }

    fn find(&self, kind: &ParamKind, namespace_: Option<&str>, selection: &Selection) -> Vec<Value> {
        self.of_kind(kind).filter(|o| namespace(o) == namespace_ && picks(selection, o)).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::params::{NotFoundAction, Params, ParamsError};

    fn config_map(namespace: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": namespace, "name": name, "labels": labels}})
    }

    fn params(reference: Value) -> Params {
        let kind = ParamKind { api_version: "v1".into(), kind: "ConfigMap".into() };
        Params::from_spec(Some(kind), Some(reference)).expect("valid").expect("a kind")
    }

    fn names(found: &[Value]) -> Vec<&str> {
        found.iter().filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str)).collect()
    }

    #[test]
    fn a_selector_picks_by_label_in_the_requests_namespace_in_name_order() {
        let files = FileParams::new(vec![
            config_map("team-a", "b", json!({"pick": "yes"})),
            config_map("team-a", "a", json!({"pick": "yes"})),
            config_map("team-a", "c", json!({"pick": "no"})),
            config_map("team-b", "d", json!({"pick": "yes"})),
        ]);
        let by_label =
            params(json!({"selector": {"matchLabels": {"pick": "yes"}}, "parameterNotFoundAction": "Allow"}));
        assert_eq!(names(&by_label.objects(&files, "team-a").expect("found")), ["a", "b"]);
        assert!(by_label.objects(&files, "team-c").expect("none, allowed").is_empty());
        assert_eq!(by_label.objects(&files, ""), Err(ParamsError::NoNamespace), "a cluster-scoped request");
        let elsewhere = params(json!({"name": "d", "namespace": "team-b", "parameterNotFoundAction": "Deny"}));
        assert_eq!(names(&elsewhere.objects(&files, "team-a").expect("found")), ["d"]);
        let missing = params(json!({"name": "x", "parameterNotFoundAction": "Deny"}));
        assert_eq!(missing.not_found, NotFoundAction::Deny);
        assert_eq!(missing.objects(&files, "team-a"), Err(ParamsError::NotFound));
    }

    #[test]
    fn a_kind_whose_objects_have_no_namespace_is_cluster_scoped() {
        let kind = ParamKind { api_version: "example.com/v1".into(), kind: "Limits".into() };
        let limits = json!({"apiVersion": "example.com/v1", "kind": "Limits", "metadata": {"name": "x"}});
        let files = FileParams::new(vec![limits]);
        assert_eq!(files.scope(&kind), Ok(Scope::Cluster));
        let reference = json!({"name": "x", "namespace": "team-a", "parameterNotFoundAction": "Deny"});
        let in_namespace = Params::from_spec(Some(kind), Some(reference)).expect("valid").expect("a kind");
        assert_eq!(in_namespace.objects(&files, "team-a"), Err(ParamsError::NamespaceOfClusterScopedKind));
    }
}
