//! A MAP's parameters: the policy's `paramKind` with its binding's
//! `paramRef`, resolved as the API server resolves them, over parameter
//! objects given as manifests (`mutate --params`). Of several objects
//! found, the API server applies the policy with one of them (in our runs
//! not always the same); `mutate` takes the first by namespace and name
//! whose match conditions hold. `native_mutations.rs` compares a parameter
//! by name with the API server; selectors are tested here.

use k8s_openapi::api::admissionregistration::v1::{ParamKind, ParamRef};
use portcullis_admission::json;
use portcullis_admission::selector::LabelSelector;
use serde_json::Value;

use super::Problem;

/// A checked `paramKind` with its `paramRef`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    api_version: String,
    kind: String,
    /// `paramRef.namespace`; unset: the request's, for a namespaced kind.
    namespace: Option<String>,
    selection: Selection,
    /// `parameterNotFoundAction: Deny`.
    deny_when_none: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Selection {
    Name(String),
    Labels(LabelSelector),
}

impl ParamSpec {
    /// Checks the policy's `paramKind` and the binding's `paramRef` as the
    /// API server does: a reference without a kind is not read; a kind
    /// needs a reference with exactly one of name and selector, and its
    /// not-found action.
    pub fn new(kind: Option<&ParamKind>, reference: Option<&ParamRef>) -> Result<Option<Self>, Problem> {
        let Some(kind) = kind else { return Ok(None) };
        let invalid = |field: &str, why: &str| Problem::Invalid { field: field.to_owned(), why: why.to_owned() };
        let (Some(api_version), Some(kind)) = (kind.api_version.clone(), kind.kind.clone()) else {
            return Err(invalid("spec.paramKind", "apiVersion and kind are required"));
        };
        let reference =
            reference.ok_or_else(|| invalid("binding spec.paramRef", "Required value: paramKind is set"))?;
        let selection = match (reference.name.clone().filter(|n| !n.is_empty()), &reference.selector) {
            (Some(name), None) => Selection::Name(name),
            (None, Some(selector)) => {
                let selector: LabelSelector = serde_json::to_value(selector)
                    .and_then(serde_json::from_value)
                    .map_err(|e| invalid("binding spec.paramRef.selector", &e.to_string()))?;
                selector.check().map_err(|e| invalid("binding spec.paramRef.selector", &e.to_string()))?;
                Selection::Labels(selector)
            }
            _ => return Err(invalid("binding spec.paramRef", "exactly one of name and selector is required")),
        };
        let deny_when_none = match reference.parameter_not_found_action.as_deref() {
            Some("Deny") => true,
            Some("Allow") => false,
            _ => return Err(invalid("binding spec.paramRef.parameterNotFoundAction", "Required value: Allow or Deny")),
        };
        let namespace = reference.namespace.clone().filter(|n| !n.is_empty());
        Ok(Some(Self { api_version, kind, namespace, selection, deny_when_none }))
    }

    /// The parameter objects for a request in `request_namespace` (empty
    /// for a cluster-scoped object) among `objects`, or the API server's
    /// words for why there are none to use. A kind is namespaced when any
    /// of its objects has a namespace, or when `objects` hold none of it.
    pub fn collect<'a>(&self, objects: &'a [Value], request_namespace: &str) -> Result<Vec<&'a Value>, String> {
        let of_kind: Vec<&Value> =
            objects.iter().filter(|o| o["apiVersion"] == *self.api_version && o["kind"] == *self.kind).collect();
        let namespaced = of_kind.is_empty() || of_kind.iter().any(|o| namespace(o).is_some());
        let namespace_ = match (namespaced, self.namespace.as_deref()) {
            (false, None) => None,
            (false, Some(_)) => {
                return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".to_owned());
            }
            (true, Some(namespace)) => Some(namespace),
            (true, None) if request_namespace.is_empty() => {
                return Err(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".to_owned()
                );
            }
            (true, None) => Some(request_namespace),
        };
        let mut found: Vec<&Value> =
            of_kind.into_iter().filter(|o| namespace(o) == namespace_ && self.picks(o)).collect();
        found.sort_by(|a, b| (namespace(a), name(a)).cmp(&(namespace(b), name(b))));
        if found.is_empty() && self.deny_when_none {
            return Err("failed to configure binding: no params found for policy binding with `Deny` \
                        parameterNotFoundAction"
                .to_owned());
        }
        Ok(found)
    }

    fn picks(&self, object: &Value) -> bool {
        match &self.selection {
            Selection::Name(wanted) => name(object) == Some(wanted.as_str()),
            Selection::Labels(selector) => {
                let labels = json::at(object, &["metadata", "labels"]);
                selector.matches(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
            }
        }
    }
}

fn namespace(object: &Value) -> Option<&str> {
    object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty())
}

fn name(object: &Value) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(reference: Value) -> ParamSpec {
        let kind = ParamKind { api_version: Some("v1".into()), kind: Some("ConfigMap".into()) };
        let reference: ParamRef = serde_json::from_value(reference).expect("a paramRef");
        ParamSpec::new(Some(&kind), Some(&reference)).expect("valid").expect("a kind")
    }

    fn config_map(namespace: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": namespace, "name": name, "labels": labels}})
    }

    fn names(found: &[&Value]) -> Vec<String> {
        found.iter().filter_map(|o| name(o)).map(str::to_owned).collect()
    }

    #[test]
    fn a_selector_picks_by_label_in_the_requests_namespace_in_name_order() {
        let objects = [
            config_map("team-a", "b", json!({"pick": "yes"})),
            config_map("team-a", "a", json!({"pick": "yes"})),
            config_map("team-a", "c", json!({"pick": "no"})),
            config_map("team-b", "d", json!({"pick": "yes"})),
        ];
        let by_label = spec(json!({"selector": {"matchLabels": {"pick": "yes"}}, "parameterNotFoundAction": "Allow"}));
        assert_eq!(names(&by_label.collect(&objects, "team-a").expect("found")), ["a", "b"]);
        assert_eq!(names(&by_label.collect(&objects, "team-c").expect("none, allowed")), Vec::<String>::new());
        let elsewhere = spec(json!({"name": "d", "namespace": "team-b", "parameterNotFoundAction": "Deny"}));
        assert_eq!(names(&elsewhere.collect(&objects, "team-a").expect("found")), ["d"]);
        let missing = spec(json!({"name": "x", "parameterNotFoundAction": "Deny"}));
        let said = missing.collect(&objects, "team-a").expect_err("denied");
        assert!(said.contains("no params found for policy binding with `Deny` parameterNotFoundAction"), "{said}");
        assert!(by_label.collect(&objects, "").is_err(), "a cluster-scoped request has no namespace to read");
    }

    #[test]
    fn a_reference_needs_one_of_name_and_selector_and_an_action() {
        let kind = ParamKind { api_version: Some("v1".into()), kind: Some("ConfigMap".into()) };
        let check = |r: Value| {
            let reference: ParamRef = serde_json::from_value(r).expect("a paramRef");
            ParamSpec::new(Some(&kind), Some(&reference))
        };
        assert!(check(json!({"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"})).is_err());
        assert!(check(json!({"parameterNotFoundAction": "Deny"})).is_err());
        assert!(check(json!({"name": "a"})).is_err());
        assert!(ParamSpec::new(Some(&kind), None).is_err());
        assert!(ParamSpec::new(None, None).is_ok_and(|s| s.is_none()));
    }
}
