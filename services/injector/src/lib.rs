//! The Portcullis injector: a mutating admission webhook for Pods.
//!
//! It injects sidecars from named templates, rewrites images to mirror
//! registries and applies defaults, all configured by `InjectorConfig`
//! documents ([`config`]), in files or as API objects
//! ([`resources`]; each checked on its own by [`compile`], together by
//! [`assemble`]). The decision ([`mutate`]) is a pure function of
//! the request and the configuration: no I/O. It edits the pod as JSON and
//! records what it injected in the `portcullis.dev/status` annotation, so a
//! second pass over its own output changes nothing. The shared server
//! (`portcullis-server`) owns HTTP, TLS and the protocol; `mutate` on the
//! command line runs the same decision offline.

#![forbid(unsafe_code)]

pub mod apply;
pub mod assemble;
pub mod cli;
pub mod cluster;
pub mod compile;
pub mod config;
pub mod images;
pub mod inject;
pub mod mutate;
pub mod native;
pub mod offline;
pub mod pod;
pub mod resources;
pub mod serve;
pub mod status;
pub mod webhook;
