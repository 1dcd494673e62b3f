//! The Portcullis cert-manager: webhooks send it a PKCS#10 request made
//! with their own key (which never leaves them) and get back a serving
//! certificate, the trust bundle and when to renew.
//!
//! Before anything is signed the caller is authenticated and the request
//! checked ([`checks`]): names the caller may have ([`config`]), server
//! authentication only, no CA, an accepted key, a capped lifetime. The
//! gRPC edge ([`grpc`]) maps refusals to precise status codes. Standalone,
//! the CA lives in a directory; in Kubernetes mode ([`kubernetes`]) callers
//! are checked with TokenReview, requests become CertificateSigningRequests,
//! the CA lives in a Secret, and the leader (a Lease, `portcullis-lease`) signs and keeps
//! webhook configurations' caBundles current ([`ca_bundle`]). The CA is
//! rotated in steps that never leave a live certificate untrusted
//! ([`authority`]), kept in a [`store`] and followed by every replica
//! ([`keeper`]). [`request`] sends one request by hand, as a webhook would.

#![forbid(unsafe_code)]

pub mod authority;
pub mod ca;
pub mod ca_bundle;
pub mod checks;
pub mod cli;
pub mod config;
pub mod grpc;
pub mod keeper;
pub mod kubernetes;
pub mod request;
pub mod serve;
pub mod store;
