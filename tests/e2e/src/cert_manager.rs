//! The cert-manager in Kubernetes mode as `deploy/` runs it: in
//! `portcullis-system`, as its ServiceAccount with exactly the RBAC that
//! `deploy/base/cert-manager` grants (never as cluster-admin), and an
//! injector that takes its serving certificate from it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use portcullis_test_support::http;

use crate::cleanup::Cleanup;
use crate::{Cluster, Process, binaries, eventually, ok, repo};

/// The cert-manager's namespace, as in `deploy/`.
pub const NAMESPACE: &str = "portcullis-system";

/// The files a cert-manager and its clients share: `kubeconfig` (as the
/// cert-manager's ServiceAccount), `token` (the ServiceAccount `webhook`'s,
/// for the cert-manager's audience), `config.yaml`, and `ca.crt`, where the
/// cert-manager publishes the CAs to trust.
#[derive(Debug)]
pub struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    /// Creates the namespace, applies deploy's RBAC for the cert-manager and
    /// a ServiceAccount `webhook`, and writes the files with the
    /// CertManagerConfig `clients` (YAML list items, indented 4).
    pub fn new(cluster: &Cluster, clients: &str) -> Self {
        let ns = NAMESPACE;
        ok(cluster.kubectl(&["create", "namespace", ns]));
        let rbac = ok(cluster.kubectl(&["kustomize", repo().join("deploy/base/cert-manager").to_str().unwrap()]));
        ok(cluster.kubectl_stdin(&["apply", "-n", ns, "-f", "-"], &rbac));
        ok(cluster.kubectl(&["create", "serviceaccount", "webhook", "-n", ns]));
        let dir = tempfile::tempdir().unwrap();
        let own_token = ok(cluster.kubectl(&["create", "token", "portcullis-cert-manager", "-n", ns]));
        let mut kubeconfig = kube::config::Kubeconfig::read_from(cluster.var("KUBECONFIG")).unwrap();
        for auth in &mut kubeconfig.auth_infos {
            auth.auth_info =
                Some(kube::config::AuthInfo { token: Some(own_token.trim().to_owned().into()), ..Default::default() });
        }
        std::fs::write(dir.path().join("kubeconfig"), serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
        let token =
            ok(cluster.kubectl(&["create", "token", "webhook", "-n", ns, "--audience", "portcullis-cert-manager"]));
        std::fs::write(dir.path().join("token"), token.trim()).unwrap();
        let config =
            format!("apiVersion: portcullis.dev/v1alpha1\nkind: CertManagerConfig\nspec:\n  clients:\n{clients}");
        std::fs::write(dir.path().join("config.yaml"), config).unwrap();
        Self { dir }
    }

    /// A file in the shared directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts a replica named `pod` with `extra` flags, exporting to the
    /// cluster's Jaeger; returns once it listens.
    pub async fn start(&self, cluster: &Cluster, pod: &str, extra: &[&str]) -> CertManager {
        let mut command = Command::new(binaries().join("portcullis-cert-manager"));
        command
            .args(["serve", "--mode", "kubernetes", "--namespace", NAMESPACE, "--config"])
            .arg(self.path("config.yaml"))
            .arg("--publish-ca")
            .arg(self.path("ca.crt"))
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(extra)
            .env("KUBECONFIG", self.path("kubeconfig"))
            .env("POD_NAME", pod)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", cluster.var("PORTCULLIS_JAEGER_OTLP"))
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .stderr(Stdio::inherit());
        // It logs its addresses once both listeners are bound.
        let (process, addrs) = Process::spawn_reporting(command, &["grpc", "admin"], true);
        CertManager { process, addr: addrs[0], admin: addrs[1] }
    }

    /// Starts an injector (deploy's injector config) serving on loopback
    /// with a certificate from `cert_manager`, with `extra` flags.
    pub async fn injector(&self, cluster: &Cluster, cert_manager: &CertManager, extra: &[&str]) -> Injector {
        let mut command = Command::new(binaries().join("portcullis-injector"));
        command
            .arg("serve")
            .arg("--config")
            .arg(repo().join("deploy/base/policies/injector.yaml"))
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(["--cert-manager-url", &cert_manager.url()])
            .arg("--cert-manager-ca-file")
            .arg(self.path("ca.crt"))
            .arg("--cert-manager-token-file")
            .arg(self.path("token"))
            .args(["--cert-names", "127.0.0.1"])
            .args(extra)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", cluster.var("PORTCULLIS_JAEGER_OTLP"))
            .env("OTEL_SERVICE_NAME", "portcullis-injector")
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .stderr(Stdio::inherit());
        let (process, addrs) = Process::spawn_reporting(command, &["webhook", "admin"], true);
        let (addr, admin) = (addrs[0], addrs[1]);
        let ready = format!("http://{admin}/readyz");
        eventually("the injector has its certificate", Duration::from_secs(40), || http::get_ok(&ready)).await;
        Injector { process, addr, admin }
    }
}

