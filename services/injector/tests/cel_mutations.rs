//! CEL mutations in an `InjectorConfig` (MutatingAdmissionPolicy's
//! language), checked as a user would: the pod after the patch, a second
//! pass that changes nothing, and the answer when a mutation fails.

mod support;

use std::path::Path;

use portcullis_cel::budget::Limits;
use portcullis_injector::config::{CelBounds, Config};
use portcullis_injector::webhook::Injector;
use portcullis_server::webhook::Webhook as _;
use serde_json::{Value, json};
use support::{admit, again, data, names, review};

fn load(text: &str) -> Result<Config, String> {
    portcullis_injector::serve::parse(&vec![(Path::new("cel.yaml").to_path_buf(), text.as_bytes().to_vec())])
        .map_err(|e| portcullis_telemetry::error_chain(&e))
}

fn cel_config() -> String {
    std::fs::read_to_string(data("cel-config.yaml")).expect("the fixture")
}

fn pod(annotations: Value, containers: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "demo", "annotations": annotations},
        "spec": {"containers": containers},
    })
}

fn web() -> Value {
    json!({"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 8080}], "env": [{"name": "A", "value": "1"}]})
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"].as_array().and_then(|c| c.iter().find(|c| c["name"] == name)).unwrap_or(&Value::Null)
}

#[test]
fn mutations_do_what_map_refuses_in_one_patch_and_a_second_pass_changes_nothing() {
    let injector = Injector::new(load(&cel_config()).expect("the fixture loads"));
    let debug = json!({"name": "debug", "image": "busybox:1.36", "command": ["sleep", "inf"]});
    let object = pod(json!({"example.com/proxy-log-level": "debug"}), json!([web(), debug]));
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &object));
    assert_eq!(admitted.response["response"]["allowed"], true, "{}", admitted.response);
    let pod = &admitted.object;
    // The debug container is gone (JSONMergePatch), the sidecar injected.
    assert_eq!(names(&pod["spec"]["containers"]), ["web", "proxy"]);
    // The sidecar's args replaced whole (an atomic list), its other fields
    // kept, and its image rewritten after the mutation.
    let proxy = container(pod, "proxy");
    assert_eq!(proxy["args"], json!(["--log-level", "debug"]));
    assert_eq!(proxy["ports"], json!([{"containerPort": 15001, "name": "proxy"}]));
    assert_eq!(proxy["image"], "mirror.example.com/dockerhub/envoyproxy/envoy:v1.31.0");
    // The pod's own container is kept whole through the list's filter.
    assert_eq!(container(pod, "web")["env"], json!([{"name": "A", "value": "1"}]));
    assert_eq!(container(pod, "web")["ports"], json!([{"containerPort": 8080}]));
    assert_eq!(pod["metadata"]["labels"], json!({"team": "unassigned"}));
    assert_eq!(pod["metadata"]["annotations"]["example.com/trace"], "on");
    assert_eq!(pod["metadata"]["annotations"]["example.com/proxy-log-level"], "debug");

    let second = admit(&injector, &again(&review("pod-v1.json"), pod));
    assert_eq!(second.patch(), None, "a second pass changed the pod: {:?}", second.patch());

    // What each mutation did, as /metrics shows it: four applied on the
    // first pass; on the second, the debug container is gone.
    let mut registry = prometheus_client::registry::Registry::with_prefix("portcullis");
    injector.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("metrics encode");
    for (mutation, result, count) in [
        ("proxy-log-level", "applied", 2),
        ("no-debug-containers", "applied", 1),
        ("no-debug-containers", "skipped", 1),
        ("trace-annotation", "applied", 2),
    ] {
        let line =
            format!("portcullis_injector_cel_mutations_total{{mutation=\"{mutation}\",result=\"{result}\"}} {count}");
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
}

#[test]
fn a_pod_without_annotations_or_matches_gets_only_what_applies() {
    let injector = Injector::new(load(&cel_config()).expect("the fixture loads"));
    let mut object = pod(json!({}), json!([web()]));
    object["metadata"].as_object_mut().map(|m| m.remove("annotations"));
    object["metadata"]["labels"] = json!({"team": "shop"});
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &object));
    let pod = &admitted.object;
    assert_eq!(container(pod, "proxy")["args"], json!(["--log-level", "info"]), "no level asked for");
    assert_eq!(pod["metadata"]["labels"], json!({"team": "shop"}), "the label was there");
    assert_eq!(pod["metadata"]["annotations"]["example.com/trace"], "on", "annotations created");
    let second = admit(&injector, &again(&review("pod-v1.json"), pod));
    assert_eq!(second.patch(), None);
}

const ACCOUNT: &str = r#"- name: account
  matchConditions:
    - name: restarts
      expression: object.spec.restartPolicy == "Always"
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{spec: Object.spec{serviceAccountName: "web"}}'
"#;

