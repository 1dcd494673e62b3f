//! Finding the pod spec in a Pod or in any workload's pod template.

use std::fmt;

use portcullis_admission::json;
use serde_json::Value;

/// Every kind with a pod spec: the kind, the path that names the spec in
/// messages, and where it is.
pub(crate) const POD_SPECS: [(&str, &str, &[&str]); 8] = [
    ("Pod", "spec", &["spec"]),
    ("Deployment", "spec.template.spec", &["spec", "template", "spec"]),
    ("StatefulSet", "spec.template.spec", &["spec", "template", "spec"]),
    ("DaemonSet", "spec.template.spec", &["spec", "template", "spec"]),
    ("ReplicaSet", "spec.template.spec", &["spec", "template", "spec"]),
    ("ReplicationController", "spec.template.spec", &["spec", "template", "spec"]),
    ("Job", "spec.template.spec", &["spec", "template", "spec"]),
    ("CronJob", "spec.jobTemplate.spec.template.spec", &["spec", "jobTemplate", "spec", "template", "spec"]),
];

/// Every kind [`pod_spec`] finds a pod spec in.
pub fn pod_kinds() -> impl Iterator<Item = &'static str> {
    POD_SPECS.iter().map(|(kind, _, _)| *kind)
}

/// The pod spec of `object` (a `kind`) and its path for messages: a Pod's
/// `spec`, a workload's `spec.template.spec`, a CronJob's
/// `spec.jobTemplate.spec.template.spec`.
pub fn pod_spec<'a>(kind: &str, object: &'a Value) -> Option<(&'static str, &'a Value)> {
    let (_, path, at) = POD_SPECS.iter().find(|(k, _, _)| *k == kind)?;
    json::at(object, at).filter(|spec| spec.is_object()).map(|spec| (*path, spec))
}

/// The lists of containers in a pod spec.
pub const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// One container of a pod spec. Displays as the path that names it in
/// messages, `spec.template.spec.initContainers[0] (migrate)`, built only
/// when a message needs it.
#[derive(Debug)]
pub struct Container<'a> {
    /// Where the pod spec is, `spec.template.spec`.
    pub prefix: &'static str,
    /// One of [`CONTAINER_LISTS`].
    pub list: &'static str,
    /// The position in the list.
    pub index: usize,
    /// The container.
    pub value: &'a Value,
}

impl fmt::Display for Container<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.value.get("name").and_then(Value::as_str).unwrap_or("?");
        write!(f, "{}.{}[{}] ({name})", self.prefix, self.list, self.index)
    }
}

/// Every init, regular and ephemeral container of `spec`.
pub fn containers<'a>(prefix: &'static str, spec: &'a Value) -> Vec<Container<'a>> {
    let mut out = Vec::new();
    for list in CONTAINER_LISTS {
        for (index, value) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            out.push(Container { prefix, list, index, value });
        }
    }
    out
}
