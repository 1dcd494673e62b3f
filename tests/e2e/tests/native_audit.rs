//! Native ValidatingAdmissionPolicies audited, as a platform team meets
//! them: ConfigMaps stored before the policies exist, then three VAPs
//! (one whose limit is a label of the namespace, read through
//! `namespaceObject`, one with variables and a messageExpression, one with
//! parameters) bound with Deny, Warn and Audit;
//! `portcullis-validator audit --watch-resources` reports the stored
//! objects that break them in the namespace's OpenReport, with the VAP's
//! name as the policy. Differential: for every object, the API server's
//! own verdict on it now (a server-side dry-run replace, by kubectl, whose
//! warnings show Warn) must be the audit's, message included. A deleted
//! binding takes its results away.
//!
//! Its own test binary: the audit here judges every policy of the cluster.

use std::time::Duration;

use portcullis_e2e::audit::{self, install_reports, result, start_watching};
use portcullis_e2e::webhook::namespace;
use portcullis_e2e::{cluster, eventually, ok, unique};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

/// The three policies and their bindings, all selecting namespaces
/// labelled `e2e.portcullis.dev/native-audit: <ns>`.
fn policies(ns: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {ns}-size}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}}
  validations:
  - expression: "!has(object.data) || size(object.data) <= int(namespaceObject.metadata.labels['max-keys'])"
    messageExpression: "'at most ' + namespaceObject.metadata.labels['max-keys'] + ' keys in namespace ' + namespaceObject.metadata.name"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {ns}-size}}
spec:
  policyName: {ns}-size
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/native-audit: {ns}}}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {ns}-owner}}
spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}}
  matchConditions:
  - {{name: not-the-root-ca, expression: "object.metadata.name != 'kube-root-ca.crt'"}}
  variables:
  - {{name: owner, expression: "object.metadata.?labels.?owner.orValue('')"}}
  validations:
  - expression: variables.owner != ''
    messageExpression: "'config map ' + object.metadata.name + ' has no owner label'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {ns}-owner}}
spec:
  policyName: {ns}-owner
  validationActions: [Warn]
  matchResources:
    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/native-audit: {ns}}}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {ns}-forbidden}}
spec:
  paramKind: {{apiVersion: v1, kind: ConfigMap}}
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}}
  validations:
  - expression: "!has(object.data) || !(params.data.key in object.data)"
    messageExpression: "'the key ' + params.data.key + ' is forbidden'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {ns}-forbidden}}
spec:
  policyName: {ns}-forbidden
  validationActions: [Audit]
  paramRef: {{name: forbidden, namespace: {ns}, parameterNotFoundAction: Deny}}
  matchResources:
    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/native-audit: {ns}}}}}
"#
    )
}

/// ConfigMaps on both sides of each policy's edges.
fn objects(ns: &str) -> Vec<Value> {
    let cm = |name: &str, labels: Value, data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": data})
    };
    vec![
        cm("forbidden", json!({"owner": "platform"}), json!({"key": "secret"})),
        cm("two-keys", json!({"owner": "shop"}), json!({"a": "1", "b": "2"})),
        cm("three-keys", json!({"owner": "shop"}), json!({"a": "1", "b": "2", "c": "3"})),
        cm("no-owner", json!({}), json!({"a": "1"})),
        cm("empty-owner", json!({"owner": ""}), json!({})),
        cm("has-secret", json!({"owner": "shop"}), json!({"secret": "x"})),
        cm("everything-wrong", json!({}), json!({"secret": "x", "b": "2", "c": "3"})),
    ]
}

/// The API server's verdict on `object` now (kubectl, server-side dry-run
/// replace): the denial's message, and the warnings.
fn api_server(object: &Value) -> (Option<String>, Vec<String>) {
    let out = cluster().kubectl_stdin(&["replace", "--dry-run=server", "-f", "-"], &object.to_string());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let warnings = stderr.lines().filter_map(|l| l.strip_prefix("Warning: ")).map(str::to_owned).collect();
    let denial = (!out.status.success()).then(|| {
        let (_, message) = stderr.split_once("denied request: ").unwrap_or_else(|| panic!("{stderr}"));
        message.trim().to_owned()
    });
    (denial, warnings)
}

