//! The injector's CEL mutations with parameters (`paramKind` and
//! `paramRef`, as a MutatingAdmissionPolicy and its binding have them),
//! against a real kube-apiserver: an `InjectorConfig` is Ready once the
//! ConfigMaps it reads are listed, a pod gets the value of its namespace's
//! ConfigMap, a change to the ConfigMap is in force without a reload, a
//! deleted one denies with the API server's words, and a kind the API does
//! not serve is reported in the configuration's status; and an entry's
//! `matchConstraints` selects pods by their namespace's labels and their
//! own, its expression reading `namespaceObject`, even for a pod created
//! with its namespace, before the watch has it. Its own control plane:
//! its injector is the only replica reporting.

use std::time::Duration;

use portcullis_e2e::cleanup::Cleanup;
use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, eventually, ok, stored_dry_run, unique};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn apply(yaml: &str) {
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], yaml));
}

/// An `InjectorConfig` with one CEL mutation labelling the pod with
/// `params.data.team`, its parameters `kind` by `param_ref` (flow YAML).
fn config(name: &str, api_version: &str, kind: &str, param_ref: &str, failure_policy: &str) -> String {
    format!(
        r#"apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
metadata: {{name: {name}}}
spec:
  mutations:
  - name: {name}
    failurePolicy: {failure_policy}
    paramKind: {{apiVersion: {api_version}, kind: {kind}}}
    paramRef: {param_ref}
    mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{{metadata: Object.metadata{{labels: {{"team": params.data.team}}}}}}'
"#
    )
}

fn settings(ns: &str, team: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: team-settings, namespace: {ns}}}\ndata: {{team: {team}}}\n"
    )
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
           "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}})
}

/// The team label the API server would store on a new pod in `ns`, or
/// why it refused the pod.
fn team(ns: &str) -> Result<String, String> {
    stored_dry_run(&pod(), ns).map(|p| p["metadata"]["labels"]["team"].as_str().unwrap_or_default().to_owned())
}

/// An `InjectorConfig` annotating the pods of namespaces labelled
/// `team-annotation: "on"`, unless the pod is labelled `skip`, with the
/// namespace's `team` label.
const NAMESPACE_TEAM: &str = r#"apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
metadata: {name: namespace-team}
spec:
  mutations:
  - name: namespace-team
    matchConstraints:
      resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
      namespaceSelector: {matchLabels: {team-annotation: "on"}}
      objectSelector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}
    mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{metadata: Object.metadata{annotations: {"example.com/team": namespaceObject.metadata.labels.team}}}
"#;

/// The `example.com/team` annotation the API server would store on a new
/// pod in `ns` labelled `labels`.
fn team_annotation(ns: &str, labels: Value) -> Result<String, String> {
    let mut pod = pod();
    pod["metadata"]["labels"] = labels;
    let stored = stored_dry_run(&pod, ns)?;
    Ok(stored["metadata"]["annotations"]["example.com/team"].as_str().unwrap_or_default().to_owned())
}

fn reason(what: &str) -> String {
    let path = r#"jsonpath={.status.conditions[?(@.type=="Ready")].reason}"#;
    ok(cluster().kubectl(&["get", what, "-o", path]))
}

