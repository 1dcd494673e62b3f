//! The images and the README's laptop section, for real: a Docker daemon
//! runs the images `scripts/images` built, `docker compose up --build`
//! starts the cert-manager (standalone), both webhooks and Jaeger, the
//! README's curl gets an AdmissionReview back over TLS verified against the
//! published CA, the traces are in Jaeger, and `docker compose down -v`
//! leaves nothing behind.

use std::process::{Command, Output};
use std::time::Duration;

use portcullis_e2e::{err, eventually, jaeger_traces_at, ok, repo};
use serde_json::Value;

const PROJECT: &str = "portcullis";
const SERVICES: [&str; 3] = ["injector", "validator", "cert-manager"];

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).env("DOCKER_BUILDKIT", "0").output().expect("running a command")
}

/// `docker compose` in the repository, as the README runs it; `down -v`
/// when dropped, so a failed test leaves no container, volume or network.
struct Compose {
    env: Vec<(String, String)>,
    _secrets: tempfile::TempDir,
}

impl Compose {
    fn new() -> Self {
        // As the README makes them: 24 random bytes in hex, one file each
        // (PORTCULLIS_SECRETS_DIR instead of ./.secrets, to leave the
        // checkout alone).
        let secrets = tempfile::tempdir().expect("a temporary directory");
        for service in ["injector", "validator"] {
            let token = ok(Command::new("openssl").args(["rand", "-hex", "24"]).output().expect("running a command"));
            let file = secrets.path().join(format!("{service}-token"));
            std::fs::write(&file, token).expect("writing test files");
            // Bind-mounted as they are: readable by the containers' user.
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .expect("writing test files");
        }
        let env = vec![
            ("PORTCULLIS_SECRETS_DIR".to_owned(), secrets.path().display().to_string()),
            // No registry here: the Jaeger image scripts/images built.
            ("PORTCULLIS_JAEGER_IMAGE".to_owned(), "localhost/portcullis/jaeger:dev".to_owned()),
            ("DOCKER_BUILDKIT".to_owned(), "0".to_owned()),
        ];
        let compose = Self { env, _secrets: secrets };
        compose.run(&["down", "-v", "--remove-orphans"]);
        compose
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .current_dir(repo())
            .arg("compose")
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("running a command")
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let _ = self.run(&["down", "-v", "--remove-orphans"]);
    }
}

fn daemon() {
    ok(Command::new(repo().join("scripts/docker-daemon.sh")).output().expect("running a command"));
}

#[test]
fn each_image_is_a_static_binary_from_scratch_running_as_non_root() {
    daemon();
    for service in SERVICES {
        let image = format!("ghcr.io/portcullis/{service}:dev");
        let help = ok(docker(&["run", "--rm", "--read-only", "--cap-drop=ALL", &image, "--help"]));
        assert!(help.contains("Usage:"), "{image}: {help}");
        let config: Value = serde_json::from_str(&ok(docker(&["image", "inspect", &image]))).unwrap();
        let config = &config[0]["Config"];
        assert_eq!(config["User"], "65532:65532", "{image}");
        assert_eq!(config["Entrypoint"], serde_json::json!(["/portcullis"]), "{image}");
        let labels = &config["Labels"];
        for label in ["source", "version", "revision"] {
            assert!(labels[format!("org.opencontainers.image.{label}")].is_string(), "{image}: {labels}");
        }
        // Nothing but the binary: no shell to exec into.
        let no_shell = err(docker(&["run", "--rm", "--entrypoint", "/bin/sh", &image, "-c", "true"]));
        assert!(no_shell.contains("no such file or directory"), "{image}: {no_shell}");
    }
}

#[tokio::test]
async fn compose_up_runs_the_readme_laptop_section() {
    daemon();
    let compose = Compose::new();
    let up = compose.run(&["up", "--build", "--detach", "--wait", "--wait-timeout", "120"]);
    if !up.status.success() {
        let logs = compose.run(&["logs", "--no-color"]);
        panic!(
            "docker compose up failed: {}\n{}",
            String::from_utf8_lossy(&up.stderr),
            String::from_utf8_lossy(&logs.stdout)
        );
    }

    // Every service hardened as the file says, for real.
    for service in SERVICES {
        let id = ok(compose.run(&["ps", "-q", service])).trim().to_owned();
        let inspect: Value = serde_json::from_str(&ok(docker(&["inspect", &id]))).unwrap();
        let host = &inspect[0]["HostConfig"];
        assert_eq!(host["ReadonlyRootfs"], true, "{service}");
        assert_eq!(inspect[0]["Config"]["User"], "65532:65532", "{service}");
        assert_eq!(inspect[0]["State"]["Health"]["Status"], "healthy", "{service}");
    }

    // The README, exactly: the CA from the cert-manager, then curl.
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("portcullis-ca.crt");
    ok(compose.run(&["cp", "cert-manager:/trust/ca.crt", ca.to_str().unwrap()]));
    let review = |port: u16, path: &str, body: &str| {
        let url = format!("https://localhost:{port}/{path}");
        let out = Command::new("curl")
            .current_dir(repo())
            .args(["-sS", "--cacert", ca.to_str().unwrap(), "--data", body, &url])
            .output()
            .unwrap();
        serde_json::from_str::<Value>(&ok(out)).unwrap()
    };
    let mutated = review(8443, "mutate", "@services/injector/tests/data/pod-v1.json");
    assert_eq!(mutated["kind"], "AdmissionReview", "{mutated}");
    assert_eq!(mutated["response"]["allowed"], true, "{mutated}");
    // The documented wire format: patch is base64 of an RFC 6902 patch.
    use base64::Engine as _;
    let patch = mutated["response"]["patch"].as_str().unwrap_or_else(|| panic!("patch is not a string: {mutated}"));
    let patch: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
    assert!(patch.as_array().is_some_and(|ops| ops.iter().all(|op| op["op"].is_string() && op["path"].is_string())));
    assert_eq!(mutated["response"]["patchType"], "JSONPatch");
    let request: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("services/injector/tests/data/pod-v1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(mutated["response"]["uid"], request["request"]["uid"]);
    // deploy/base/policies/validator.yaml only audits and warns on this pod.
    let validated = review(8444, "validate", "@services/injector/tests/data/pod-v1.json");
    assert_eq!(validated["kind"], "AdmissionReview", "{validated}");
    assert_eq!(validated["response"]["uid"], request["request"]["uid"], "{validated}");
    assert_eq!(validated["response"]["allowed"], true, "{validated}");

    // Traces: the admissions and the certificate issuance.
    for service in ["portcullis-injector", "portcullis-cert-manager"] {
        let query = format!("service={service}&lookback=1h&limit=5");
        eventually(&format!("traces of {service} in Jaeger"), Duration::from_secs(60), || {
            (!jaeger_traces_at("http://localhost:16686", &query).is_empty()).then_some(())
        })
        .await;
    }

    // down -v leaves nothing behind.
    ok(compose.run(&["down", "-v", "--remove-orphans"]));
    let filter = format!("label=com.docker.compose.project={PROJECT}");
    for what in [["ps", "-aq"], ["volume", "ls"], ["network", "ls"]] {
        let mut args = what.to_vec();
        args.extend(["--filter", &filter, "-q"]);
        let left = ok(docker(&args));
        assert!(left.trim().is_empty(), "left after down -v ({what:?}): {left}");
    }
}
