//! Portcullis webhooks as real processes, registered with the API server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

use crate::{Process, binaries, free_addr};

/// A CA and a serving certificate for 127.0.0.1 signed by it.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA, PEM: what goes into caBundle.
    pub ca: String,
    /// The leaf, PEM.
    pub cert: String,
    /// The leaf's key, PEM.
    pub key: String,
}

impl Pki {
    /// A fresh CA and leaf.
    pub fn new() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name.push(rcgen::DnType::CommonName, "portcullis e2e CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, &ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap().signed_by(&key, &issuer).unwrap();
        Self { ca: ca_cert.pem(), cert: cert.pem(), key: key.serialize_pem() }
    }
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

/// An injector process serving on a fixed loopback port (so it can be
/// stopped and started again at the same address) with file certificates.
#[derive(Debug)]
pub struct Injector {
    /// The webhook's address.
    pub addr: SocketAddr,
    /// The admin port's address.
    pub admin: SocketAddr,
    /// Its certificates.
    pub pki: Pki,
    dir: tempfile::TempDir,
    config: PathBuf,
    process: Option<Process>,
}

impl Injector {
    /// Starts an injector with `config` and waits until it is ready.
    pub async fn start(config: &Path) -> Self {
        let pki = Pki::new();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), &pki.cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), &pki.key).unwrap();
        let mut injector =
            Self { addr: free_addr(), admin: free_addr(), pki, dir, config: config.to_path_buf(), process: None };
        injector.resume().await;
        injector
    }

    /// Stops the process (the port stops answering).
    pub fn stop(&mut self) {
        self.process = None;
    }

    /// Starts the process again on the same address and waits for readiness.
    pub async fn resume(&mut self) {
        let child = Command::new(binaries().join("portcullis-injector"))
            .arg("serve")
            .arg("--config")
            .arg(&self.config)
            .arg("--tls-cert-file")
            .arg(self.dir.path().join("tls.crt"))
            .arg("--tls-key-file")
            .arg(self.dir.path().join("tls.key"))
            .args(["--listen", &self.addr.to_string(), "--admin-listen", &self.admin.to_string()])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", crate::cluster().var("PORTCULLIS_JAEGER_OTLP"))
            .env("OTEL_SERVICE_NAME", "portcullis-injector")
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.process = Some(Process(child));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = std::net::TcpStream::connect(self.admin).is_ok()
                && Command::new("curl")
                    .args(["-fsS", &format!("http://{}/readyz", self.admin)])
                    .output()
                    .is_ok_and(|o| o.status.success());
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "injector not ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The webhook URL.
    pub fn url(&self) -> String {
        format!("https://{}/mutate", self.addr)
    }
}

/// How to register a mutating webhook for one test's namespaces.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Name of the MutatingWebhookConfiguration (and the webhook's prefix).
    pub name: String,
    /// Only namespaces with this `e2e.portcullis.dev/case` label (plus
    /// `portcullis.dev/inject=enabled`) are sent to the webhook, so tests
    /// running at once never see each other's webhook.
    pub case: String,
    /// Webhook URL.
    pub url: String,
    /// PEM CA put into caBundle.
    pub ca_bundle: String,
    /// `Fail` or `Ignore`.
    pub failure_policy: &'static str,
}

impl Registration {
    /// Creates or replaces the configuration.
    pub async fn apply(&self, client: &kube::Client) {
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let config = MutatingWebhookConfiguration {
            metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
            webhooks: Some(vec![MutatingWebhook {
                name: format!("{}.inject.portcullis.dev", self.name),
                admission_review_versions: vec!["v1".into()],
                side_effects: "None".into(),
                failure_policy: Some(self.failure_policy.into()),
                reinvocation_policy: Some("IfNeeded".into()),
                timeout_seconds: Some(5),
                client_config: WebhookClientConfig {
                    url: Some(self.url.clone()),
                    ca_bundle: Some(ByteString(self.ca_bundle.clone().into_bytes())),
                    service: None,
                },
                namespace_selector: Some(LabelSelector {
                    match_labels: Some(
                        [
                            ("portcullis.dev/inject".to_owned(), "enabled".to_owned()),
                            ("e2e.portcullis.dev/case".to_owned(), self.case.clone()),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
                rules: Some(vec![
                    RuleWithOperations {
                        api_groups: Some(vec!["".into()]),
                        api_versions: Some(vec!["v1".into()]),
                        operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                        resources: Some(vec!["pods".into()]),
                        scope: Some("Namespaced".into()),
                    },
                    RuleWithOperations {
                        api_groups: Some(vec!["".into()]),
                        api_versions: Some(vec!["v1".into()]),
                        operations: Some(vec!["UPDATE".into()]),
                        resources: Some(vec!["pods/ephemeralcontainers".into()]),
                        scope: Some("Namespaced".into()),
                    },
                ]),
                ..Default::default()
            }]),
        };
        let _ = api.delete(&self.name, &DeleteParams::default()).await;
        api.create(&PostParams::default(), &config).await.unwrap();
    }

    /// Deletes the configuration.
    pub async fn delete(&self, client: &kube::Client) {
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let _ = api.delete(&self.name, &DeleteParams::default()).await;
    }
}

/// Creates namespace `name` with `labels`.
pub async fn namespace(client: &kube::Client, name: &str, labels: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>()}
    });
    api.patch(name, &PatchParams::apply("portcullis-e2e").force(), &Patch::Apply(ns)).await.unwrap();
}
