//! The Portcullis cert-manager: webhooks send it a PKCS#10 request made
//! with their own key (which never leaves them) and get back a serving
//! certificate, the trust bundle and when to renew.
//!
//! The [`issuer`] is its core, with no gRPC and no Kubernetes in it: the
//! caller is authenticated (a token becomes an identity), the request
//! checked (names the caller may have ([`config`]), server authentication
//! only, no CA, an accepted key, a capped lifetime) into a grant, and the
//! grant signed through a signer; one profile builds every leaf
//! certificate. The gRPC edge ([`grpc`]) maps requests and refusals to the
//! API and precise status codes. Standalone, the CA lives in a directory
//! and signs in process; in Kubernetes mode ([`kubernetes`]) callers are
//! checked with TokenReview, grants become CertificateSigningRequests, the
//! CA lives in a Secret, and the leader (a Lease, `portcullis-lease`)
//! signs them through the same profile and keeps webhook configurations'
//! caBundles current ([`ca_bundle`]). The CA is rotated in steps that
//! never leave a live certificate untrusted ([`authority`]), kept in a
//! [`store`] and followed by every replica ([`keeper`]). [`request`] sends
//! one request by hand, as a webhook would.

#![forbid(unsafe_code)]

pub mod authority;
mod backoff;
pub mod ca;
pub mod ca_bundle;
pub mod cli;
pub mod config;
pub mod grpc;
pub mod issuer;
pub mod keeper;
pub mod kubernetes;
pub mod metrics;
pub mod request;
pub mod serve;
pub mod store;
