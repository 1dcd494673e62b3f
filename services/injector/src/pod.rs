//! Small helpers over a pod (or container) as JSON: lists of named items.
//!
//! The injector edits JSON rather than typed structs so that fields it does
//! not know (newer API versions) pass through untouched and the diff holds
//! only what it changed.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::config::object_name;
use crate::status::Status;

/// The pod spec's lists of containers, whose names are unique together.
pub const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The fields of a container the injector reads or writes: everything
/// else (ports, env, resources...) is never copied.
const CONTAINER_FIELDS: [&str; 4] = ["name", "image", "imagePullPolicy", "volumeMounts"];

/// The metadata fields the injector changes, copied whole.
const METADATA_FIELDS: [&str; 2] = ["labels", "annotations"];

/// The spec's fields besides the container lists that the injector
/// changes, copied whole: lists it appends to or removes from, and a flag.
const SPEC_FIELDS: [&str; 3] = ["volumes", "imagePullSecrets", "enableServiceLinks"];

/// The parts of `pod` that the injector may change, at the same paths as
/// in the pod: the [`METADATA_FIELDS`], the [`SPEC_FIELDS`], and of each
/// container only the [`CONTAINER_FIELDS`], unless its items move. The
/// injector edits a copy of this and diffs it with this, instead of copying
/// and diffing the whole pod: the patch is the same, since nothing outside
/// these parts ever changes, and the cost follows what the injector
/// touches, not the pod's size (ADR 0006).
///
/// A container list whose items can move is copied whole, since the diff
/// compares items position by position: `initContainers`, where injected
/// ones go first, and `containers` when `previous` injected some, which
/// come out.
pub fn editable(pod: &Value, previous: &Status) -> Value {
    let Value::Object(fields) = pod else {
        return pod.clone();
    };
    let mut out = Map::new();
    if let Some(metadata) = fields.get("metadata") {
        out.insert("metadata".to_owned(), only(metadata, &METADATA_FIELDS));
    }
    if let Some(spec) = fields.get("spec") {
        let mut copy = match spec {
            Value::Object(_) => only(spec, &SPEC_FIELDS),
            other => other.clone(),
        };
        if let (Value::Object(copy), Value::Object(spec)) = (&mut copy, spec) {
            for list in CONTAINER_LISTS {
                let items_move = match list {
                    "initContainers" => true,
                    "containers" => !previous.containers.is_empty(),
                    _ => false,
                };
                let value = match spec.get(list) {
                    Some(Value::Array(items)) if !items_move => {
                        Value::Array(items.iter().map(|item| only(item, &CONTAINER_FIELDS)).collect())
                    }
                    Some(other) => other.clone(),
                    None => continue,
                };
                copy.insert(list.to_owned(), value);
            }
        }
        out.insert("spec".to_owned(), copy);
    }
    Value::Object(out)
}

/// The `keys` of `value` if it is an object; anything else whole.
fn only(value: &Value, keys: &[&str]) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    Value::Object(keys.iter().filter_map(|&key| Some((key.to_owned(), map.get(key)?.clone()))).collect())
}

/// Why the spec's containers cannot be told apart by name, if they cannot:
/// a container without a name, or a name used twice. The API server
/// refuses such a pod after admission; the injector must not edit it
/// first, as everything it records is by container name.
pub fn unnamed_or_duplicate(spec: &Value) -> Option<String> {
    let mut seen = BTreeSet::new();
    for list in CONTAINER_LISTS {
        for item in items(spec, list) {
            let name = object_name(item);
            if name.is_empty() {
                return Some(format!("an item of spec.{list} has no name"));
            }
            if !seen.insert(name) {
                return Some(format!("the container name {name:?} is used twice"));
            }
        }
    }
    None
}

/// The items of the array at `key`, or none.
pub fn items<'a>(parent: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> + use<'a> {
    parent.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The `name`s of the items at `key`.
pub fn names<'a>(parent: &'a Value, key: &str) -> impl Iterator<Item = String> + use<'a> {
    items(parent, key).map(|item| object_name(item).to_owned())
}

/// The array at `key`, created empty when absent.
pub fn list_mut<'a>(parent: &'a mut Value, key: &str) -> &'a mut Vec<Value> {
    let slot = object_mut(parent).entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    match slot {
        Value::Array(list) => list,
        _ => unreachable!("just made an array"),
    }
}

/// Keeps the items at `key` for which `keep` is true; drops the key when
/// nothing is left, as the API server omits empty lists.
pub fn retain(parent: &mut Value, key: &str, keep: impl Fn(&Value) -> bool) {
    let Some(list) = parent.get_mut(key).and_then(Value::as_array_mut) else {
        return;
    };
    let before = list.len();
    list.retain(|item| keep(item));
    if list.is_empty()
        && before > 0
        && let Some(map) = parent.as_object_mut()
    {
        map.remove(key);
    }
}

/// The item named `name` in the array at `key`.
pub fn find_mut<'a>(parent: &'a mut Value, key: &str, name: &str) -> Option<&'a mut Value> {
    parent.get_mut(key)?.as_array_mut()?.iter_mut().find(|item| object_name(item) == name)
}

/// `value` as an object, replacing anything else with an empty object.
pub fn object_mut(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

/// The string annotation `key` of `object`.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// The `metadata.<field>` map (labels or annotations), created when absent.
pub fn metadata_map<'a>(object: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    let metadata = object_mut(object).entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    object_mut(object_mut(metadata).entry(field).or_insert_with(|| Value::Object(Map::new())))
}
