//! CEL rules as Kubernetes' ValidatingAdmissionPolicy runs them: the
//! documentation's examples (matchConditions, variables, messageExpression,
//! reason, oldObject), failure policies and the evaluation deadline.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use portcullis_admission::native_match::NamespacesByLabels;
use portcullis_cel::budget::{Limit, Limits};
use portcullis_cel::workers::Workers;
use portcullis_validator::cel::Outcome;
use portcullis_validator::evaluate::KnownNamespaces;
use portcullis_validator::webhook::Validator;
use serde_json::{Value, json};
use support::{create, messages, run, update};

fn set() -> Validator {
    let yaml = std::fs::read_to_string(support::data("policies.yaml")).expect("reading a file of the repository");
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
    let validator = set();
    let (decision, _) = validator.review(&req, validator.deadline());
    assert!(matches!(decision.verdict, portcullis_admission::Verdict::Deny { code: 422, .. }), "{decision:?}");
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

fn big_config_map(items: usize) -> serde_json::Value {
    let items: Vec<String> = (0..items).map(|i| format!("item-{i}")).collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "shop"}, "data": {"items": items}})
}

#[test]
fn an_evaluation_stops_at_its_cost_budget_and_follows_the_failure_policy() {
    // 400 items: 64 million passes, minutes of work. The estimate would
    // refuse this policy at load (below); with the estimate off, the
    // runtime count stops it.
    let cm = big_config_map(400);
    let validator = |policy: &str| {
        Validator::new(
            support::policies_with_cost_limit(&SLOW.replace("FAILURE", policy), u64::MAX).unwrap(),
            support::settings(),
            Arc::new(portcullis_validator::webhook::NoNamespaces),
            Workers::new(1).unwrap(),
        )
    };
    let started = Instant::now();
    let (allowed, message, _, _) = run(&validator("Fail"), &create(cm.clone()));
    assert!(started.elapsed() < Duration::from_secs(2), "ran for {:?}", started.elapsed());
    assert!(!allowed);
    assert!(
        message.contains(
            "[slow] policy could not be evaluated: CEL evaluation exceeded its cost budget: \
             \"object.data.items.all(a, object.data.items.all(b, object.data.items.all(c, a + b + c != '')))\" \
             spent more than 1000000 units (--cel-per-call-limit)"
        ),
        "{message}"
    );
    assert!(run(&validator("Ignore"), &create(cm)).0, "fails open under Ignore");
}

#[test]
fn the_policy_budget_is_shared_and_the_deadline_stops_what_the_budget_allows() {
    let bindings = support::bindings(big_config_map(300));
    // Two expressions of 90,000 passes each: each within a per-call limit
    // of 1,000,000 units, together over a policy budget of 1,000,000.
    let two = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: two}
spec:
  validations:
    - expression: object.data.items.all(a, object.data.items.all(b, a != ''))
    - expression: object.data.items.all(a, object.data.items.all(b, b != ''))
"#;
    let set = support::policies_with_cost_limit(two, u64::MAX).unwrap();
    let limits = Limits { per_call: 1_000_000, per_policy: 1_000_000 };
    let far = Instant::now() + Duration::from_secs(60);
    let Outcome::Exceeded { limit, message } = set.policies[0].cel.evaluate(&bindings, None, limits, far) else {
        panic!("not stopped")
    };
    assert_eq!(limit, Limit::Policy);
    assert!(
        message.contains("the policy's expressions spent more than 1000000 units (--cel-policy-budget)"),
        "{message}"
    );
    assert!(
        message.contains("stopped in \"object.data.items.all(a, object.data.items.all(b, b != ''))\""),
        "{message}"
    );
    // With no cost limit at all, the deadline still ends it promptly.
    let bindings = support::bindings(big_config_map(400));
    let set = support::policies_with_cost_limit(&SLOW.replace("FAILURE", "Fail"), u64::MAX).unwrap();
    let unlimited = Limits { per_call: u64::MAX, per_policy: u64::MAX };
    let started = Instant::now();
    let outcome = set.policies[0].cel.evaluate(&bindings, None, unlimited, started + Duration::from_millis(50));
    assert!(started.elapsed() < Duration::from_secs(1), "ran for {:?}", started.elapsed());
    assert!(matches!(outcome, Outcome::Exceeded { limit: Limit::Deadline, .. }), "{outcome:?}");
}

