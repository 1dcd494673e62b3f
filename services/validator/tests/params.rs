//! `paramKind`/`paramRef`: the objects a policy reads as `params`, found
//! by the API server's rules (name or selector, the request's namespace
//! for a namespaced kind, `parameterNotFoundAction`).

mod support;

use std::sync::Arc;

use portcullis_known::params::FileParams;
use serde_json::{Value, json};
use support::{create, run};

fn policy(param_ref: &str) -> String {
    format!(
        r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {{name: max-replicas}}
spec:
  match:
    resources: [{{apiGroups: [apps], kinds: [Deployment]}}]
  paramKind: {{apiVersion: v1, kind: ConfigMap}}
  paramRef: {param_ref}
  validations:
    - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
      messageExpression: "'at most ' + params.data.maxReplicas + ' replicas (' + params.metadata.name + ')'"
"#
    )
}

fn limits(namespace: &str, name: &str, max: u32, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace, "labels": labels},
           "data": {"maxReplicas": max.to_string()}})
}

fn deployment(namespace: &str, replicas: u32) -> Value {
    create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": namespace}, "spec": {"replicas": replicas}}))
}

fn validator(param_ref: &str, objects: Vec<Value>) -> portcullis_validator::webhook::Validator {
    support::validator(&policy(param_ref)).with_params(Arc::new(FileParams::new(objects)))
}

#[test]
fn a_named_parameter_is_read_in_the_requests_namespace() {
    let v = validator(
        "{name: limits, parameterNotFoundAction: Deny}",
        vec![limits("team-a", "limits", 3, json!({})), limits("team-b", "limits", 10, json!({}))],
    );
    let (allowed, message, _, _) = run(&v, &deployment("team-a", 5));
    assert!(!allowed);
    assert!(message.contains("Deployment team-a/web: at most 3 replicas (limits)"), "{message}");
    assert!(run(&v, &deployment("team-b", 5)).0, "team-b allows 10");
    let (allowed, message, _, _) = run(&v, &deployment("team-c", 1));
    assert!(!allowed, "no parameter in team-c and the action is Deny");
    assert!(
        message.contains("failed to configure binding: no params found for policy binding with `Deny`"),
        "{message}"
    );
}

#[test]
fn allow_lets_requests_through_when_no_parameter_exists() {
    let v = validator("{name: limits, parameterNotFoundAction: Allow}", vec![]);
    assert!(run(&v, &deployment("team-a", 50)).0);
}

#[test]
fn a_fixed_namespace_serves_every_request() {
    let v = validator(
        "{name: limits, namespace: platform, parameterNotFoundAction: Deny}",
        vec![limits("platform", "limits", 2, json!({}))],
    );
    assert!(!run(&v, &deployment("team-a", 3)).0);
    assert!(run(&v, &deployment("team-b", 2)).0);
}

#[test]
fn a_selector_judges_the_object_once_per_parameter() {
    let v = validator(
        "{selector: {matchLabels: {portcullis.dev/limits: 'true'}}, parameterNotFoundAction: Deny}",
        vec![
            limits("team-a", "strict", 2, json!({"portcullis.dev/limits": "true"})),
            limits("team-a", "loose", 8, json!({"portcullis.dev/limits": "true"})),
            limits("team-a", "unrelated", 1, json!({})),
        ],
    );
    let (allowed, message, _, findings) = run(&v, &deployment("team-a", 4));
    assert!(!allowed);
    assert!(message.contains("at most 2 replicas (strict)"), "{message}");
    assert_eq!(findings.len(), 1, "only the strict parameter refuses: {findings:?}");
    assert!(run(&v, &deployment("team-a", 2)).0);
}

#[test]
fn a_cluster_scoped_object_cannot_use_the_requests_namespace() {
    let yaml = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: ns-labels}
spec:
  match:
    resources: [{apiGroups: [""], kinds: [Namespace]}]
  paramKind: {apiVersion: v1, kind: ConfigMap}
  paramRef: {name: limits, parameterNotFoundAction: Deny}
  validations:
    - expression: "true"
"#;
    let v = support::validator(yaml).with_params(Arc::new(FileParams::new(vec![limits("x", "limits", 1, json!({}))])));
    let namespace = create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-z"}}));
    let (allowed, message, _, _) = run(&v, &namespace);
    assert!(!allowed);
    assert!(
        message.contains("cannot use namespaced paramRef in policy binding that matches cluster-scoped"),
        "{message}"
    );
}

#[test]
fn params_and_its_reference_are_checked_at_load() {
    let refused = |yaml: &str| support::policies_with_cost_limit(yaml, u64::MAX).unwrap_err();
    let base = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: p}\nspec:\n";
    let no_kind = format!("{base}  validations:\n    - expression: \"object.metadata.name != params.data.name\"\n");
    assert!(refused(&no_kind).contains("reads `params` but the policy has no paramKind"));
    let no_ref =
        format!("{base}  paramKind: {{apiVersion: v1, kind: ConfigMap}}\n  validations:\n    - expression: \"true\"\n");
    assert!(refused(&no_ref).contains("paramKind is set but paramRef is not"));
    let no_action = format!(
        "{base}  paramKind: {{apiVersion: v1, kind: ConfigMap}}\n  paramRef: {{name: x}}\n  validations:\n    - expression: \"true\"\n"
    );
    assert!(refused(&no_action).contains("parameterNotFoundAction is required"));
}