/// A running cert-manager replica.
#[derive(Debug)]
pub struct CertManager {
    /// The process (killed when dropped).
    pub process: Process,
    /// Its gRPC address.
    pub addr: SocketAddr,
    /// Its admin address.
    pub admin: SocketAddr,
}

impl CertManager {
    /// The URL the webhooks are given.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    /// A counter or gauge from its /metrics (0 when absent).
    pub fn metric(&self, name: &str) -> f64 {
        crate::metric(self.admin, name)
    }
}

/// A running injector.
#[derive(Debug)]
pub struct Injector {
    /// The process (killed when dropped).
    pub process: Process,
    /// Its webhook address.
    pub addr: SocketAddr,
    /// Its admin address.
    pub admin: SocketAddr,
}

impl Injector {
    /// Registers a MutatingWebhookConfiguration `name` labelled for the
    /// caBundle controller (no caBundle of its own), failing closed, for pods
    /// created in namespaces labelled `e2e.portcullis.dev/case=<case>`;
    /// removed when the returned cleanup is dropped.
    pub fn register(&self, name: &str, case: &str) -> Cleanup {
        register_injector(name, case, self.addr, None)
    }

    /// Whether the certificate it serves now verifies against `ca_pem` only.
    pub async fn serves_a_certificate_of(&self, ca_pem: &str) -> bool {
        let Ok(ca) = reqwest::Certificate::from_pem(ca_pem.as_bytes()) else { return false };
        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        // Any answer means the handshake verified.
        client.get(format!("https://127.0.0.1:{}/healthz", self.addr.port())).send().await.is_ok()
    }
}

/// Registers a MutatingWebhookConfiguration `name` for the injector at
/// `addr` (`https://127.0.0.1:<port>/mutate`), failing closed, for pods
/// created in namespaces labelled `e2e.portcullis.dev/case=<case>`: with
/// `ca_pem` as its caBundle, or without one and labelled for the
/// cert-manager's caBundle controller. Removed when the returned cleanup is
/// dropped.
pub fn register_injector(name: &str, case: &str, addr: SocketAddr, ca_pem: Option<&str>) -> Cleanup {
    use base64::Engine as _;
    let (labels, bundle) = match ca_pem {
        None => ("{portcullis.dev/inject-ca: \"true\"}".to_owned(), String::new()),
        Some(pem) => {
            ("{}".to_owned(), format!(", caBundle: {}", base64::engine::general_purpose::STANDARD.encode(pem)))
        }
    };
    let manifest = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: {name}\n  labels: {labels}\n\
         webhooks:\n  - name: inject.portcullis.dev\n    admissionReviewVersions: [v1]\n    sideEffects: None\n    failurePolicy: Fail\n\
         \x20   clientConfig: {{url: 'https://127.0.0.1:{}/mutate'{bundle}}}\n    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/case: {case}}}}}\n\
         \x20   rules: [{{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]\n",
        addr.port()
    );
    Cleanup::apply("mutatingwebhookconfiguration", name, &manifest)
}