#[test]
fn a_pod_is_read_with_what_its_mutations_read_and_change_and_decided_only_so() {
    let body = serde_json::to_vec(&review("pod-v1.json")).expect("JSON");
    let read = |injector: &Injector| injector.decode(&body).expect("decodes").object.expect("a pod");
    let plain = Injector::new(Config::default());
    let pod = read(&plain);
    assert_eq!(pod["metadata"]["labels"], json!({}), "of the labels, only the keys its defaults set: none");
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1.27", "the injector's own parts");
    for unread in [&pod["metadata"]["name"], &pod["spec"]["restartPolicy"], &pod["spec"]["containers"][0]["resources"]]
    {
        assert_eq!(*unread, Value::Null, "{pod}");
    }
    let account = Injector::new(load(&one(ACCOUNT)).expect("loads"));
    let pod = read(&account);
    assert_eq!(pod["spec"]["restartPolicy"], "Always", "read by the condition");
    assert_eq!(pod["spec"]["serviceAccountName"], "default", "changed by the mutation");
    assert_eq!(pod["spec"]["containers"][0]["resources"], Value::Null, "{pod}");
    let admitted = admit(&account, &review("pod-v1.json"));
    assert_eq!(admitted.object["spec"]["serviceAccountName"], "web");

    // A request read before the mutation was in force is decided without
    // it, never on parts it did not read.
    let req = plain.decode(&body).expect("decodes");
    plain.set_config(load(&one(ACCOUNT)).expect("loads"));
    let decision = plain.decide(&req);
    let (response, _) = decision.respond(&req);
    assert_eq!(response.patch, None, "the mutation did not run");
    let pod = read(&plain);
    assert_eq!(pod["spec"]["restartPolicy"], "Always", "the next request is read for it");
}

fn one(mutation: &str) -> String {
    format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nmetadata: {{name: one}}\nspec:\n  mutations:\n{}",
        mutation.lines().map(|l| format!("    {l}\n")).collect::<String>()
    )
}

const REINVOKED: &str = r#"- name: team-label
  reinvocationPolicy: POLICY
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{metadata: Object.metadata{labels: {"team":
            has(object.metadata.annotations) && "team" in object.metadata.annotations
              ? object.metadata.annotations["team"] : "none"}}}
- name: team-annotation
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{annotations: {"team": "shop"}}}'
"#;

#[test]
fn an_entry_asking_for_it_runs_again_after_a_later_one_changed_the_pod() {
    let object = pod(json!({}), json!([web()]));
    let run = |policy: &str| {
        let injector = Injector::new(load(&one(&REINVOKED.replace("POLICY", policy))).expect("loads"));
        let admitted = admit(&injector, &again(&review("pod-v1.json"), &object));
        assert_eq!(admitted.object["metadata"]["annotations"]["team"], "shop");
        let second = admit(&injector, &again(&review("pod-v1.json"), &admitted.object));
        (admitted.object["metadata"]["labels"]["team"].clone(), second.patch().is_none())
    };
    // Run once, before the annotation was there: the next pass (the API
    // server reinvoking the webhook) changes the label again.
    assert_eq!(run("Never"), (json!("none"), false));
    // Run again after the annotation was set: settled in one pass.
    assert_eq!(run("IfNeeded"), (json!("shop"), true));
}

#[test]
fn a_pod_the_api_server_would_never_send_is_left_as_it_is() {
    // Found by the `inject` fuzz target: the annotations a list, which the
    // status annotation would have replaced after the mutations had read
    // it, so that the next pass changed the pod again.
    let injector = Injector::new(load(&cel_config()).expect("the fixture loads"));
    let mut object = pod(json!({}), json!([web()]));
    object["metadata"]["annotations"] = json!([null]);
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &object));
    assert_eq!(admitted.response["response"]["allowed"], true);
    assert_eq!(admitted.patch(), None);
    let warnings = admitted.warnings();
    assert!(warnings.iter().any(|w| w.contains("metadata.annotations is not an object")), "{warnings:?}");
}

const ARGS: &str = r#"- name: set-args
  atomicFields: Refuse
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{spec: Object.spec{containers: [Object.spec.containers{name: "web", args: ["-v"]}]}}'
"#;

#[test]
fn refused_atomics_deny_as_map_does_naming_the_mutation_and_field() {
    let injector = Injector::new(load(&one(ARGS)).expect("loads"));
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &pod(json!({}), json!([web()]))));
    let response = &admitted.response["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mutation \"set-args\""), "{message}");
    assert!(message.contains("may not mutate atomic arrays, maps or structs: .spec.containers[0].args"), "{message}");
    // The default replaces the list whole.
    let injector = Injector::new(load(&one(&ARGS.replace("  atomicFields: Refuse\n", ""))).expect("loads"));
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &pod(json!({}), json!([web()]))));
    assert_eq!(container(&admitted.object, "web")["args"], json!(["-v"]));
}

