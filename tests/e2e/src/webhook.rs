//! Portcullis webhooks as real processes, registered with the API server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use portcullis_test_support::http;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

use crate::cleanup::Cleanup;
use crate::{Process, binaries};

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

/// Which Portcullis webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// portcullis-injector, `POST /mutate`.
    Injector,
    /// portcullis-validator, `POST /validate`.
    Validator,
}

/// A webhook process serving on a fixed loopback port (so it can be
/// stopped and started again at the same address) with file certificates.
#[derive(Debug)]
pub struct Webhook {
    /// Which one.
    pub kind: Kind,
    /// The webhook's address.
    pub addr: SocketAddr,
    /// The admin port's address.
    pub admin: SocketAddr,
    /// Its certificates.
    pub pki: Pki,
    dir: tempfile::TempDir,
    /// The configuration files, or none: the webhook watches the
    /// `portcullis.dev` resources (`--watch-resources`).
    config: Option<PathBuf>,
    args: Vec<String>,
    binaries: &'static Path,
    process: Option<Process>,
}

impl Webhook {
    /// Starts `kind` with its configuration (`--config` for the injector,
    /// `--policy` for the validator) and waits until it is ready.
    pub async fn start(kind: Kind, config: &Path) -> Self {
        Self::start_with(kind, config, &[]).await
    }

    /// [`Webhook::start`] with more `serve` flags.
    pub async fn start_with(kind: Kind, config: &Path, args: &[&str]) -> Self {
        Self::start_from(binaries(), kind, Some(config), args).await
    }

    /// Starts `kind` reading its policies or templates from the cluster's
    /// `portcullis.dev` resources (`--watch-resources`), with more `serve`
    /// flags, and waits until it is ready (every kind listed and reported).
    pub async fn start_watching(kind: Kind, args: &[&str]) -> Self {
        Self::start_from(binaries(), kind, None, args).await
    }

    /// [`Webhook::start_with`] on the release binary the image ships
    /// ([`crate::release_binaries`]), for tests that measure speed.
    pub async fn start_release_with(kind: Kind, config: &Path, args: &[&str]) -> Self {
        Self::start_from(crate::release_binaries(), kind, Some(config), args).await
    }

    async fn start_from(binaries: &'static Path, kind: Kind, config: Option<&Path>, args: &[&str]) -> Self {
        let pki = Pki::new();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), &pki.cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), &pki.key).unwrap();
        let unbound = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut webhook = Self {
            kind,
            addr: unbound,
            admin: unbound,
            pki,
            dir,
            config: config.map(Path::to_path_buf),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            binaries,
            process: None,
        };
        webhook.resume().await;
        webhook
    }

    /// Stops the process (the port stops answering).
    pub fn stop(&mut self) {
        self.process = None;
    }

    /// Starts the process (again: on the addresses it had) and waits for
    /// readiness. The first start binds port 0 and learns its addresses
    /// from the process's log.
    pub async fn resume(&mut self) {
        let (binary, config_flag, service) = match self.kind {
            Kind::Injector => ("portcullis-injector", "--config", "portcullis-injector"),
            Kind::Validator => ("portcullis-validator", "--policy", "portcullis-validator"),
        };
        let cluster = crate::cluster();
        let mut command = Command::new(self.binaries.join(binary));
        command.arg("serve");
        match &self.config {
            Some(config) => command.arg(config_flag).arg(config),
            None => command.arg("--watch-resources"),
        };
        command
            .args(&self.args)
            .arg("--tls-cert-file")
            .arg(self.dir.path().join("tls.crt"))
            .arg("--tls-key-file")
            .arg(self.dir.path().join("tls.key"))
            .args(["--listen", &self.addr.to_string(), "--admin-listen", &self.admin.to_string()])
            .args(["--config-reload-interval", "500ms"])
            .env("KUBECONFIG", cluster.var("KUBECONFIG"))
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", cluster.var("PORTCULLIS_JAEGER_OTLP"))
            .env("OTEL_SERVICE_NAME", service)
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .stderr(Stdio::inherit());
        let (process, addrs) = Process::spawn_reporting(command, &["webhook", "admin"], false);
        (self.addr, self.admin) = (addrs[0], addrs[1]);
        self.process = Some(process);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if http::get_ok(&format!("http://{}/readyz", self.admin)).is_some() {
                return;
            }
            assert!(Instant::now() < deadline, "{binary} not ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The process id of the running webhook.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().map(|p| p.id()).expect("the webhook is running")
    }

    /// An HTTPS client that trusts this webhook's certificate.
    pub fn client(&self) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(self.pki.ca.as_bytes()).unwrap();
        reqwest::Client::builder().tls_built_in_root_certs(false).add_root_certificate(ca).build().unwrap()
    }

    /// The webhook URL.
    pub fn url(&self) -> String {
        match self.kind {
            Kind::Injector => format!("https://{}/mutate", self.addr),
            Kind::Validator => format!("https://{}/validate", self.addr),
        }
    }

    /// A registration of this webhook for the namespaces of test `case`.
    pub fn registration(&self, case: &str, failure_policy: &'static str) -> Registration {
        Registration {
            kind: self.kind,
            name: format!("{case}-{}", if self.kind == Kind::Injector { "inject" } else { "validate" }),
            case: case.to_owned(),
            url: self.url(),
            ca_bundle: self.pki.ca.clone(),
            failure_policy,
        }
    }
}

