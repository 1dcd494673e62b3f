//! How a Portcullis binary starts, reads its input and ends, one way for
//! the three of them: memory set up before any thread starts ([`memory`]),
//! the offline commands' input, a file or standard input ([`input`]), and
//! the exit status with the error report, each cause once and a hint where
//! one helps ([`exit`]).
//!
//! This is what each `main` needs and no library does: nothing here serves,
//! decides or talks to Kubernetes.

#![forbid(unsafe_code)]

pub mod exit;
pub mod input;
pub mod memory;

pub use exit::{Answer, Hinted};
