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

/// The built-in cluster-scoped kinds, by API group: every other kind is
/// taken as namespaced (in `default` when the document names no
/// namespace), custom cluster-scoped kinds included.
const CLUSTER_SCOPED: [(&str, &str); 34] = [
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("authentication.k8s.io", "TokenReview"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
];

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
    let cluster_scoped = CLUSTER_SCOPED.iter().any(|&(g, k)| g == group && k == kind);
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

/// The resource name of a kind, the way the API server names the common ones
/// (every built-in kind whose schema `portcullis_cel::types` has).
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower == "endpoints" {
        lower
    } else if lower.ends_with('s') || lower.ends_with("ch") {
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
        let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}});
        assert_eq!(as_review(class).unwrap_or_default()["request"]["namespace"], Value::Null);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "StorageClass", "metadata": {"name": "x"}});
        assert_eq!(as_review(custom).unwrap_or_default()["request"]["namespace"], "default", "by group and kind");
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
