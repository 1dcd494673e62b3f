//! A certificate chain and its private key, from PEM, checked to belong
//! together.

use std::sync::Arc;

use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a chain and key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The certificate PEM has no certificate or does not parse.
    #[error("no usable certificate in {0}")]
    Certificate(String, #[source] rustls_pki_types::pem::Error),
    /// The key PEM has no private key or does not parse.
    #[error("no usable private key in {0}")]
    Key(String, #[source] rustls_pki_types::pem::Error),
    /// The key is of an unsupported type, or does not match the certificate.
    #[error("certificate and key do not form a usable pair")]
    Pair(#[source] rustls::Error),
}

/// Builds a certified key from PEM bytes (chain leaf first), checking that
/// key and leaf match; `source` names where they came from in errors.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], source: &str) -> Result<Arc<CertifiedKey>, PemError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PemError::Certificate(source.to_owned(), e))?;
    if certs.is_empty() {
        return Err(PemError::Certificate(source.to_owned(), rustls_pki_types::pem::Error::NoItemsFound));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| PemError::Key(source.to_owned(), e))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(certs, key, &provider).map(Arc::new).map_err(PemError::Pair)
}
