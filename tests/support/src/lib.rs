//! Test support shared by the unit, property, fuzz and end-to-end tests of
//! several crates. Only code that checks Portcullis from the outside lives
//! here: an RFC 6902 applier written independently of the `json-patch`
//! crate that produces the patches, so that a bug in one is not hidden by
//! the same bug in the other ([`rfc6902`]); and servers started on port 0
//! that report the addresses they bound and keep their log for the test to
//! wait on ([`process`]); reads of their plain-HTTP admin ports and of
//! Jaeger's query API with reqwest (`http`, feature `http`). Never a
//! dependency of a service.

#![forbid(unsafe_code)]

#[cfg(feature = "http")]
pub mod http;
pub mod process;
pub mod rfc6902;