#[tokio::test]
async fn stored_objects_that_break_native_policies_are_reported_as_the_api_server_judges_them() {
    install_reports();
    cluster().install_kinds();
    let client = cluster().client().await;
    let ns = unique("native-audit");
    namespace(&client, &ns, &[("e2e.portcullis.dev/native-audit", &ns), ("max-keys", "2")]).await;
    let objects = objects(&ns);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    ok(cluster().kubectl_stdin(&["create", "-f", "-"], &list.to_string()));
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &policies(&ns)));
    let (size, owner, forbidden) = (format!("{ns}-size"), format!("{ns}-owner"), format!("{ns}-forbidden"));
    eventually("the API server enforces the policies", MINUTE, || {
        let (denial, warnings) = api_server(&objects[6]);
        (denial.is_some() && !warnings.is_empty()).then_some(())
    })
    .await;

    let (_audit, _admin) = start_watching("native-audit", &unique("native-audit-lease"), &[]);
    let names: Vec<&str> = objects.iter().map(|o| o["metadata"]["name"].as_str().expect("a test step")).collect();
    let report = eventually("every stored object judged by the three policies", MINUTE, || {
        let report = audit::report(Some(&ns))?;
        let all = names.iter().all(|n| [&size, &owner, &forbidden].iter().all(|p| result(&report, p, n).is_some()));
        all.then_some(report)
    })
    .await;

    let mut differences = Vec::new();
    for object in &objects {
        let name = object["metadata"]["name"].as_str().expect("a test step");
        let (denial, warnings) = api_server(object);
        let (size_result, owner_result) =
            (result(&report, &size, name).expect("a test step"), result(&report, &owner, name).expect("a test step"));
        // Deny: `fail` with the API server's message exactly when it denies.
        let ours = (size_result["result"] == "fail").then(|| size_result["message"].as_str().unwrap_or_default());
        if ours != denial.as_deref() {
            differences.push(format!("{name}: {size}: API server {denial:?}, audit {size_result}"));
        }
        // Warn: `warn` with the API server's warning exactly when it warns.
        let warned = warnings.iter().find(|w| w.contains(&format!("ValidatingAdmissionPolicy '{owner}'")));
        let ours = (owner_result["result"] == "warn").then(|| {
            let message = owner_result["message"].as_str().unwrap_or_default();
            format!("Validation failed for ValidatingAdmissionPolicy '{owner}' with binding '{owner}': {message}")
        });
        if ours.as_ref() != warned {
            differences.push(format!("{name}: {owner}: API server {warned:?}, audit {owner_result}"));
        }
        for source in [size_result, owner_result] {
            assert_eq!(source["source"], "ValidatingAdmissionPolicy", "{source}");
        }
    }
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));

    // Audit: no admission verdict to compare; `fail` with action audit.
    let audited = result(&report, &forbidden, "has-secret").expect("a test step");
    assert_eq!(audited["result"], "fail", "{audited}");
    assert_eq!(audited["properties"]["action"], "audit");
    assert_eq!(audited["properties"]["binding"], forbidden.as_str());
    assert_eq!(audited["message"], "the key secret is forbidden");
    assert_eq!(result(&report, &forbidden, "two-keys").expect("a test step")["result"], "pass");

    // A deleted binding binds nothing: its results go.
    ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding", &size]));
    eventually("the deleted binding's results are gone", MINUTE, || {
        audit::report(Some(&ns)).filter(|r| names.iter().all(|n| result(r, &size, n).is_none()))
    })
    .await;
    ok(cluster().kubectl(&[
        "delete",
        "validatingadmissionpolicy,validatingadmissionpolicybinding",
        &owner,
        &forbidden,
        "--ignore-not-found",
    ]));
    ok(cluster().kubectl(&["delete", "validatingadmissionpolicy", &size]));
}