#[tokio::test]
async fn cel_mutations_read_their_namespaces_parameters_and_follow_their_changes() {
    cluster().install_kinds();
    let client = cluster().client().await;
    let injector = Webhook::start_watching(Kind::Injector, &[]).await;
    let ns = unique("params");
    let labels = [("portcullis.dev/inject", "enabled"), ("e2e.portcullis.dev/case", &ns), ("team", "payments")];
    namespace(&client, &ns, &labels).await;
    let _registered = injector.registration(&ns, "Fail").apply(&client).await;

    // A ConfigMap per namespace, read by name in the pod's namespace.
    apply(&settings(&ns, "payments"));
    let by_name = "{name: team-settings, parameterNotFoundAction: Deny}";
    let team_label =
        Cleanup::apply("injectorconfig", "team-label", &config("team-label", "v1", "ConfigMap", by_name, "Fail"));
    ok(cluster().kubectl(&["wait", "--for=condition=Ready", "injectorconfig/team-label", "--timeout=60s"]));
    let first = eventually("the mutation is in force", WAIT, || team(&ns).ok().filter(|t| !t.is_empty())).await;
    assert_eq!(first, "payments");

    // A change to the ConfigMap, with no reload of anything.
    apply(&settings(&ns, "billing"));
    eventually("the changed ConfigMap is read", WAIT, || team(&ns).ok().filter(|t| t == "billing")).await;

    // None left, and `Deny`: the pod is denied, naming the mutation, in
    // the API server's words.
    ok(cluster().kubectl(&["delete", "configmap", "team-settings", "-n", &ns]));
    let denied = eventually("the deleted ConfigMap denies", WAIT, || team(&ns).err()).await;
    assert!(denied.contains(r#"portcullis: mutation "team-label" failed"#), "{denied}");
    assert!(
        denied.contains(
            "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{denied}"
    );
    drop(team_label);

    // A kind the API does not serve: in force, failing by its failure
    // policy (here `Ignore`: the pod is admitted, with a warning), and its
    // status says why.
    let missing = "{name: x, parameterNotFoundAction: Deny}";
    let team_missing = config("team-missing", "example.com/v1", "TeamSettings", missing, "Ignore");
    let team_missing = Cleanup::apply("injectorconfig", "team-missing", &team_missing);
    let said = eventually("the unknown paramKind is reported", WAIT, || {
        Some(reason("injectorconfig/team-missing")).filter(|r| !r.is_empty() && r != "Pending")
    })
    .await;
    assert_eq!(said, "UnknownParamKind");
    let message = ok(cluster().kubectl(&[
        "get",
        "injectorconfig/team-missing",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="Ready")].message}"#,
    ]));
    assert!(message.contains("TeamSettings (example.com/v1)"), "{message}");
    let mut admitted = pod();
    admitted["metadata"]["name"] = json!("admitted");
    let out = cluster().kubectl_stdin(&["create", "-n", &ns, "-f", "-"], &admitted.to_string());
    let warned = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{warned}");
    assert!(warned.contains(r#"mutation "team-missing" was ignored"#), "{warned}");
    assert!(warned.contains("TeamSettings"), "{warned}");
    drop(team_missing);

    // matchConstraints: the namespace's labels (watched), the pod's own.
    let _namespace_team = Cleanup::apply("injectorconfig", "namespace-team", NAMESPACE_TEAM);
    ok(cluster().kubectl(&["wait", "--for=condition=Ready", "injectorconfig/namespace-team", "--timeout=60s"]));
    assert_eq!(team_annotation(&ns, json!({})), Ok(String::new()), "the namespace is not selected yet");
    ok(cluster().kubectl(&["label", "namespace", &ns, "team-annotation=on"]));
    eventually("the relabelled namespace is selected", WAIT, || {
        team_annotation(&ns, json!({})).ok().filter(|t| t == "payments")
    })
    .await;
    assert_eq!(team_annotation(&ns, json!({"skip": "yes"})), Ok(String::new()), "the objectSelector");
    ok(cluster().kubectl(&["label", "namespace", &ns, "team=billing", "--overwrite"]));
    eventually("namespaceObject follows the namespace", WAIT, || {
        team_annotation(&ns, json!({})).ok().filter(|t| t == "billing")
    })
    .await;

    // A namespace and its pod created together, as `kubectl apply` of a
    // directory does: the pod may reach the injector before the
    // namespace reaches its watch. It waits for the namespace, as the API
    // server would look it up, instead of failing by the failure policy.
    for i in 0..10 {
        let fresh = format!("{ns}-new-{i}");
        let _gone = Cleanup::of("namespace", &fresh);
        let labels = json!({"e2e.portcullis.dev/case": ns, "portcullis.dev/inject": "enabled",
                            "team-annotation": "on", "team": format!("fresh-{i}")});
        let mut pod = pod();
        pod["metadata"]["namespace"] = fresh.clone().into();
        let both = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fresh, "labels": labels}}, pod]});
        ok(cluster().kubectl_stdin(&["create", "-f", "-"], &both.to_string()));
        let path = r#"jsonpath={.metadata.annotations.example\.com/team}"#;
        let annotation = ok(cluster().kubectl(&["get", "pod", "web", "-n", &fresh, "-o", path]));
        assert_eq!(annotation, format!("fresh-{i}"), "the pod created with namespace {fresh}");
    }
}
