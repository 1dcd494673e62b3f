//! The debugging walk-through of docs/operations.md, for real: a denial in
//! kubectl, its trace in Jaeger, the captured request (Secret data absent,
//! files 0600), replayed offline with the same decision; and an injection
//! captured and replayed with the same patch.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{binaries, cluster, decode_base64, eventually, ok, repo, spans_of, unique};
use portcullis_test_support::http;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, labels: {{team: shop}}}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n\
         \x20   metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: web, image: 'nginx:1.27'}}]}}\n"
    )
}

/// The captured reviews of `kind` in `dir`, oldest first.
fn captured(dir: &Path, kind: &str) -> Vec<(PathBuf, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let review: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            (review["request"]["kind"]["kind"] == kind).then_some((path, review))
        })
        .collect()
}

/// The trace id in a capture's file name, `<ms>-<trace id>-<uid>.json`.
fn trace_id(path: &Path) -> String {
    let name = path.file_name().expect("the expected format").to_str().expect("a UTF-8 path");
    name.split('-').nth(1).expect("the expected format").to_owned()
}

#[tokio::test]
async fn a_denial_is_captured_redacted_traced_and_replayed_with_the_same_decision() {
    let client = cluster().client().await;
    let policies = tempfile::tempdir().unwrap();
    let policy = policies.path().join("policies.yaml");
    std::fs::copy(repo().join("deploy/base/policies/validator.yaml"), &policy).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capture");
    let flags = ["--capture-dir", dir.to_str().unwrap(), "--capture-kinds", "Deployment,Secret"];
    let validator = Webhook::start_with(Kind::Validator, &policy, &flags).await;
    let ns = unique("capture");
    namespace(&client, &ns, &[("e2e.portcullis.dev/case", &ns)]).await;
    let registration = validator.registration(&ns, "Fail");
    let _registered = registration.apply(&client).await;

    // 1. The denial, as kubectl shows it.
    let denial = eventually("the webhook denies", WAIT, || {
        let out = cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &deployment("web"));
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    })
    .await;
    let reason = format!("[replicas] Deployment {ns}/web: spec.replicas is 1, below the minimum of 2");
    assert!(denial.contains(&reason), "{denial}");
    // A Secret goes through the same webhook; its data must stay out of the file.
    ok(cluster().kubectl(&["create", "secret", "generic", "db", "-n", &ns, "--from-literal=password=hunter2-e2e"]));

    // 2. The captured request: the denied one is the last Deployment.
    let (file, review) = eventually("the Deployment and the Secret captured", WAIT, || {
        let secrets = captured(&dir, "Secret");
        let deployments = captured(&dir, "Deployment");
        (!secrets.is_empty()).then(|| deployments.last().cloned()).flatten()
    })
    .await;
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(review["request"]["namespace"], ns.as_str());
    for (path, _) in captured(&dir, "Secret") {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("hunter2-e2e") && !text.contains("aHVudGVyMi1lMmU="), "Secret data in {text}");
        assert!(text.contains("REDACTED"), "{text}");
    }

    // 3. Its trace in Jaeger, by the id in the file name: the API server's
    //    call and the validator's admission span.
    let trace = trace_id(&file);
    assert_eq!(trace.len(), 32, "a W3C trace id in {}", file.display());
    let url = format!("{}/api/traces/{trace}", cluster().var("PORTCULLIS_JAEGER_QUERY"));
    eventually("the captured request's trace in Jaeger", WAIT, || {
        let body: Value = serde_json::from_str(&http::get_ok(&url)?).ok()?;
        let spans = spans_of(body["data"].get(0)?);
        spans
            .iter()
            .any(|(service, operation)| service == "portcullis-validator" && operation == "admission")
            .then_some(())
    })
    .await;

    // 4. Replayed offline: the same decision and message.
    let out = Command::new(binaries().join("portcullis-validator"))
        .arg("check")
        .arg("--policy")
        .arg(&policy)
        .arg("-f")
        .arg(&file)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "denied offline too: {printed}");
    assert!(printed.contains("DENIED") && printed.contains(&reason), "{printed}");
}

#[tokio::test]
async fn an_injection_is_captured_and_replayed_with_the_same_patch() {
    let client = cluster().client().await;
    let config = repo().join("deploy/base/policies/injector.yaml");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("capture");
    let injector = Webhook::start_with(Kind::Injector, &config, &["--capture-dir", dir.to_str().unwrap()]).await;
    let ns = unique("capture-inject");
    namespace(&client, &ns, &[("e2e.portcullis.dev/case", &ns), ("portcullis.dev/inject", "enabled")]).await;
    let registration = injector.registration(&ns, "Fail");
    let _registered = registration.apply(&client).await;

    let pod = eventually("a pod created with its sidecar", WAIT, || {
        let _ = cluster().kubectl(&["run", "app", "-n", &ns, "--image", "nginx:1.27"]);
        let out = cluster().kubectl(&["get", "pod", "app", "-n", &ns, "-o", "json"]);
        let pod: Value = serde_json::from_slice(&out.stdout).ok()?;
        pod["metadata"]["annotations"]["portcullis.dev/status"].is_string().then_some(pod)
    })
    .await;
    let (file, _) = eventually("the pod's creation captured", WAIT, || {
        captured(&dir, "Pod").into_iter().find(|(_, r)| r["request"]["operation"] == "CREATE")
    })
    .await;
    let out = Command::new(binaries().join("portcullis-injector"))
        .arg("mutate")
        .arg("--config")
        .arg(&config)
        .arg("-f")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let patch: Value = serde_json::from_str(&decode_base64(replayed["response"]["patch"].as_str().unwrap())).unwrap();
    // The replayed patch applied to the captured pod gives the pod the API
    // server stored: the same sidecars, containers and status annotation.
    let captured_review: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let mut mutated = captured_review["request"]["object"].clone();
    portcullis_test_support::rfc6902::apply(&mut mutated, &patch).unwrap();
    let names = |pod: &Value, list: &str| -> Vec<String> {
        pod["spec"][list].as_array().into_iter().flatten().map(|c| c["name"].as_str().unwrap().to_owned()).collect()
    };
    for list in ["initContainers", "containers"] {
        assert_eq!(names(&mutated, list), names(&pod, list), "{list}");
    }
    assert_eq!(
        mutated["metadata"]["annotations"]["portcullis.dev/status"],
        pod["metadata"]["annotations"]["portcullis.dev/status"]
    );
}
