//! `CertManagerConfig`: who may get a certificate for which names, and for
//! how long.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use portcullis_admission::documents::{self, DocumentError};
use serde::Deserialize;

const KIND: &str = "CertManagerConfig";

/// The shortest lifetime the Kubernetes CSR API accepts (`expirationSeconds`).
pub const MIN_LIFETIME: Duration = Duration::from_secs(600);

/// The issuance rules.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Lifetime when a request asks for none, in seconds (default 24h).
    #[serde(default = "default_lifetime")]
    pub default_lifetime_seconds: u64,
    /// Longest lifetime granted, in seconds (default 7 days).
    #[serde(default = "max_lifetime")]
    pub max_lifetime_seconds: u64,
    /// The callers, and the names each may have.
    pub clients: Vec<Client>,
}

fn default_lifetime() -> u64 {
    24 * 3600
}

fn max_lifetime() -> u64 {
    7 * 24 * 3600
}

/// One caller.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Client {
    /// The identity: `namespace/serviceaccount` in Kubernetes mode, any name
    /// in standalone mode.
    pub identity: String,
    /// Standalone mode: the file holding this caller's bearer token.
    pub token_file: Option<PathBuf>,
    /// DNS names the caller may have in its certificate.
    #[serde(default)]
    pub dns_names: Vec<String>,
    /// IP addresses the caller may have in its certificate.
    #[serde(default)]
    pub ip_addresses: Vec<IpAddr>,
    /// What the certificate's subject may say besides a DNS name as common
    /// name: for signers that need a particular subject, such as
    /// `kubernetes.io/kubelet-serving` (`system:node:<name>`, organization
    /// `system:nodes`).
    #[serde(default)]
    pub subject: Subject,
}

/// A subject a caller may have.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subject {
    /// A common name the caller may have.
    pub common_name: Option<String>,
    /// Organizations the caller may have.
    #[serde(default)]
    pub organizations: Vec<String>,
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A document does not parse or is not valid.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// The configuration as a whole is unusable.
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Parses exactly one `CertManagerConfig` document from `sources`.
    pub fn from_sources<'a>(sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>) -> Result<Self, ConfigError> {
        let mut docs = documents::parse::<Config>(sources, KIND)?;
        if docs.len() != 1 {
            return Err(ConfigError::Invalid(format!("expected one {KIND} document, found {}", docs.len())));
        }
        let (origin, doc) = docs.remove(0);
        let config = doc.spec;
        let invalid = |m: String| ConfigError::Document(origin.invalid(m));
        if config.max_lifetime_seconds < MIN_LIFETIME.as_secs() {
            return Err(invalid(format!("maxLifetimeSeconds must be at least {}", MIN_LIFETIME.as_secs())));
        }
        if config.default_lifetime_seconds > config.max_lifetime_seconds
            || config.default_lifetime_seconds < MIN_LIFETIME.as_secs()
        {
            return Err(invalid("defaultLifetimeSeconds must be between 600 and maxLifetimeSeconds".into()));
        }
        for client in &config.clients {
            if client.dns_names.is_empty() && client.ip_addresses.is_empty() {
                return Err(invalid(format!("client {}: no dnsNames or ipAddresses", client.identity)));
            }
        }
        Ok(config)
    }

    /// The lifetimes a grant may have.
    pub fn lifetimes(&self) -> crate::issuer::Lifetimes {
        crate::issuer::Lifetimes {
            default: Duration::from_secs(self.default_lifetime_seconds),
            max: Duration::from_secs(self.max_lifetime_seconds),
        }
    }

    /// The client with `identity`.
    pub fn client(&self, identity: &str) -> Option<&Client> {
        self.clients.iter().find(|c| c.identity == identity)
    }
}
