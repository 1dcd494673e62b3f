//! CEL rules as Kubernetes' ValidatingAdmissionPolicy runs them: the
//! documentation's examples (matchConditions, variables, messageExpression,
//! reason, oldObject), failure policies and the evaluation deadline.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use portcullis_validator::evaluate::NamespaceLabels;
use portcullis_validator::webhook::Validator;
use serde_json::{Value, json};
use support::{create, messages, run, update};

fn set() -> Validator {
    let yaml = std::fs::read_to_string(support::data("policies.yaml")).unwrap();
    let only_cel: String = yaml.split("\n---\n").filter(|d| d.contains("deployment-cel")).collect();
    support::validator(&only_cel)
}

fn deployment(name: &str, replicas: i64, images: &[&str]) -> Value {
    let containers: Vec<Value> =
        images.iter().enumerate().map(|(i, image)| json!({"name": format!("c{i}"), "image": image})).collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "labels": {"team": "shop", "environment": "prod"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}}}
    })
}

#[test]
fn a_valid_deployment_passes_every_validation() {
    let (allowed, message, _, findings) = run(&set(), &create(deployment("web", 3, &["registry.example.com/web:1"])));
    assert!(allowed, "{message}");
    assert!(findings.is_empty());
}

#[test]
fn the_documentation_examples_deny_with_their_messages() {
    let mut d = deployment("Web", 6, &["nginx:1", "example.com/app:1"]);
    d["metadata"]["labels"]["environment"] = json!("qa");
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": "4Gi"}});
    let (allowed, message, _, findings) = run(&set(), &create(d));
    assert!(!allowed);
    let p = "[deployment-cel] Deployment shop/Web";
    assert_eq!(
        messages(&findings),
        [
            format!("{p}: object.spec.replicas must be no greater than 5"),
            format!("{p}: images from example.com must come from registry.example.com, found example.com/app:1"),
            format!("{p}: the name must be lower-case letters, digits and dashes"),
            format!("{p}: memory limits must be below 2Gi"),
            format!("{p}: environment must be dev, staging or prod"),
        ]
    );
    // Every violation is reported at once, in one denial.
    assert_eq!(message.lines().count(), 5, "{message}");
}

#[test]
fn reason_sets_the_status_code() {
    let req =
        portcullis_admission::decode(&serde_json::to_vec(&create(deployment("Web", 3, &["x:1"]))).unwrap()).unwrap();
    let (decision, _) = set().review(&req);
    assert_eq!(decision.denied.map(|(code, _)| code), Some(422));
}

#[test]
fn match_conditions_skip_what_they_exclude() {
    let mut review = create(deployment("web", 99, &["x:1"]));
    review["request"]["userInfo"] = json!({"username": "system:node:n1", "groups": ["system:nodes"]});
    let (allowed, _, _, findings) = run(&set(), &review);
    assert!(allowed && findings.is_empty(), "requests from nodes are excluded");
}

#[test]
fn updates_see_the_old_object() {
    let old = deployment("web", 3, &["x:1"]);
    let mut new = old.clone();
    new["metadata"]["labels"]["team"] = json!("other");
    new["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    let (allowed, _, _, findings) = run(&set(), &update(old.clone(), new));
    assert!(!allowed);
    assert_eq!(
        messages(&findings),
        [
            "[deployment-cel] Deployment shop/web: the team label may not change (was shop)",
            "[deployment-cel] Deployment shop/web: spec.selector may not change",
        ]
    );
    assert!(run(&set(), &update(old.clone(), old)).0, "an unchanged update passes");
}

const SLOW: &str = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: slow}
spec:
  failurePolicy: FAILURE
  validations:
    - expression: object.data.items.all(a, object.data.items.all(b, object.data.items.all(c, a + b + c != '')))
"#;

