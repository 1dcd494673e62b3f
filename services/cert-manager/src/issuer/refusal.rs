//! Why a request is not signed: one type for every place that decides it
//! (the check of a caller's request, the signer's check of a
//! CertificateSigningRequest), so that both say the same thing.

/// Why a request was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// Not a PKCS#10 request, or its signature does not verify.
    #[error("the certificate request is not a valid, self-signed PKCS#10 request ({0})")]
    Malformed(String),
    /// The request asks to be a CA.
    #[error("the certificate request asks for CA:true; only leaf certificates are issued")]
    Ca,
    /// The request asks for a usage other than server authentication.
    #[error("the certificate request asks for {0} usage; only server authentication is granted")]
    Usage(String),
    /// The key type is not accepted.
    #[error("the key type {0} is not accepted; use ECDSA P-256 or P-384, Ed25519, or RSA of at least 2048 bits")]
    Key(String),
    /// A subject attribute the caller may not have.
    #[error("{identity} may not have {attribute} in its subject (see subject in its CertManagerConfig client)")]
    Subject {
        /// The caller.
        identity: String,
        /// The attribute it asked for.
        attribute: String,
    },
    /// No DNS name or IP address.
    #[error("the certificate request names no DNS name or IP address")]
    NoNames,
    /// A name the caller may not have.
    #[error("{identity} may not have the name {name} (it may have: {allowed})")]
    Name {
        /// The caller.
        identity: String,
        /// The name it asked for.
        name: String,
        /// What it may have.
        allowed: String,
    },
}

impl Refusal {
    /// A bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::Ca => "ca",
            Self::Usage(_) => "usage",
            Self::Key(_) => "key",
            Self::NoNames => "no_names",
            Self::Name { .. } => "name_not_allowed",
            Self::Subject { .. } => "subject_not_allowed",
        }
    }

    /// Whether the caller asked for something it is not allowed (as opposed
    /// to sending an unusable request).
    pub fn is_permission(&self) -> bool {
        matches!(self, Self::Name { .. } | Self::Subject { .. })
    }
}
