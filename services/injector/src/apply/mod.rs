//! Apply configurations merged as the API server merges them: the schema
//! of each kind ([`schema`], from the API server's OpenAPI v3, built-in
//! kinds also offline) and server-side apply's merge ([`merge`]). Used by
//! MutatingAdmissionPolicy's `patchType: ApplyConfiguration` mutations.
//! No crate does this merge in Rust; ADR 0010 says why it is ported here.

pub mod merge;
pub mod schema;

pub use merge::{Atomics, MergeError, apply};
pub use schema::{BUILTIN, Schemas, Shape};
