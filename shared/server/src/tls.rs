//! Serving certificates: a resolver that can be swapped while serving, and
//! the rustls server configuration. Where the certificate comes from is
//! [`crate::certificates`]; a chain and key become a served key through
//! [`portcullis_certs_client::certified_key`].

use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use portcullis_certs_client::PemError;

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The chain or key does not parse, or they do not belong together.
    #[error(transparent)]
    Pem(#[from] PemError),
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
