//! The issuer's core, with no gRPC and no Kubernetes in it: authenticate
//! (a token becomes an identity, [`Authenticator`]), check (identity and
//! request become a [`Grant`] or a [`Refusal`]), sign (through a
//! [`Signer`]: the CA in hand, or the Kubernetes CSR flow). The gRPC edge
//! maps requests and results; the Kubernetes modules implement the
//! traits. Every leaf certificate is built by [`profile::leaf`].

mod auth;
mod grant;
pub mod profile;
mod refusal;
mod sign;

use std::time::Duration;

pub use auth::{AuthError, Authenticator, TokenFiles};
pub use grant::{Grant, KeyKind, Lifetimes, Usage, check, check_approved};
pub use refusal::Refusal;
pub use sign::{LocalSigner, SignError, Signer};

use crate::config::Config;

/// Why no certificate was issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The token does not prove an identity.
    #[error(transparent)]
    Unauthenticated(AuthError),
    /// The identity is not a client.
    #[error("{0} is not a client of this cert-manager (see its CertManagerConfig)")]
    UnknownClient(String),
    /// The request asks for something not granted.
    #[error(transparent)]
    Refused(Refusal),
    /// The grant was not signed.
    #[error(transparent)]
    Signer(SignError),
    /// The signer returned something that is not a certificate.
    #[error("the signer returned something that is not a certificate")]
    NotACertificate,
}

impl IssueError {
    /// A bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unauthenticated(_) => "unauthenticated",
            Self::UnknownClient(_) => "unknown_client",
            Self::Refused(refusal) => refusal.reason(),
            Self::Signer(_) | Self::NotACertificate => "signer",
        }
    }
}

/// An issued certificate.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The leaf certificate, PEM.
    pub chain_pem: String,
    /// Its notAfter, Unix seconds.
    pub not_after: i64,
    /// When to renew (two thirds of its life), Unix seconds.
    pub renew_after: i64,
    /// The granted lifetime.
    pub lifetime: Duration,
}

/// Authenticates, checks and signs under one configuration.
pub struct Issuer {
    config: Config,
    authenticator: Box<dyn Authenticator>,
    signer: Box<dyn Signer>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").finish_non_exhaustive()
    }
}

impl Issuer {
    /// An issuer for `config`'s clients.
    pub fn new(config: Config, authenticator: Box<dyn Authenticator>, signer: Box<dyn Signer>) -> Self {
        Self { config, authenticator, signer }
    }

    /// The identity `token` proves.
    pub async fn authenticate(&self, token: &str) -> Result<String, IssueError> {
        self.authenticator.authenticate(token).await.map_err(IssueError::Unauthenticated)
    }

    /// Checks `csr_pem` from `identity` for `lifetime_seconds` (0: the
    /// default) and signs it.
    pub async fn issue(&self, identity: &str, csr_pem: &str, lifetime_seconds: u32) -> Result<Issued, IssueError> {
        let client = self.config.client(identity).ok_or_else(|| IssueError::UnknownClient(identity.to_owned()))?;
        let grant = check(csr_pem, client, lifetime_seconds, &self.config.lifetimes()).map_err(IssueError::Refused)?;
        let chain_pem = self.signer.sign(&grant).await.map_err(IssueError::Signer)?;
        // The signer has the last word on the lifetime: read it from the
        // certificate, not from what was granted.
        let (not_before, not_after) = crate::ca::validity(&chain_pem).ok_or(IssueError::NotACertificate)?;
        let renew_after = not_before + (not_after - not_before) * 2 / 3;
        Ok(Issued { chain_pem, not_after, renew_after, lifetime: grant.lifetime })
    }
}
