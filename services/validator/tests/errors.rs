//! What a user reads when `portcullis-validator serve` cannot start: each
//! cause once, outermost first, and what to do about it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `serve` on a machine with no Kubernetes API configured: no in-cluster
/// variables, `KUBECONFIG` naming a file that does not exist.
#[test]
fn serve_without_a_kubeconfig_names_each_cause_once_and_says_what_to_do() {
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-dir/kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_portcullis-validator"))
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--policy"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/policies.yaml"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("KUBECONFIG", &missing)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the validator");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the validator") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the validator did not exit within 30 s without a Kubernetes API");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::io::read_to_string(child.stderr.take().expect("stderr is piped")).expect("reading stderr");
    assert_eq!(status.code(), Some(2), "an error: {stderr}");

    let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line: {stderr}"));
    let causes = [
        "connecting to the Kubernetes API to watch Namespaces",
        "failed to infer config",
        "in-cluster",
        "kubeconfig: (",
        &missing.display().to_string(),
        "No such file or directory",
    ];
    let mut from = 0;
    for cause in causes {
        assert_eq!(error.matches(cause).count(), 1, "{cause:?} named once in {error}");
        let at = error.find(cause).unwrap_or_default();
        assert!(at >= from, "{cause:?} after the causes before it (outermost first) in {error}");
        from = at;
    }

    let hint = stderr.lines().find(|l| l.starts_with("hint: ")).unwrap_or_else(|| panic!("no hint: {stderr}"));
    assert!(hint.contains("--watch-namespaces=false"), "{hint}");
    assert!(
        hint.contains("$KUBECONFIG") && hint.contains("~/.kube/config"),
        "where a kubeconfig is looked for: {hint}"
    );
}
