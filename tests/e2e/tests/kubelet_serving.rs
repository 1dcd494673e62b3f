//! Another signer: with `--signer-name kubernetes.io/kubelet-serving` the
//! cert-manager checks, creates and approves the CSR, and
//! kube-controller-manager signs it with the cluster's signing CA. The
//! cert-manager runs under deploy's RBAC plus the kubelet-serving component.

use std::time::Duration;

use portcullis_certs_client::{IssueError, Settings, issue};
use portcullis_e2e::cert_manager::{NAMESPACE, Setup};
use portcullis_e2e::{cluster, eventually, ok, repo};

#[tokio::test]
async fn a_webhook_gets_a_kubelet_serving_certificate_signed_by_kube_controller_manager() {
    let cluster = cluster();
    let setup = Setup::new(
        cluster,
        &format!(
            "    - identity: {NAMESPACE}/webhook\n      ipAddresses: [127.0.0.1]\n      subject: {{commonName: \"system:node:portcullis-webhook\", organizations: [system:nodes]}}\n"
        ),
    );
    let rbac = repo().join("deploy/components/kubelet-serving-signer/rbac.yaml");
    ok(cluster.kubectl(&["apply", "-f", rbac.to_str().unwrap()]));
    let cluster_ca_file = cluster.var("PORTCULLIS_CSR_SIGNER_CA");
    let cluster_ca = std::fs::read_to_string(cluster_ca_file).unwrap();
    let cert_manager = setup
        .start(
            cluster,
            "replica-one",
            &["--signer-name", "kubernetes.io/kubelet-serving", "--trust-bundle-file", cluster_ca_file],
        )
        .await;
    let node_style = ["--cert-common-name", "system:node:portcullis-webhook", "--cert-organizations", "system:nodes"];

    // Without the subject that signer requires, kube-controller-manager
    // refuses the CSR, and the webhook is told why.
    let plain = Settings::new(cert_manager.url(), setup.path("ca.crt"), setup.path("token"), &["127.0.0.1"]);
    match issue(&plain).await {
        Err(IssueError::Refused { code, message }) => {
            assert_eq!(code, tonic::Code::FailedPrecondition, "{message}");
            assert!(message.contains("was refused: Failed"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A subject the configuration does not grant is refused before any CSR.
    let other_node = Settings { common_name: Some("system:node:worker-1".into()), ..plain.clone() };
    match issue(&other_node).await {
        Err(IssueError::Refused { code, message }) => {
            assert_eq!(code, tonic::Code::PermissionDenied);
            assert!(message.contains("may not have CommonName \"system:node:worker-1\""), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    // A webhook with the node-style subject serves a certificate from the
    // cluster's CA; the caBundle is that CA, and pods are admitted through it.
    let injector = setup.injector(cluster, &cert_manager, &node_style).await;
    assert!(injector.serves_a_certificate_of(&cluster_ca).await, "signed by kube-controller-manager's CA");
    ok(cluster.kubectl(&["create", "namespace", "kubelet-serving"]));
    ok(cluster.kubectl(&["label", "namespace", "kubelet-serving", "e2e.portcullis.dev/case=kubelet-serving"]));
    let _registered = injector.register("portcullis-injector", "kubelet-serving");
    let created = || {
        let out = cluster.kubectl(&["run", "web", "--image=nginx", "-n", "kubelet-serving", "-o", "json"]);
        String::from_utf8_lossy(&out.stdout).contains("portcullis.dev/status").then_some(())
    };
    eventually("a pod admitted through the kubelet-serving certificate", Duration::from_secs(30), created).await;
    let path = "jsonpath={.webhooks[0].clientConfig.caBundle}";
    let bundle = ok(cluster.kubectl(&["get", "mutatingwebhookconfiguration", "portcullis-injector", "-o", path]));
    use base64::Engine as _;
    let bundle = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(bundle.trim()).unwrap()).unwrap();
    assert_eq!(bundle, cluster_ca, "the caBundle is the other signer's CA");

    // Finished CSR objects are cleaned up, refused ones included.
    let path = "jsonpath={.items[*].spec.signerName}";
    let left = ok(cluster.kubectl(&["get", "csr", "-o", path]));
    assert!(!left.contains("kubernetes.io/kubelet-serving"), "CSR objects left behind: {left}");
}