const WRONG_TYPE: &str = r#"- name: wrong-type
  failurePolicy: POLICY
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: '"not an object"'
"#;

#[test]
fn a_failing_mutation_follows_its_failure_policy() {
    let review_of = |object: &Value| again(&review("pod-v1.json"), object);
    let object = pod(json!({"a": "b"}), json!([web()]));
    let fail = Injector::new(load(&one(&WRONG_TYPE.replace("POLICY", "Fail"))).expect("loads"));
    let denied = admit(&fail, &review_of(&object));
    assert_eq!(denied.response["response"]["allowed"], false);
    let message = denied.response["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mutation \"wrong-type\" failed"), "{message}");
    assert!(message.contains("unsupported return type from ApplyConfiguration expression"), "{message}");

    let ignore = Injector::new(load(&one(&WRONG_TYPE.replace("POLICY", "Ignore"))).expect("loads"));
    let admitted = admit(&ignore, &review_of(&object));
    assert_eq!(admitted.response["response"]["allowed"], true);
    assert_eq!(admitted.patch(), None, "nothing else to change");
    let warnings = admitted.warnings();
    assert!(
        warnings.iter().any(|w| w.contains("mutation \"wrong-type\" was ignored (failurePolicy: Ignore)")),
        "{warnings:?}"
    );
}

#[test]
fn a_patch_to_a_missing_path_fails_with_the_path() {
    let config = one(r#"- name: missing
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "replace", path: "/spec/nodeSelector/zone", value: "a"}]'
"#);
    let injector = Injector::new(load(&config).expect("loads"));
    let denied = admit(&injector, &again(&review("pod-v1.json"), &pod(json!({}), json!([web()]))));
    let message = denied.response["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mutation \"missing\" failed"), "{message}");
    assert!(message.contains("/spec/nodeSelector/zone"), "{message}");
}

#[rstest::rstest]
#[case::reading_the_pod(r#"string(object.spec.containers.map(c, c.name).size())"#)]
// Computed once at load: a request with lower limits evaluates it again
// and is stopped as it would be.
#[case::constant_folded_at_load(r#""1""#)]
fn the_runtime_budget_stops_a_mutation_and_its_failure_policy_answers(#[case] value: &str) {
    let config = one(&format!(
        r#"- name: costly
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{{metadata: Object.metadata{{labels: {{"n": {value}}}}}}}'
"#
    ));
    let tight = CelBounds { limits: Limits { per_call: 1, per_policy: 1 }, ..CelBounds::default() };
    let injector = Injector::bounded(load(&config).expect("loads"), tight, None);
    let denied = admit(&injector, &again(&review("pod-v1.json"), &pod(json!({}), json!([web()]))));
    assert_eq!(denied.response["response"]["allowed"], false);
    let message = denied.response["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mutation \"costly\" failed"), "{message}");
    assert!(message.contains("CEL evaluation exceeded its cost budget"), "{message}");
    assert!(message.contains("--cel-per-call-limit") || message.contains("--cel-policy-budget"), "{message}");
    // Within the default budget it runs.
    let injector = Injector::new(load(&config).expect("loads"));
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &pod(json!({}), json!([web()]))));
    assert_eq!(admitted.object["metadata"]["labels"]["n"], "1");
}

#[rstest::rstest]
#[case::duplicate_name(
    "- name: a\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: '[]'}}]\n- name: a\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: '[]'}}]\n",
    "mutation \"a\" is defined twice"
)]
#[case::expression_of_another_type(
    "- name: a\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: '[]'}, applyConfiguration: {expression: 'Object{}'}}]\n",
    "mutations[0] (\"a\"): mutations[0].jsonPatch.expression: Required value, and no expression of another patch type"
)]
#[case::no_mutations("- name: a\n  mutations: []\n", "mutations: Required value")]
#[case::match_constraints_without_rules(
    "- name: a\n  matchConstraints: {objectSelector: {}}\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: '[]'}}]\n",
    "mutations[0] (\"a\"): matchConstraints.resourceRules: Required value"
)]
#[case::match_constraints_bad_selector(
    "- name: a\n  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}], namespaceSelector: {matchExpressions: [{key: team, operator: Bogus}]}}\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: '[]'}}]\n",
    "mutations[0] (\"a\"): matchConstraints: namespaceSelector"
)]
#[case::does_not_compile(
    "- name: a\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: '[JSONPatch{'}}]\n",
    "mutations[0].jsonPatch.expression"
)]
#[case::quadratic(
    "- name: a\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: \"object.metadata.annotations.all(k, object.metadata.annotations.all(j, k != j || true)) ? [] : []\"}}]\n",
    "cost"
)]
#[case::unknown_patch_type(
    "- name: a\n  mutations: [{patchType: Strategic, jsonPatch: {expression: '[]'}}]\n",
    "unknown variant `Strategic`"
)]
fn bad_mutations_are_refused_at_load_with_the_field(#[case] mutations: &str, #[case] expected: &str) {
    let said = load(&one(mutations)).expect_err("refused");
    assert!(said.contains(expected), "{said}");
}

