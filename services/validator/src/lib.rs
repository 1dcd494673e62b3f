//! The Portcullis validator: a validating admission webhook.
//!
//! `ValidatorPolicy` documents ([`policy`]), with `PolicyException`s
//! ([`exception`]), select requests by resource, operation, namespace and
//! labels ([`matching`]), and check them with built-in rules ([`rules`]:
//! labels, replicas, Services, images, resources, pod security for Pods
//! and every pod template) and with CEL in the form of Kubernetes'
//! ValidatingAdmissionPolicy ([`cel`]), reading parameter objects of the
//! cluster as `params` ([`portcullis_known::params`]). [`evaluate`] runs the set over one
//! request: pure and with no I/O. CEL runs on the shared engine
//! (`portcullis-cel`): a cost estimate at load, a budget that stops it as
//! it runs, and a fixed pool of threads the webhook evaluates on, never the
//! async runtime. Every violation is reported at once: Deny policies refuse the
//! request, Warn policies return warnings, Audit policies log, count and
//! trace. The shared server owns HTTP and TLS; `check` runs the same
//! evaluation offline, and [`audit`] runs it over the objects that already
//! exist, writing OpenReports. In a cluster the same documents are API
//! objects ([`resources`]: the CRD types, each object compiled on its own).

#![forbid(unsafe_code)]

pub mod audit;
pub mod cel;
pub mod cli;
pub mod cluster;
pub mod evaluate;
pub mod exception;
pub mod matching;
mod names;
pub mod native;
pub mod offline;
pub mod pods;
pub mod policy;
pub mod pushdown;
pub mod resources;
pub mod rules;
pub mod serve;
pub mod webhook;
