//! The cert-manager as the certificate source: make a key and a CSR here
//! (the key never leaves the process), get the certificate over gRPC, serve
//! it at once through the swappable resolver, renew at about two thirds of
//! its lifetime with jitter, and keep serving the old one with backoff when
//! the cert-manager cannot be reached.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portcullis_proto::certs::v1::certificates_client::CertificatesClient;
use portcullis_proto::certs::v1::{IssueRequest, WatchTrustBundleRequest};
use rcgen::{CertificateParams, KeyPair};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::args::TlsArgs;
use crate::error::error_chain;
use crate::tls::{CertResolver, TlsError, certified_key};

/// Why one issuance failed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// Bad flags or files.
    #[error("{0}")]
    Setup(String),
    /// The cert-manager could not be reached.
    #[error("cannot reach the cert-manager")]
    Connect(#[source] tonic::transport::Error),
    /// The cert-manager refused or failed.
    #[error("the cert-manager answered {code:?}: {message}")]
    Refused {
        /// gRPC status code.
        code: tonic::Code,
        /// Its message.
        message: String,
    },
    /// Key or CSR generation failed.
    #[error("cannot make a key or CSR")]
    Key(#[source] rcgen::Error),
    /// The returned certificate does not match the key.
    #[error("the returned certificate is unusable")]
    Certificate(#[source] TlsError),
}

/// One certificate: the served key and when to renew it.
#[derive(Debug)]
pub struct Issued {
    /// Certificate chain and key, ready to serve.
    pub key: Arc<CertifiedKey>,
    /// When to start renewing.
    pub renew_after: SystemTime,
    /// The certificate's notAfter.
    pub not_after: SystemTime,
    /// The certificate chain as returned, PEM (leaf first).
    pub chain_pem: String,
    /// The trust bundle (caBundle) the cert-manager returned.
    pub ca_bundle_pem: String,
    /// The CA that signed it (empty when the cert-manager does not say).
    pub issuer_pem: String,
}

/// Requests one certificate for `args.cert_names`, as a client span whose
/// context travels to the cert-manager in the gRPC metadata.
pub async fn issue(args: &TlsArgs) -> Result<Issued, IssueError> {
    issue_for(args, request_params(args)?).await
}

/// What the webhooks ask for: `args.cert_names`, and a subject only when
/// `--cert-common-name`/`--cert-organizations` say so.
pub fn request_params(args: &TlsArgs) -> Result<CertificateParams, IssueError> {
    let mut params = CertificateParams::new(args.cert_names.clone()).map_err(IssueError::Key)?;
    // No placeholder subject: only what was asked for.
    params.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(name) = &args.cert_common_name {
        params.distinguished_name.push(rcgen::DnType::CommonName, name.as_str());
    }
    for organization in &args.cert_organizations {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, organization.as_str());
    }
    Ok(params)
}

/// Requests one certificate for `params`, with a key made here.
pub async fn issue_for(args: &TlsArgs, params: CertificateParams) -> Result<Issued, IssueError> {
    use tracing::Instrument as _;
    let span = tracing::info_span!("request certificate", otel.kind = "client", names = ?args.cert_names);
    issue_in_span(args, params).instrument(span).await
}

/// A connected client and the bearer token to send, from `args`.
async fn connect(args: &TlsArgs) -> Result<(CertificatesClient<Channel>, MetadataValue<Ascii>, String), IssueError> {
    let url = args.cert_manager_url.clone().ok_or_else(|| IssueError::Setup("no --cert-manager-url".into()))?;
    let read = |path: &Option<std::path::PathBuf>, what: &str| match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| IssueError::Setup(format!("{what} {}: {e}", p.display()))),
        None => Err(IssueError::Setup(format!("--cert-manager-{what} is required with --cert-manager-url"))),
    };
    // Both read at each connection: the kubelet refreshes them in place.
    let ca = read(&args.cert_manager_ca_file, "ca-file")?;
    let token = read(&args.cert_manager_token_file, "token-file")?;
    let bearer = format!("Bearer {}", token.trim())
        .parse()
        .map_err(|_| IssueError::Setup("the token file holds characters a header cannot".into()))?;
    let endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| IssueError::Setup(format!("--cert-manager-url {url}: {e}")))?
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
        .map_err(IssueError::Connect)?
        .connect_timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.map_err(IssueError::Connect)?;
    Ok((CertificatesClient::new(channel), bearer, url))
}

