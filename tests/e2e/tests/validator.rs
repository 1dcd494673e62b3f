//! The validator behind a real kube-apiserver: what a user sees with kubectl.

use std::time::Duration;

use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, err, eventually, metric, ok, repo, unique};

const WAIT: Duration = Duration::from_secs(30);

fn deployment(name: &str, replicas: u32, labels: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n\
         spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n\
         \x20   metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: web, image: 'nginx:1.27'}}]}}\n"
    )
}

#[tokio::test]
async fn policies_deny_warn_see_old_objects_and_reload_from_disk() {
    let client = cluster().client().await;
    let policies = tempfile::tempdir().unwrap();
    std::fs::copy(repo().join("deploy/base/policies/validator.yaml"), policies.path().join("policies.yaml")).unwrap();
    let validator = Webhook::start(Kind::Validator, policies.path()).await;
    let ns = unique("validate");
    namespace(&client, &ns, &[("e2e.portcullis.dev/case", &ns)]).await;
    let registration = validator.registration(&ns, "Fail");
    let _registered = registration.apply(&client).await;

    // A denied Deployment: kubectl shows the policy's message.
    let message = eventually("the webhook is in use", WAIT, || {
        let out = cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &deployment("web", 1, "team: shop"));
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    })
    .await;
    assert!(message.contains("denied the request"), "{message}");
    assert!(
        message.contains(&format!("[replicas] Deployment {ns}/web: spec.replicas is 1, below the minimum of 2")),
        "{message}"
    );

    // Every violation at once.
    let out = cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &deployment("web", 1, ""));
    let message = err(out);
    assert!(message.contains("[replicas]") && message.contains("[team-label]"), "{message}");
    assert!(message.contains(r#"label "team" is required"#), "{message}");

    // A Warn policy: kubectl prints "Warning:" and the object is created.
    let out = cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &deployment("web", 2, "team: shop"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "Warning: [owner-annotation] Deployment {ns}/web: annotation \"example.com/owner\" is required"
        )),
        "{stderr}"
    );
    ok(cluster().kubectl(&["get", "deployment", "web", "-n", &ns]));

    // kubectl scale below the minimum goes through deployments/scale.
    let message = err(cluster().kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=1"]));
    assert!(
        message.contains(&format!("[replicas] Scale {ns}/web: spec.replicas is 1, below the minimum of 2")),
        "{message}"
    );
    ok(cluster().kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=3"]));

    // An UPDATE rule sees the old object.
    let message = err(cluster().kubectl(&["label", "deployment", "web", "-n", &ns, "team=other", "--overwrite"]));
    assert!(message.contains("the team label may not change (it is shop)"), "{message}");

    // A policy change on disk takes effect without a restart.
    std::fs::write(
        policies.path().join("tight.yaml"),
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: tight}\nspec:\n  match:\n    resources: [{apiGroups: [apps], resources: [deployments/scale]}]\n  rules:\n    replicas: {max: 3}\n",
    )
    .unwrap();
    let message = eventually("the new policy is in force", WAIT, || {
        let out = cluster().kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=4"]);
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    })
    .await;
    assert!(message.contains("[tight]") && message.contains("above the maximum of 3"), "{message}");

    // A broken policy file is refused; the last good set stays in force.
    std::fs::write(policies.path().join("tight.yaml"), "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: tight}\nspec: {rules: {replicas: {max: [}}}\n").unwrap();
    let refused = r#"portcullis_config_reloads_total{result="failure"}"#;
    eventually("the broken policy file refused", Duration::from_secs(30), || {
        (metric(validator.admin, refused) >= 1.0).then_some(())
    })
    .await;
    let message = err(cluster().kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=4"]));
    assert!(message.contains("[tight]"), "{message}");
}

/// A policy whose limit is a ConfigMap in each team's namespace.
const MAX_REPLICAS: &str = r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: max-replicas}
spec:
  match:
    resources: [{apiGroups: [apps], kinds: [Deployment]}]
  paramKind: {apiVersion: v1, kind: ConfigMap}
  paramRef: {name: replica-limit, parameterNotFoundAction: Deny}
  validations:
    - expression: "object.spec.replicas <= int(params.data.max)"
      messageExpression: "'at most ' + params.data.max + ' replicas in this namespace'"
"#;

#[tokio::test]
async fn parameters_come_from_the_cluster_and_follow_its_changes() {
    let client = cluster().client().await;
    let policies = tempfile::tempdir().unwrap();
    let file = policies.path().join("policies.yaml");
    std::fs::write(&file, MAX_REPLICAS).unwrap();
    let validator = Webhook::start(Kind::Validator, policies.path()).await;
    let ns = unique("params");
    namespace(&client, &ns, &[("e2e.portcullis.dev/case", &ns)]).await;
    let limit = |max: u32| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: replica-limit}}\ndata: {{max: '{max}'}}\n")
    };
    ok(cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &limit(3)));
    let registration = validator.registration(&ns, "Fail");
    let _registered = registration.apply(&client).await;
    let dry_run = |replicas: u32| {
        cluster().kubectl_stdin(
            &["create", "--dry-run=server", "-n", &ns, "-f", "-"],
            &deployment("web", replicas, "team: shop"),
        )
    };
    let denied_with = |expected: &'static str| {
        let dry_run = &dry_run;
        move || {
            let out = dry_run(5);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (!out.status.success() && stderr.contains(expected)).then_some(stderr)
        }
    };

    // The ConfigMap's limit is enforced, with the policy's message.
    let message = eventually("the limit of 3 is enforced", WAIT, denied_with("at most 3 replicas")).await;
    assert!(message.contains(&format!("[max-replicas] Deployment {ns}/web: at most 3 replicas in this namespace")));
    ok(dry_run(3));

    // Raising the limit in the ConfigMap takes effect without a reload.
    ok(cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &limit(10)));
    eventually("the limit of 10 is in force", WAIT, || dry_run(5).status.success().then_some(())).await;

    // No ConfigMap: parameterNotFoundAction Deny, under failurePolicy Fail.
    ok(cluster().kubectl(&["delete", "configmap", "replica-limit", "-n", &ns]));
    let message = eventually(
        "a missing parameter denies",
        WAIT,
        denied_with("no params found for policy binding with `Deny` parameterNotFoundAction"),
    )
    .await;
    assert!(message.contains("[max-replicas] policy could not be evaluated: failed to configure binding"), "{message}");

    // The policy removed, a new ConfigMap created meanwhile, the policy
    // back: it reads the new ConfigMap (a fresh watch, not a frozen copy).
    std::fs::write(&file, "").unwrap();
    eventually("the policy is gone", WAIT, || dry_run(50).status.success().then_some(())).await;
    ok(cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &limit(1)));
    std::fs::write(&file, MAX_REPLICAS).unwrap();
    eventually("the limit of 1 is enforced", WAIT, denied_with("at most 1 replicas")).await;
    assert!(
        metric(validator.admin, r#"portcullis_validator_findings_total{policy="max-replicas",action="deny"}"#) >= 2.0
    );
}
