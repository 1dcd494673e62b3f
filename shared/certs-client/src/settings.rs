//! Where the cert-manager is and what to ask it for.

use std::path::PathBuf;
use std::time::Duration;

/// Where the cert-manager is, how to trust and authenticate to it, and
/// what to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `https://host:port`.
    pub url: String,
    /// The CA certificates (PEM) to trust for the cert-manager's own
    /// certificate; read at each connection, so a rotation reaches it
    /// through the mounted ConfigMap.
    pub ca_file: PathBuf,
    /// The bearer token (a projected ServiceAccount token); read at each
    /// connection, as the kubelet refreshes it in place.
    pub token_file: PathBuf,
    /// DNS names and IP addresses to request.
    pub names: Vec<String>,
    /// Subject common name (none: the cert-manager uses the first DNS name).
    pub common_name: Option<String>,
    /// Subject organizations.
    pub organizations: Vec<String>,
    /// Requested lifetime (zero: the cert-manager's default).
    pub lifetime: Duration,
}

impl Settings {
    /// A request for `names` with no subject and the default lifetime.
    pub fn new(url: String, ca_file: PathBuf, token_file: PathBuf, names: &[&str]) -> Self {
        Self {
            url,
            ca_file,
            token_file,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            common_name: None,
            organizations: Vec::new(),
            lifetime: Duration::ZERO,
        }
    }
}
