//! The audit as an operator uses it: objects that already exist in the
//! real API server are judged by `portcullis-validator audit` with the same
//! policies and messages as admission, `kubectl get reports` shows the
//! counts, a changed object, a deleted object and a changed policy are
//! reflected without a restart, one replica audits while another stands by
//! and takes over, the pass is a span in Jaeger, and memory stays bounded
//! with 10,000 objects.

use std::process::Command;
use std::time::Duration;

use portcullis_e2e::audit::{install_reports as install, report as get_report, result, start as audit};
use portcullis_e2e::{binaries, cluster, eventually, jaeger_traces, memory_kib, metric, ok, repo, spans_of, unique};
use portcullis_test_support::process;
use serde_json::Value;

const MINUTE: Duration = Duration::from_secs(60);

fn summary(report: &Value) -> [u64; 3] {
    ["pass", "fail", "warn"].map(|k| report["summary"][k].as_u64().unwrap_or_default())
}

fn lease_holder(lease: &str) -> String {
    let args = ["get", "lease", lease, "-n", "portcullis-system", "-o", "jsonpath={.spec.holderIdentity}"];
    String::from_utf8_lossy(&cluster().kubectl(&args).stdout).trim().to_owned()
}

fn policies(ns: &str) -> String {
    let base = std::fs::read_to_string(repo().join("deploy/base/policies/validator.yaml"))
        .expect("reading a file of the repository");
    let extra = r#"
---
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: namespace-owner}
spec:
  match:
    resources: [{apiGroups: [""], resources: [namespaces]}]
  matchConditions: [{name: ours, expression: "object.metadata.name == 'NS'"}]
  validations:
    - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
      message: namespaces need an owner label
---
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: configmap-owner}
spec:
  match:
    resources: [{apiGroups: [""], resources: [configmaps]}]
  matchConditions: [{name: ours, expression: "object.metadata.namespace == 'NS' && object.metadata.name.startsWith('cm-')"}]
  validations:
    - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
      message: config maps need an owner label
---
apiVersion: portcullis.dev/v1alpha1
kind: PolicyException
metadata: {name: exposed-until-the-ingress}
spec:
  policies: [no-public-services]
  namespaces: [NS]
  names: [exposed]
  reason: the ingress replaces it next sprint
"#;
    format!("{base}{}", extra.replace("NS", ns))
}

fn objects(ns: &str) -> String {
    let mut yaml = format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: good
  namespace: {ns}
  labels: {{team: shop}}
  annotations: {{example.com/owner: shop@example.com}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: good}}}}
  template:
    metadata: {{labels: {{app: good}}}}
    spec: {{containers: [{{name: web, image: "nginx:1.27"}}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: bad, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: bad}}}}
  template:
    metadata: {{labels: {{app: bad}}}}
    spec: {{containers: [{{name: web, image: nginx}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: exposed, namespace: {ns}}}
spec:
  type: NodePort
  selector: {{app: good}}
  ports: [{{port: 80}}]
"#
    );
    for i in 0..5 {
        let labels = if i == 0 { "labels: {owner: shop}" } else { "labels: {}" };
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}, namespace: {ns}, {labels}}}\n"
        ));
    }
    yaml
}

