//! Portcullis policies and templates as API objects (`portcullis.dev`).
//!
//! A webhook replica watches its kinds ([`Catalog`]), compiles each object
//! on its own (a broken object affects only itself; its last good
//! generation stays in force), swaps its whole set atomically, and then
//! reports in its own [`WebhookReplica`] object which generation of each
//! object it has in force. One leader reads those reports and writes each
//! object's `status.conditions[Ready]`: `True` only when every live, ready
//! replica enforces the object's current generation ([`verdict`]). This
//! crate knows no policy: what an object compiles to, and how a set is
//! built from the compiled objects, are the caller's.
//!
//! Nothing here is on the admission path: it runs when objects change.

#![forbid(unsafe_code)]

pub mod catalog;
mod metrics;
pub mod replica;
mod run;
pub mod status;
pub mod verdict;
mod writer;

pub use catalog::{Catalog, Key, WatchedKind};
pub use metrics::ResourceMetrics;
pub use replica::{Identity, WebhookReplica};
pub use run::{Loader, Remark, Swap, follow};
pub use status::{EnforcedBy, Path, Refusal, ResourceStatus};

/// The API group of every Portcullis kind.
pub const GROUP: &str = "portcullis.dev";
/// Their version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every Portcullis kind.
pub const API_VERSION: &str = "portcullis.dev/v1alpha1";
