//! Command-line flag groups shared by the webhooks (`#[clap(flatten)]`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the webhook listens and how long it gives requests.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address of the HTTPS webhook listener.
    #[arg(long, env = "PORTCULLIS_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Time a client has to send its request headers (else it is
    /// disconnected) and to get the whole request answered (else 408).
    #[arg(long, env = "PORTCULLIS_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Time in-flight requests get to finish after SIGTERM.
    #[arg(long, env = "PORTCULLIS_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub admin: AdminArgs,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub tls: TlsArgs,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub capture: crate::capture::CaptureArgs,
}

/// The plain-HTTP admin listener (`/healthz`, `/readyz`, `/metrics`).
#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// Address of the admin listener.
    #[arg(long, env = "PORTCULLIS_ADMIN_LISTEN", default_value = "0.0.0.0:9090")]
    pub admin_listen: SocketAddr,
}

/// `ready`: the container healthcheck.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// The admin listener to ask.
    #[arg(long, env = "PORTCULLIS_ADMIN_LISTEN", default_value = "127.0.0.1:9090")]
    pub admin_listen: SocketAddr,
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct TlsArgs {
    /// PEM certificate chain to serve (leaf first). Reloaded when it changes.
    /// Without it the server makes a self-signed certificate.
    #[arg(long, env = "PORTCULLIS_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of the certificate (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "PORTCULLIS_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// With no certificate files: where to write the self-signed CA, to be
    /// used as the webhook configuration's caBundle. Default:
    /// `$TMPDIR/portcullis-<service>-ca.crt`.
    #[arg(long, env = "PORTCULLIS_SELF_SIGNED_CA_FILE")]
    pub self_signed_ca_file: Option<PathBuf>,
    /// Extra DNS names or IP addresses for the self-signed certificate
    /// (localhost and 127.0.0.1 are always included).
    #[arg(long = "self-signed-san", env = "PORTCULLIS_SELF_SIGNED_SANS", value_delimiter = ',')]
    pub self_signed_sans: Vec<String>,
    /// Get the certificate from the Portcullis cert-manager at this URL
    /// (`https://host:port`) instead of files: a key made here, a CSR sent
    /// over gRPC, renewal at about two thirds of the lifetime.
    #[arg(long, env = "PORTCULLIS_CERT_MANAGER_URL", conflicts_with = "tls_cert_file")]
    pub cert_manager_url: Option<String>,
    /// The CA certificates (PEM) to trust for the cert-manager's own
    /// certificate: its published CA bundle. Re-read for every request, so
    /// that a CA rotation reaches it through the mounted ConfigMap.
    #[arg(long, env = "PORTCULLIS_CERT_MANAGER_CA_FILE", requires = "cert_manager_url")]
    pub cert_manager_ca_file: Option<PathBuf>,
    /// File holding the bearer token for the cert-manager (a projected
    /// ServiceAccount token in Kubernetes); re-read for every request.
    #[arg(long, env = "PORTCULLIS_CERT_MANAGER_TOKEN_FILE", requires = "cert_manager_url")]
    pub cert_manager_token_file: Option<PathBuf>,
    /// DNS names and IP addresses to request (comma-separated).
    #[arg(long, env = "PORTCULLIS_CERT_NAMES", value_delimiter = ',', requires = "cert_manager_url")]
    pub cert_names: Vec<String>,
    /// Subject common name to request (default: none; the cert-manager
    /// uses the first DNS name). Only for signers that need one, such as
    /// `kubernetes.io/kubelet-serving` (`system:node:<name>`); the
    /// cert-manager grants only what its configuration allows the caller.
    #[arg(long, env = "PORTCULLIS_CERT_COMMON_NAME", requires = "cert_manager_url")]
    pub cert_common_name: Option<String>,
    /// Subject organizations to request (comma-separated), such as
    /// `system:nodes` for `kubernetes.io/kubelet-serving`.
    #[arg(long, env = "PORTCULLIS_CERT_ORGANIZATIONS", value_delimiter = ',', requires = "cert_manager_url")]
    pub cert_organizations: Vec<String>,
    /// Requested certificate lifetime (0: the cert-manager's default).
    #[arg(long, env = "PORTCULLIS_CERT_LIFETIME", default_value = "0s", value_parser = parse_duration)]
    pub cert_lifetime: Duration,

    /// How often certificate and key files are checked for changes.
    #[arg(long, env = "PORTCULLIS_TLS_RELOAD_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    pub tls_reload_interval: Duration,
}

impl TlsArgs {
    /// Certificates from the cert-manager at `url`, trusting `ca_file`,
    /// authenticating with `token_file`, for `names`; every other setting
    /// as the flags default it.
    pub fn from_cert_manager(url: String, ca_file: PathBuf, token_file: PathBuf, names: &[&str]) -> Self {
        Self {
            tls_cert_file: None,
            tls_key_file: None,
            self_signed_ca_file: None,
            self_signed_sans: Vec::new(),
            cert_manager_url: Some(url),
            cert_manager_ca_file: Some(ca_file),
            cert_manager_token_file: Some(token_file),
            cert_names: names.iter().map(|n| (*n).to_owned()).collect(),
            cert_common_name: None,
            cert_organizations: Vec::new(),
            cert_lifetime: Duration::ZERO,
            tls_reload_interval: Duration::from_secs(2),
        }
    }
}

/// How often a service re-reads its own configuration files (the
/// injector's InjectorConfig, the validator's policies): one flag, one name
/// in every service.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ReloadArgs {
    /// How often the configuration files are checked for changes (a mounted
    /// ConfigMap changes by an atomic symlink swap, which polling sees).
    /// `--policy-reload-interval` is the validator's former name for it.
    #[arg(
        long = "config-reload-interval",
        alias = "policy-reload-interval",
        env = "PORTCULLIS_CONFIG_RELOAD_INTERVAL",
        default_value = "2s",
        value_parser = parse_duration
    )]
    pub interval: Duration,
}

/// Parses `500ms`, `10s`, `5m`, `1h` or `7d`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration like 10s or 500ms"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        "d" => Ok(Duration::from_secs(n * 86_400)),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m, h or d)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("ten").is_err());
        assert_eq!(parse_duration("5d"), Ok(Duration::from_secs(5 * 86_400)));
        assert!(parse_duration("5w").is_err());
    }
}
