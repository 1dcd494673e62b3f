//! Portcullis policies and templates as API objects (`portcullis.dev`).
//!
//! A webhook replica watches its kinds, compiles each object on its own
//! (a broken object affects only itself; its last good generation stays in
//! force), swaps the whole set atomically, and reports in its own
//! `WebhookReplica` object which generation of each object it has in force.
//! One leader reads those reports and writes each object's
//! `status.conditions[Ready]`: `True` only when every live replica has the
//! object's current generation in force. This crate knows no policy: what
//! an object compiles to is the caller's.
//!
//! It must not be on the admission path: nothing here runs per request.

#![forbid(unsafe_code)]

pub mod status;

pub use status::{Refusal, ResourceStatus};

/// The API group of every Portcullis kind.
pub const GROUP: &str = "portcullis.dev";
/// Their version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every Portcullis kind.
pub const API_VERSION: &str = "portcullis.dev/v1alpha1";
