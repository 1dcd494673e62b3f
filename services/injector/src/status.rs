//! The `portcullis.dev/status` annotation: what the injector added to a pod,
//! so that the next pass can take exactly that out before injecting again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one pass injected and rewrote. Serialised deterministically (sorted
/// maps, ordered lists) so that an unchanged pass writes the same text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Templates applied, in order.
    #[serde(default)]
    pub templates: Vec<String>,
    /// Names of containers added to `spec.containers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<String>,
    /// Names of containers added to `spec.initContainers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<String>,
    /// Names of volumes added to `spec.volumes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// Mount names added, by the container they were added to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub volume_mounts: BTreeMap<String, Vec<String>>,
    /// Names added to `spec.imagePullSecrets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// Images rewritten, by container name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, Rewrite>,
}

/// One image rewrite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewrite {
    /// The image the pod asked for.
    pub from: String,
    /// The image it now pulls.
    pub to: String,
}

impl Status {
    /// The status annotation of `pod`, read: `None` when the pod has none.
    pub fn of(pod: &serde_json::Value) -> Option<Result<Self, serde_json::Error>> {
        crate::pod::annotation(pod, portcullis_admission::names::STATUS_ANNOTATION).map(serde_json::from_str)
    }

    /// Whether nothing was injected or rewritten.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.images.is_empty()
    }
}
