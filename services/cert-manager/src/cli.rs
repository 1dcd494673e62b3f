//! Command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use portcullis_telemetry::LogArgs;

/// Portcullis cert-manager: issues the webhooks' serving certificates.
#[derive(Debug, clap::Parser)]
#[command(name = "portcullis-cert-manager", version)]
pub struct Cli {
    #[command(subcommand)]
    #[allow(missing_docs)]
    pub command: Command,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub log: LogArgs,
}

/// What to run.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Serve the gRPC API (TLS) and the admin endpoints (HTTP).
    Serve(Box<Serve>),
    /// Exit 0 if the running service's /readyz says ready.
    Ready(portcullis_server::args::ProbeArgs),
    /// Send one certificate request by hand, as a webhook would, and print
    /// what comes back: the certificate, or the refusal (exit 1).
    Request(Box<Request>),
    /// Standalone: ask the running cert-manager to rotate its CA (it takes
    /// the request within `--ca-check-interval`). In Kubernetes mode,
    /// annotate the CA Secret with `portcullis.dev/rotate` instead.
    RotateCa(RotateCa),
}

/// `request` flags: the webhooks' `--cert-manager-*` and `--cert-*` flags.
#[derive(Debug, clap::Args)]
pub struct Request {
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub cert_manager: portcullis_server::args::CertManagerArgs,
    /// Ask for CA:true, to see the request refused.
    #[arg(long)]
    pub ask_for_ca: bool,
}

/// `rotate-ca` flags.
#[derive(Debug, clap::Args)]
pub struct RotateCa {
    /// The running cert-manager's `--ca-dir`.
    #[arg(long, env = "PORTCULLIS_CA_DIR")]
    pub ca_dir: PathBuf,
}

/// Where certificates come from and how callers prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// A CA in `--ca-dir`; callers send the token in their `tokenFile`.
    Standalone,
    /// CertificateSigningRequests through the API server; callers send a
    /// projected ServiceAccount token, checked with TokenReview.
    Kubernetes,
}

/// `serve` flags.
#[derive(Debug, clap::Args)]
pub struct Serve {
    /// The CertManagerConfig file: callers, their names and lifetimes.
    #[arg(long, env = "PORTCULLIS_CONFIG")]
    pub config: PathBuf,
    /// Standalone or Kubernetes.
    #[arg(long, env = "PORTCULLIS_MODE", value_enum, default_value = "standalone")]
    pub mode: Mode,
    /// Standalone: directory of the CA state (`ca-state.json`, mode 0600),
    /// made on first start. `rotate-ca` asks for a CA rotation.
    #[arg(long, env = "PORTCULLIS_CA_DIR", required_if_eq("mode", "standalone"))]
    pub ca_dir: Option<PathBuf>,
    /// Kubernetes: the namespace of the CA Secret (the cert-manager's own).
    #[arg(long, env = "PORTCULLIS_NAMESPACE", default_value = portcullis_admission::names::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Kubernetes: the Secret holding the CAs (made on first start). The
    /// annotation `portcullis.dev/rotate` on it asks for a CA rotation.
    #[arg(long, env = "PORTCULLIS_CA_SECRET", default_value = "portcullis-webhook-ca")]
    pub ca_secret: String,
    /// Kubernetes: a ConfigMap (in `--namespace`) where the CA certificate
    /// (not its key) is published as `ca.crt`, for the webhooks to trust the
    /// cert-manager's own TLS.
    #[arg(long, env = "PORTCULLIS_CA_CONFIGMAP", default_value = "portcullis-webhook-ca-bundle")]
    pub ca_configmap: String,
    /// Kubernetes: the Lease (in `--namespace`) that elects the replica
    /// running the signer and the caBundle controller.
    #[arg(long, env = "PORTCULLIS_LEASE", default_value = portcullis_admission::names::CERT_MANAGER_LEASE)]
    pub lease: String,
    /// Kubernetes: this replica's name in the Lease (the pod name).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Kubernetes: the signerName of the CSRs. With the default the
    /// cert-manager signs them itself; with any other (say
    /// `kubernetes.io/kubelet-serving`) it creates, approves and waits.
    #[arg(long, env = "PORTCULLIS_SIGNER_NAME", default_value = portcullis_admission::names::OWN_SIGNER)]
    pub signer_name: String,
    /// Kubernetes, another signer: the CA bundle (PEM) of that signer, sent
    /// to the webhooks as their trust bundle.
    #[arg(long, env = "PORTCULLIS_TRUST_BUNDLE_FILE")]
    pub trust_bundle_file: Option<PathBuf>,
    /// Kubernetes: the audience callers' tokens must be issued for.
    #[arg(long, env = "PORTCULLIS_TOKEN_AUDIENCE", default_value = "portcullis-cert-manager")]
    pub token_audience: String,
    /// Kubernetes: how long to wait for a CSR to be signed.
    #[arg(long, env = "PORTCULLIS_CSR_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub csr_timeout: std::time::Duration,
    /// Also write the CA certificates to trust (never a key) here, kept
    /// current through rotations: a volume shared with the webhooks, say.
    #[arg(long, env = "PORTCULLIS_PUBLISH_CA")]
    pub publish_ca: Option<PathBuf>,
    /// Lifetime of each CA made. A CA is rotated when a third of its life
    /// is left, or when asked.
    #[arg(long, env = "PORTCULLIS_CA_LIFETIME", default_value = "365d", value_parser = humantime::parse_duration)]
    pub ca_lifetime: std::time::Duration,
    /// How long a new CA is only trusted (in every caBundle and trust
    /// bundle) before it starts signing: time for bundles to reach
    /// everyone, the kubelet's ConfigMap refresh included.
    #[arg(long, env = "PORTCULLIS_CA_OVERLAP", default_value = "10m", value_parser = humantime::parse_duration)]
    pub ca_overlap: std::time::Duration,
    /// How often each replica reads the CA state, and the leader takes the
    /// next rotation step when it is due.
    #[arg(long, env = "PORTCULLIS_CA_CHECK_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
    pub ca_check_interval: std::time::Duration,
    /// gRPC listener (TLS).
    #[arg(long, env = "PORTCULLIS_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Admin listener (HTTP): /healthz, /readyz, /metrics.
    #[arg(long, env = "PORTCULLIS_ADMIN_LISTEN", default_value = "0.0.0.0:9090")]
    pub admin_listen: SocketAddr,
    /// Names in the cert-manager's own serving certificate (signed by its
    /// CA, renewed when the CA changes and when a third of its 30 days is left).
    #[arg(
        long = "serving-name",
        env = "PORTCULLIS_SERVING_NAMES",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1"
    )]
    pub serving_names: Vec<String>,
}