#[test]
fn a_regular_expression_costs_by_the_length_of_its_pattern_and_its_string() {
    // Patterns taken from the object, one per key: each compile is charged
    // by its length (2,100 units for 21 KB), so the per-call limit stops
    // the loop after a few compiles, where the nodes alone (about 8 per
    // key, 8,000 in all) are within it.
    let pattern = "(?:a|b)".repeat(3_000);
    let data: serde_json::Map<String, Value> =
        (0..1_000).map(|i| (format!("k{i}"), json!(format!("{pattern}{i}")))).collect();
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
    let bindings = support::bindings(object);
    let yaml = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: patterns}
spec:
  validations:
    - expression: "object.data.all(k, !'ab'.matches(object.data[k]))"
"#;
    let set = support::policies_with_cost_limit(yaml, u64::MAX).unwrap();
    let limits = Limits { per_call: 20_000, per_policy: u64::MAX };
    let far = Instant::now() + Duration::from_secs(60);
    let outcome = set.policies[0].cel.evaluate(&bindings, None, limits, far);
    assert!(matches!(outcome, Outcome::Exceeded { limit: Limit::PerCall, .. }), "{outcome:?}");
    // Short patterns and strings cost what they did: the same loop over
    // short values passes.
    let short: serde_json::Map<String, Value> = (0..1_000).map(|i| (format!("k{i}"), json!("^x$"))).collect();
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": short});
    let bindings = support::bindings(object);
    assert!(matches!(set.policies[0].cel.evaluate(&bindings, None, limits, far), Outcome::Passed(_)));
}

#[test]
fn a_policy_whose_cost_grows_faster_than_the_object_is_refused_at_load() {
    let refused = support::policies_with_cost_limit(&SLOW.replace("FAILURE", "Fail"), 10_000_000).unwrap_err();
    assert!(refused.contains("policy slow: validations[0]"), "{refused}");
    assert!(refused.contains("estimated worst-case cost of"), "{refused}");
    assert!(refused.contains("over the limit of 10000000 (--cel-cost-limit)"), "{refused}");
    // A loop over annotations inside a loop over annotations: no two
    // annotations share a value.
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

/// `shop` (labelled `env: prod`) and `lab`, known by their labels.
fn shop_and_lab() -> Arc<dyn KnownNamespaces> {
    let labels = BTreeMap::from([
        ("shop".to_owned(), BTreeMap::from([("env".to_owned(), "prod".to_owned())])),
        ("lab".to_owned(), BTreeMap::new()),
    ]);
    Arc::new(NamespacesByLabels(move |name: &str| labels.get(name).cloned()))
}

#[test]
fn namespace_selectors_use_the_namespaces_labels() {
    let policy = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: prod}\nspec:\n  match:\n    namespaceSelector: {matchLabels: {env: prod}}\n  rules:\n    requiredLabels: {version: ''}\n";
    let v = support::validator_with(policy, shop_and_lab());
    let cm = |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}});
    assert!(!run(&v, &create(cm("shop"))).0);
    assert!(run(&v, &create(cm("lab"))).0);
    let (allowed, message, _, _) = run(&v, &create(cm("unknown")));
    assert!(!allowed, "unknown labels fail closed under failurePolicy Fail");
    assert!(message.contains("labels of namespace unknown are not known"), "{message}");
}

#[test]
fn the_optional_syntax_works_as_in_kubernetes() {
    let optional = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: optional}
spec:
  validations:
    - expression: "object.?data.?config.orValue('') != 'bad'"
      message: config may not be bad
"#;
    let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop"}, "data": data});
    let v = support::validator(optional);
    assert!(run(&v, &create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))).0, "no data");
    assert!(run(&v, &create(cm(json!({"other": "x"})))).0, "no config key");
    let (allowed, message, _, _) = run(&v, &create(cm(json!({"config": "bad"}))));
    assert!(!allowed && message.contains("config may not be bad"), "{message}");
    // A chain of optional selections is one optional: `orValue` gives the
    // default when any link is absent.
    let chained = optional
        .replace("object.?data.?config.orValue('') != 'bad'", "object.metadata.?labels.?team.orValue('none') == 'shop'")
        .replace(
            "message: config may not be bad",
            "messageExpression: \"'team is ' + object.metadata.?labels.?team.orValue('none')\"",
        );
    let v = support::validator(&chained);
    let (allowed, message, _, _) = run(&v, &create(cm(json!({}))));
    assert!(!allowed && message.contains("team is none"), "{message}");
    let labelled = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop", "labels": {"team": "shop"}}});
    assert!(run(&v, &create(labelled)).0);
}

