//! Harness for the end-to-end suite: a real control plane (started once per
//! test binary by `scripts/control-plane.sh`, torn down by its watchdog when
//! the binary exits, or reused from `PORTCULLIS_CP_DIR`), the Portcullis
//! binaries as real processes with real certificates, and kubectl.
//!
//! Nothing here is mocked. When the control plane cannot be built or
//! started, the suite fails with the script's output; it never skips.

#![forbid(unsafe_code)]
// A harness panics to fail the test that called it, so it may unwrap.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub use portcullis_test_support::process::Process;
use std::time::{Duration, Instant};

pub mod audit;
pub mod cert_manager;
pub mod cleanup;
pub mod webhook;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A running control plane.
#[derive(Debug)]
pub struct Cluster {
    env: HashMap<String, String>,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static BINARIES: OnceLock<PathBuf> = OnceLock::new();

/// The control plane shared by the tests of this binary.
pub fn cluster() -> &'static Cluster {
    start(false)
}

/// The control plane with a real node joined (containerd, kubelet,
/// kube-proxy, kube-scheduler, CoreDNS: `control-plane.sh up DIR --node`),
/// shared by the tests of this binary. Pods run.
pub fn cluster_with_node() -> &'static Cluster {
    let cluster = start(true);
    assert_eq!(cluster.var("PORTCULLIS_NODE"), "1", "PORTCULLIS_CP_DIR names a control plane without a node");
    cluster
}

fn start(node: bool) -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let dir = match std::env::var("PORTCULLIS_CP_DIR") {
            Ok(dir) => PathBuf::from(dir),
            Err(_) => {
                let dir = std::env::temp_dir().join(format!("portcullis-e2e-{}", std::process::id()));
                let mut args = vec!["up".to_owned(), dir.to_str().unwrap().to_owned()];
                args.extend(["--owner".to_owned(), std::process::id().to_string()]);
                if node {
                    args.push("--node".to_owned());
                }
                let out = Command::new(repo().join("scripts/control-plane.sh"))
                    .args(&args)
                    .stderr(Stdio::inherit())
                    .output()
                    .expect("running scripts/control-plane.sh");
                assert!(out.status.success(), "the control plane did not start (see the log above)");
                dir
            }
        };
        let text = std::fs::read_to_string(dir.join("env")).expect("control plane env file");
        let env = text
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Cluster { env }
    })
}

impl Cluster {
    /// A value from the control plane's env file (e.g. `KUBECONFIG`).
    pub fn var(&self, name: &str) -> &str {
        self.env.get(name).map(String::as_str).unwrap_or_else(|| panic!("{name} missing from the env file"))
    }

    /// kubectl of the server's minor version, as the admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_as(self.var("KUBECONFIG"), args, None)
    }

    /// kubectl with `stdin`, as the admin.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        self.kubectl_as(self.var("KUBECONFIG"), args, Some(stdin))
    }

    /// Creates namespace `name` unless it exists. Tests of one binary run
    /// in parallel on one control plane, so two may create the same
    /// namespace at once: `kubectl apply` would fail for one of them with
    /// AlreadyExists (it reads, then creates).
    pub fn ensure_namespace(&self, name: &str) {
        let out = self.kubectl(&["create", "namespace", name]);
        if !out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("AlreadyExists") {
            ok(out);
        }
    }

    /// Installs the Portcullis kinds as `deploy/` ships them (the CRDs and
    /// their aggregated roles, server-side apply), waits until the API
    /// server serves them, and makes the `portcullis-system` namespace.
    pub fn install_kinds(&self) {
        let crds = repo().join("deploy/base/crds");
        ok(self.kubectl(&["apply", "--server-side", "-k", crds.to_str().expect("a UTF-8 path")]));
        ok(self.kubectl(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=90s"]));
        self.ensure_namespace("portcullis-system");
    }

    /// kubectl with the given kubeconfig.
    pub fn kubectl_as(&self, kubeconfig: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let mut kubectl = Command::new(Path::new(self.var("PORTCULLIS_CP_BIN")).join("kubectl"));
        kubectl.arg("--kubeconfig").arg(kubeconfig).args(args);
        portcullis_test_support::process::run_with_stdin(&mut kubectl, stdin).unwrap()
    }

    /// A kube-rs client as the admin.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.var("KUBECONFIG")).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

/// stdout of a successful command; panics with stderr otherwise.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "command failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// stderr of a failed command; panics if it succeeded.
pub fn err(out: Output) -> String {
    assert!(!out.status.success(), "command succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

/// The directory holding the release binaries the images ship (static,
/// musl), built by the same command as `scripts/images` (so a no-op after
/// it): for tests that measure what users run.
pub fn release_binaries() -> &'static Path {
    static RELEASE: OnceLock<PathBuf> = OnceLock::new();
    const TARGET: &str = "x86_64-unknown-linux-musl";
    RELEASE.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(repo())
            .args(["build", "--quiet", "--release", "--locked", "--target", TARGET])
            .args(["-p", "portcullis-injector", "-p", "portcullis-validator", "-p", "portcullis-cert-manager"])
            .status()
            .expect("running cargo build --release");
        assert!(status.success(), "building the release binaries failed (scripts/images needs the same)");
        // target/debug -> target/<musl>/release
        let target = binaries().parent().unwrap();
        target.join(TARGET).join("release")
    })
}

/// The directory holding the Portcullis binaries, built once per test
/// binary with the same cargo and target directory as the tests.
pub fn binaries() -> &'static Path {
    BINARIES.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(repo())
            .args(["build", "--quiet", "--bins"])
            .status()
            .expect("running cargo build");
        assert!(status.success(), "building the Portcullis binaries failed");
        // target/debug/deps/<this test> -> target/debug
        let exe = std::env::current_exe().unwrap();
        exe.parent().and_then(Path::parent).unwrap().to_path_buf()
    })
}

