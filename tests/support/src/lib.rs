//! Test support shared by the unit, property and fuzz tests of several
//! crates. Only code that checks Portcullis from the outside lives here: an
//! RFC 6902 applier written independently of the `json-patch` crate that
//! produces the patches, so that a bug in one is not hidden by the same bug
//! in the other. Never a dependency of a service.

#![forbid(unsafe_code)]

pub mod rfc6902;
