//! Serving certificates: a resolver that can be swapped while serving, fed
//! from PEM files (reloaded on change) or a self-signed certificate.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use crate::args::TlsArgs;
use crate::watch;

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate PEM has no certificate or does not parse.
    #[error("no usable certificate in {0}")]
    Certificate(String, #[source] rustls_pki_types::pem::Error),
    /// The key PEM has no private key or does not parse.
    #[error("no usable private key in {0}")]
    Key(String, #[source] rustls_pki_types::pem::Error),
    /// The key is of an unsupported type, or does not match the certificate.
    #[error("certificate and key do not form a usable pair")]
    Pair(#[source] rustls::Error),
    /// A self-signed certificate could not be made.
    #[error("cannot make a self-signed certificate")]
    SelfSigned(#[source] rcgen::Error),
    /// The certificate files could not be read.
    #[error("cannot read certificate files")]
    Io(#[source] std::io::Error),
}

/// Resolves every TLS handshake to the current certificate. Swapping it with
/// [`CertResolver::set`] affects new handshakes only; established
/// connections keep theirs, so nothing is dropped.
#[derive(Debug, Default)]
pub struct CertResolver {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    expiry: prometheus_client::metrics::gauge::Gauge,
}

impl CertResolver {
    /// A resolver that reports each certificate's notAfter to `expiry`.
    pub fn with_expiry_gauge(expiry: prometheus_client::metrics::gauge::Gauge) -> Self {
        Self { current: RwLock::default(), expiry }
    }

    /// Replaces the certificate served from now on.
    pub fn set(&self, key: Arc<CertifiedKey>) {
        if let Some(leaf) = key.cert.first()
            && let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf)
        {
            self.expiry.set(cert.validity().not_after.timestamp());
        }
        if let Ok(mut current) = self.current.write() {
            *current = Some(key);
        }
    }

    /// The certificate served now, if any.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok()?.clone()
    }

    /// Whether a certificate is in hand (the server is ready to serve TLS).
    pub fn is_ready(&self) -> bool {
        self.current.read().is_ok_and(|c| c.is_some())
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// A rustls server configuration (TLS 1.2 and 1.3, ring, ALPN `alpn`, say
/// `http/1.1` or `h2`) that takes its certificate from `resolver`.
pub fn server_config(resolver: Arc<CertResolver>, alpn: &[u8]) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map(|b| b.with_no_client_auth().with_cert_resolver(resolver))
        // ring supports both versions; this branch cannot be taken, but if
        // it were, the safe defaults are the right fallback.
        .unwrap_or_else(|_| {
            rustls::ServerConfig::builder().with_no_client_auth().with_cert_resolver(Arc::new(CertResolver::default()))
        });
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

/// Builds a certified key from PEM bytes, checking that key and leaf match.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], source: &str) -> Result<Arc<CertifiedKey>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificate(source.to_owned(), e))?;
    if certs.is_empty() {
        return Err(TlsError::Certificate(source.to_owned(), rustls_pki_types::pem::Error::NoItemsFound));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Key(source.to_owned(), e))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(certs, key, &provider).map(Arc::new).map_err(TlsError::Pair)
}

/// Starts serving from the configured source: the certificate files
/// (watched, and swapped in when both change to a valid pair) or, without
/// files, a self-signed certificate whose CA is written to disk.
pub fn resolver_from_args(
    args: &TlsArgs,
    service: &str,
    expiry: prometheus_client::metrics::gauge::Gauge,
    shutdown: CancellationToken,
) -> Result<Arc<CertResolver>, TlsError> {
    let resolver = Arc::new(CertResolver::with_expiry_gauge(expiry));
    if let Some(url) = &args.cert_manager_url {
        tracing::info!(%url, names = ?args.cert_names, "getting the serving certificate from the cert-manager; not ready until it arrives");
        crate::cert_manager::spawn(args.clone(), resolver.clone(), shutdown);
        return Ok(resolver);
    }
    match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => {
            let paths = vec![cert.clone(), key.clone()];
            let contents = watch::read_all(&paths).map_err(TlsError::Io)?;
            resolver.set(certified_key(&contents[0].1, &contents[1].1, &cert.display().to_string())?);
            tracing::info!(cert = %cert.display(), "serving the certificate from files; reloaded on change");
            let target = resolver.clone();
            let source = cert.display().to_string();
            watch::spawn_poll("tls certificate", paths, args.tls_reload_interval, contents, shutdown, move |c| {
                match certified_key(&c[0].1, &c[1].1, &source) {
                    Ok(key) => {
                        target.set(key);
                        tracing::info!(cert = %source, "serving certificate reloaded");
                    }
                    // Mid-update (new cert, old key) or broken files: keep
                    // the old pair; the next change is picked up.
                    Err(err) => {
                        tracing::error!(cert = %source, error = %error_chain(&err), "new certificate refused; still serving the previous one")
                    }
                }
            });
        }
        _ => {
            let ca_file = args.self_signed_ca_file.clone().unwrap_or_else(|| default_ca_file(service));
            let (key, ca_pem) = self_signed(&args.self_signed_sans)?;
            resolver.set(key);
            write_ca(&ca_file, &ca_pem);
        }
    }
    Ok(resolver)
}

fn write_ca(path: &Path, pem: &str) {
    match std::fs::write(path, pem) {
        Ok(()) => tracing::warn!(
            ca_file = %path.display(),
            "no certificate configured: serving a self-signed certificate for localhost and 127.0.0.1; \
             its CA is in the ca_file (use it as the webhook caBundle)"
        ),
        Err(err) => tracing::warn!(
            ca_file = %path.display(), error = %err,
            "no certificate configured: serving a self-signed certificate, but its CA could not be written"
        ),
    }
}

/// Makes a throwaway CA and a leaf for `localhost`, `127.0.0.1`, `::1` and
/// `extra_sans`. Returns the leaf (chain: leaf, CA) and the CA's PEM.
pub fn self_signed(extra_sans: &[String]) -> Result<(Arc<CertifiedKey>, String), TlsError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().map_err(TlsError::SelfSigned)?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name.push(DnType::CommonName, "portcullis self-signed CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca_params.self_signed(&ca_key).map_err(TlsError::SelfSigned)?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    names.extend(extra_sans.iter().cloned());
    let mut leaf_params = CertificateParams::new(names).map_err(TlsError::SelfSigned)?;
    leaf_params.distinguished_name.push(DnType::CommonName, "portcullis webhook");
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().map_err(TlsError::SelfSigned)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(TlsError::SelfSigned)?;

    let chain = format!("{}{}", leaf.pem(), ca_cert.pem());
    let key = certified_key(chain.as_bytes(), leaf_key.serialize_pem().as_bytes(), "self-signed")?;
    Ok((key, ca_cert.pem()))
}

/// `err` and its sources, `: `-separated, for one log line.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Where the self-signed CA is written when `--self-signed-ca-file` is not given.
pub fn default_ca_file(service: &str) -> PathBuf {
    std::env::temp_dir().join(format!("portcullis-{service}-ca.crt"))
}
