//! Manifests for the offline modes: YAML or JSON documents, and plain
//! objects wrapped in the CREATE review the API server would send.

use serde::Deserialize as _;
use serde_json::{Value, json};

/// Why a manifest cannot be reviewed.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A document is neither YAML nor JSON.
    #[error("document {doc} is not YAML or JSON")]
    Syntax {
        /// 1-based document index.
        doc: usize,
        /// The parser's message.
        #[source]
        source: serde_yaml::Error,
    },
    /// The input has no documents.
    #[error("the input has no documents")]
    Empty,
    /// An object without `apiVersion` or `kind`.
    #[error("an object has no {0}")]
    Missing(&'static str),
}

/// The non-empty documents of a YAML or JSON stream, as JSON. A `List`
/// (as `kubectl get -o yaml` prints) contributes its items.
pub fn documents(input: &[u8]) -> Result<Vec<Value>, ManifestError> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_slice(input).enumerate() {
        let value = Value::deserialize(doc).map_err(|source| ManifestError::Syntax { doc: i + 1, source })?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(map.get("items").and_then(Value::as_array).cloned().unwrap_or_default());
            }
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return Err(ManifestError::Empty);
    }
    Ok(out)
}

/// An AdmissionReview as it is; any other object wrapped in a CREATE
/// review (`admission.k8s.io/v1`, dry run) as the API server would send it.
pub fn as_review(document: Value) -> Result<Value, ManifestError> {
    if document["kind"] == "AdmissionReview" {
        return Ok(document);
    }
    let api_version = document["apiVersion"].as_str().ok_or(ManifestError::Missing("apiVersion"))?;
    let kind = document["kind"].as_str().ok_or(ManifestError::Missing("kind"))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = plural(kind);
    let cluster_scoped =
        matches!(kind, "Namespace" | "ClusterRole" | "ClusterRoleBinding" | "Node" | "PersistentVolume");
    let namespace = (!cluster_scoped)
        .then(|| document.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_owned());
    let name = document.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    Ok(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000000",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "namespace": namespace,
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "portcullis offline"},
            "object": document,
            "oldObject": null,
            "dryRun": true,
        }
    }))
}

/// The resource name of a kind, the way the API server names the common ones.
fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') || lower.ends_with("ch") {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_objects_like_the_api_server() {
        let review = as_review(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}))
            .unwrap_or_default();
        assert_eq!(review["request"]["kind"], json!({"group": "apps", "version": "v1", "kind": "Deployment"}));
        assert_eq!(review["request"]["resource"]["resource"], "deployments");
        assert_eq!(review["request"]["namespace"], "default");
        let ns =
            as_review(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})).unwrap_or_default();
        assert_eq!(ns["request"]["namespace"], Value::Null);
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
    }

    #[test]
    fn lists_and_multi_documents() {
        let docs = documents(b"kind: List\nitems: [{kind: A}, {kind: B}]\n---\n---\nkind: C\n").unwrap_or_default();
        assert_eq!(docs.len(), 3);
        assert!(matches!(documents(b"---\n"), Err(ManifestError::Empty)));
    }
}
