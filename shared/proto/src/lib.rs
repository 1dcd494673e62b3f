//! Generated code for the Portcullis gRPC APIs (`proto/`), and nothing else:
//! the cert-manager serves `certs::v1::certificates_server`, the webhooks'
//! certificate source uses `certs::v1::certificates_client`.

#![forbid(unsafe_code)]
#![allow(missing_docs, missing_debug_implementations, clippy::all)]

/// `portcullis.certs.*`
pub mod certs {
    /// `portcullis.certs.v1`
    pub mod v1 {
        tonic::include_proto!("portcullis.certs.v1");
    }
}
