//! Policies as API objects, against a real kube-apiserver, as a platform
//! team and a GitOps tool use them: `kubectl apply`, `kubectl wait
//! --for=condition=Ready`, then the very next request is judged by that
//! generation in every replica; a broken policy affects only itself; a
//! namespaced policy stays in its namespace; exceptions live where they
//! apply; deletion, and an API server restart. (What a team's `edit` role
//! reaches is tested in `deploy.rs`, with the shipped roles.)
//!
//! One test, run in order, because every validator in a cluster reports to
//! the same status writer: the two replicas here are the only ones.

use std::time::{Duration, Instant};

use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, config_map_review, err, eventually, metric, ok, repo, unique};
use serde_json::{Value, json};

const WAIT: &str = "--timeout=60s";

fn apply(yaml: &str) -> String {
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], yaml))
}

fn wait_ready(what: &str, namespace: Option<&str>) {
    let mut args = vec!["wait", "--for=condition=Ready", what, WAIT];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    ok(cluster().kubectl(&args));
}

fn jsonpath(what: &str, namespace: Option<&str>, path: &str) -> String {
    let expr = format!("jsonpath={path}");
    let mut args = vec!["get", what, "-o", expr.as_str()];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    ok(cluster().kubectl(&args))
}

/// A cluster policy judging ConfigMaps of the case's namespaces: no data
/// key `key`.
fn config_map_policy(name: &str, case: &str, key: &str, extra: &str) -> String {
    format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {name}}}\nspec:\n  match:\n\
         \x20   resources: [{{apiGroups: [''], resources: [configmaps]}}]\n\
         \x20   namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/case: {case}}}}}\n  validations:\n\
         \x20   - expression: \"!has(object.data) || !('{key}' in object.data)\"\n      message: no {key} key\n{extra}"
    )
}

fn config_map(namespace: &str, name: &str, key: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": {key: "x"}})
}

