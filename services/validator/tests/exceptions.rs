//! PolicyException at admission: the exempted object is admitted by that
//! policy and only that one, while the exception lasts; a typo in an
//! exception refuses the whole set, as a broken policy does.

mod support;

use serde_json::{Value, json};
use support::{create, policies_with_cost_limit, run, validator};

const POLICIES: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: replicas}\nspec:\n  match: {resources: [{apiGroups: [apps], kinds: [Deployment]}]}\n  rules: {replicas: {min: 2}}\n---\napiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: team-label}\nspec:\n  rules: {requiredLabels: {team: ''}}\n";

fn exception(extra: &str) -> String {
    format!(
        "{POLICIES}---\napiVersion: portcullis.dev/v1alpha1\nkind: PolicyException\nmetadata: {{name: legacy}}\nspec:\n  policies: [replicas]\n  namespaces: [billing]\n  names: ['legacy-*']\n  reason: one replica until the migration\n{extra}"
    )
}

fn deployment(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
                 "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "x", "image": "x:1"}]}}}
    })
}

#[test]
fn an_exception_exempts_its_objects_from_its_policies_only() {
    let validator = validator(&exception(""));
    let (allowed, message, _, _) = run(&validator, &create(deployment("billing", "legacy-api")));
    assert!(!allowed, "team-label still applies");
    assert!(!message.contains("[replicas]"), "replicas is exempted: {message}");
    assert!(message.contains("[team-label]"), "{message}");
    let (_, message, _, _) = run(&validator, &create(deployment("billing", "api")));
    assert!(message.contains("[replicas]"), "another name is not exempted: {message}");
    let (_, message, _, _) = run(&validator, &create(deployment("shop", "legacy-api")));
    assert!(message.contains("[replicas]"), "another namespace is not exempted: {message}");
}

#[test]
fn an_expired_exception_no_longer_applies() {
    let validator = validator(&exception("  expires: '2020-01-01T00:00:00Z'\n"));
    let (_, message, _, _) = run(&validator, &create(deployment("billing", "legacy-api")));
    assert!(message.contains("[replicas]"), "{message}");
}

#[test]
fn an_exception_for_an_unknown_policy_is_refused() {
    let err = policies_with_cost_limit(&exception("").replace("policies: [replicas]", "policies: [replica]"), 1 << 20)
        .err()
        .unwrap();
    assert!(err.contains("exception legacy") && err.contains("\"replica\", which no ValidatorPolicy defines"), "{err}");
}
