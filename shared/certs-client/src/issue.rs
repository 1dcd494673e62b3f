//! One certificate: a key made here, a CSR over gRPC, the chain back.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portcullis_proto::certs::v1::IssueRequest;
use portcullis_proto::certs::v1::certificates_client::CertificatesClient;
use rcgen::{CertificateParams, KeyPair};
use rustls::sign::CertifiedKey;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::Settings;
use crate::pem::{PemError, certified_key};

/// Why one issuance failed.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The CA or token file could not be read.
    #[error("cannot read the cert-manager {what} {}", path.display())]
    Read {
        /// `CA file` or `token file`.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// The token holds characters an HTTP header cannot.
    #[error("the token file {} holds characters a header cannot", .0.display())]
    Token(std::path::PathBuf),
    /// The URL is not one.
    #[error("the cert-manager URL {0:?} is not usable")]
    Url(String, #[source] tonic::transport::Error),
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
    Certificate(#[source] PemError),
}

impl From<tonic::Status> for IssueError {
    fn from(status: tonic::Status) -> Self {
        Self::Refused { code: status.code(), message: status.message().to_owned() }
    }
}

/// One certificate: the key to serve and when to renew it.
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

/// Requests one certificate for `settings.names`, as a client span whose
/// context travels to the cert-manager in the gRPC metadata.
pub async fn issue(settings: &Settings) -> Result<Issued, IssueError> {
    issue_for(settings, request_params(settings)?).await
}

/// What the webhooks ask for: `settings.names`, and a subject only when
/// `common_name`/`organizations` say so.
pub fn request_params(settings: &Settings) -> Result<CertificateParams, IssueError> {
    let mut params = CertificateParams::new(settings.names.clone()).map_err(IssueError::Key)?;
    // No placeholder subject: only what was asked for.
    params.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(name) = &settings.common_name {
        params.distinguished_name.push(rcgen::DnType::CommonName, name.as_str());
    }
    for organization in &settings.organizations {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, organization.as_str());
    }
    Ok(params)
}

/// Requests one certificate for `params`, with a key made here.
pub async fn issue_for(settings: &Settings, params: CertificateParams) -> Result<Issued, IssueError> {
    use tracing::Instrument as _;
    let span = tracing::info_span!("request certificate", otel.kind = "client", names = ?settings.names);
    issue_in_span(settings, params).instrument(span).await
}

/// A connected client and the bearer token to send.
pub(crate) async fn connect(
    settings: &Settings,
) -> Result<(CertificatesClient<Channel>, MetadataValue<Ascii>), IssueError> {
    let read = |path: &std::path::Path, what| {
        std::fs::read_to_string(path).map_err(|error| IssueError::Read { what, path: path.to_owned(), error })
    };
    // Both read at each connection: the kubelet refreshes them in place.
    let ca = read(&settings.ca_file, "CA file")?;
    let token = read(&settings.token_file, "token file")?;
    let bearer =
        format!("Bearer {}", token.trim()).parse().map_err(|_| IssueError::Token(settings.token_file.clone()))?;
    let endpoint = Endpoint::from_shared(settings.url.clone())
        .map_err(|e| IssueError::Url(settings.url.clone(), e))?
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
        .map_err(IssueError::Connect)?
        .connect_timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.map_err(IssueError::Connect)?;
    Ok((CertificatesClient::new(channel), bearer))
}

async fn issue_in_span(settings: &Settings, params: CertificateParams) -> Result<Issued, IssueError> {
    let (mut client, bearer) = connect(settings).await?;
    let key = KeyPair::generate().map_err(IssueError::Key)?;
    let csr = params.serialize_request(&key).and_then(|csr| csr.pem()).map_err(IssueError::Key)?;
    let lifetime_seconds = u32::try_from(settings.lifetime.as_secs()).unwrap_or(u32::MAX);
    let mut request = tonic::Request::new(IssueRequest { csr_pem: csr, lifetime_seconds });
    request.set_timeout(Duration::from_secs(30));
    let mut headers = http::HeaderMap::new();
    portcullis_telemetry::inject_context(&mut headers);
    *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(headers);
    request.metadata_mut().insert("authorization", bearer);
    let response = client.issue(request).await?.into_inner();
    let certified =
        certified_key(response.certificate_chain_pem.as_bytes(), key.serialize_pem().as_bytes(), &settings.url)
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