/// Creates the ConfigMap through the API server; its error on denial.
fn create(namespace: &str, name: &str, key: &str) -> Result<(), String> {
    let out = cluster().kubectl_stdin(&["create", "-f", "-"], &config_map(namespace, name, key).to_string());
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// What `replica` itself answers for the ConfigMap: whether it allows it.
async fn allowed_by(replica: &Webhook, namespace: &str, key: &str) -> bool {
    let review = config_map_review(config_map(namespace, &unique("direct"), key));
    let answer = replica.client().post(replica.url()).json(&review).send().await.expect("the replica answers");
    let answer: Value = answer.json().await.expect("an AdmissionReview");
    answer["response"]["allowed"].as_bool().expect("response.allowed")
}

#[tokio::test]
async fn policies_are_objects_with_status_that_means_in_force() {
    cluster().install_kinds();
    let client = cluster().client().await;
    let case = unique("objects");
    let (team, other) = (format!("{case}-team"), format!("{case}-other"));
    for ns in [&team, &other] {
        namespace(&client, ns, &[("e2e.portcullis.dev/case", &case)]).await;
    }
    let exceptions = format!("--exception-namespaces={team}");
    let first = Webhook::start_watching(Kind::Validator, &[&exceptions]).await;
    let second = Webhook::start_watching(Kind::Validator, &[&exceptions]).await;
    let registration = first.registration(&case, "Fail");
    let _registered = registration.apply(&client).await;

    // Applied, waited for, and the very next create is judged by it, in
    // both replicas; each new generation the same.
    let policy = format!("{case}-keys");
    for (round, key) in ["forbidden", "banned", "verboten"].into_iter().enumerate() {
        apply(&config_map_policy(&policy, &case, key, ""));
        wait_ready(&format!("validatorpolicy/{policy}"), None);
        let message = create(&team, &format!("round-{round}"), key).expect_err("denied by the generation waited for");
        assert!(message.contains(&format!("no {key} key")), "{message}");
        for replica in [&first, &second] {
            assert!(!allowed_by(replica, &team, key).await, "a replica lags behind Ready (round {round})");
        }
    }
    let columns = ok(cluster().kubectl(&["get", "validatorpolicy", &policy]));
    assert!(columns.contains("ACTION") && columns.contains("READY") && columns.contains("True"), "{columns}");
    assert_eq!(jsonpath(&format!("validatorpolicy/{policy}"), None, "{.status.replicas}"), "2/2");
    ok(cluster().kubectl(&["get", "portcullis"]));

    // A broken policy beside it: Ready=False with the field, an Event and
    // a metric; the good one stays in force.
    let broken = format!("{case}-broken");
    apply(&format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {broken}}}\nspec:\n  validations:\n\
         \x20   - expression: 'object.metadata.name.startsWith('\n"
    ));
    let reason = eventually("the broken policy is reported", Duration::from_secs(30), || {
        let reason = jsonpath(&format!("validatorpolicy/{broken}"), None, "{.status.conditions[0].reason}");
        (!reason.is_empty() && reason != "Pending").then_some(reason)
    })
    .await;
    assert_eq!(reason, "CompileError");
    let message = jsonpath(&format!("validatorpolicy/{broken}"), None, "{.status.conditions[0].message}");
    assert!(message.contains("validations[0]") && message.contains("does not compile"), "{message}");
    let described = eventually("the refusal is an Event", Duration::from_secs(30), || {
        let out = ok(cluster().kubectl(&["describe", "validatorpolicy", &broken]));
        out.contains("CompileError").then_some(out)
    })
    .await;
    assert!(described.contains("Warning"), "{described}");
    let series = format!(
        "portcullis_resource_refused{{kind=\"ValidatorPolicy\",namespace=\"\",name=\"{broken}\",reason=\"CompileError\"}}"
    );
    assert_eq!(metric(first.admin, &series), 1.0);
    assert!(create(&team, "still-judged", "verboten").is_err());

    // A broken new generation of a good policy: its last good generation
    // stays in force, and its status says so.
    let good_generation = jsonpath(&format!("validatorpolicy/{policy}"), None, "{.metadata.generation}");
    apply(&config_map_policy(&policy, &case, "verboten", "    - expression: 'object.data.size( <'\n"));
    let message = eventually("the refused generation is reported", Duration::from_secs(30), || {
        let reason = jsonpath(&format!("validatorpolicy/{policy}"), None, "{.status.conditions[0].reason}");
        (reason == "CompileError")
            .then(|| jsonpath(&format!("validatorpolicy/{policy}"), None, "{.status.conditions[0].message}"))
    })
    .await;
    assert!(message.contains(&format!("generation {good_generation} stays in force")), "{message}");
    assert_eq!(jsonpath(&format!("validatorpolicy/{policy}"), None, "{.status.enforcedGeneration}"), good_generation);
    assert!(create(&team, "last-good", "verboten").is_err(), "the last good generation is in force");
    apply(&config_map_policy(&policy, &case, "verboten", ""));
    wait_ready(&format!("validatorpolicy/{policy}"), None);

    // A namespaced policy judges its own namespace only.
    apply(&format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: NamespacedValidatorPolicy\nmetadata: {{name: team-keys, namespace: {team}}}\n\
         spec:\n  match:\n    resources: [{{apiGroups: [''], resources: [configmaps]}}]\n  validations:\n\
         \x20   - expression: \"!has(object.data) || !('team-secret' in object.data)\"\n      message: no team-secret key\n"
    ));
    wait_ready("namespacedvalidatorpolicy/team-keys", Some(&team));
    let message = create(&team, "team-secret", "team-secret").expect_err("denied in its namespace");
    assert!(message.contains("no team-secret key"), "{message}");
    create(&other, "team-secret", "team-secret").expect("another namespace is not the team's");
    let refused = err(cluster().kubectl_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: NamespacedValidatorPolicy\nmetadata: {{name: reach, namespace: {team}}}\n\
             spec:\n  match: {{includeSystemNamespaces: true}}\n  validations: [{{expression: 'true'}}]\n"
        ),
    ));
    assert!(refused.contains("includeSystemNamespaces"), "{refused}");

    // Exceptions live where they apply, where the admin allows them.
    apply(&format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: PolicyException\nmetadata: {{name: legacy, namespace: {team}}}\n\
         spec: {{policies: [{policy}], names: ['legacy-*'], reason: migrating the legacy app}}\n"
    ));
    wait_ready("policyexception/legacy", Some(&team));
    create(&team, "legacy-app", "verboten").expect("exempted in its namespace");
    assert!(create(&other, "legacy-app", "verboten").is_err(), "an exception applies only where it lives");
    apply(&format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: PolicyException\nmetadata: {{name: legacy, namespace: {other}}}\n\
         spec: {{policies: [{policy}], names: ['legacy-*'], reason: not allowed here}}\n"
    ));
    let reason = eventually("the misplaced exception is reported", Duration::from_secs(30), || {
        let reason = jsonpath("policyexception/legacy", Some(&other), "{.status.conditions[0].reason}");
        (!reason.is_empty() && reason != "Pending").then_some(reason)
    })
    .await;
    assert_eq!(reason, "NamespaceNotAllowed");
    assert!(create(&other, "legacy-two", "verboten").is_err(), "a refused exception exempts nothing");

    // A paramKind the API server does not serve: in force (failing by its
    // failure policy), and its status says why.
    let params = format!("{case}-params");
    apply(&format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {params}}}\nspec:\n  match:\n\
         \x20   resources: [{{apiGroups: [''], resources: [configmaps]}}]\n\
         \x20   namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/case: {case}}}}}\n\
         \x20 paramKind: {{apiVersion: example.com/v1, kind: Missing}}\n\
         \x20 paramRef: {{name: settings, parameterNotFoundAction: Allow}}\n\
         \x20 validations: [{{expression: \"params.data.x == 'y'\"}}]\n"
    ));
    let reason = eventually("the unknown paramKind is reported", Duration::from_secs(30), || {
        let reason = jsonpath(&format!("validatorpolicy/{params}"), None, "{.status.conditions[0].reason}");
        (!reason.is_empty() && reason != "Pending").then_some(reason)
    })
    .await;
    assert_eq!(reason, "UnknownParamKind");
    ok(cluster().kubectl(&["delete", "validatorpolicy", &params]));

    // An API server restart: every policy stays in force through it and
    // after it, and changes made after it are picked up.
    let restart = std::process::Command::new(repo().join("scripts/control-plane.sh"))
        .args(["restart", cluster().var("PORTCULLIS_CP_DIR"), "kube-apiserver"])
        .output()
        .unwrap();
    assert!(restart.status.success(), "{}", String::from_utf8_lossy(&restart.stderr));
    assert!(!allowed_by(&first, &team, "verboten").await, "in force while the API server is down");
    eventually("the API server is back", Duration::from_secs(60), || {
        cluster().kubectl(&["get", "--raw", "/readyz"]).status.success().then_some(())
    })
    .await;
    for replica in [&first, &second] {
        assert!(!allowed_by(replica, &team, "verboten").await, "in force after the restart");
    }
    apply(&config_map_policy(&policy, &case, "after-restart", ""));
    wait_ready(&format!("validatorpolicy/{policy}"), None);
    assert!(create(&team, "after-restart", "after-restart").is_err());

    // Deleting a policy ends its enforcement in every replica at once.
    ok(cluster().kubectl(&["delete", "validatorpolicy", &policy]));
    let deleted = Instant::now();
    for replica in [&first, &second] {
        while !allowed_by(replica, &team, "after-restart").await {
            assert!(deleted.elapsed() < Duration::from_secs(5), "the deleted policy is still enforced");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!("deletion in force in both replicas after {:?}", deleted.elapsed());
    ok(cluster().kubectl(&["delete", "validatorpolicy", &broken]));
}
