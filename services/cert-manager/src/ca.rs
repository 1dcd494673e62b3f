//! The signing CA of standalone mode: a key and certificate in a directory,
//! made on first start.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::checks::Approved;

/// Why the CA could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The key or certificate is unusable.
    #[error("CA in {dir}: {source}")]
    Crypto {
        /// The directory.
        dir: PathBuf,
        /// What rcgen said.
        #[source]
        source: rcgen::Error,
    },
    /// Signing failed.
    #[error("signing failed: {0}")]
    Sign(#[source] rcgen::Error),
}

/// A CA that signs approved requests.
pub struct LocalCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for LocalCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCa").finish_non_exhaustive()
    }
}

impl LocalCa {
    /// Loads `dir/ca.crt` and `dir/ca.key`, or makes them (key mode 0600)
    /// when neither exists. Two processes starting at once cannot both
    /// make one: the key file is created exclusively, and the loser loads
    /// the winner's.
    pub fn load_or_create(dir: &Path) -> Result<Self, CaError> {
        let (cert_path, key_path) = (dir.join("ca.crt"), dir.join("ca.key"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CaError::Io { path, source }
        };
        if !key_path.exists() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
            let (cert, key) = Self::generate()?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&key_path) {
                Ok(mut file) => {
                    // Certificate first: a reader that sees the key also sees it.
                    std::fs::write(&cert_path, &cert).map_err(io(&cert_path))?;
                    file.write_all(key.as_bytes()).map_err(io(&key_path))?;
                    tracing::info!(dir = %dir.display(), "made a new CA");
                    return Self::from_pem(&cert, &key);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&key_path)(e)),
            }
        }
        let key = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
        let cert = std::fs::read_to_string(&cert_path).map_err(io(&cert_path))?;
        Self::from_pem(&cert, &key)
    }

    /// A new CA valid for five years: (certificate PEM, key PEM).
    pub fn generate() -> Result<(String, String), CaError> {
        let key = KeyPair::generate().map_err(CaError::Sign)?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, "portcullis webhook CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::days(5 * 365);
        let cert = params.self_signed(&key).map_err(CaError::Sign)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The CA of `cert` and `key` (PEM).
    pub fn from_pem(cert: &str, key: &str) -> Result<Self, CaError> {
        let crypto = |source| CaError::Crypto { dir: PathBuf::from("(PEM)"), source };
        let key = KeyPair::from_pem(key).map_err(crypto)?;
        let issuer = Issuer::from_ca_cert_pem(cert, key).map_err(crypto)?;
        Ok(Self { cert_pem: cert.to_owned(), issuer })
    }

    /// Signs a CertificateSigningRequest object's request as its signer:
    /// server-auth leaf certificates only, for the names it asks for (the
    /// cert-manager checked them before approving), for
    /// `expiration_seconds` (default 24 h, at least 600 s). Returns the
    /// certificate PEM, or why it will not sign.
    pub fn sign_csr(&self, request: &[u8], expiration_seconds: Option<i32>) -> Result<String, String> {
        use rcgen::{CertificateSigningRequestParams, ExtendedKeyUsagePurpose};
        let pem = std::str::from_utf8(request).map_err(|_| "the request is not PEM".to_owned())?;
        let csr = CertificateSigningRequestParams::from_pem(pem).map_err(|e| format!("unusable request: {e}"))?;
        if !matches!(csr.params.is_ca, IsCa::NoCa | IsCa::ExplicitNoCa) {
            return Err("the request asks for CA:true".into());
        }
        if csr.params.extended_key_usages.iter().any(|u| *u != ExtendedKeyUsagePurpose::ServerAuth) {
            return Err("the request asks for a usage other than server auth".into());
        }
        let seconds = i64::from(expiration_seconds.unwrap_or(86_400).max(600));
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
        params.signed_by(&csr.public_key, &self.issuer).map(|c| c.pem()).map_err(|e| format!("signing failed: {e}"))
    }

    /// The CA certificate's notAfter, Unix seconds.
    pub fn not_after(&self) -> Option<i64> {
        not_after(&self.cert_pem)
    }

    /// The CA certificate (the trust bundle), PEM.
    pub fn bundle_pem(&self) -> &str {
        &self.cert_pem
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

/// The notAfter of the first certificate in `pem`, Unix seconds.
pub fn not_after(pem: &str) -> Option<i64> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}