#[test]
fn variables_portcullis_does_not_bind_are_refused_at_load() {
    let expression = "authorizer.group('apps').resource('deployments').check('create').allowed()";
    let yaml = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: p}}\nspec:\n  validations:\n    - expression: \"{expression}\"\n"
    );
    let refused = support::policies_with_cost_limit(&yaml, u64::MAX).unwrap_err();
    assert!(refused.contains("uses `authorizer`, which Portcullis does not provide"), "{refused}");
}

/// What the API server refuses when a policy is created, a ValidatorPolicy
/// is refused at load for too: a field of `request` it does not have, a
/// validation that is not a bool, a message that is not a string.
#[test]
fn fields_and_result_types_the_api_server_refuses_are_refused_at_load() {
    let policy = |validation: &str| {
        format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: p}}\nspec:\n  validations:\n    - {validation}\n"
        )
    };
    let cases = [
        ("expression: 'size(request.uid) > 0'", "undefined field 'uid'"),
        ("expression: object.spec.paused", "validations[0]: must evaluate to bool but got dyn"),
        (
            "{expression: 'true', messageExpression: object.metadata.name}",
            "validations[0].messageExpression: must evaluate to string but got dyn",
        ),
    ];
    for (validation, expected) in cases {
        let refused = support::policies_with_cost_limit(&policy(validation), u64::MAX).unwrap_err();
        assert!(refused.contains(expected), "{validation}: {refused}");
    }
    assert!(support::policies_with_cost_limit(&policy("expression: object.spec.paused == true"), u64::MAX).is_ok());
}

/// `namespaceObject` is the object's namespace, `null` for a cluster-scoped
/// object and for a Namespace itself; an unknown namespace fails the
/// policies that read it, and only those.
#[test]
fn namespace_object_is_the_objects_namespace() {
    let policy = |name: &str, expression: &str| {
        format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {name}}}\nspec:\n  validations:\n    - expression: \"{expression}\"\n      message: {name}\n"
        )
    };
    let yaml = [
        policy("prod-only", "namespaceObject == null || namespaceObject.metadata.?labels.?env.orValue('') == 'prod'"),
        policy("named", "namespaceObject == null || namespaceObject.metadata.name == object.metadata.namespace"),
        policy("cluster-scoped", "has(object.metadata.namespace) || namespaceObject == null"),
    ]
    .join("---\n");
    let v = support::validator_with(&yaml, shop_and_lab());
    let cm = |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}});
    assert!(run(&v, &create(cm("shop"))).0);
    let (allowed, message, _, _) = run(&v, &create(cm("lab")));
    assert!(!allowed && message.contains("prod-only") && !message.contains("named"), "{message}");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}});
    assert!(run(&v, &create(namespace)).0, "a Namespace's own namespaceObject is null");
    let (allowed, message, _, _) = run(&v, &create(cm("unknown")));
    assert!(!allowed, "an unknown namespace fails closed under failurePolicy Fail");
    assert!(message.contains("namespace unknown is not known, so namespaceObject cannot be bound"), "{message}");
}

#[test]
fn audit_annotations_go_into_the_response_for_every_request_the_policy_applies_to() {
    let yaml = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: replicas}
spec:
  validations:
    - expression: object.spec.replicas <= 5
  auditAnnotations:
    - key: high-replica-count
      valueExpression: "object.spec.replicas > 3 ? 'Deployment spec.replicas set to ' + string(object.spec.replicas) : null"