async fn issue_in_span(args: &TlsArgs, params: CertificateParams) -> Result<Issued, IssueError> {
    let (mut client, bearer, url) = connect(args).await?;
    let key = KeyPair::generate().map_err(IssueError::Key)?;
    let csr = params.serialize_request(&key).and_then(|csr| csr.pem()).map_err(IssueError::Key)?;
    let lifetime_seconds = u32::try_from(args.cert_lifetime.as_secs()).unwrap_or(u32::MAX);
    let mut request = tonic::Request::new(IssueRequest { csr_pem: csr, lifetime_seconds });
    request.set_timeout(Duration::from_secs(30));
    let mut headers = http::HeaderMap::new();
    portcullis_telemetry::inject_context(&mut headers);
    *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(headers);
    request.metadata_mut().insert("authorization", bearer);
    let response = client
        .issue(request)
        .await
        .map_err(|s| IssueError::Refused { code: s.code(), message: s.message().to_owned() })?
        .into_inner();
    let certified = certified_key(response.certificate_chain_pem.as_bytes(), key.serialize_pem().as_bytes(), &url)
        .map_err(IssueError::Certificate)?;
    let at = |unix: i64| UNIX_EPOCH + Duration::from_secs(u64::try_from(unix).unwrap_or_default());
    let bundle = response.trust_bundle.unwrap_or_default();
    Ok(Issued {
        key: certified,
        renew_after: at(response.renew_after_unix),
        not_after: at(response.not_after_unix),
        chain_pem: response.certificate_chain_pem,
        ca_bundle_pem: bundle.ca_bundle_pem,
        issuer_pem: bundle.issuer_pem,
    })
}

/// Sends the issuer of every trust bundle the cert-manager announces to
/// `issuer`, reconnecting with backoff, until `shutdown`.
async fn follow_issuer(args: TlsArgs, issuer: watch::Sender<String>, shutdown: CancellationToken) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let followed = async {
            let (mut client, bearer, _) = connect(&args).await?;
            let mut request = tonic::Request::new(WatchTrustBundleRequest {});
            request.metadata_mut().insert("authorization", bearer);
            let mut stream = client
                .watch_trust_bundle(request)
                .await
                .map_err(|s| IssueError::Refused { code: s.code(), message: s.message().to_owned() })?
                .into_inner();
            while let Some(bundle) = stream
                .message()
                .await
                .map_err(|s| IssueError::Refused { code: s.code(), message: s.message().to_owned() })?
            {
                backoff = Duration::from_secs(1);
                issuer.send_replace(bundle.issuer_pem);
            }
            Ok::<_, IssueError>(())
        };
        let ended = tokio::select! {
            ended = followed => ended,
            _ = shutdown.cancelled() => return,
        };
        if let Err(err) = ended {
            tracing::debug!(error = %error_chain(&err), "the trust bundle stream ended");
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

/// Keeps `resolver` supplied from the cert-manager until `shutdown`.
/// Renews at once when the cert-manager announces a new signing CA (a CA
/// rotation), and on SIGHUP.
pub fn spawn(args: TlsArgs, resolver: Arc<CertResolver>, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    let (issuer_updates, mut issuer) = watch::channel(String::new());
    tokio::spawn(follow_issuer(args.clone(), issuer_updates, shutdown.clone()));
    tokio::spawn(async move {
        let mut hangup = hangup();
        let mut backoff = Duration::from_secs(1);
        let mut signed_by = String::new();
        loop {
            let wait = match issue(&args).await {
                Ok(issued) => {
                    resolver.set(issued.key);
                    signed_by = issued.issuer_pem;
                    backoff = Duration::from_secs(1);
                    let remaining = issued.renew_after.duration_since(SystemTime::now()).unwrap_or_default();
                    let not_after = issued.not_after.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
                    tracing::info!(
                        not_after_unix = not_after,
                        renew_in_seconds = remaining.as_secs(),
                        "serving a certificate from the cert-manager"
                    );
                    jitter(remaining)
                }
                Err(err) => {
                    let serving = resolver.is_ready();
                    tracing::warn!(error = %error_chain(&err), retry_in_seconds = backoff.as_secs(), serving_previous = serving, "certificate request failed");
                    let wait = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    wait
                }
            };
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => break,
                    Some(()) = next_hangup(&mut hangup) => {
                        tracing::info!("SIGHUP: renewing the certificate now");
                        break;
                    }
                    Ok(()) = issuer.changed() => {
                        let announced = issuer.borrow_and_update().clone();
                        if !announced.is_empty() && !signed_by.is_empty() && announced != signed_by {
                            // Spread the replicas' renewals over a few seconds.
                            let spread = random_up_to(Duration::from_secs(5));
                            tracing::info!(in_ms = spread.as_millis() as u64, "the CA was rotated: renewing onto the new one");
                            tokio::time::sleep(spread).await;
                            break;
                        }
                    }
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    })
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = Option<()>;

#[cfg(unix)]
fn hangup() -> Hangup {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

#[cfg(not(unix))]
fn hangup() -> Hangup {
    None
}

/// The next SIGHUP; never, where there is none to wait for.
async fn next_hangup(hangup: &mut Hangup) -> Option<()> {
    #[cfg(unix)]
    if let Some(signal) = hangup {
        return signal.recv().await;
    }
    let _ = hangup;
    std::future::pending().await
}

/// `wait` less up to a tenth, so that replicas do not renew in lockstep.
fn jitter(wait: Duration) -> Duration {
    wait - random_up_to(wait / 10)
}

/// Somewhere between zero and `max`, differing between processes and moments.
fn random_up_to(max: Duration) -> Duration {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    max.mul_f64(f64::from(nanos % 1000) / 1000.0)
}