/// How to register a webhook for one test's namespaces.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Mutating (injector) or validating (validator).
    pub kind: Kind,
    /// Name of the webhook configuration (and the webhook's prefix).
    pub name: String,
    /// Only namespaces with this `e2e.portcullis.dev/case` label (plus
    /// `portcullis.dev/inject=enabled` for the injector) are sent to the
    /// webhook, so tests running at once never see each other's webhook.
    pub case: String,
    /// Webhook URL.
    pub url: String,
    /// PEM CA put into caBundle.
    pub ca_bundle: String,
    /// `Fail` or `Ignore`.
    pub failure_policy: &'static str,
}

impl Registration {
    /// Creates or replaces the configuration; it is deleted when the
    /// returned cleanup is dropped.
    pub async fn apply(&self, client: &kube::Client) -> Cleanup {
        use base64::Engine as _;
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&self.ca_bundle);
        let rule = |groups: &[&str], resources: &[&str], operations: &[&str]| serde_json::json!({"apiGroups": groups, "apiVersions": ["v1"], "operations": operations, "resources": resources, "scope": "Namespaced"});
        let mut labels = serde_json::json!({"e2e.portcullis.dev/case": self.case});
        let (kind, suffix, rules) = match self.kind {
            Kind::Injector => {
                labels["portcullis.dev/inject"] = "enabled".into();
                (
                    "MutatingWebhookConfiguration",
                    "inject.portcullis.dev",
                    vec![
                        rule(&[""], &["pods"], &["CREATE", "UPDATE"]),
                        rule(&[""], &["pods/ephemeralcontainers"], &["UPDATE"]),
                    ],
                )
            }
            Kind::Validator => (
                "ValidatingWebhookConfiguration",
                "validate.portcullis.dev",
                vec![
                    rule(&[""], &["pods", "services", "configmaps", "secrets"], &["CREATE", "UPDATE"]),
                    rule(
                        &["apps"],
                        &["deployments", "deployments/scale", "statefulsets", "statefulsets/scale"],
                        &["CREATE", "UPDATE"],
                    ),
                ],
            ),
        };
        let mut webhook = serde_json::json!({
            "name": format!("{}.{suffix}", self.name),
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": self.failure_policy,
            "timeoutSeconds": 5,
            "clientConfig": {"url": self.url, "caBundle": ca_bundle},
            "namespaceSelector": {"matchLabels": labels},
            "rules": rules,
        });
        if self.kind == Kind::Injector {
            webhook["reinvocationPolicy"] = "IfNeeded".into();
        }
        let config = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": self.name}, "webhooks": [webhook],
        });
        let api = self.api(client);
        let _ = api.delete(&self.name, &DeleteParams::default()).await;
        let object: DynamicObject = serde_json::from_value(config).unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
        let resource = match self.kind {
            Kind::Injector => "mutatingwebhookconfiguration",
            Kind::Validator => "validatingwebhookconfiguration",
        };
        Cleanup::of(resource, &self.name)
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        let kind = match self.kind {
            Kind::Injector => "MutatingWebhookConfiguration",
            Kind::Validator => "ValidatingWebhookConfiguration",
        };
        let gvk = kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk(&gvk))
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
