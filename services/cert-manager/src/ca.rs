//! One signing CA: a key and its self-signed certificate, signing leaf
//! certificates (approved requests, Kubernetes CSRs, the cert-manager's own).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::checks::Approved;

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

/// Why the CA did not sign a CertificateSigningRequest's request.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Not text.
    #[error("the request is not PEM")]
    NotPem,
    /// Not a PKCS#10 request rcgen can read.
    #[error("unusable request")]
    Unusable(#[source] rcgen::Error),
    /// Asks for a CA certificate.
    #[error("the request asks for CA:true")]
    Ca,
    /// Asks for client auth or another usage.
    #[error("the request asks for a usage other than server auth")]
    Usage,
    /// The CA could not sign it.
    #[error(transparent)]
    Signing(CaError),
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

    /// Signs a CertificateSigningRequest object's request as its signer:
    /// server-auth leaf certificates only, for the names it asks for (the
    /// cert-manager checked them before approving), for
    /// `expiration_seconds` (default 24 h, at least 600 s, at most
    /// `max_seconds`: a CA rotation relies on no leaf outliving that).
    /// Returns the certificate PEM, or why it will not sign.
    pub fn sign_csr(
        &self,
        request: &[u8],
        expiration_seconds: Option<i32>,
        max_seconds: u64,
    ) -> Result<String, Refusal> {
        use rcgen::{CertificateSigningRequestParams, ExtendedKeyUsagePurpose};
        let pem = std::str::from_utf8(request).map_err(|_| Refusal::NotPem)?;
        let csr = CertificateSigningRequestParams::from_pem(pem).map_err(Refusal::Unusable)?;
        if !matches!(csr.params.is_ca, IsCa::NoCa | IsCa::ExplicitNoCa) {
            return Err(Refusal::Ca);
        }
        if csr.params.extended_key_usages.iter().any(|u| *u != ExtendedKeyUsagePurpose::ServerAuth) {
            return Err(Refusal::Usage);
        }
        let max = i64::try_from(max_seconds).unwrap_or(i64::MAX);
        let seconds = i64::from(expiration_seconds.unwrap_or(86_400).max(600)).min(max);
        let mut params = CertificateParams::default();
        params.subject_alt_names = csr.params.subject_alt_names;
        params.distinguished_name = csr.params.distinguished_name;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::seconds(seconds);
        params.signed_by(&csr.public_key, &self.issuer).map(|c| c.pem()).map_err(|e| Refusal::Signing(CaError::Sign(e)))
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

    /// Signs `approved`; returns the leaf certificate, PEM.
    pub fn sign(&self, approved: &Approved) -> Result<String, CaError> {
        let cert = approved.params.signed_by(&approved.public_key, &self.issuer).map_err(CaError::Sign)?;
        Ok(cert.pem())
    }
}

/// The (notBefore, notAfter) of the first certificate in `pem`, Unix seconds.
pub fn validity(pem: &str) -> Option<(i64, i64)> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some((cert.validity().not_before.timestamp(), cert.validity().not_after.timestamp()))
}
