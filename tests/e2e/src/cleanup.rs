//! What a test registers in the cluster is removed when the test ends, by
//! `Drop`: a test that fails half-way leaves no webhook configuration
//! behind to refuse the next test's objects (the control plane may be
//! shared through `PORTCULLIS_CP_DIR`).

use crate::cluster;

/// Deletes a cluster-scoped object with kubectl when dropped.
#[derive(Debug)]
#[must_use = "the object is deleted when this is dropped"]
pub struct Cleanup {
    resource: &'static str,
    name: String,
    keep: bool,
}

impl Cleanup {
    /// Deletes `resource` (a kubectl resource name) `name` on drop.
    pub fn of(resource: &'static str, name: &str) -> Self {
        Self { resource, name: name.to_owned(), keep: false }
    }

    /// Applies `manifest` (the object `resource` `name`) with kubectl and
    /// returns its cleanup.
    pub fn apply(resource: &'static str, name: &str, manifest: &str) -> Self {
        crate::ok(cluster().kubectl_stdin(&["apply", "-f", "-"], manifest));
        Self::of(resource, name)
    }

    /// Leaves the object in place (it goes with its control plane: the
    /// benchmark's).
    pub fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.keep {
            let _ = cluster().kubectl(&["delete", self.resource, &self.name, "--ignore-not-found", "--wait=false"]);
        }
    }
}
