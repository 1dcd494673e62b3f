//! The validator's audit as `deploy/components/reports` runs it: the
//! OpenReports CRDs installed, and `portcullis-validator audit` processes.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::{Process, binaries, cluster, ok, repo};

/// Installs the OpenReports CRDs from deploy/components/reports, as a
/// platform team would, and the namespace the audit's Lease lives in.
pub fn install_reports() {
    let cluster = cluster();
    for crd in ["reports", "clusterreports"] {
        let file = repo().join(format!("deploy/components/reports/openreports.io_{crd}.yaml"));
        ok(cluster.kubectl(&["apply", "--server-side", "-f", file.to_str().unwrap()]));
        ok(cluster.kubectl(&["wait", "--for=condition=Established", &format!("crd/{crd}.openreports.io")]));
    }
    cluster.ensure_namespace("portcullis-system");
}

/// The audit's OpenReport for `namespace` (the ClusterReport for
/// cluster-scoped objects when `None`), as `kubectl get` shows it; `None`
/// while it does not exist yet.
pub fn report(namespace: Option<&str>) -> Option<Value> {
    let mut args = match namespace {
        Some(ns) => vec!["get", "report", "portcullis-validator", "-n", ns],
        None => vec!["get", "clusterreport", "portcullis-validator"],
    };
    args.extend(["-o", "json"]);
    let out = cluster().kubectl(&args);
    out.status.success().then(|| serde_json::from_slice(&out.stdout).expect("a report as JSON"))
}

/// The result of `policy` for the object named `name` in `report`.
pub fn result<'a>(report: &'a Value, policy: &str, name: &str) -> Option<&'a Value> {
    report["results"].as_array()?.iter().find(|r| r["policy"] == policy && r["resources"][0]["name"] == name)
}

/// Starts an audit replica named `name` (Lease `lease`) judging by the
/// policy files `policy`, with `extra` flags, exporting to the cluster's
/// Jaeger as `portcullis-validator-audit`; returns it with its admin
/// address. Its log goes to the test's output when `PORTCULLIS_E2E_ECHO`
/// is set.
pub fn start(policy: &Path, name: &str, lease: &str, extra: &[&str]) -> (Process, SocketAddr) {
    spawn(&["--policy".as_ref(), policy.as_os_str()], name, lease, extra)
}

/// As [`start`], judging by the cluster's policy objects and native
/// ValidatingAdmissionPolicies (`--watch-resources`).
pub fn start_watching(name: &str, lease: &str, extra: &[&str]) -> (Process, SocketAddr) {
    spawn(&["--watch-resources".as_ref()], name, lease, extra)
}

fn spawn(source: &[&std::ffi::OsStr], name: &str, lease: &str, extra: &[&str]) -> (Process, SocketAddr) {
    let cluster = cluster();
    let mut command = Command::new(binaries().join("portcullis-validator"));
    command
        .arg("audit")
        .args(source)
        .args(["--admin-listen", "127.0.0.1:0", "--lease", lease, "--pod-name", name])
        .args(["--config-reload-interval", "500ms", "--report-delay", "500ms"])
        .args(extra)
        .env("KUBECONFIG", cluster.var("KUBECONFIG"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", cluster.var("PORTCULLIS_JAEGER_OTLP"))
        .env("OTEL_SERVICE_NAME", "portcullis-validator-audit")
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .stderr(Stdio::inherit());
    let (process, addrs) =
        Process::spawn_reporting(command, &["admin"], std::env::var_os("PORTCULLIS_E2E_ECHO").is_some());
    (process, addrs[0])
}
