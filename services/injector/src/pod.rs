//! A pod as the injector reads it (the parts it may change), and small
//! helpers over a pod (or container) as JSON: lists of named items.
//!
//! The injector edits JSON rather than typed structs so that fields it does
//! not know (newer API versions) pass through untouched and the diff holds
//! only what it changed.

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};

use portcullis_admission::names::{INJECT_ANNOTATION, STATUS_ANNOTATION, TEMPLATES_ANNOTATION};
use portcullis_admission::parts::Parts;
use portcullis_admission::{DecodeError, Request, decode_parts};
use serde_json::{Map, Value};

use crate::config::object_name;
use crate::status::Status;

/// Set by the kubelet on mirror pods of static pods, which must not change.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The pod spec's lists of containers, whose names are unique together.
pub const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The parts of a pod the injector's templates, image rewrites and
/// defaults read or may change, and all it builds of a request's pod
/// without CEL mutations ([`decode`]): `apiVersion` and `kind` (checked
/// against the request); of the annotations the injector's own (the
/// defaults' labels and annotations are added by [`parts_for`]); of the
/// spec, `hostNetwork`, a flag, the image pull secrets, the init
/// containers whole (injected ones go first, so their items move), of the
/// volumes and the other containers' mounts the names (and paths) it
/// compares, and of the other containers only what it reads or writes. A
/// pod an earlier pass injected into is read whole ([`decode`]): taking
/// that injection out moves items. The injector
/// edits a copy of these parts and diffs it with them: the patch is the
/// same as from the whole pod, since nothing else is read or changed, and
/// the cost follows what the injector touches, not the pod's size (ADR
/// 0006).
pub static EDITABLE: LazyLock<Parts> = LazyLock::new(|| {
    // The fields of a container the injector reads or writes: everything
    // else (ports, env, resources, probes...) is never built.
    let container = || {
        Parts::items(Parts::fields([
            ("name", Parts::All),
            ("image", Parts::All),
            ("imagePullPolicy", Parts::All),
            ("volumeMounts", Parts::items(Parts::fields([("name", Parts::All), ("mountPath", Parts::All)]))),
        ]))
    };
    // Of the labels and annotations, only the keys read or written:
    // adding a key to a map that exists is the same operation whatever
    // else it holds, and the rest (a `last-applied-configuration` of the
    // whole manifest, say) is never built, copied or compared. The
    // defaults' keys are the configuration's ([`parts_for`]).
    let annotations = [STATUS_ANNOTATION, TEMPLATES_ANNOTATION, INJECT_ANNOTATION, MIRROR_ANNOTATION];
    let annotations = Parts::fields(annotations.map(|key| (key, Parts::All)));
    Parts::fields([
        ("apiVersion", Parts::All),
        ("kind", Parts::All),
        ("metadata", Parts::fields([("labels", Parts::fields([])), ("annotations", annotations)])),
        (
            "spec",
            Parts::fields([
                ("hostNetwork", Parts::All),
                ("enableServiceLinks", Parts::All),
                ("volumes", Parts::items(Parts::fields([("name", Parts::All)]))),
                ("imagePullSecrets", Parts::All),
                ("initContainers", Parts::All),
                ("containers", container()),
                ("ephemeralContainers", container()),
            ]),
        ),
    ])
});

/// The parts of a pod `config`'s decision reads or may change: the
/// [`EDITABLE`] parts, the labels and annotations its defaults add, and
/// what its CEL mutations read and change (ADR 0010), built once when the
/// configuration is put in force.
pub fn parts_for(config: &crate::config::Config) -> Arc<Parts> {
    let mut parts = EDITABLE.clone();
    let keys = |map: &'_ std::collections::BTreeMap<String, String>| {
        Parts::fields(map.keys().map(|key| (key.as_str(), Parts::All)).collect::<Vec<_>>())
    };
    let (labels, annotations) = (keys(&config.defaults.labels), keys(&config.defaults.annotations));
    parts.merge(Parts::fields([("metadata", Parts::fields([("labels", labels), ("annotations", annotations)]))]));
    for mutation in &config.mutations {
        parts.merge(mutation.pod_parts.clone());
    }
    Arc::new(parts)
}

/// Reads a review, building of its pod only `parts` ([`parts_for`]). A
/// pod that an earlier pass injected app containers, volumes or mounts
/// into is read whole: taking them out moves the items after them, and
/// the diff, which compares list items by position, then writes those
/// items whole.
pub fn decode(body: &[u8], parts: &Arc<Parts>) -> Result<Request, DecodeError> {
    let req = decode_parts(body, parts)?;
    let injected = req.object.as_ref().and_then(Status::of).and_then(Result::ok).is_some_and(|previous| {
        !(previous.containers.is_empty() && previous.volumes.is_empty() && previous.volume_mounts.is_empty())
    });
    if injected { portcullis_admission::decode(body) } else { Ok(req) }
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

/// Why the injector cannot go on with `pod` after a CEL mutation changed
/// it, if it cannot: its metadata, labels, annotations or spec are not
/// objects, a container is not an object, or [`unnamed_or_duplicate`].
pub fn unusable(pod: &Value) -> Option<String> {
    unusable_in(pod, true)
}

/// As [`unusable`], checking the spec only when `check_spec` is true:
/// after a mutation that cannot change it, the spec is as usable as it was.
pub fn unusable_in(pod: &Value, check_spec: bool) -> Option<String> {
    let not_object = |v: Option<&Value>| v.is_some_and(|v| !v.is_object());
    let metadata = pod.get("metadata");
    if !pod.is_object() || not_object(metadata) {
        return Some("the pod or its metadata is not an object".to_owned());
    }
    for field in ["labels", "annotations"] {
        if not_object(metadata.and_then(|m| m.get(field))) {
            return Some(format!("metadata.{field} is not an object"));
        }
    }
    if !check_spec {
        return None;
    }
    let Some(spec) = pod.get("spec").filter(|s| s.is_object()) else {
        return Some("spec is not an object".to_owned());
    };
    for list in CONTAINER_LISTS {
        let not_a_list = spec.get(list).is_some_and(|l| !l.is_null() && !l.is_array());
        if not_a_list || items(spec, list).any(|item| !item.is_object()) {
            return Some(format!("spec.{list} is not a list of objects"));
        }
    }
    unnamed_or_duplicate(spec)
}

/// The items of the array at `key`, or none.
pub fn items<'a>(parent: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> + use<'a> {
    parent.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// Whether the array at `key` has an item named `name`.
pub fn has_named(parent: &Value, key: &str, name: &str) -> bool {
    items(parent, key).any(|item| object_name(item) == name)
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
