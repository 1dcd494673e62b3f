//! The cert-manager's client, for every process that needs a serving
//! certificate from it: the webhooks (renewing in the background through
//! `portcullis-server`) and the cert-manager's own `request` command.
//!
//! [`issue`] makes a key pair here (the private key never leaves the
//! process), sends a PKCS#10 request over gRPC with the bearer token read
//! from a file, and returns the certificate checked against the key, with
//! the trust bundle and when to renew. [`follow_issuer`] follows the trust
//! bundle stream so that a CA rotation is seen at once. Both continue the
//! caller's trace. Serving, renewal timing and readiness are the caller's.

#![forbid(unsafe_code)]

mod issue;
mod pem;
mod settings;
mod trust;

pub use issue::{IssueError, Issued, issue, issue_for, request_params};
pub use pem::{PemError, certified_key};
pub use settings::Settings;
pub use trust::follow_issuer;
