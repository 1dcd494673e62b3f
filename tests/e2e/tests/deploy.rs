//! deploy/ as a platform team uses it: every overlay and its policies
//! render with kubectl's kustomize and are accepted by the real API server
//! (server-side dry run: schema and admission; the CRDs first, as the
//! two-step install does); the webhook configurations, applied for real,
//! do what their failure policies say; the service accounts can do what
//! they need and nothing they must not; and a team bound to `edit` in its
//! namespace manages that namespace's policies and nothing cluster-wide.

use std::time::Duration;

use portcullis_e2e::{cluster, err, eventually, ok, render_with_component, repo};
use serde_json::Value;

fn render(overlay: &str) -> String {
    let dir = repo().join("deploy/overlays").join(overlay);
    ok(cluster().kubectl(&["kustomize", dir.to_str().expect("a UTF-8 path")]))
}

/// What the authorizer answers `kubectl auth can-i VERB RESOURCE ARGS...`
/// for the service account `portcullis-system/<service_account>`.
fn can_i(service_account: &str, verb: &str, resource: &str, args: &[&str]) -> bool {
    can(&format!("system:serviceaccount:portcullis-system:{service_account}"), verb, resource, args)
}

fn can(user: &str, verb: &str, resource: &str, args: &[&str]) -> bool {
    let user = format!("--as={user}");
    let mut all = vec!["auth", "can-i", verb, resource, user.as_str()];
    all.extend(args);
    let out = cluster().kubectl(&all);
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// The objects of a server-side dry run, as the API server would store them.
fn dry_run(yaml: &str) -> Vec<Value> {
    let out = ok(cluster().kubectl_stdin(&["apply", "--dry-run=server", "-o", "json", "-f", "-"], yaml));
    let list: Value = serde_json::from_str(&out).expect("kubectl's JSON");
    match list["items"].as_array() {
        Some(items) => items.clone(),
        None => vec![list],
    }
}

fn action_of(objects: &[Value], policy: &str) -> String {
    let object = objects
        .iter()
        .find(|o| o["kind"] == "ValidatorPolicy" && o["metadata"]["name"] == policy)
        .unwrap_or_else(|| panic!("no ValidatorPolicy {policy}"));
    object["spec"]["action"].as_str().unwrap_or("Deny").to_owned()
}

#[tokio::test]
async fn overlays_render_apply_and_enforce_least_privilege() {
    cluster().ensure_namespace("portcullis-system");
    cluster().install_kinds();
    let mut actions = Vec::new();
    for overlay in ["dev", "staging", "prod"] {
        let rendered = render(overlay);
        for kind in [
            "CustomResourceDefinition",
            "ClusterRole",
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
        // The policies are objects now: no ConfigMap of them, and the
        // webhooks watch the API instead of files.
        assert!(!rendered.contains("portcullis-validator-policies"), "{overlay}: a policy ConfigMap is left");
        assert!(!rendered.contains("PORTCULLIS_POLICY"), "{overlay}: the validator still reads files");
        assert_eq!(rendered.matches("name: PORTCULLIS_WATCH_RESOURCES").count(), 2 + usize::from(overlay == "dev"));
        let out = ok(cluster().kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &rendered));
        assert!(out.contains("deployment.apps/portcullis-validator created (server dry run)"), "{overlay}: {out}");

        // Step two: the environment's policies, against the CRDs' schemas.
        let policies = dry_run(&render(&format!("{overlay}/policies")));
        let kinds: Vec<&str> = policies.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert!(kinds.contains(&"ValidatorPolicy") && kinds.contains(&"InjectorConfig"), "{overlay}: {kinds:?}");
        actions.push(action_of(&policies, "replicas"));
        if overlay == "dev" {
            let sidecars = policies.iter().find(|o| o["metadata"]["name"] == "sidecars").expect("the sidecars config");
            let image = &sidecars["spec"]["templates"][0]["initContainers"][0]["image"];
            assert_eq!(image, "localhost/portcullis/pause:dev", "dev's sidecar is an image a local node has");
        }
    }
    // Staging turns the Deny policy into Warn; dev and prod enforce it.
    assert_eq!(actions, ["Deny", "Warn", "Deny"]);
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
    for (webhook, verb) in [("validator", "list"), ("validator", "watch"), ("injector", "list"), ("injector", "watch")]
    {
        assert!(can_i(&format!("portcullis-{webhook}"), verb, "namespaces", &[]), "{webhook} must {verb} namespaces");
    }
    for (verb, resource) in [
        ("get", "secrets"),
        ("create", "namespaces"),
        ("update", "namespaces"),
        ("list", "pods"),
        ("patch", "validatingwebhookconfigurations"),
    ] {
        assert!(!can_i("portcullis-validator", verb, resource, &[]), "validator must not {verb} {resource}");
    }
    for (verb, resource) in
        [("get", "pods"), ("get", "namespaces"), ("update", "namespaces"), ("get", "secrets"), ("list", "configmaps")]
    {
        assert!(!can_i("portcullis-injector", verb, resource, &[]), "injector must not {verb} {resource}");
    }
    // Each webhook reads its kinds and writes only their status (and only
    // through the status subresource); it reports in its own namespace.
    for (webhook, kinds) in [
        ("validator", &["validatorpolicies", "namespacedvalidatorpolicies", "policyexceptions"][..]),
        ("injector", &["injectiontemplates", "injectorconfigs"][..]),
    ] {
        let account = format!("portcullis-{webhook}");
        for kind in kinds {
            let resource = format!("{kind}.portcullis.dev");
            for verb in ["get", "list", "watch"] {
                assert!(can_i(&account, verb, &resource, &["-A"]), "{webhook} must be able to {verb} {kind}");
            }
            assert!(can_i(&account, "patch", &resource, &["--subresource=status"]), "{webhook}: patch {kind}/status");
            for verb in ["create", "update", "patch", "delete"] {
                assert!(!can_i(&account, verb, &resource, &[]), "{webhook} must not {verb} {kind}");
            }
            assert!(
                !can_i(&account, "update", &resource, &["--subresource=status"]),
                "{webhook}: update {kind}/status"
            );
        }
        let other = if webhook == "validator" { "injectorconfigs" } else { "validatorpolicies" };
        assert!(!can_i(&account, "list", &format!("{other}.portcullis.dev"), &[]), "{webhook} must not list {other}");
        assert!(can_i(&account, "create", "events.events.k8s.io", &["-n", "shop"]), "{webhook}: Events");
        assert!(!can_i(&account, "get", "secrets", &["-n", "portcullis-system"]), "{webhook} must not read Secrets");
        let own = ["-n", "portcullis-system"];
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            assert!(can_i(&account, verb, "webhookreplicas.portcullis.dev", &own), "{webhook}: {verb} its report");
        }
        assert!(!can_i(&account, "create", "webhookreplicas.portcullis.dev", &["-n", "shop"]), "reports elsewhere");
        let lease = format!("leases.coordination.k8s.io/portcullis-{webhook}-status");
        assert!(can_i(&account, "update", &lease, &own), "{webhook}: its status Lease");
        assert!(!can_i(&account, "update", "leases.coordination.k8s.io/portcullis-cert-manager", &own), "{webhook}");
    }
    // The validator pushes policies down: it writes admission policies and
    // their bindings, and probes them with dry-run ConfigMaps it cannot read.
    let own = ["-n", "portcullis-system"];
    for resource in ["validatingadmissionpolicies", "validatingadmissionpolicybindings"] {
        let resource = format!("{resource}.admissionregistration.k8s.io");
        for verb in ["watch", "create", "patch", "delete"] {
            assert!(can_i("portcullis-validator", verb, &resource, &[]), "validator: {verb} {resource}");
        }
        assert!(!can_i("portcullis-injector", "create", &resource, &[]), "injector: create {resource}");
    }
    assert!(can_i("portcullis-validator", "update", "leases.coordination.k8s.io/portcullis-validator-pushdown", &own));
    assert!(can_i("portcullis-validator", "create", "configmaps", &own), "validator: the probe");
    for verb in ["get", "list"] {
        assert!(!can_i("portcullis-validator", verb, "configmaps", &own), "validator must not {verb} configmaps");
    }
    assert!(!can_i("portcullis-validator", "create", "configmaps", &["-n", "shop"]), "probes elsewhere");
    // The webhooks' projected token is for the cert-manager's audience.
    let rendered = render("prod");
    assert!(rendered.contains("audience: portcullis-cert-manager"), "projected token for the cert-manager");
    assert!(!rendered.contains("secretName: portcullis-injector-tls"), "no certificate Secret to hand-make");

    // The audit (components/reports) reads what the policies select and
    // writes only reports and its Lease.
    let reports = repo().join("deploy/components/reports");
    for file in ["openreports.io_reports.yaml", "openreports.io_clusterreports.yaml", "rbac.yaml"] {
        ok(cluster().kubectl(&["apply", "--server-side", "-f", reports.join(file).to_str().unwrap()]));
    }
    ok(cluster().kubectl(&["wait", "--for=condition=Established", "crd/reports.openreports.io"]));
    let audit = "portcullis-validator-audit";
    for (verb, resource) in [
        ("list", "deployments.apps"),
        ("watch", "pods"),
        ("patch", "reports.openreports.io"),
        ("list", "namespaces"),
        ("watch", "validatorpolicies.portcullis.dev"),
        ("list", "policyexceptions.portcullis.dev"),
        ("watch", "validatingadmissionpolicies.admissionregistration.k8s.io"),
        ("list", "validatingadmissionpolicybindings.admissionregistration.k8s.io"),
    ] {
        assert!(can_i(audit, verb, resource, &[]), "the audit must be able to {verb} {resource}");
    }
    for (verb, resource) in [
        ("get", "secrets"),
        ("list", "configmaps"),
        ("create", "deployments.apps"),
        ("delete", "reports.openreports.io"),
        ("patch", "validatorpolicies.portcullis.dev"),
        ("create", "validatingadmissionpolicies.admissionregistration.k8s.io"),
        ("delete", "validatingadmissionpolicybindings.admissionregistration.k8s.io"),
    ] {
        assert!(!can_i(audit, verb, resource, &[]), "the audit must not {verb} {resource}");
    }
}

