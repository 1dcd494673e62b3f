//! Parameter objects from files, for `check --params`.

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
