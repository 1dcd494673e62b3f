//! What admission reads of the cluster besides the request, known in
//! memory so that the admission path never calls the API: policy
//! parameters ([`params`]: `paramKind` and `paramRef`, checked at load and
//! found by the API server's rules) and namespaces ([`namespaces`]: their
//! labels for `namespaceSelector`, the object for `namespaceObject`). Each
//! is kept by a watch (an informer) in the webhooks and the audit, or read
//! from files offline. The validator and the injector share it.

#![forbid(unsafe_code)]

pub mod namespaces;
pub mod params;

use portcullis_admission::native_match::KnownNamespaces;

use params::ParamSource;

/// What an evaluation reads of the cluster besides the request, all of it
/// kept in memory: the admission path never calls the API.
#[derive(Clone, Copy)]
#[allow(missing_debug_implementations)] // trait objects without Debug
pub struct Cluster<'a> {
    /// Namespaces, for `namespaceSelector` and `namespaceObject`.
    pub namespaces: &'a dyn KnownNamespaces,
    /// Parameter objects, for `paramKind`.
    pub params: &'a dyn ParamSource,
}
