//! `portcullis-validator check`, as a CI job runs it on manifests.

use std::io::Write as _;
use std::process::{Command, Stdio};

use portcullis_test_support::process::run_with_stdin;

/// `check` of the test policies, reading stdin.
fn check_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis-validator"));
    command
        .args(["check", "--policy"])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/policies.yaml"))
        .args(["-f", "-"]);
    command
}

/// [`check_command`] left running with its output piped, for a reader
/// that goes away early.
fn spawn_check(stdin: &str) -> std::process::Child {
    let mut child = check_command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running a command");
    child.stdin.take().expect("the stream is piped").write_all(stdin.as_bytes()).expect("writing to the child's stdin");
    child
}

fn check(stdin: &str) -> (Option<i32>, String, String) {
    let out = run_with_stdin(&mut check_command(), Some(stdin)).expect("running a command");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("UTF-8 output"),
        String::from_utf8(out.stderr).expect("UTF-8 output"),
    )
}

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {env: prod, app.kubernetes.io/version: "1"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {team: shop, app.kubernetes.io/version: "2"}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
        - name: web
          image: registry.example.com/shop/web:2
          resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 32Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, labels: {app.kubernetes.io/version: "2"}}
spec: {ports: [{port: 80}]}
"#;

#[test]
fn reports_every_finding_per_object_and_fails_on_denials() {
    let (code, stdout, stderr) = check(MANIFESTS);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("Namespace shop: allowed"), "{stdout}");
    assert!(stdout.contains("Deployment shop/web: DENIED"), "{stdout}");
    assert!(
        stdout.contains("deny: [replicas] Deployment shop/web: spec.replicas is 1, below the minimum of 2"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("warning: [owner-annotation] Deployment shop/web: annotation \"example.com/owner\" is required"),
        "{stdout}"
    );
    assert!(stdout.contains("audit: [pinned-images]"), "{stdout}");
    assert!(stdout.contains("Service shop/web: allowed"), "{stdout}");
}

#[test]
fn passes_when_nothing_is_denied() {
    let fixed = MANIFESTS.replace("replicas: 1", "replicas: 2");
    let (code, stdout, _) = check(&fixed);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("Deployment shop/web: allowed"), "{stdout}");
}

#[test]
fn namespace_selectors_see_namespaces_from_the_manifests() {
    let unversioned = MANIFESTS
        .replace("replicas: 1", "replicas: 2")
        .replace(", app.kubernetes.io/version: \"2\"}}\nspec:\n  replicas", "}}\nspec:\n  replicas");
    let (code, stdout, _) = check(&unversioned);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("[prod-namespaces] Deployment shop/web: label \"app.kubernetes.io/version\" is required"),
        "{stdout}"
    );
}

#[test]
fn unreadable_input_is_an_error() {
    let (code, _, stderr) = check("kind: [");
    assert_eq!(code, Some(2), "an error, not a denial");
    assert!(stderr.contains("not YAML or JSON"), "{stderr}");
}

#[test]
fn a_reader_that_stops_early_ends_check_quietly() {
    // `check ... | head -1`: the pipe closes while check still writes.
    let items: Vec<String> = (0..20_000)
        .map(|i| {
            format!(
                r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "c{i}", "namespace": "shop"}}}}"#
            )
        })
        .collect();
    let list = format!(r#"{{"apiVersion": "v1", "kind": "List", "items": [{}]}}"#, items.join(","));
    let mut child = spawn_check(&list);
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    assert!(stderr.is_empty(), "{stderr}");
}

/// `vap`: the native pair of each policy that can be pushed down, on
/// standard output (and `check` takes it back with the same verdicts);
/// the others named on standard error with the field, exit status 1.
#[test]
fn vap_prints_the_native_pair_or_names_what_stands_in_the_way() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policies = dir.path().join("policies.yaml");
    std::fs::write(
        &policies,
        r#"apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: team-label}
spec:
  match: {resources: [{apiGroups: [""], resources: [configmaps]}]}
  rules: {requiredLabels: {team: ""}}
---
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: pinned}
spec:
  match: {resources: [{apiGroups: [""], resources: [pods]}], operations: [CREATE, DELETE]}
  rules: {podSecurity: {forbidPrivileged: true}}
---
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: exempted}
spec:
  match: {resources: [{apiGroups: [""], resources: [configmaps]}]}
  validations: [{expression: "true"}]
---
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: everything}
spec:
  validations: [{expression: "true"}]
---
apiVersion: portcullis.dev/v1alpha1
kind: PolicyException
metadata: {name: legacy}
spec: {policies: [exempted], reason: migrating}
"#,
    )
    .expect("writing a test file");
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis-validator"))
        .arg("vap")
        .arg("--policy")
        .arg(&policies)
        .output()
        .expect("running vap");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("name: portcullis.team-label"), "{stdout}");
    assert!(!stdout.contains("portcullis.pinned") && !stdout.contains("portcullis.exempted"), "{stdout}");
    assert!(stderr.contains("policy pinned: not pushed down: spec.match.operations:"), "{stderr}");
    assert!(stderr.contains("policy exempted: not pushed down: PolicyException legacy:"), "{stderr}");
    assert!(stderr.contains("policy everything: not pushed down: spec.match.resources:"), "{stderr}");

    let generated = dir.path().join("generated.yaml");
    std::fs::write(&generated, stdout.as_bytes()).expect("writing a test file");
    let mut check = Command::new(env!("CARGO_BIN_EXE_portcullis-validator"));
    check.arg("check").arg("--policy").arg(&generated).args(["-f", "-"]);
    // Its namespaceSelector leaves out the system namespaces by name: the
    // namespace is among the manifests, as for any namespaceSelector.
    let pod = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n---\n\
               apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n";
    let out = run_with_stdin(&mut check, Some(pod)).expect("running check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "deny: ValidatingAdmissionPolicy 'portcullis.team-label' with binding 'portcullis.team-label' denied \
             request: label \"team\" is required"
        ),
        "{stdout}"
    );
}
