//! The injector behind a real kube-apiserver: what a user sees with kubectl.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use portcullis_e2e::cleanup::Cleanup;
use portcullis_e2e::webhook::{Kind, Pki, Registration, Webhook, namespace};
use portcullis_e2e::{cluster, err, eventually, ok, repo, unique};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn manifest(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\n\
         spec:\n  containers:\n    - name: web\n      image: nginx:1.27\n"
    )
}

/// Server-side dry run of a pod: what the API server would store.
fn dry_run(ns: &str, name: &str) -> Result<Value, String> {
    let out = cluster()
        .kubectl_stdin(&["create", "-n", ns, "--dry-run=server", "-o", "json", "-f", "-"], &manifest(name, ""));
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("JSON of the expected shape"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn injected(pod: &Value) -> bool {
    pod["metadata"]["annotations"]["portcullis.dev/status"].is_string()
}

/// A namespace opted in for this test's webhook only.
async fn opted_in(client: &kube::Client, case: &str) -> String {
    namespace(client, case, &[("portcullis.dev/inject", "enabled"), ("e2e.portcullis.dev/case", case)]).await;
    case.to_owned()
}

async fn register(
    client: &kube::Client,
    injector: &Webhook,
    case: &str,
    ca: &str,
    policy: &'static str,
) -> (Registration, Cleanup) {
    let registration = Registration { ca_bundle: ca.to_owned(), ..injector.registration(case, policy) };
    let registered = registration.apply(client).await;
    (registration, registered)
}

#[tokio::test]
async fn pods_in_opted_in_namespaces_come_back_injected() {
    let client = cluster().client().await;
    let injector = Webhook::start(Kind::Injector, &repo().join("deploy/base/policies/injector.yaml")).await;
    let ns = opted_in(&client, &unique("inject")).await;
    let (_, _registered) = register(&client, &injector, &ns, &injector.pki.ca, "Fail").await;
    eventually("the webhook is in use", WAIT, || dry_run(&ns, "probe").ok().filter(injected)).await;

    // kubectl apply: the stored pod has the sidecar, rewrites, defaults, status.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest("web", "example.com/owner: team/a")).unwrap();
    let path = file.path().to_str().unwrap();
    ok(cluster().kubectl(&["apply", "-n", &ns, "-f", path]));
    let pod: Pod = Api::namespaced(client.clone(), &ns).get("web").await.unwrap();
    let spec = pod.spec.as_ref().unwrap();
    let init = spec.init_containers.as_ref().unwrap();
    assert_eq!(init[0].name, "portcullis-proxy");
    assert_eq!(init[0].restart_policy.as_deref(), Some("Always"));
    assert_eq!(init[0].image.as_deref(), Some("mirror.example.internal/ghcr/example/proxy:v1.4.2"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("mirror.example.internal/dockerhub/library/nginx:1.27"));
    assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("Always"));
    let mounts: Vec<&str> = spec.containers[0].volume_mounts.iter().flatten().map(|m| m.mount_path.as_str()).collect();
    assert!(mounts.contains(&"/var/run/portcullis/certs"), "{mounts:?}");
    assert_eq!(spec.enable_service_links, Some(false));
    let meta = &pod.metadata;
    assert_eq!(meta.labels.as_ref().unwrap()["portcullis.dev/injected"], "true");
    let annotations = meta.annotations.as_ref().unwrap();
    assert_eq!(annotations["example.com/owner"], "team/a");
    let status: Value = serde_json::from_str(&annotations["portcullis.dev/status"]).unwrap();
    assert_eq!(status["templates"], serde_json::json!(["proxy"]));

    // Applying the same manifest again changes nothing. kubectl sends the
    // Docker Hub image back (it differs from the live one, so kubectl says
    // "configured"); the webhook keeps it on the mirror and the stored pod
    // is not modified at all.
    ok(cluster().kubectl(&["apply", "-n", &ns, "-f", path]));
    let after: Pod = Api::namespaced(client.clone(), &ns).get("web").await.unwrap();
    assert_eq!(after.metadata.resource_version, pod.metadata.resource_version);
    assert_eq!(after.spec.unwrap().containers[0].image, spec.containers[0].image);
    // With an image no rule rewrites, kubectl itself sees nothing to do.
    let local = manifest("local", "").replace("nginx:1.27", "registry.local:5000/web:1");
    std::fs::write(file.path(), &local).unwrap();
    ok(cluster().kubectl(&["apply", "-n", &ns, "-f", path]));
    let again = ok(cluster().kubectl(&["apply", "-n", &ns, "-f", path]));
    assert!(again.contains("pod/local unchanged"), "{again}");

    // Server-side dry run goes through the webhook and stores nothing.
    let preview = dry_run(&ns, "preview").unwrap();
    assert!(injected(&preview));
    let missing = err(cluster().kubectl(&["get", "pod", "preview", "-n", &ns]));
    assert!(missing.contains("NotFound"), "{missing}");

    // Opted out: untouched.
    ok(cluster()
        .kubectl_stdin(&["create", "-n", &ns, "-f", "-"], &manifest("batch", "portcullis.dev/inject: \"false\"")));
    let batch: Pod = Api::namespaced(client.clone(), &ns).get("batch").await.unwrap();
    assert!(batch.spec.unwrap().init_containers.is_none());
    assert!(!batch.metadata.annotations.unwrap().contains_key("portcullis.dev/status"));

    // A namespace without the opt-in label: untouched.
    let plain = unique("plain");
    namespace(&client, &plain, &[("e2e.portcullis.dev/case", &ns)]).await;
    ok(cluster().kubectl_stdin(&["create", "-n", &plain, "-f", "-"], &manifest("web", "")));
    let untouched: Pod = Api::namespaced(client.clone(), &plain).get("web").await.unwrap();
    assert_eq!(untouched.spec.unwrap().containers[0].image.as_deref(), Some("nginx:1.27"));
}

#[tokio::test]
async fn the_api_server_checks_the_webhook_certificate_against_ca_bundle() {
    let client = cluster().client().await;
    let injector = Webhook::start(Kind::Injector, &repo().join("deploy/base/policies/injector.yaml")).await;
    let ns = opted_in(&client, &unique("cabundle")).await;
    let wrong_ca = Pki::new().ca;

    let (registration, _registered) = register(&client, &injector, &ns, &wrong_ca, "Fail").await;
    let message = eventually("creation refused under Fail", WAIT, || dry_run(&ns, "probe").err()).await;
    assert!(message.contains("failed calling webhook"), "{message}");
    assert!(message.contains("x509") || message.contains("certificate"), "{message}");

    let registration = Registration { failure_policy: "Ignore", ..registration };
    let _registered = registration.apply(&client).await;
    let pod = eventually("admitted untouched under Ignore", WAIT, || dry_run(&ns, "probe").ok()).await;
    assert!(!injected(&pod), "a webhook with an untrusted certificate must not have been used");

    let registration = Registration { ca_bundle: injector.pki.ca.clone(), ..registration };
    let _registered = registration.apply(&client).await;
    eventually("used once the caBundle is right", WAIT, || dry_run(&ns, "probe").ok().filter(injected)).await;
}

#[tokio::test]
async fn a_webhook_that_is_down_fails_closed_or_open_and_is_used_again_when_back() {
    let client = cluster().client().await;
    let mut injector = Webhook::start(Kind::Injector, &repo().join("deploy/base/policies/injector.yaml")).await;
    let ns = opted_in(&client, &unique("down")).await;
    let (registration, _registered) = register(&client, &injector, &ns, &injector.pki.ca, "Fail").await;
    eventually("the webhook is in use", WAIT, || dry_run(&ns, "probe").ok().filter(injected)).await;

    injector.stop();
    let message = dry_run(&ns, "probe").unwrap_err();
    assert!(message.contains("failed calling webhook"), "{message}");
    assert!(message.contains("connection refused"), "{message}");

    let registration = Registration { failure_policy: "Ignore", ..registration };
    let _registered = registration.apply(&client).await;
    let pod = eventually("admitted under Ignore", WAIT, || dry_run(&ns, "probe").ok()).await;
    assert!(!injected(&pod));

    injector.resume().await;
    eventually("used again once back", WAIT, || dry_run(&ns, "probe").ok().filter(injected)).await;
}
