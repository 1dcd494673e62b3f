//! Kubernetes mode, each part in its own module: callers authenticated with
//! TokenReview ([`token_review`]), grants turned into
//! CertificateSigningRequests that the cert-manager approves and waits on
//! ([`csr`]), the signer of its own signer name as a kube-runtime
//! controller ([`signer`]), and the published CA bundle ([`publish`]).
//! The decisions are the issuer core's ([`crate::issuer`]); these modules
//! only talk to the API server.

pub mod csr;
pub mod publish;
pub mod signer;
pub mod token_review;

use k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition;

/// What can go wrong talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// An API call failed.
    #[error("{what}")]
    Api {
        /// Which call.
        what: &'static str,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The CSR was denied, or its signer marked it failed.
    #[error("CertificateSigningRequest {name} was refused: {reason}")]
    Refused {
        /// The CSR object's name.
        name: String,
        /// The condition, its reason and message.
        reason: String,
    },
    /// Waiting for the CSR's result failed.
    #[error("watching CertificateSigningRequest {name}")]
    Watch {
        /// The CSR object's name.
        name: String,
        /// Why.
        #[source]
        source: kube::runtime::wait::Error,
    },
    /// The CSR was not signed in time, or the result is unusable.
    #[error("CertificateSigningRequest {name}: {reason}")]
    Csr {
        /// The CSR object's name.
        name: String,
        /// What happened.
        reason: String,
    },
}

fn api_err(what: &'static str) -> impl FnOnce(kube::Error) -> KubeError {
    move |source| KubeError::Api { what, source }
}

/// A Denied or Failed condition: the CSR will never get a certificate.
fn refusal(condition: &CertificateSigningRequestCondition) -> bool {
    condition.type_ == "Denied" || condition.type_ == "Failed"
}