/// `portcullis-validator check` of the policies in `policies` (YAML) on
/// one ConfigMap, with `args` besides: what it printed, and whether it
/// succeeded.
pub fn check_policies(policies: &str, args: &[&std::ffi::OsStr]) -> Output {
    let dir = tempfile::tempdir().expect("a test step");
    let (policy, objects) = (dir.path().join("policies.yaml"), dir.path().join("objects.yaml"));
    std::fs::write(&policy, policies).expect("a test step");
    std::fs::write(&objects, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n")
        .expect("a test step");
    Command::new(binaries().join("portcullis-validator"))
        .args(["check", "--policy"])
        .arg(&policy)
        .arg("-f")
        .arg(&objects)
        .args(args)
        .output()
        .expect("a test step")
}

/// `deploy/overlays/<overlay>` with `deploy/components/<component>` added,
/// as a platform team's own overlay would be written (kustomize takes only
/// relative paths), rendered by kubectl's kustomize.
pub fn render_with_component(overlay: &str, component: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let up = "../".repeat(dir.path().components().count());
    let deploy = format!("{up}{}", repo().join("deploy").to_str().unwrap().trim_start_matches('/'));
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!("resources: [{deploy}/overlays/{overlay}]\ncomponents: [{deploy}/components/{component}]\n"),
    )
    .unwrap();
    ok(cluster().kubectl(&["kustomize", dir.path().to_str().unwrap()]))
}

/// A name unique to this test run: `prefix-<pid>-<n>`.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// What the API server would store for `object` in namespace `ns` (a
/// server-side dry run through kubectl, so with every admission plugin and
/// webhook in force there), without the fields that differ by creation
/// alone; or its refusal, as kubectl prints it.
pub fn stored_dry_run(object: &serde_json::Value, ns: &str) -> Result<serde_json::Value, String> {
    let mut object = object.clone();
    object["metadata"]["namespace"] = ns.into();
    let out = cluster().kubectl_stdin(&["create", "--dry-run=server", "-o", "json", "-f", "-"], &object.to_string());
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    let mut stored: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kubectl prints JSON");
    if let Some(metadata) = stored["metadata"].as_object_mut() {
        for field in ["uid", "creationTimestamp", "managedFields", "resourceVersion", "generation", "namespace"] {
            metadata.remove(field);
        }
    }
    Ok(stored)
}

/// The CREATE AdmissionReview the API server would send for ConfigMap
/// `object` (namespace and name from its metadata, a fresh uid).
pub fn config_map_review(object: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": unique("uid"),
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": object["metadata"]["namespace"].clone(),
            "name": object["metadata"]["name"].clone(),
            "operation": "CREATE",
            "userInfo": {"username": "portcullis e2e"},
            "object": object,
        }
    })
}

/// Polls `f` until it returns `Some`, up to `timeout`.
pub async fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A counter or gauge (`name` with its labels, as exposed) from the
/// `/metrics` of the admin port at `admin`; 0 when absent.
pub fn metric(admin: SocketAddr, name: &str) -> f64 {
    portcullis_test_support::http::metric(admin, name).unwrap_or_default()
}

/// A memory figure of process `pid` from `/proc/PID/status`, in KiB:
/// `VmRSS:` (resident now) or `VmHWM:` (the peak).
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process's status");
    let line = status.lines().find_map(|l| l.strip_prefix(field)).unwrap_or_else(|| panic!("no {field} line"));
    line.trim().trim_end_matches("kB").trim().parse().expect("a figure in kB")
}

/// The text a base64 field holds (a Secret's data, a caBundle).
pub fn decode_base64(text: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(text.trim()).unwrap()).unwrap()
}

/// Traces from the control plane's Jaeger, `GET /api/traces?{query}`;
/// empty while Jaeger has nothing (or does not answer), for polling.
pub fn jaeger_traces(query: &str) -> Vec<serde_json::Value> {
    jaeger_traces_at(cluster().var("PORTCULLIS_JAEGER_QUERY"), query)
}

/// Traces from the Jaeger whose query API is at `base` (a pod's, Compose's).
pub fn jaeger_traces_at(base: &str, query: &str) -> Vec<serde_json::Value> {
    let url = format!("{base}/api/traces?{query}");
    let Some(text) = portcullis_test_support::http::get_ok(&url) else { return Vec::new() };
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    body["data"].as_array().cloned().unwrap_or_default()
}

/// Every span of a Jaeger `trace` as `(service, operation)`.
pub fn spans_of(trace: &serde_json::Value) -> Vec<(String, String)> {
    let processes = trace["processes"].as_object().cloned().unwrap_or_default();
    trace["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let service = processes.get(s["processID"].as_str()?)?["serviceName"].as_str()?;
            Some((service.to_owned(), s["operationName"].as_str()?.to_owned()))
        })
        .collect()
}
