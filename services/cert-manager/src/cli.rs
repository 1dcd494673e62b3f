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
    /// Serve the gRPC API (TLS) and the admin endpoints (HTTP), standalone:
    /// a CA in a local directory, callers authenticated by token files.
    Serve(Box<Serve>),
    /// Exit 0 if the running service's /readyz says ready.
    Ready(portcullis_server::args::ProbeArgs),
}

/// `serve` flags.
#[derive(Debug, clap::Args)]
pub struct Serve {
    /// The CertManagerConfig file: callers, their names and lifetimes.
    #[arg(long, env = "PORTCULLIS_CONFIG")]
    pub config: PathBuf,
    /// Directory of the CA (`ca.crt`, `ca.key`), made on first start.
    #[arg(long, env = "PORTCULLIS_CA_DIR")]
    pub ca_dir: PathBuf,
    /// Also write the CA certificate (not the key) here, for clients to
    /// trust: a volume shared with the webhooks, say.
    #[arg(long, env = "PORTCULLIS_PUBLISH_CA")]
    pub publish_ca: Option<PathBuf>,
    /// gRPC listener (TLS).
    #[arg(long, env = "PORTCULLIS_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Admin listener (HTTP): /healthz, /readyz, /metrics.
    #[arg(long, env = "PORTCULLIS_ADMIN_LISTEN", default_value = "0.0.0.0:9090")]
    pub admin_listen: SocketAddr,
    /// Names in the cert-manager's own serving certificate (signed by its CA).
    #[arg(
        long = "serving-name",
        env = "PORTCULLIS_SERVING_NAMES",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1"
    )]
    pub serving_names: Vec<String>,
}
