//! The transport-free core of every Portcullis webhook.
//!
//! This crate turns the bytes of an `AdmissionReview` into a request a
//! decision function can read, and turns that decision back into a response
//! of the same `apiVersion` (`admission.k8s.io/v1` or `v1beta1`). Mutations
//! become a JSON Patch computed by diffing the original and the mutated
//! object, never written by hand. It also holds what every webhook's
//! configuration needs: reading `portcullis.dev/v1alpha1` documents
//! ([`documents`]) and label selector matching ([`selector`]). It knows
//! nothing of HTTP, TLS or gRPC and does no I/O: the servers live at the
//! edges (`portcullis-server`).

#![forbid(unsafe_code)]

mod decision;
pub mod documents;
pub mod image;
pub mod json;
pub mod manifest;
pub mod names;
pub mod native_match;
pub mod parts;
pub mod patch;
mod review;
pub mod selector;
mod wire;

pub use decision::{Decision, Verdict};
pub use patch::{ApplyError, JsonPatch};
pub use review::{DecodeError, Request, decode, decode_parts, encode, existing, operation_name};

/// The Kubernetes admission types this crate builds on, re-exported so that
/// services share one version of them.
pub use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
pub use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource};
