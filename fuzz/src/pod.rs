//! Arbitrary pods: mostly well-formed (so the injector's real work is
//! reached), with names that clash with the shipped templates, status
//! annotations an earlier pass could have written (or not), and now and
//! then a field of the wrong type anywhere.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Value, json};

use crate::json;

/// Container, volume and template names of the shipped configurations.
const NAMES: &[&str] = &["app", "web", "portcullis-proxy", "log-shipper", "proxy", "portcullis-proxy-certs", "certs"];
const ANNOTATIONS: &[&str] = &[
    "portcullis.dev/inject",
    "portcullis.dev/status",
    "portcullis.dev/templates",
    "kubernetes.io/config.mirror",
    "portcullis.dev/injected",
];

/// A pod object.
pub fn pod(u: &mut Unstructured<'_>) -> Result<Value> {
    let mut spec = Map::new();
    for list in ["containers", "initContainers", "ephemeralContainers", "volumes", "imagePullSecrets"] {
        if u.ratio(2, 3)? {
            spec.insert(list.to_owned(), some_or_wrong(u, |u| containers(u, list))?);
        }
    }
    if u.ratio(1, 4)? {
        spec.insert("hostNetwork".to_owned(), json!(u.arbitrary::<bool>()?));
    }
    spec.extend(json::object(u, 2)?);
    let mut metadata = Map::new();
    metadata.insert("name".to_owned(), json!(*u.choose(NAMES)?));
    if u.ratio(1, 2)? {
        metadata.insert("annotations".to_owned(), some_or_wrong(u, annotations)?);
    }
    if u.ratio(1, 2)? {
        metadata.insert("labels".to_owned(), Value::Object(strings(u)?));
    }
    let spec = if u.ratio(1, 16)? { json::value(u, 1)? } else { Value::Object(spec) };
    Ok(json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}))
}

/// What `make` builds, or once in a while any value in its place.
fn some_or_wrong(u: &mut Unstructured<'_>, make: impl FnOnce(&mut Unstructured<'_>) -> Result<Value>) -> Result<Value> {
    if u.ratio(1, 16)? { json::value(u, 1) } else { make(u) }
}

fn containers(u: &mut Unstructured<'_>, list: &str) -> Result<Value> {
    let mut items = Vec::new();
    for _ in 0..u.int_in_range(0..=4)? {
        let mut item = Map::new();
        let name = if u.ratio(3, 4)? { (*u.choose(NAMES)?).to_owned() } else { json::string(u)? };
        item.insert("name".to_owned(), json!(name));
        if list.ends_with("ontainers") {
            item.insert("image".to_owned(), json!(json::text(u)?));
            if u.ratio(1, 3)? {
                let mounts: Vec<Value> = (0..u.int_in_range(0..=2)?)
                    .map(|_| Ok(json!({"name": *u.choose(NAMES)?, "mountPath": "/m"})))
                    .collect::<Result<_>>()?;
                item.insert("volumeMounts".to_owned(), json!(mounts));
            }
        }
        if u.ratio(1, 4)? {
            item.extend(json::object(u, 1)?);
        }
        items.push(if u.ratio(1, 32)? { json::value(u, 1)? } else { Value::Object(item) });
    }
    Ok(Value::Array(items))
}

fn annotations(u: &mut Unstructured<'_>) -> Result<Value> {
    let mut map = strings(u)?;
    for _ in 0..u.int_in_range(0..=3)? {
        let key = *u.choose(ANNOTATIONS)?;
        let value = if key == "portcullis.dev/status" && u.ratio(3, 4)? { status(u)? } else { json::text(u)? };
        map.insert(key.to_owned(), json!(value));
    }
    Ok(Value::Object(map))
}

/// A status annotation an earlier pass could have written, naming things
/// the pod may or may not have.
fn status(u: &mut Unstructured<'_>) -> Result<String> {
    let names = |u: &mut Unstructured<'_>| -> Result<Vec<&str>> {
        (0..u.int_in_range(0..=2)?).map(|_| u.choose(NAMES).copied()).collect()
    };
    let mut status = json!({
        "templates": names(u)?,
        "containers": names(u)?,
        "initContainers": names(u)?,
        "volumes": names(u)?,
    });
    if u.ratio(1, 2)? {
        let container = *u.choose(NAMES)?;
        status["images"] = json!({container: {"from": json::text(u)?, "to": json::text(u)?}});
        status["volumeMounts"] = json!({container: names(u)?});
    }
    Ok(status.to_string())
}

fn strings(u: &mut Unstructured<'_>) -> Result<Map<String, Value>> {
    let mut map = Map::new();
    for _ in 0..u.int_in_range(0..=3)? {
        map.insert(json::key(u)?, json!(json::text(u)?));
    }
    Ok(map)
}
