//! One CEL engine for Portcullis: the language of Kubernetes' admission
//! policies (ValidatingAdmissionPolicy, MutatingAdmissionPolicy), with the
//! Kubernetes CEL library registered and `object`, `oldObject`, `request`,
//! `params`, `namespaceObject` and `variables` bound as the API server binds
//! them.
//!
//! Every webhook and the audit evaluate through this crate, so they share
//! one budget: an expression is compiled once, at load ([`compile`]), and
//! refused when it uses a name Kubernetes' CEL does not declare (as the
//! API server's type checker refuses it) or when its worst-case cost grows
//! faster than the object it reads ([`cost`]); what the expressions read is found in their syntax trees
//! ([`reads`]) so that a request converts only that into CEL values
//! ([`Bindings`]), and what mutations change ([`changes`]) so that a
//! mutating webhook builds only that of an object; an evaluation counts its work as it runs and stops at
//! the first limit it meets ([`budget`]), and runs on a fixed pool of
//! threads, never on the async runtime ([`workers`]).
//!
//! It knows nothing of policy documents (which expressions are match
//! conditions, validations or mutations, and what their results mean is
//! the caller's), does no I/O and never evaluates without a budget. It uses
//! the `cel` crate patched in `third_party/cel` directly, never through
//! `kube-cel`'s re-export (third_party/cel/PORTCULLIS.md).

#![forbid(unsafe_code)]

pub mod args;
pub mod budget;
pub mod changes;
mod compile;
mod convert;
pub mod cost;
mod declared;
mod evaluate;
mod format;
pub mod json;
mod libraries;
mod literals;
mod output;
mod overloads;
mod planner;
pub mod reads;
pub mod refusal;
pub mod schemas;
pub mod typecheck;
pub mod types;
pub mod workers;

pub use cel::{ExecutionError, Value};
pub use compile::{
    API_SERVER_MAX_LEN, CompileError, Environment, Expression, LoadBounds, MAX_EXPRESSION_LEN, compile, compile_in,
};
pub use convert::{Bindings, Converted};
pub use evaluate::{Constant, Exceeded, Scope, evaluate, fold};
