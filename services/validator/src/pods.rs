//! Finding the pod spec in a Pod or in any workload's pod template.

use serde_json::Value;

/// Every kind with a pod spec: the kind, the path that names the spec in
/// messages, and its JSON pointer.
const POD_SPECS: [(&str, &str, &str); 8] = [
    ("Pod", "spec", "/spec"),
    ("Deployment", "spec.template.spec", "/spec/template/spec"),
    ("StatefulSet", "spec.template.spec", "/spec/template/spec"),
    ("DaemonSet", "spec.template.spec", "/spec/template/spec"),
    ("ReplicaSet", "spec.template.spec", "/spec/template/spec"),
    ("ReplicationController", "spec.template.spec", "/spec/template/spec"),
    ("Job", "spec.template.spec", "/spec/template/spec"),
    ("CronJob", "spec.jobTemplate.spec.template.spec", "/spec/jobTemplate/spec/template/spec"),
];

/// Every kind [`pod_spec`] finds a pod spec in.
pub fn pod_kinds() -> impl Iterator<Item = &'static str> {
    POD_SPECS.iter().map(|(kind, _, _)| *kind)
}

/// The pod spec of `object` (a `kind`) and its path for messages: a Pod's
/// `spec`, a workload's `spec.template.spec`, a CronJob's
/// `spec.jobTemplate.spec.template.spec`.
pub fn pod_spec<'a>(kind: &str, object: &'a Value) -> Option<(&'static str, &'a Value)> {
    let (_, path, pointer) = POD_SPECS.iter().find(|(k, _, _)| *k == kind)?;
    object.pointer(pointer).filter(|spec| spec.is_object()).map(|spec| (*path, spec))
}

/// One container of a pod spec, with the path that names it in messages.
#[derive(Debug)]
pub struct Container<'a> {
    /// `spec.template.spec.initContainers[0] (migrate)`.
    pub path: String,
    /// The container.
    pub value: &'a Value,
}

/// Every init, regular and ephemeral container of `spec`.
pub fn containers<'a>(prefix: &str, spec: &'a Value) -> Vec<Container<'a>> {
    let mut out = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
            out.push(Container { path: format!("{prefix}.{list}[{i}] ({name})"), value: c });
        }
    }
    out
}