#[test]
fn evaluation_is_bounded_in_time_and_follows_the_failure_policy() {
    // 400 items: 64 million passes. Before evaluations stopped themselves,
    // the abandoned ones burned both cores for a minute and starved every
    // later test of this binary.
    let items: Vec<String> = (0..400).map(|i| format!("item-{i}")).collect();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "shop"}, "data": {"items": items}});
    let mut settings = support::settings();
    settings.cel_deadline = Duration::from_millis(50);
    // The cost estimate would refuse this policy at load (next test); with
    // the estimate off, the deadline is the backstop.
    let validator = |policy: &str| {
        Validator::new(
            support::policies_with_cost_limit(&SLOW.replace("FAILURE", policy), u64::MAX).unwrap(),
            settings.clone(),
            Arc::new(portcullis_validator::webhook::NoNamespaces),
        )
    };
    let (allowed, message, _, _) = run(&validator("Fail"), &create(cm.clone()));
    assert!(!allowed);
    // Whichever comes first: the request giving up, or the evaluation
    // stopping itself at the same deadline.
    assert!(
        message.contains("policy could not be evaluated: CEL evaluation took longer than 50 ms")
            || message.contains("policy could not be evaluated: CEL evaluation stopped at its deadline"),
        "{message}"
    );
    assert!(run(&validator("Ignore"), &create(cm)).0, "fails open under Ignore");
}

#[test]
fn an_evaluation_past_its_deadline_stops_by_itself() {
    let items: Vec<String> = (0..400).map(|i| format!("item-{i}")).collect();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"items": items}});
    let set = support::policies_with_cost_limit(&SLOW.replace("FAILURE", "Fail"), u64::MAX).unwrap();
    let bindings = portcullis_validator::cel::Bindings::new(Some(&cm), None, &json!({"operation": "CREATE"}));
    let started = std::time::Instant::now();
    let outcome = set.policies[0].cel.evaluate(&bindings, started + Duration::from_millis(50));
    // 64 million passes would take minutes; it ends within one innermost
    // loop (400 passes) of the deadline.
    assert!(started.elapsed() < Duration::from_secs(2), "ran for {:?}", started.elapsed());
    assert_eq!(outcome, portcullis_validator::cel::Outcome::Error(portcullis_validator::cel::STOPPED.to_owned()));
}

#[test]
fn a_policy_whose_cost_grows_faster_than_the_object_is_refused_at_load() {
    let refused = support::policies_with_cost_limit(&SLOW.replace("FAILURE", "Fail"), 10_000_000).unwrap_err();
    assert!(refused.contains("policy slow: validations[0]"), "{refused}");
    assert!(refused.contains("estimated worst-case cost of"), "{refused}");
    assert!(refused.contains("over the limit of 10000000 (--cel-cost-limit)"), "{refused}");
    // The example from the issue: no two annotations share a value.
    let quadratic = SLOW.replace("FAILURE", "Fail").replace(
        "object.data.items.all(a, object.data.items.all(b, object.data.items.all(c, a + b + c != '')))",
        "object.metadata.annotations.all(k, object.metadata.annotations.all(j, k == j || object.metadata.annotations[k] != object.metadata.annotations[j]))",
    );
    assert!(support::policies_with_cost_limit(&quadratic, 10_000_000).is_err());
}

#[test]
fn evaluation_errors_follow_the_failure_policy() {
    let policy = |fp: &str| {
        format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: typo}}\nspec:\n  failurePolicy: {fp}\n  validations: [{{expression: 'object.spec.nope > 1'}}]\n"
        )
    };
    let d = deployment("web", 3, &["x:1"]);
    let (allowed, message, _, _) = run(&support::validator(&policy("Fail")), &create(d.clone()));
    assert!(!allowed);
    assert!(
        message.starts_with("[typo] policy could not be evaluated: validation \"object.spec.nope > 1\""),
        "{message}"
    );
    assert!(run(&support::validator(&policy("Ignore")), &create(d)).0);
}

struct Namespaces(BTreeMap<String, BTreeMap<String, String>>);

impl NamespaceLabels for Namespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.0.get(name).cloned()
    }
}

#[test]
fn namespace_selectors_use_the_namespaces_labels() {
    let policy = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: prod}\nspec:\n  match:\n    namespaceSelector: {matchLabels: {env: prod}}\n  rules:\n    requiredLabels: {version: ''}\n";
    let namespaces = Namespaces(BTreeMap::from([
        ("shop".to_owned(), BTreeMap::from([("env".to_owned(), "prod".to_owned())])),
        ("lab".to_owned(), BTreeMap::new()),
    ]));
    let v = support::validator_with(policy, Arc::new(namespaces));
    let cm = |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}});
    assert!(!run(&v, &create(cm("shop"))).0);
    assert!(run(&v, &create(cm("lab"))).0);
    let (allowed, message, _, _) = run(&v, &create(cm("unknown")));
    assert!(!allowed, "unknown labels fail closed under failurePolicy Fail");
    assert!(message.contains("labels of namespace unknown are not known"), "{message}");
}
