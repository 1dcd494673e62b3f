//! The benchmark's reviews: the CREATE of a pod with `containers` app
//! containers (`app-0`..), each with ports, resources, env and a mount, as
//! kubectl and the API server's defaults leave them; or of a given pod
//! (`tests/data/pod-from-deployment.json`: a Deployment's pod as the API
//! server sends it, with managedFields, probes and defaults). Shared by
//! `benches/admission.rs` and `examples/admit.rs`.

use serde_json::{Value, json};

/// The pod with `containers` app containers.
pub(crate) fn pod(containers: usize) -> Value {
    let containers: Vec<Value> = (0..containers)
        .map(|i| {
            json!({
                "name": format!("app-{i}"), "image": format!("nginx:1.{i}"),
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "env": [{"name": "MODE", "value": "production"}],
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"
            })
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"},
                     "annotations": {"example.com/owner": "team-a", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"containers": containers, "restartPolicy": "Always", "serviceAccountName": "default",
                 "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}
    })
}

/// The AdmissionReview body of the CREATE of `pod`.
pub(crate) fn review(pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "bench", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "demo", "operation": "CREATE", "userInfo": {"username": "bench"},
            "object": pod
        }
    }))
    .unwrap_or_default()
}