/// The shipped aggregated roles: a ServiceAccount bound to the cluster's
/// `edit` role in its namespace manages that namespace's policies, reads
/// its exceptions, and can neither write a cluster-wide policy nor exempt
/// itself with a PolicyException.
#[tokio::test]
async fn a_namespace_editor_manages_its_namespaces_policies_only() {
    cluster().install_kinds();
    let (team, other) = ("team-edit", "team-other");
    for namespace in [team, other] {
        cluster().ensure_namespace(namespace);
    }
    ok(cluster().kubectl(&["create", "serviceaccount", "owner", "-n", team]));
    ok(cluster().kubectl(&[
        "create",
        "rolebinding",
        "owner-edit",
        "--clusterrole=edit",
        "-n",
        team,
        &format!("--serviceaccount={team}:owner"),
    ]));
    let owner = format!("system:serviceaccount:{team}:owner");
    // The clusterrole-aggregation controller copies the rules into `edit`.
    eventually("edit aggregates portcullis-policy-edit", Duration::from_secs(30), || {
        can(&owner, "create", "namespacedvalidatorpolicies.portcullis.dev", &["-n", team]).then_some(())
    })
    .await;
    for verb in ["get", "list", "watch", "update", "patch", "delete"] {
        assert!(can(&owner, verb, "namespacedvalidatorpolicies.portcullis.dev", &["-n", team]), "edit: {verb}");
    }
    assert!(can(&owner, "list", "policyexceptions.portcullis.dev", &["-n", team]), "edit reads its exceptions");
    // Cluster-scoped kinds are asked without a namespace, as the API
    // server sees a request for them (`-n` would let the RoleBinding count).
    for (verb, resource, namespace) in [
        ("create", "namespacedvalidatorpolicies", Some(other)),
        ("create", "policyexceptions", Some(team)),
        ("update", "policyexceptions", Some(team)),
        ("list", "webhookreplicas", Some(team)),
        ("create", "validatorpolicies", None),
        ("list", "validatorpolicies", None),
        ("create", "injectorconfigs", None),
    ] {
        let resource = format!("{resource}.portcullis.dev");
        let args = namespace.map(|ns| vec!["-n", ns]).unwrap_or_default();
        assert!(!can(&owner, verb, &resource, &args), "edit in {team} must not {verb} {resource} in {namespace:?}");
    }

    // And as the API server answers a real request.
    let as_owner = format!("--as={owner}");
    let spec = "spec:\n  match:\n    resources: [{apiGroups: [''], resources: [configmaps]}]\n  validations: [{expression: 'true'}]\n";
    let namespaced = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: NamespacedValidatorPolicy\nmetadata: {{name: by-owner, namespace: {team}}}\n{spec}"
    );
    let out = ok(cluster().kubectl_stdin(&["apply", "--dry-run=server", &as_owner, "-f", "-"], &namespaced));
    assert!(out.contains("created (server dry run)"), "{out}");
    let cluster_wide =
        format!("apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: by-owner}}\n{spec}");
    let refused = err(cluster().kubectl_stdin(&["apply", "--dry-run=server", &as_owner, "-f", "-"], &cluster_wide));
    assert!(refused.contains("forbidden"), "{refused}");
    let exception = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: PolicyException\nmetadata: {{name: mine, namespace: {team}}}\n\
         spec: {{policies: [replicas], names: ['*'], reason: we would rather not}}\n"
    );
    let refused = err(cluster().kubectl_stdin(&["apply", "--dry-run=server", &as_owner, "-f", "-"], &exception));
    assert!(refused.contains("forbidden"), "{refused}");
}