"#;
    let validator = support::validator(yaml);
    let annotations = |replicas: u32| {
        let review = create(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": replicas}}),
        );
        let req = portcullis_admission::decode(&serde_json::to_vec(&review).unwrap()).unwrap();
        let (decision, _) = validator.review(&req, validator.deadline());
        let (response, _) = decision.respond(&req);
        (response.allowed, response.audit_annotations.into_iter().collect::<BTreeMap<_, _>>())
    };
    assert_eq!(annotations(2), (true, BTreeMap::new()), "null: no annotation");
    let four =
        BTreeMap::from([("replicas.high-replica-count".to_owned(), "Deployment spec.replicas set to 4".to_owned())]);
    assert_eq!(annotations(4), (true, four));
    let (allowed, nine) = annotations(9);
    assert!(!allowed);
    assert_eq!(
        nine["replicas.high-replica-count"], "Deployment spec.replicas set to 9",
        "denied requests are annotated too"
    );
    // A key with a slash could not be recorded by the API server.
    let refused = support::policies_with_cost_limit(&yaml.replace("key: high-replica-count", "key: a/b"), u64::MAX);
    assert!(refused.unwrap_err().contains("auditAnnotations[0]: key \"a/b\" must be 1-63 letters"));
}

#[test]
fn size_and_the_string_functions_answer_as_cel_go_does() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop"},
                        "data": {"greeting": "héllo", "other": "x"}});
    let bindings = support::bindings(object);
    let evaluate = |expression: &str| {
        let yaml = format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: f}}\nspec:\n  \
             variables:\n    - name: values\n      expression: \"[object.data.greeting, object.data.other]\"\n  \
             validations:\n    - expression: {expression:?}\n"
        );
        let set = support::policies_with_cost_limit(&yaml, u64::MAX).unwrap();
        set.policies[0].cel.evaluate(&bindings, None, Limits::default(), Instant::now() + Duration::from_secs(60))
    };
    for holds in [
        // A string's size is its number of code points, as in cel-go (not bytes).
        "size(object.data.greeting) == 5",
        "object.data.greeting.size() == 5",
        "size(b'ab') == 2",
        "size(object.data) == 2 && object.data.size() == 2",
        "size(variables.values) == 2 && variables.values.size() == 2",
        "object.data.greeting.startsWith('hé') && object.data.greeting.endsWith('llo')",
        "object.data.greeting.contains('éll') && !object.data.greeting.contains('x')",
        // A list kept in a variable is the same after a comprehension copied it.
        "variables.values.filter(v, v == 'x').size() == 1 && variables.values[0] == 'héllo'",
    ] {
        assert_eq!(evaluate(holds), Outcome::Passed(vec![]), "{holds}");
    }
    for fails in ["size(1) == 1", "object.data.greeting.startsWith(1)", "object.metadata.nope.size() == 0"] {
        assert!(matches!(evaluate(fails), Outcome::Error(_)), "{fails}: {:?}", evaluate(fails));
    }
}

#[test]
fn the_request_variable_has_every_field_of_the_api_servers() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop"}});
    let mut review = create(object);
    review["request"]["userInfo"] = json!({"username": "alice", "uid": "u-1", "groups": ["dev", "system:authenticated"], "extra": {"scopes": ["a", "b"]}});
    review["request"]["dryRun"] = json!(true);
    review["request"]["options"] =
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl"});
    let checks = [
        "request.kind.group == '' && request.kind.version == 'v1' && request.kind.kind == 'ConfigMap'",
        "request.resource.group == '' && request.resource.version == 'v1' && request.resource.resource == 'configmaps'",
        "request.requestKind == request.kind && request.requestResource == request.resource",
        "request.subResource == '' && request.requestSubResource == ''",
        "request.name == 'c' && request.namespace == 'shop' && request.operation == 'CREATE' && request.dryRun",
        "request.userInfo.username == 'alice' && request.userInfo.uid == 'u-1' && 'dev' in request.userInfo.groups",
        "request.userInfo.extra.scopes == ['a', 'b'] && request.options.fieldManager == 'kubectl'",
        // The API server's `request` has no `uid`: it refuses a policy that reads one.
        "size(request.resource) == 3",
    ];
    let validations: String =
        checks.iter().map(|c| format!("    - expression: {c:?}\n      message: {c:?}\n")).collect();
    let yaml = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: r}}\nspec:\n  validations:\n{validations}"
    );
    let (allowed, message, _, findings) = run(&support::validator(&yaml), &review);
    assert!(allowed, "{message} {findings:?}");
}
