//! Thousands of native ValidatingAdmissionPolicies audited: 2,000 VAPs,
//! each bound with Deny, applied at once to a cluster with two stored
//! ConfigMaps; the audit judges both ConfigMaps by every one of them (the
//! report's summary counts 3,999 passes and the one failure, with its
//! message). Its memory before and with them, and the time until every
//! pair is judged, are printed for docs/BENCHMARKS.md.
//!
//! Its own test binary: the audit here judges every policy of the cluster.

use std::time::{Duration, Instant};

use portcullis_e2e::audit::{self, install_reports, start_watching};
use portcullis_e2e::webhook::namespace;
use portcullis_e2e::{cluster, eventually, memory_kib, metric, ok, unique};
use serde_json::{Value, json};

const POLICIES: usize = 2000;
/// The one policy the ConfigMap `holder` breaks.
const BROKEN: usize = 1234;

/// Policy `i` and its binding, for the namespaces labelled `ns`.
fn pair(ns: &str, i: usize) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {ns}-{i:04}, labels: {{e2e.portcullis.dev/native-scale: {ns}}}}}\n\
         spec:\n  matchConstraints:\n    resourceRules:\n    - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}}\n\
         \x20 matchConditions: [{{name: ours, expression: \"object.metadata.name in ['holder', 'plain']\"}}]\n\
         \x20 validations:\n  - expression: \"!has(object.data) || !('key-{i}' in object.data)\"\n    message: no key-{i}\n\
         ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: {ns}-{i:04}, labels: {{e2e.portcullis.dev/native-scale: {ns}}}}}\n\
         spec:\n  policyName: {ns}-{i:04}\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/native-scale: {ns}}}}}\n"
    )
}

/// Deletes the pairs labelled for a namespace when dropped, in one call
/// per kind (`kubectl delete` would send one per object, each matched
/// against the 2,000 policies on its way).
struct Pairs(String);

impl Drop for Pairs {
    fn drop(&mut self) {
        for resource in ["validatingadmissionpolicybindings", "validatingadmissionpolicies"] {
            let path = format!(
                "/apis/admissionregistration.k8s.io/v1/{resource}?labelSelector=e2e.portcullis.dev%2Fnative-scale%3D{}",
                self.0
            );
            let out = cluster().kubectl(&["delete", "--raw", &path]);
            if !out.status.success() {
                eprintln!("deleting {path} failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
}

fn counts(report: &Value) -> [u64; 3] {
    ["pass", "fail", "error"].map(|k| report["summary"][k].as_u64().unwrap_or_default())
}

#[tokio::test]
async fn two_thousand_native_policies_are_all_audited() {
    install_reports();
    cluster().install_kinds();
    let client = cluster().client().await;
    let ns = unique("native-scale");
    namespace(&client, &ns, &[("e2e.portcullis.dev/native-scale", &ns)]).await;
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "holder", "namespace": ns},
         "data": {format!("key-{BROKEN}"): "x", "other": "y"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "namespace": ns}, "data": {"a": "1"}},
    ]});
    ok(cluster().kubectl_stdin(&["create", "-f", "-"], &objects.to_string()));

    let (audit, admin) = start_watching("native-scale", &unique("native-scale-lease"), &[]);
    eventually("the audit's first pass", Duration::from_secs(120), || {
        (metric(admin, "portcullis_validator_audit_passes_total") >= 1.0).then_some(())
    })
    .await;
    let idle = memory_kib(audit.id(), "VmRSS:");

    let documents: Vec<String> = (0..POLICIES).map(|i| pair(&ns, i)).collect();
    let _pairs = Pairs(ns.clone());
    let started = Instant::now();
    ok(cluster().kubectl_stdin(&["apply", "--server-side", "-f", "-"], &documents.join("---\n")));
    let applied = started.elapsed();
    let judged = eventually("both ConfigMaps judged by every policy", Duration::from_secs(600), || {
        let report = audit::report(Some(&ns))?;
        assert_eq!(counts(&report)[2], 0, "no pair is an error: {}", report["summary"]);
        (counts(&report)[..2].iter().sum::<u64>() == 2 * POLICIES as u64).then_some(report)
    })
    .await;
    let all_judged = started.elapsed();
    let (loaded, peak) = (memory_kib(audit.id(), "VmRSS:"), memory_kib(audit.id(), "VmHWM:"));
    println!(
        "{POLICIES} native policies and bindings: applied in {applied:?}, every pair judged {all_judged:?} after \
         the apply began; audit resident memory {idle} KiB before, {loaded} KiB with them ({} KiB more), peak {peak} KiB",
        loaded.saturating_sub(idle)
    );
    // Measured at 25 KiB a pair (docs/BENCHMARKS.md); 100 KiB would
    // be a regression, not noise.
    assert!(loaded.saturating_sub(idle) < 100 * POLICIES as u64, "{loaded} KiB with the policies, {idle} before");

    assert_eq!(counts(&judged), [2 * POLICIES as u64 - 1, 1, 0], "{}", judged["summary"]);
    let failed: Vec<&Value> =
        judged["results"].as_array().expect("results").iter().filter(|r| r["result"] == "fail").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["policy"], format!("{ns}-{BROKEN:04}"));
    assert_eq!(failed[0]["message"], format!("no key-{BROKEN}"));
    assert_eq!(failed[0]["resources"][0]["name"], "holder");
}