#[rstest::rstest]
// The spec is checked after a mutation that may change it, a path built
// at run time included; one that changes only metadata has its metadata
// checked.
#[case(r#"[JSONPatch{op: "add", path: "/spec/containers/-", value: "not a container"}]"#, "spec.containers")]
#[case(r#"[JSONPatch{op: "add", path: "/spec/" + "containers/-", value: "not a container"}]"#, "spec.containers")]
#[case(r#"[JSONPatch{op: "add", path: "/metadata/labels", value: "not a map"}]"#, "metadata.labels")]
fn a_mutation_that_leaves_a_pod_the_injector_cannot_work_on_is_its_failure(
    #[case] expression: &str,
    #[case] field: &str,
) {
    let config = |policy: &str| {
        one(&format!(
            r#"- name: breaks
  failurePolicy: {policy}
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '{expression}'
"#
        )) + "  defaults: {imagePullPolicy: Always, enableServiceLinks: false}\n"
    };
    let object = pod(json!({}), json!([web()]));
    let fail = Injector::new(load(&config("Fail")).expect("loads"));
    let denied = admit(&fail, &again(&review("pod-v1.json"), &object));
    let message = denied.response["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("mutation \"breaks\" failed: it left the pod unusable: {field}")), "{message}");
    let ignore = Injector::new(load(&config("Ignore")).expect("loads"));
    let admitted = admit(&ignore, &again(&review("pod-v1.json"), &object));
    assert_eq!(names(&admitted.object["spec"]["containers"]), ["web"]);
    assert_eq!(container(&admitted.object, "web")["imagePullPolicy"], "Always", "the defaults still apply");
    assert!(admitted.warnings().iter().any(|w| w.contains("left the pod unusable")), "{:?}", admitted.warnings());
}

#[test]
fn a_merge_that_fails_halfway_leaves_nothing_of_its_policy_under_ignore() {
    // The labels are merged into the pod before the containers' duplicate
    // key is found, and the first mutation has already run.
    let config = |policy: &str| {
        one(&format!(
            r#"- name: halfway
  failurePolicy: {policy}
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{{metadata: Object.metadata{{annotations: {{"first": "ran"}}}}}}'
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{{metadata: Object.metadata{{labels: {{"team": "x"}}}},
          spec: Object.spec{{containers: [Object.spec.containers{{name: "web", image: "a"}}, Object.spec.containers{{name: "web", image: "b"}}]}}}}
"#
        ))
    };
    let object = pod(json!({"a": "b"}), json!([web()]));
    let fail = Injector::new(load(&config("Fail")).expect("loads"));
    let denied = admit(&fail, &again(&review("pod-v1.json"), &object));
    let message = denied.response["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mutation \"halfway\" failed"), "{message}");
    assert!(message.contains(".spec.containers: duplicate entries for key name=\"web\""), "{message}");
    let ignore = Injector::new(load(&config("Ignore")).expect("loads"));
    let admitted = admit(&ignore, &again(&review("pod-v1.json"), &object));
    assert_eq!(admitted.response["response"]["allowed"], true);
    assert_eq!(admitted.object["metadata"]["labels"], Value::Null, "{}", admitted.object);
    assert_eq!(admitted.object["metadata"]["annotations"], json!({"a": "b"}), "{}", admitted.object);
    assert_eq!(admitted.object["spec"]["containers"], json!([web()]));
    assert!(admitted.warnings().iter().any(|w| w.contains("duplicate entries")), "{:?}", admitted.warnings());
}

#[test]
fn each_mutation_sees_the_object_as_the_one_before_left_it() {
    let config = one(r#"- name: in-turn
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"team": "a"}}}'
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "add", path: "/metadata/annotations/team", value: object.metadata.labels.team + "-seen"}]'
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{metadata: Object.metadata{labels: {"seen": object.metadata.annotations.team}}}'
"#);
    let injector = Injector::new(load(&config).expect("loads"));
    let admitted = admit(&injector, &again(&review("pod-v1.json"), &pod(json!({"a": "b"}), json!([web()]))));
    assert_eq!(admitted.object["metadata"]["labels"], json!({"team": "a", "seen": "a-seen"}), "{}", admitted.object);
    assert_eq!(admitted.object["metadata"]["annotations"]["team"], "a-seen");
}
