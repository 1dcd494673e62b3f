//! deploy/ as a platform team uses it: every overlay renders with kubectl's
//! kustomize and is accepted by the real API server (server-side dry run:
//! schema and admission); the webhook configurations, applied for real, do
//! what their failure policies say; and the service accounts can do what
//! they need and nothing they must not.

use portcullis_e2e::{cluster, err, ok, render_with_component, repo};

fn render(overlay: &str) -> String {
    let dir = repo().join("deploy/overlays").join(overlay);
    ok(cluster().kubectl(&["kustomize", dir.to_str().expect("a UTF-8 path")]))
}

fn can_i(service_account: &str, verb: &str, resource: &str) -> bool {
    let user = format!("--as=system:serviceaccount:portcullis-system:{service_account}");
    let out = cluster().kubectl(&["auth", "can-i", verb, resource, &user]);
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[tokio::test]
async fn overlays_render_apply_and_enforce_least_privilege() {
    cluster().ensure_namespace("portcullis-system");
    for overlay in ["dev", "staging", "prod"] {
        let rendered = render(overlay);
        for kind in [
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ConfigMap",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            assert!(rendered.contains(&format!("kind: {kind}\n")), "{overlay} renders a {kind}");
        }
        let out = ok(cluster().kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered));
        assert!(out.contains("deployment.apps/portcullis-validator created (server dry run)"), "{overlay}: {out}");
    }
    // An environment's overlay with the kubelet-serving component, as a
    // platform team would write it.
    let kubelet_serving = render_with_component("prod", "kubelet-serving-signer");
    for wanted in
        ["value: kubernetes.io/kubelet-serving", "value: system:node:portcullis-injector", "name: kube-root-ca.crt"]
    {
        assert!(kubelet_serving.contains(wanted), "the kubelet-serving component sets {wanted}");
    }
    ok(cluster().kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &kubelet_serving));

    let prod = render("prod");
    assert!(prod.contains("replicas: 3"));
    assert!(prod.contains("topologySpreadConstraints"));
    assert!(render("dev").contains("failurePolicy: Ignore"));

    // Apply prod for real, without running its pods (no kubelet here): the
    // validator fails closed, and kube-system stays out of its reach.
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &prod));
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: NS}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: 'nginx:1.27'}]}\n";
    ok(cluster().kubectl(&["create", "namespace", "shop"]));
    let refused =
        err(cluster().kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &deployment.replace("NS", "shop")));
    assert!(refused.contains("failed calling webhook \"validate.portcullis.dev\""), "{refused}");
    ok(cluster().kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &deployment.replace("NS", "kube-system")));
    ok(cluster()
        .kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &deployment.replace("NS", "portcullis-system")));

    // Least privilege, as the API server's authorizer sees it.
    assert!(can_i("portcullis-validator", "list", "namespaces"));
    assert!(can_i("portcullis-validator", "watch", "namespaces"));
    for (verb, resource) in [
        ("get", "secrets"),
        ("create", "namespaces"),
        ("update", "namespaces"),
        ("list", "pods"),
        ("patch", "validatingwebhookconfigurations"),
    ] {
        assert!(!can_i("portcullis-validator", verb, resource), "validator must not {verb} {resource}");
    }
    // The webhooks' projected token is for the cert-manager's audience.
    let rendered = render("prod");
    assert!(rendered.contains("audience: portcullis-cert-manager"), "projected token for the cert-manager");
    assert!(!rendered.contains("secretName: portcullis-injector-tls"), "no certificate Secret to hand-make");
    for (verb, resource) in [("get", "pods"), ("list", "namespaces"), ("get", "secrets"), ("get", "configmaps")] {
        assert!(!can_i("portcullis-injector", verb, resource), "injector must not {verb} {resource}");
    }

    // The audit (components/reports) reads what the policies select and
    // writes only reports and its Lease.
    let reports = repo().join("deploy/components/reports");
    for file in ["openreports.io_reports.yaml", "openreports.io_clusterreports.yaml", "rbac.yaml"] {
        ok(cluster().kubectl(&["apply", "--server-side", "-f", reports.join(file).to_str().unwrap()]));
    }
    ok(cluster().kubectl(&["wait", "--for=condition=Established", "crd/reports.openreports.io"]));
    let audit = "portcullis-validator-audit";
    for (verb, resource) in
        [("list", "deployments.apps"), ("watch", "pods"), ("patch", "reports.openreports.io"), ("list", "namespaces")]
    {
        assert!(can_i(audit, verb, resource), "the audit must be able to {verb} {resource}");
    }
    for (verb, resource) in [
        ("get", "secrets"),
        ("list", "configmaps"),
        ("create", "deployments.apps"),
        ("delete", "reports.openreports.io"),
    ] {
        assert!(!can_i(audit, verb, resource), "the audit must not {verb} {resource}");
    }
}
