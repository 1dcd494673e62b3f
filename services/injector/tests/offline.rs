//! `portcullis-injector mutate`: the offline mode users run like
//! `istioctl kube-inject`, on a plain manifest and on an AdmissionReview.

mod support;

use std::process::Command;

use portcullis_test_support::process::run_with_stdin;
use serde_json::Value;

fn run(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis-injector"));
    command.arg("mutate").arg("--config").arg(support::data("config.yaml")).args(args);
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
