//! One signing CA: a key and its self-signed certificate, signing leaf
//! certificates (grants, in either mode, and the cert-manager's own).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::issuer::Grant;

/// Why the CA could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The key or certificate is unusable.
    #[error("the CA key or certificate is unusable")]
    Crypto(#[source] rcgen::Error),
    /// Signing failed.
    #[error("signing failed")]
    Sign(#[source] rcgen::Error),
    /// The stored state of the CAs is unusable.
    #[error("the stored CA state is unusable: {0}")]
    State(String),
}

/// A CA that signs approved requests.
pub struct LocalCa {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for LocalCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCa").finish_non_exhaustive()
    }
}

impl LocalCa {
    /// A new CA valid for `lifetime`: (certificate PEM, key PEM). Its name
    /// carries the time it was made, so that CAs of successive rotations
    /// can be told apart in a bundle.
    pub fn generate(lifetime: std::time::Duration) -> Result<(String, String), CaError> {
        let key = KeyPair::generate().map_err(CaError::Sign)?;
        let mut params = CertificateParams::default();
        let now = time::OffsetDateTime::now_utc();
        params.distinguished_name.push(DnType::CommonName, format!("portcullis webhook CA {}", now.unix_timestamp()));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + lifetime;
        let cert = params.self_signed(&key).map_err(CaError::Sign)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The CA of `cert` and `key` (PEM).
    pub fn from_pem(cert: &str, key: &str) -> Result<Self, CaError> {
        let pair = KeyPair::from_pem(key).map_err(CaError::Crypto)?;
        let issuer = Issuer::from_ca_cert_pem(cert, pair).map_err(CaError::Crypto)?;
        Ok(Self { cert_pem: cert.to_owned(), key_pem: key.to_owned(), issuer })
    }

    /// The CA certificate's notAfter, Unix seconds.
    pub fn not_after(&self) -> Option<i64> {
        validity(&self.cert_pem).map(|(_, not_after)| not_after)
    }

    /// The CA certificate, PEM.
    pub fn bundle_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA key, PEM, for the state store only.
    pub fn key_pem(&self) -> String {
        self.key_pem.clone()
    }

    /// A serving certificate for the cert-manager itself, for `names`, valid
    /// for `days`: (certificate PEM, key PEM). The key is made here and
    /// stays in this process.
    pub fn own_certificate(&self, names: &[String], days: i64) -> Result<(String, String), CaError> {
        let key = KeyPair::generate().map_err(CaError::Sign)?;
        let mut params = CertificateParams::new(names.to_vec()).map_err(CaError::Sign)?;
        params.distinguished_name.push(DnType::CommonName, "portcullis cert-manager");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::days(days);
        let cert = params.signed_by(&key, &self.issuer).map_err(CaError::Sign)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Signs `grant` as the profile builds it; returns the leaf
    /// certificate, PEM.
    pub fn sign(&self, grant: &Grant) -> Result<String, CaError> {
        let params = crate::issuer::profile::leaf(grant, time::OffsetDateTime::now_utc());
        let cert = params.signed_by(&grant.public_key, &self.issuer).map_err(CaError::Sign)?;
        Ok(cert.pem())
    }
}

/// The (notBefore, notAfter) of the first certificate in `pem`, Unix seconds.
pub fn validity(pem: &str) -> Option<(i64, i64)> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some((cert.validity().not_before.timestamp(), cert.validity().not_after.timestamp()))
}
