//! The validator's CRDs (deploy/base/crds/validator.yaml) in a real
//! kube-apiserver: today's policy files apply unchanged, a malformed
//! object is refused at `kubectl apply` with the field named, `kubectl
//! explain` describes the fields, and `kubectl get portcullis` lists them.

use portcullis_e2e::cleanup::Cleanup;
use portcullis_e2e::{cluster, err, ok, repo, unique};

const KINDS: [&str; 3] = ["validatorpolicies", "namespacedvalidatorpolicies", "policyexceptions"];

fn install_crds() {
    let cluster = cluster();
    let file = repo().join("deploy/base/crds/validator.yaml");
    ok(cluster.kubectl(&["apply", "--server-side", "-f", file.to_str().unwrap_or_default()]));
    for kind in KINDS {
        ok(cluster.kubectl(&["wait", "--for=condition=Established", &format!("crd/{kind}.portcullis.dev")]));
    }
}

fn namespaced(kind: &str, name: &str, namespace: &str, spec: &str) -> String {
    format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{spec}"
    )
}

/// kubectl's error applying `manifest`, which must be refused.
fn refused(manifest: &str) -> String {
    err(cluster().kubectl_stdin(&["apply", "-f", "-"], manifest))
}

#[tokio::test]
async fn shipped_policies_apply_and_malformed_ones_are_refused_with_the_field() {
    install_crds();
    let cluster = cluster();
    let prefix = unique("crd");
    // The shipped file, as it is but for the names (cluster-scoped objects
    // of a shared control plane).
    let shipped = std::fs::read_to_string(repo().join("deploy/base/policies/validator.yaml")).unwrap_or_default();
    let renamed = shipped.replace("metadata:\n  name: ", &format!("metadata:\n  name: {prefix}-"));
    let names: Vec<String> = renamed
        .lines()
        .filter_map(|l| l.strip_prefix("  name: "))
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_owned)
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let _cleanups: Vec<Cleanup> = names.iter().map(|n| Cleanup::of("validatorpolicy", n)).collect();
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &renamed));
    let listed = ok(cluster.kubectl(&["get", "vpol", &names[0], &names[3]]));
    let header = listed.lines().next().unwrap_or_default();
    for column in ["NAME", "ACTION", "READY", "REASON", "AGE"] {
        assert!(header.contains(column), "{listed}");
    }
    assert!(listed.contains("Deny") && listed.contains("Warn"), "the action defaults to Deny: {listed}");

    let ns = unique("crd");
    cluster.ensure_namespace(&ns);
    let _namespace = Cleanup::of("namespace", &ns);
    let team = "  action: Warn\n  rules: {requiredLabels: {owner: ''}}\n";
    ok(cluster
        .kubectl_stdin(&["apply", "-f", "-"], &namespaced("NamespacedValidatorPolicy", "require-owner", &ns, team)));
    let exception =
        "  policies: [require-owner]\n  names: ['legacy-*']\n  reason: migrating\n  expires: '2030-01-01T00:00:00Z'\n";
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &namespaced("PolicyException", "legacy", &ns, exception)));
    let all = ok(cluster.kubectl(&["get", "portcullis", "-n", &ns]));
    assert!(
        all.contains("namespacedvalidatorpolicy.portcullis.dev/require-owner")
            && all.contains("policyexception.portcullis.dev/legacy"),
        "{all}"
    );
    let exceptions = ok(cluster.kubectl(&["get", "pex", "-n", &ns]));
    assert!(exceptions.contains("POLICIES") && exceptions.contains("require-owner"), "{exceptions}");
    assert!(exceptions.contains("2030-01-01T00:00:00Z"), "{exceptions}");

    let policy = |name: &str, spec: &str| {
        format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {prefix}-{name}}}\nspec:\n{spec}"
        )
    };
    let cases = [
        (policy("empty", "  action: Deny\n"), "a policy needs rules or validations"),
        (policy("blank", "  validations: [{expression: ''}]\n"), "spec.validations[0].expression"),
        (policy("verb", "  action: Block\n  rules: {replicas: {min: 1}}\n"), "spec.action"),
        (policy("typo", "  rulez: {replicas: {min: 1}}\n"), "rulez"),
        (
            namespaced(
                "NamespacedValidatorPolicy",
                "wide",
                &ns,
                "  match: {excludeNamespaces: [other]}\n  rules: {replicas: {min: 1}}\n",
            ),
            "spec.match.excludeNamespaces",
        ),
        (
            namespaced(
                "NamespacedValidatorPolicy",
                "system",
                &ns,
                "  match: {includeSystemNamespaces: true}\n  rules: {replicas: {min: 1}}\n",
            ),
            "spec.match.includeSystemNamespaces",
        ),
        (namespaced("PolicyException", "none", &ns, "  policies: []\n  reason: x\n"), "spec.policies"),
        (namespaced("PolicyException", "why", &ns, "  policies: [a]\n  reason: ''\n"), "spec.reason"),
    ];
    for (manifest, field) in cases {
        let message = refused(&manifest);
        assert!(message.contains(field), "{field} not named in: {message}\nfor:\n{manifest}");
    }

    let explained = ok(cluster.kubectl(&["explain", "validatorpolicy.spec.action"]));
    assert!(explained.contains("What the policy does with what it finds"), "{explained}");
    assert!(explained.contains("Deny") && explained.contains("Audit"), "{explained}");
    let explained = ok(cluster.kubectl(&["explain", "policyexception.spec"]));
    assert!(explained.contains("policies") && explained.contains("-required-"), "{explained}");
}