#[tokio::test]
async fn existing_objects_are_reported_like_admission_and_kept_current() {
    install();
    let cluster = cluster();
    let ns = unique("audit");
    ok(cluster.kubectl(&["create", "namespace", &ns]));
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &objects(&ns)));
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policies.yaml");
    std::fs::write(&policy, policies(&ns)).unwrap();
    let lease = unique("audit-lease");
    let (first, first_admin) = audit(&policy, "audit-a", &lease, &["--max-results", "10"]);

    // Objects in this namespace: `good` passes the five policies that judge
    // Deployments; `bad` fails replicas and team-label, warns twice, passes
    // pod security; the NodePort Service is exempted (skip); one ConfigMap
    // of five passes.
    let report = eventually("the namespace's report with every object judged", MINUTE, || {
        get_report(Some(&ns)).filter(|r| summary(r) == [7, 6, 2])
    })
    .await;
    assert_eq!(report["summary"]["skip"], 1, "{report}");
    assert_eq!(report["results"].as_array().unwrap().len(), 10, "capped at --max-results: {report}");
    assert_eq!(report["configuration"]["limits"]["maxResults"], 10);
    let listed = ok(cluster.kubectl(&["get", "reports", "-A"]));
    assert!(listed.contains("PASS") && listed.contains("FAIL"), "printer columns: {listed}");
    assert!(listed.lines().any(|l| l.starts_with(&format!("{ns} ")) && l.contains("portcullis-validator")), "{listed}");

    // The same messages as admission (`check` runs the webhook's evaluation).
    let bad = ok(cluster.kubectl(&["get", "deployment", "bad", "-n", &ns, "-o", "yaml"]));
    let mut check = Command::new(binaries().join("portcullis-validator"));
    check.arg("check").arg("--policy").arg(&policy).args(["-f", "-"]);
    let checked = run_with_stdin(check, &bad);
    for policy_name in ["replicas", "team-label", "owner-annotation", "pinned-tags"] {
        let prefix = format!("[{policy_name}] ");
        let expected: Vec<&str> = checked.lines().filter_map(|l| Some(l.split_once(&prefix)?.1)).collect();
        assert!(!expected.is_empty(), "check found nothing for {policy_name}: {checked}");
        let found = result(&report, policy_name, "bad").unwrap_or_else(|| panic!("no {policy_name} result: {report}"));
        assert_eq!(found["message"].as_str().unwrap().lines().collect::<Vec<_>>(), expected, "{policy_name}");
    }
    assert_eq!(result(&report, "replicas", "bad").unwrap()["result"], "fail");
    assert_eq!(result(&report, "owner-annotation", "bad").unwrap()["result"], "warn");
    let exempted = result(&report, "no-public-services", "exposed").unwrap();
    assert_eq!(exempted["result"], "skip");
    assert_eq!(exempted["resources"][0]["kind"], "Service");
    assert_eq!(exempted["message"], "exception exposed-until-the-ingress: the ingress replaces it next sprint");

    // Cluster-scoped objects go to the ClusterReport.
    let cluster_report = eventually("the ClusterReport names the namespace", MINUTE, || {
        get_report(None).filter(|r| result(r, "namespace-owner", &ns).is_some())
    })
    .await;
    let verdict = result(&cluster_report, "namespace-owner", &ns).unwrap();
    assert_eq!(verdict["result"], "fail");
    assert!(verdict["message"].as_str().unwrap().ends_with("namespaces need an owner label"), "{verdict}");

    let team =
        format!("portcullis_validator_audit_violations{{policy=\"team-label\",namespace=\"{ns}\",result=\"fail\"}}");
    assert_eq!(metric(first_admin, &team), 1.0);
    assert!(metric(first_admin, "portcullis_validator_audit_passes_total") >= 1.0);

    // A second replica stands by while the first holds the Lease.
    let (second, second_admin) = audit(&policy, "audit-b", &lease, &[]);
    assert_eq!(lease_holder(&lease), "audit-a");

    // A fixed object, a deleted object: the report follows the watch.
    ok(cluster.kubectl(&["label", "deployment", "bad", "-n", &ns, "team=shop"]));
    ok(cluster.kubectl(&["delete", "configmap", "cm-1", "-n", &ns]));
    let report = eventually("the report after the changes", MINUTE, || {
        get_report(Some(&ns)).filter(|r| summary(r) == [8, 4, 2])
    })
    .await;
    // Passes past --max-results are counted, not listed; no failure is left.
    assert!(result(&report, "team-label", "bad").is_none_or(|r| r["result"] == "pass"), "{report}");
    eventually("the team-label gauge back to 0", MINUTE, || (metric(first_admin, &team) == 0.0).then_some(())).await;

    // A changed policy set is audited at once.
    let stricter = format!(
        "{}\n---\napiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: no-bad-names}}\nspec:\n  match: {{resources: [{{apiGroups: [apps], kinds: [Deployment]}}]}}\n  validations: [{{expression: \"object.metadata.name != 'bad'\", message: pick another name}}]\n",
        policies(&ns)
    );
    std::fs::write(&policy, stricter).unwrap();
    eventually("the new policy's verdict in the report", MINUTE, || {
        let report = get_report(Some(&ns))?;
        (result(&report, "no-bad-names", "bad")?["result"] == "fail").then_some(())
    })
    .await;

    // Each pass is a span in Jaeger.
    eventually("an audit pass span in Jaeger", MINUTE, || {
        let traces = jaeger_traces("service=portcullis-validator-audit&operation=audit%20pass&lookback=1h&limit=5");
        traces.iter().flat_map(spans_of).find(|(_, operation)| operation == "audit pass")
    })
    .await;
    assert_eq!(metric(second_admin, "portcullis_validator_audit_passes_total"), 0.0, "the standby audited");

    // The leader goes away: the standby takes the Lease and audits.
    drop(first);
    eventually("the standby took over and finished a pass", Duration::from_secs(90), || {
        (metric(second_admin, "portcullis_validator_audit_passes_total") >= 1.0).then_some(())
    })
    .await;
    assert_eq!(lease_holder(&lease), "audit-b");
    drop(second);
}

