//! The injector's CEL mutations (an `InjectorConfig`'s `mutations`, in
//! MutatingAdmissionPolicy's language) behind a real kube-apiserver: a pod
//! created with kubectl is stored with the sidecar's atomic `args` replaced
//! and a container removed, which a native MAP refuses or cannot say; the
//! same `args` change as a native MAP is refused by the API server.

use std::time::Duration;

use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, eventually, ok, repo, stored_dry_run, unique};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"example.com/proxy-log-level": "debug"}},
        "spec": {"containers": [
            {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]},
            {"name": "debug", "image": "busybox:1.36", "command": ["sleep", "inf"]},
        ]},
    })
}

/// Creates `object` in `ns` and returns the stored object.
fn create(object: &Value, ns: &str) -> Value {
    let out = cluster().kubectl_stdin(&["create", "-n", ns, "-o", "json", "-f", "-"], &object.to_string());
    serde_json::from_str(&ok(out)).expect("kubectl prints JSON")
}

/// A MutatingAdmissionPolicy on pod creates with one ApplyConfiguration
/// mutation, and its binding to the namespaces labelled
/// `e2e.portcullis.dev/map: ns`.
fn map_yaml(name: &str, ns: &str, reinvocation: &str, expression: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}
  reinvocationPolicy: {reinvocation}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        {expression}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec:
  policyName: {name}
  matchResources:
    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/map: {ns}}}}}
"#
    )
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"].as_array().and_then(|c| c.iter().find(|c| c["name"] == name)).unwrap_or(&Value::Null)
}

#[tokio::test]
async fn the_injectors_cel_mutations_do_what_a_native_map_refuses() {
    let client = cluster().client().await;
    let injector = Webhook::start(Kind::Injector, &repo().join("services/injector/tests/data/cel-config.yaml")).await;
    let ns = unique("cel-inject");
    namespace(&client, &ns, &[("portcullis.dev/inject", "enabled"), ("e2e.portcullis.dev/case", &ns)]).await;
    let _registered = injector.registration(&ns, "Fail").apply(&client).await;
    eventually("the injector is in use", WAIT, || {
        stored_dry_run(&pod("probe"), &ns).ok().filter(|p| p["metadata"]["labels"]["team"] == "unassigned")
    })
    .await;

    let stored = create(&pod("web"), &ns);
    let names: Vec<&str> =
        stored["spec"]["containers"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["web", "proxy"], "debug removed, the sidecar injected");
    let proxy = container(&stored, "proxy");
    assert_eq!(proxy["args"], json!(["--log-level", "debug"]), "the atomic list replaced");
    assert_eq!(proxy["image"], "mirror.example.com/dockerhub/envoyproxy/envoy:v1.31.0");
    assert_eq!(container(&stored, "web")["ports"][0]["containerPort"], 8080);
    assert_eq!(stored["metadata"]["labels"]["team"], "unassigned");
    assert_eq!(stored["metadata"]["annotations"]["example.com/trace"], "on");
    // As kubectl shows it.
    let shown = ok(cluster().kubectl(&["get", "pod", "web", "-n", &ns, "-o", "jsonpath={.spec.containers[1].args}"]));
    assert_eq!(shown, r#"["--log-level","debug"]"#);

    // The same change of `args` as a native MAP: the API server refuses it.
    let map_ns = unique("cel-map");
    namespace(&client, &map_ns, &[("e2e.portcullis.dev/map", &map_ns)]).await;
    let name = format!("proxy-args.{map_ns}");
    let yaml = map_yaml(
        &name,
        &map_ns,
        "Never",
        r#"Object{spec: Object.spec{containers: [Object.spec.containers{name: "web", args: ["--log-level", "debug"]}]}}"#,
    );
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &yaml));
    let refusal =
        eventually("the API server applies the MAP", WAIT, || stored_dry_run(&pod("web"), &map_ns).err()).await;
    ok(cluster().kubectl(&["delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", &name]));
    assert!(refusal.contains("may not mutate atomic arrays, maps or structs: .spec.containers[0].args"), "{refusal}");
}

#[tokio::test]
async fn a_map_reinvoked_after_the_injector_changed_the_pod_gives_what_mutate_gives() {
    let client = cluster().client().await;
    let config = repo().join("services/injector/tests/data/cel-config.yaml");
    let injector = Webhook::start(Kind::Injector, &config).await;
    let ns = unique("cel-reinvoke");
    let labels =
        [("portcullis.dev/inject", "enabled"), ("e2e.portcullis.dev/case", &ns), ("e2e.portcullis.dev/map", &ns)];
    namespace(&client, &ns, &labels).await;
    let plain = unique("cel-plain");
    namespace(&client, &plain, &[]).await;
    let _registered = injector.registration(&ns, "Fail").apply(&client).await;
    // Counts the containers: the injector adds one after the MAP ran, so
    // only a reinvocation gets the count right.
    let name = format!("count.{ns}");
    let yaml = map_yaml(
        &name,
        &ns,
        "IfNeeded",
        r#"Object{metadata: Object.metadata{labels: {"containers": string(size(object.spec.containers))}}}"#,
    );
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &yaml));
    let mut object = pod("web");
    if let Some(containers) = object["spec"]["containers"].as_array_mut() {
        containers.truncate(1);
    }
    let theirs = eventually("the MAP and the injector are in use", WAIT, || {
        stored_dry_run(&object, &ns).ok().filter(|p| {
            p["metadata"]["labels"]["containers"].is_string() && p["metadata"]["labels"]["team"].is_string()
        })
    })
    .await;
    assert_eq!(theirs["metadata"]["labels"]["containers"], "2", "reinvoked after the sidecar was added");

    // The same through `mutate --policy --config` on the pod as admitted
    // without either, stored where neither applies.
    let admitted = stored_dry_run(&object, &plain).expect("valid without the MAP and the webhook");
    let dir = tempfile::tempdir().expect("a test step");
    let namespace_doc = json!({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": ns, "labels": {"e2e.portcullis.dev/map": ns}}});
    std::fs::write(dir.path().join("map.yaml"), format!("{yaml}---\n{namespace_doc}\n")).expect("a test step");
    let mut input = admitted.clone();
    input["metadata"]["namespace"] = json!(ns);
    std::fs::write(dir.path().join("pod.json"), input.to_string()).expect("a test step");
    let out = std::process::Command::new(portcullis_e2e::binaries().join("portcullis-injector"))
        .args(["mutate", "--output", "object", "--policy"])
        .arg(dir.path().join("map.yaml"))
        .arg("--config")
        .arg(&config)
        .arg("-f")
        .arg(dir.path().join("pod.json"))
        .output()
        .expect("a test step");
    assert!(out.status.success(), "mutate failed: {}", String::from_utf8_lossy(&out.stderr));
    let mutated: Value = serde_yaml::from_slice(&out.stdout).expect("mutate prints YAML");
    let ours = stored_dry_run(&mutated, &plain).expect("the mutated pod is valid");
    ok(cluster().kubectl(&["delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", &name]));
    assert_eq!(ours, theirs, "mutate and the API server differ");
}
