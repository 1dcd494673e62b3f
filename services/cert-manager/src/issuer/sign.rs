//! Who signs a [`Grant`]: the CA in hand ([`LocalSigner`], standalone), or
//! the Kubernetes CSR flow (`crate::kubernetes::csr`), whose signer builds
//! the certificate from the same kind of grant.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;

use super::Grant;
use crate::authority::Authority;

/// Why a grant was not signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The signer refused it: asking again will not change that.
    #[error("the signer refused the request: {0}")]
    Refused(String),
    /// The signer could not be reached or failed.
    #[error("the certificate could not be signed")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Signs grants: returns the leaf certificate, PEM.
pub trait Signer: Send + Sync {
    /// Signs `grant`.
    fn sign<'a>(&'a self, grant: &'a Grant) -> BoxFuture<'a, Result<String, SignError>>;
}

/// Signs with the active CA of the authority in hand (followed through
/// rotations).
#[derive(Debug)]
pub struct LocalSigner {
    authority: watch::Receiver<Arc<Authority>>,
}

impl LocalSigner {
    /// A signer following `authority`.
    pub fn new(authority: watch::Receiver<Arc<Authority>>) -> Self {
        Self { authority }
    }
}

impl Signer for LocalSigner {
    fn sign<'a>(&'a self, grant: &'a Grant) -> BoxFuture<'a, Result<String, SignError>> {
        let ca = self.authority.borrow().active.clone();
        Box::pin(std::future::ready(ca.sign(grant).map_err(|e| SignError::Unavailable(e.into()))))
    }
}