fn run_with_stdin(mut command: Command, stdin: &str) -> String {
    let out = process::run_with_stdin(&mut command, Some(stdin)).expect("running a command");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Resident memory stays bounded on a large cluster: the audit keeps
/// results, not objects, and lists in pages.
#[tokio::test]
async fn ten_thousand_objects_in_bounded_memory() {
    use futures::StreamExt as _;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ObjectMeta, PostParams};

    const OBJECTS: usize = 10_000;
    install();
    let cluster = cluster();
    let ns = unique("audit-scale");
    ok(cluster.kubectl(&["create", "namespace", &ns]));
    let client = cluster.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    // 16 KiB of data each, so that keeping the objects would show.
    let data: std::collections::BTreeMap<String, String> = [("payload".to_owned(), "x".repeat(16 * 1024))].into();
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let (api, data) = (api.clone(), data.clone());
            async move {
                let labels = (i % 2 == 0).then(|| [("owner".to_owned(), "shop".to_owned())].into());
                let cm = ConfigMap {
                    metadata: ObjectMeta { name: Some(format!("cm-{i}")), labels, ..ObjectMeta::default() },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
        })
        .buffer_unordered(32)
        .for_each(|r| async move { r.unwrap() })
        .await;
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policies.yaml");
    let text = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: configmap-owner}}\nspec:\n  match: {{resources: [{{apiGroups: [\"\"], resources: [configmaps]}}]}}\n  matchConditions: [{{name: ours, expression: \"object.metadata.namespace == '{ns}' && object.metadata.name.startsWith('cm-')\"}}]\n  validations: [{{expression: \"has(object.metadata.labels) && 'owner' in object.metadata.labels\", message: config maps need an owner label}}]\n"
    );
    std::fs::write(&policy, text).unwrap();
    let (process, admin) = audit(&policy, "audit-scale", &unique("audit-scale-lease"), &["--max-results", "1000"]);
    let report = eventually("all 10,000 objects judged", Duration::from_secs(240), || {
        get_report(Some(&ns)).filter(|r| summary(r)[..2] == [5_000, 5_000])
    })
    .await;
    assert_eq!(report["results"].as_array().unwrap().len(), 1000);
    let (peak, now) = (memory_kib(process.id(), "VmHWM:"), memory_kib(process.id(), "VmRSS:"));
    let pass = metric(admin, "portcullis_validator_audit_pass_duration_seconds");
    eprintln!(
        "audit of {OBJECTS} config maps (16 KiB each, {} MiB in all): peak RSS {} MiB, now {} MiB; pass {pass:.1} s",
        OBJECTS * 16 / 1024,
        peak / 1024,
        now / 1024,
    );
    assert!(pass > 0.0, "the pass duration is measured");
    // The objects alone are 160 MiB; a page of 500 is 8 MiB.
    assert!(peak < 128 * 1024, "peak RSS {peak} KiB: the audit keeps more than results");
}
