//! The Portcullis cert-manager: webhooks send it a PKCS#10 request made
//! with their own key (which never leaves them) and get back a serving
//! certificate, the trust bundle and when to renew.
//!
//! Before anything is signed the caller is authenticated and the request
//! checked ([`checks`]): names the caller may have ([`config`]), server
//! authentication only, no CA, an accepted key, a capped lifetime. The
//! gRPC edge ([`grpc`]) maps refusals to precise status codes. This crate
//! now runs standalone, with a CA in a directory ([`ca`]); the Kubernetes
//! mode (CertificateSigningRequest API, TokenReview, caBundle controller)
//! is not built yet.

#![forbid(unsafe_code)]

pub mod ca;
pub mod ca_bundle;
pub mod checks;
pub mod cli;
pub mod config;
pub mod grpc;
pub mod kubernetes;
pub mod leader;
pub mod serve;
