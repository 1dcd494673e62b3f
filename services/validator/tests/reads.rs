//! Converting only what a policy set's expressions read of the request
//! (`portcullis_cel::reads`) decides every request exactly as
//! converting all of it: the same verdicts, messages and errors, for
//! expressions that select, test with `has`, compare subtrees, loop, index,
//! use optionals and read `oldObject` and `request`.

mod support;

use std::time::{Duration, Instant};

use portcullis_admission::decode;
use portcullis_cel::Bindings;
use portcullis_cel::reads::DataReads;
use serde_json::{Value, json};
use support::{create, update};

const EXPRESSIONS: &[&str] = &[
    "object.spec.replicas <= 5",
    "has(object.metadata.annotations)",
    "!has(object.metadata.annotations) || size(object.metadata.annotations) < 2",
    "has(object.spec.template.spec.hostNetwork) && object.spec.template.spec.hostNetwork",
    "object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
    "object.spec.template.spec.containers.exists(c, has(c.resources) && has(c.resources.limits))",
    "object.metadata.labels.team == 'shop'",
    "object.metadata.labels['team'] == 'shop'",
    "'team' in object.metadata.labels",
    "object.metadata.?labels.?team.orValue('none') == 'shop'",
    "object.?status.?replicas.orValue(0) == 0",
    "object.spec.nothing.deeper == 1",
    "object.spec.replicas.nothing == 1",
    "size(object) > 3",
    "object.spec.selector == object.spec.template.metadata",
    "object.metadata.name.matches('^[a-z]+$')",
    "oldObject == null || oldObject.spec.replicas <= object.spec.replicas",
    "oldObject.metadata.labels.team == object.metadata.labels.team",
    "has(oldObject.metadata)",
    "request.operation == 'CREATE' || request.userInfo.username != ''",
    "request.userInfo.groups.exists(g, g == 'system:masters')",
    "request.kind.kind == 'Deployment' && request.resource.resource == 'deployments'",
    "request.dryRun",
    "request.options.nothing == 1",
    "[object].all(object, has(object.status))",
    "object.metadata.annotations.all(k, object.metadata.annotations[k].size() < 10)",
    "dyn(object).spec.replicas > 1",
];

fn deployment(replicas: i64, annotations: Value, status: bool) -> Value {
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"team": "shop"}, "annotations": annotations},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"hostNetwork": replicas > 3, "containers": [
                                  {"name": "a", "image": "registry.example.com/a:1",
                                   "resources": {"limits": {"memory": "1Gi"}}},
                                  {"name": "b", "image": "example.com/b:1"}]}}}
    });
    if status {
        object["status"] = json!({"replicas": replicas, "conditions": [{"type": "Available"}]});
    }
    object
}

fn reviews() -> Vec<Value> {
    let plain = deployment(2, json!({}), false);
    let annotated = deployment(7, json!({"a": "short", "b": "a much longer value"}), true);
    vec![
        create(plain.clone()),
        create(annotated.clone()),
        update(plain.clone(), annotated.clone()),
        update(annotated, plain.clone()),
        create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "spec": "text"})),
    ]
}

fn policy(index: usize, expression: &str) -> String {
    let quoted = serde_json::to_string(expression).expect("a string serializes");
    format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: p{index}}}\nspec:\n  \
         validations:\n    - expression: {quoted}\n      \
         messageExpression: \"'replicas ' + string(object.spec.replicas)\"\n"
    )
}

#[test]
fn only_what_is_read_is_converted_and_every_outcome_is_the_same() {
    let far = Instant::now() + Duration::from_secs(60);
    let limits = Default::default();
    let each: Vec<String> = EXPRESSIONS.iter().enumerate().map(|(i, e)| policy(i, e)).collect();
    // Each expression alone (the least converted), then all of them in one
    // set (the union of what they read).
    let sets: Vec<String> = each.iter().cloned().chain([each.join("---\n")]).collect();
    let mut compared = 0;
    for yaml in &sets {
        let set = support::policies_with_cost_limit(yaml, u64::MAX).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        for review in reviews() {
            let req = decode(&serde_json::to_vec(&review).unwrap()).unwrap();
            let pruned = Bindings::of(&req, None, &set.cel_reads);
            let whole = Bindings::of(&req, None, &DataReads::everything());
            for policy in &set.policies {
                let expected = policy.cel.evaluate(&whole, None, limits, far);
                let got = policy.cel.evaluate(&pruned, None, limits, far);
                assert_eq!(
                    got,
                    expected,
                    "{}: {:?}",
                    policy.name,
                    policy.cel.validations[0].expression.expression.source()
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, EXPRESSIONS.len() * reviews().len() * 2);
}

#[test]
fn fields_no_expression_reads_are_not_converted() {
    let yaml = policy(0, "object.spec.replicas <= 5");
    let set = support::policies_with_cost_limit(&yaml, u64::MAX).unwrap();
    let reads = &set.cel_reads;
    let object = reads.object.as_ref().unwrap();
    assert!(object.field("spec").and_then(|s| s.field("replicas")).is_some());
    assert!(object.field("status").is_none(), "status is not read");
    assert!(object.field("metadata").is_none(), "metadata is not read");
    assert!(reads.old_object.is_none() && reads.request.is_none(), "{reads:?}");
}

const PARAMS_EXPRESSIONS: &[&str] = &[
    "object.spec.replicas <= int(params.data.maxReplicas)",
    "has(params.data.team) && params.data.team == object.metadata.labels.team",
    "!has(params.data.absent)",
    "params.data.all(k, k.size() < 20)",
    "size(params.data) == 3",
    "params.metadata.name == 'limits'",
    "params.data.absent == 'x'",
    "params != null",
];

#[test]
fn parameter_objects_too_are_converted_only_as_far_as_they_are_read() {
    let far = Instant::now() + Duration::from_secs(60);
    let limits = Default::default();
    let config_map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "limits", "namespace": "shop", "managedFields": [{"manager": "kubectl"}]},
        "data": {"maxReplicas": "5", "team": "shop", "notes": "x".repeat(1000)}
    });
    let whole = portcullis_cel::Converted::reading(&config_map, Some(&portcullis_cel::reads::Reads::Whole));
    let mut compared = 0;
    for (i, expression) in PARAMS_EXPRESSIONS.iter().enumerate() {
        let quoted = serde_json::to_string(expression).unwrap();
        let yaml = format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: p{i}}}\nspec:\n  \
             paramKind: {{apiVersion: v1, kind: ConfigMap}}\n  paramRef: {{name: limits, parameterNotFoundAction: Deny}}\n  \
             validations:\n    - expression: {quoted}\n"
        );
        let set = support::policies_with_cost_limit(&yaml, u64::MAX).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        let rules = &set.policies[0].cel;
        if i == 0 {
            let reads = rules.data_reads.params.as_ref().unwrap();
            assert!(reads.field("metadata").is_none(), "only data.maxReplicas is read: {reads:?}");
        }
        let pruned = portcullis_cel::Converted::reading(&config_map, rules.data_reads.params.as_ref());
        for review in reviews() {
            let req = decode(&serde_json::to_vec(&review).unwrap()).unwrap();
            let bindings = Bindings::of(&req, None, &set.cel_reads);
            let expected = rules.evaluate(&bindings, Some(&whole), limits, far);
            let got = rules.evaluate(&bindings, Some(&pruned), limits, far);
            assert_eq!(got, expected, "{expression}");
            compared += 1;
        }
    }
    assert_eq!(compared, PARAMS_EXPRESSIONS.len() * reviews().len());
}
