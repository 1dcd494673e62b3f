//! What every contender is given: the pod, the injector's configuration, the
//! pod policies (as a Portcullis `ValidatorPolicy` and as a
//! ValidatingAdmissionPolicy), and the floor's precomputed answer.

use std::path::PathBuf;

use portcullis_admission::Verdict;
use serde_json::{Value, json};

/// The injector configuration every injector implements: one native
/// sidecar with a volume, mounts and a pull secret; two image rewrites;
/// four defaults (the criterion benchmark's, so the figures compare).
pub(crate) fn injector_config() -> PathBuf {
    crate::repo().join("services/injector/tests/data/config.yaml")
}

/// A pod as a client sends it: `containers` application containers with
/// ports, requests and an environment variable, no service-account token
/// (so that a patch made in advance applies to what the API server sends).
pub(crate) fn pod(containers: usize) -> Value {
    let containers: Vec<Value> = (0..containers)
        .map(|i| {
            json!({
                "name": format!("app-{i}"), "image": format!("nginx:1.{i}"),
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "env": [{"name": "MODE", "value": "production"}],
            })
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "bench-", "labels": {"app": "web"}, "annotations": {"example.com/owner": "team-a"}},
        "spec": {"automountServiceAccountToken": false, "restartPolicy": "Always", "containers": containers},
    })
}

/// The CREATE review the API server would send for `pod`.
pub(crate) fn review(pod: &Value) -> Vec<u8> {
    let mut object = pod.clone();
    object["metadata"]["name"] = json!("web");
    object["metadata"]["namespace"] = json!("bench");
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "8e7f8b4e-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "bench", "name": "web", "operation": "CREATE",
            "userInfo": {"username": "bench"}, "object": object,
        }
    });
    serde_json::to_vec(&review).unwrap_or_default()
}

/// The JSON Patch Portcullis' injector answers for `pod`: what the floor
/// sends back without reading the request.
pub(crate) fn precomputed_patch(pod: &Value) -> anyhow::Result<Vec<u8>> {
    let text = std::fs::read(injector_config())?;
    let config = portcullis_injector::serve::parse(&vec![(injector_config(), text)])?;
    let req = portcullis_admission::decode(&review(pod))?;
    let outcome = portcullis_injector::mutate::mutate(&req, &config);
    let Verdict::Patch(patch) = outcome.decision.verdict else {
        anyhow::bail!("the injector did not patch the benchmark pod");
    };
    Ok(patch.into_bytes())
}

/// The label that makes a pod break the policies: the evidence that a
/// policy is enforced.
pub(crate) const DENY_LABEL: &str = "bench.portcullis.dev/deny";

/// The pod policies, as (expression, message): what a platform team
/// typically asks of every pod. The benchmark pod passes all of them.
const VALIDATIONS: [(&str, &str); 5] = [
    (
        "!has(object.metadata.labels) || !('bench.portcullis.dev/deny' in object.metadata.labels)",
        "denied by the benchmark",
    ),
    ("has(object.metadata.labels) && 'app' in object.metadata.labels", "pods need an app label"),
    ("object.spec.containers.all(c, !c.image.endsWith(':latest'))", "images must not use :latest"),
    (
        "object.spec.containers.all(c, has(c.resources) && has(c.resources.requests) && 'memory' in c.resources.requests)",
        "every container requests memory",
    ),
    ("!has(object.spec.hostNetwork) || !object.spec.hostNetwork", "pods must not use the host network"),
];

fn validations() -> Vec<Value> {
    VALIDATIONS.iter().map(|(expression, message)| json!({"expression": expression, "message": message})).collect()
}

fn pod_rules() -> Value {
    json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}])
}

/// The policies as a Portcullis `ValidatorPolicy`.
pub(crate) fn validator_policy() -> Value {
    json!({
        "apiVersion": "portcullis.dev/v1alpha1", "kind": "ValidatorPolicy",
        "metadata": {"name": "bench-pods"},
        "spec": {
            "failurePolicy": "Fail",
            "match": {"resources": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
            "validations": validations(),
        }
    })
}

/// The policies as a `ValidatorPolicy` for the namespaces labelled
/// `e2e.portcullis.dev/case: case` only: what is pushed down.
pub(crate) fn validator_policy_for(case: &str) -> Value {
    let mut policy = validator_policy();
    policy["spec"]["match"]["namespaceSelector"] = json!({"matchLabels": {"e2e.portcullis.dev/case": case}});
    policy
}

/// The ValidatingAdmissionPolicies and bindings `portcullis-validator vap`
/// prints for the ValidatorPolicies at `path` (a file or a directory): what
/// the validator pushes down in a cluster, as YAML for `kubectl apply`.
pub(crate) fn vap(bin_dir: &std::path::Path, path: &std::path::Path) -> anyhow::Result<String> {
    let out = std::process::Command::new(bin_dir.join("portcullis-validator"))
        .arg("vap")
        .arg("--policy")
        .arg(path)
        .output()?;
    anyhow::ensure!(out.status.success(), "portcullis-validator vap: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

/// The policies as a ValidatingAdmissionPolicy and its Deny binding for the
/// namespaces labelled `e2e.portcullis.dev/case: case`.
pub(crate) fn admission_policy(case: &str) -> [Value; 2] {
    let name = format!("bench-pods-{case}");
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": pod_rules()}, "validations": validations()},
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name, "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"e2e.portcullis.dev/case": case}}},
            },
        }),
    ]
}

/// The label the benchmark's CEL mutation sets: the evidence that it is in
/// force.
pub(crate) const CEL_LABEL: &str = "bench.portcullis.dev/cel";

/// A typical MAP-style mutation (a label set where it is missing), as
/// `matchConditions` and `mutations` that an `InjectorConfig` entry and a
/// `MutatingAdmissionPolicy` both take.
fn cel_mutation() -> Value {
    json!({
        "matchConditions": [{
            "name": "unlabelled",
            "expression": format!("!has(object.metadata.labels) || !('{CEL_LABEL}' in object.metadata.labels)"),
        }],
        "mutations": [{
            "patchType": "ApplyConfiguration",
            "applyConfiguration": {"expression": format!("Object{{metadata: Object.metadata{{labels: {{'{CEL_LABEL}': 'true'}}}}}}")},
        }],
    })
}

/// The injector configuration with only the CEL mutation.
pub(crate) fn injector_cel_config() -> Value {
    let mut mutation = cel_mutation();
    mutation["name"] = json!("bench-label");
    json!({
        "apiVersion": "portcullis.dev/v1alpha1", "kind": "InjectorConfig",
        "metadata": {"name": "bench-cel"},
        "spec": {"mutations": [mutation]},
    })
}

/// The same mutation as a MutatingAdmissionPolicy and its binding for the
/// namespaces labelled `e2e.portcullis.dev/case: case`.
pub(crate) fn mutating_admission_policy(case: &str) -> [Value; 2] {
    let name = format!("bench-label-{case}");
    let mut spec = cel_mutation();
    spec["matchConstraints"] = json!({"resourceRules": pod_rules()});
    spec["failurePolicy"] = json!("Fail");
    spec["reinvocationPolicy"] = json!("Never");
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": spec,
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "matchResources": {"namespaceSelector": {"matchLabels": {"e2e.portcullis.dev/case": case}}},
            },
        }),
    ]
}
