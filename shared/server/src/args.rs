//! Command-line flag groups shared by the webhooks (`#[clap(flatten)]`).
//! Every duration flag is read by `humantime::parse_duration` (`500ms`,
//! `10s`, `5m`, `1h 30m`, `7d`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use portcullis_certs_client::Settings;

/// Where the webhook listens and how long it gives requests.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address of the HTTPS webhook listener.
    #[arg(long, env = "PORTCULLIS_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Time a client has to send its request headers (else it is
    /// disconnected) and to get the whole request answered (else 408).
    #[arg(long, env = "PORTCULLIS_REQUEST_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// After SIGTERM, the longest the server goes on answering (each answer
    /// closing its connection, so that clients move away from it without
    /// a request lost) while clients still hold connections to it.
    #[arg(long, env = "PORTCULLIS_SHUTDOWN_DRAIN", default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_drain: Duration,
    /// Time in-flight requests get to finish once the drain is over.
    #[arg(long, env = "PORTCULLIS_SHUTDOWN_GRACE", default_value = "20s", value_parser = humantime::parse_duration)]
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
    #[arg(long, env = "PORTCULLIS_TLS_CERT_FILE", requires = "tls_key_file", conflicts_with = "cert_manager_url")]
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
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub cert_manager: CertManagerArgs,

    /// How often certificate and key files are checked for changes.
    #[arg(long, env = "PORTCULLIS_TLS_RELOAD_INTERVAL", default_value = "2s", value_parser = humantime::parse_duration)]
    pub tls_reload_interval: Duration,
}

/// Where the cert-manager is and what to ask it for: the webhooks' and
/// the cert-manager's `request` command's `--cert-manager-*` and `--cert-*`
/// flags.
#[derive(Debug, Clone, clap::Args)]
pub struct CertManagerArgs {
    /// Get the certificate from the Portcullis cert-manager at this URL
    /// (`https://host:port`) instead of files: a key made here, a CSR sent
    /// over gRPC, renewal at about two thirds of the lifetime.
    #[arg(long, env = "PORTCULLIS_CERT_MANAGER_URL", requires_all = ["cert_manager_ca_file", "cert_manager_token_file"])]
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
    #[arg(long, env = "PORTCULLIS_CERT_LIFETIME", default_value = "0s", value_parser = humantime::parse_duration)]
    pub cert_lifetime: Duration,
}

impl CertManagerArgs {
    /// The client's settings; `None` without `--cert-manager-url` (its CA
    /// and token files are required with it).
    pub fn settings(&self) -> Option<Settings> {
        Some(Settings {
            url: self.cert_manager_url.clone()?,
            ca_file: self.cert_manager_ca_file.clone()?,
            token_file: self.cert_manager_token_file.clone()?,
            names: self.cert_names.clone(),
            common_name: self.cert_common_name.clone(),
            organizations: self.cert_organizations.clone(),
            lifetime: self.cert_lifetime,
        })
    }
}

/// How often a service re-reads its own configuration files (the
/// injector's InjectorConfig, the validator's policies): one flag, one name
/// in every service.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ReloadArgs {
    /// How often the configuration files are checked for changes (a mounted
    /// ConfigMap changes by an atomic symlink swap, which polling sees).
    #[arg(
        long = "config-reload-interval",
        env = "PORTCULLIS_CONFIG_RELOAD_INTERVAL",
        default_value = "2s",
        value_parser = humantime::parse_duration
    )]
    pub interval: Duration,
}

/// Where a webhook's policies or templates come from in a cluster: the
/// `portcullis.dev` resources, watched. One flag, one name in both
/// webhooks; exclusive with their files (`--policy`, `--config`).
#[derive(Debug, Clone, clap::Args)]
pub struct ResourceArgs {
    /// Read the policies and exceptions (validator) or the templates and
    /// configuration (injector) from the cluster's `portcullis.dev`
    /// resources, watched, instead of files; each object's status says
    /// whether it is in force in every replica.
    #[arg(long, env = "PORTCULLIS_WATCH_RESOURCES")]
    pub watch_resources: bool,
    /// This replica's name in its `WebhookReplica` report and the status
    /// Lease: the pod's name (downward API); `<webhook>-<pid>` without one.
    #[arg(long = "replica-name", env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// The pod's uid (downward API): the report is owned by the pod, so the
    /// garbage collector removes it with the pod.
    #[arg(long = "replica-uid", env = "POD_UID")]
    pub pod_uid: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[clap(flatten)]
        reload: super::ReloadArgs,
        #[clap(flatten)]
        cert_manager: super::CertManagerArgs,
    }

    fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
        Flags::try_parse_from(std::iter::once("portcullis").chain(args.iter().copied()))
    }

    #[test]
    fn durations_are_read_as_the_docs_write_them() -> Result<(), clap::Error> {
        let flags = parse(&["--config-reload-interval", "500ms", "--cert-lifetime", "1h 30m"])?;
        assert_eq!(flags.reload.interval, Duration::from_millis(500));
        assert_eq!(flags.cert_manager.cert_lifetime, Duration::from_secs(5400));
        assert_eq!(parse(&["--config-reload-interval", "7d"])?.reload.interval, Duration::from_secs(7 * 86_400));
        assert_eq!(parse(&[])?.reload.interval, Duration::from_secs(2));
        // A unit is required: `10` could be meant as seconds or milliseconds.
        let bare = parse(&["--config-reload-interval", "10"]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(bare.contains("time unit needed"), "{bare}");
        Ok(())
    }

    #[test]
    fn the_validators_former_flag_name_is_gone() {
        let err = parse(&["--policy-reload-interval", "5s"]).err().map(|e| e.kind());
        assert_eq!(err, Some(clap::error::ErrorKind::UnknownArgument));
    }
}
