//! `portcullis-injector mutate`: the offline mode users run like
//! `istioctl kube-inject`, on a plain manifest and on an AdmissionReview.

mod support;

use std::path::Path;
use std::process::Command;

use portcullis_test_support::process::run_with_stdin;
use serde_json::Value;

fn run(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    run_with(&support::data("config.yaml"), args, stdin)
}

fn run_with(config: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis-injector"));
    command.arg("mutate").arg("--config").arg(config).args(args);
    let out = run_with_stdin(&mut command, stdin).expect("running a command");
    (
        out.status.success(),
        String::from_utf8(out.stdout).expect("UTF-8 output"),
        String::from_utf8(out.stderr).expect("UTF-8 output"),
    )
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: hello
  namespace: demo
  annotations:
    portcullis.dev/templates: proxy,log-shipper
spec:
  containers:
    - name: hello
      image: registry.local:5000/hello@sha256:1111111111111111111111111111111111111111111111111111111111111111
"#;

#[test]
fn prints_the_mutated_object_for_a_plain_manifest() {
    let (ok, stdout, stderr) = run(&["-f", "-", "--output", "object"], Some(POD));
    assert!(ok, "{stderr}");
    let pod: Value = serde_yaml::from_str(&stdout).unwrap();
    assert_eq!(support::names(&pod["spec"]["containers"]), ["hello", "log-shipper"]);
    assert_eq!(support::names(&pod["spec"]["initContainers"]), ["proxy-init"]);
    assert_eq!(pod["spec"]["containers"][1]["image"], "mirror.example.com/dockerhub/fluent/fluent-bit:3.1");
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        "registry.local:5000/hello@sha256:1111111111111111111111111111111111111111111111111111111111111111"
    );
}

#[test]
fn answers_an_admission_review_like_the_server() {
    let file = support::data("pod-v1beta1.json");
    let (ok, stdout, stderr) = run(&["-f", file.to_str().unwrap()], None);
    assert!(ok, "{stderr}");
    let review: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1");
    let served = support::admit(&support::injector(), &support::review("pod-v1beta1.json"));
    assert_eq!(review, served.response, "offline and server answers differ");
}

#[test]
fn bad_input_fails_with_a_message() {
    let (ok, _, stderr) = run(&["-f", "-"], Some("kind: [unclosed"));
    assert!(!ok);
    assert!(stderr.contains("not YAML or JSON"), "{stderr}");
    let (ok, _, stderr) = run(&["-f", "-"], Some("metadata: {name: x}\n"));
    assert!(!ok);
    assert!(stderr.contains("no apiVersion"), "{stderr}");
}

/// A CEL mutation reading `params.data.team` from the ConfigMaps labelled
/// `team-settings: "yes"` in the pod's namespace.
const PARAMS_CONFIG: &str = r#"
apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
metadata: {name: teams}
spec:
  mutations:
    - name: team-label
      paramKind: {apiVersion: v1, kind: ConfigMap}
      paramRef:
        selector: {matchLabels: {team-settings: "yes"}}
        parameterNotFoundAction: Deny
      matchConditions:
        - name: has-team
          expression: has(params.data.team)
      mutations:
        - patchType: ApplyConfiguration
          applyConfiguration:
            expression: 'Object{metadata: Object.metadata{labels: {"team": params.data.team}}}'
"#;

const SETTINGS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: a-empty, namespace: demo, labels: {team-settings: "yes"}}
data: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b-payments, namespace: demo, labels: {team-settings: "yes"}}
data: {team: payments}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c-billing, namespace: demo, labels: {team-settings: "yes"}}
data: {team: billing}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: other, labels: {team-settings: "yes"}}
data: {team: other}
"#;

#[test]
fn a_cel_mutation_reads_the_parameter_objects_given_with_params() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (config, settings) = (dir.path().join("config.yaml"), dir.path().join("settings.yaml"));
    std::fs::write(&config, PARAMS_CONFIG).expect("written");
    std::fs::write(&settings, SETTINGS).expect("written");
    let params = settings.to_str().expect("a UTF-8 path");
    // Of the pod's namespace's three, the first (by name) whose match
    // condition holds.
    let (ok, stdout, stderr) = run_with(&config, &["--params", params, "-f", "-", "-o", "object"], Some(POD));
    assert!(ok, "{stderr}");
    let pod: Value = serde_yaml::from_str(&stdout).expect("YAML");
    assert_eq!(pod["metadata"]["labels"]["team"], "payments");
    // None given: `Deny`, in the API server's words, naming the mutation.
    let (ok, _, stderr) = run_with(&config, &["-f", "-", "-o", "object"], Some(POD));
    assert!(!ok);
    assert!(
        stderr.contains(r#"mutation "team-label" failed: failed to configure binding: no params found"#),
        "{stderr}"
    );
}
