//! Valid `AdmissionReview` envelopes (v1 and v1beta1) around arbitrary
//! objects: what the API server could send, so that the decisions behind
//! `decode` are reached.

use arbitrary::{Result, Unstructured};
use serde_json::{Value, json};

/// Kinds the shipped configurations act on: group, version, kind, resource.
pub const KINDS: &[(&str, &str, &str, &str)] = &[
    ("", "v1", "Pod", "pods"),
    ("apps", "v1", "Deployment", "deployments"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("apps", "v1", "DaemonSet", "daemonsets"),
    ("batch", "v1", "Job", "jobs"),
    ("batch", "v1", "CronJob", "cronjobs"),
    ("", "v1", "Service", "services"),
    ("", "v1", "ConfigMap", "configmaps"),
    ("", "v1", "Namespace", "namespaces"),
];
const OPERATIONS: &[&str] = &["CREATE", "UPDATE", "DELETE", "CONNECT"];
const SUB_RESOURCES: &[&str] = &["scale", "status", "ephemeralcontainers", "exec"];
const NAMESPACES: &[&str] = &["demo", "default", "kube-system", "portcullis-system"];

/// Everything of a review but its objects.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// `admission.k8s.io/v1` or `v1beta1`.
    pub api_version: &'static str,
    /// One of [`KINDS`].
    pub kind: (&'static str, &'static str, &'static str, &'static str),
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'static str,
    /// `scale`, `ephemeralcontainers`...
    pub sub_resource: Option<&'static str>,
    /// The request's namespace.
    pub namespace: &'static str,
    /// Whether the request is a dry run.
    pub dry_run: bool,
}

impl Envelope {
    /// A pod CREATE in `demo`, as `kubectl run` sends it.
    pub fn pod_create() -> Self {
        Self {
            api_version: "admission.k8s.io/v1",
            kind: KINDS[0],
            operation: "CREATE",
            sub_resource: None,
            namespace: "demo",
            dry_run: false,
        }
    }

    /// Any envelope the API server could send.
    pub fn arbitrary(u: &mut Unstructured<'_>) -> Result<Self> {
        Ok(Self {
            api_version: if u.arbitrary()? { "admission.k8s.io/v1" } else { "admission.k8s.io/v1beta1" },
            kind: *u.choose(KINDS)?,
            operation: u.choose(OPERATIONS)?,
            sub_resource: if u.ratio(1, 4)? { Some(u.choose(SUB_RESOURCES)?) } else { None },
            namespace: u.choose(NAMESPACES)?,
            dry_run: u.arbitrary()?,
        })
    }

    /// The review around `object` and `old_object`.
    pub fn wrap(&self, object: Option<&Value>, old_object: Option<&Value>) -> Value {
        let (group, version, kind, resource) = self.kind;
        json!({
            "apiVersion": self.api_version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "7f0e3c0a-fuzz",
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version, "resource": resource},
                "subResource": self.sub_resource,
                "name": "fuzzed",
                "namespace": self.namespace,
                "operation": self.operation,
                "userInfo": {"username": "fuzzer", "groups": ["system:authenticated"]},
                "object": object,
                "oldObject": old_object,
                "dryRun": self.dry_run,
            }
        })
    }

    /// The review's bytes, as the API server sends them.
    pub fn body(&self, object: Option<&Value>, old_object: Option<&Value>) -> Vec<u8> {
        serde_json::to_vec(&self.wrap(object, old_object)).unwrap_or_default()
    }
}
