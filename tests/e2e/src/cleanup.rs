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

/// Applies the CustomResourceDefinition `name` (`manifest`), waits until
/// it is established and the API server publishes `schema` (its kind's
/// schema name) in the OpenAPI v3 document of `group_version`, and
/// returns its cleanup with that document: a new CRD's schema is
/// published a moment after it is established, and what reads it (the
/// type checker, `--schema` files) needs it there.
pub async fn install_crd(
    name: &str,
    manifest: &str,
    group_version: &str,
    schema: &str,
) -> (Cleanup, serde_json::Value) {
    let crd = Cleanup::apply("crd", name, manifest);
    crate::ok(cluster().kubectl(&["wait", "--for=condition=Established", &format!("crd/{name}"), "--timeout=60s"]));
    let what = format!("the API server publishes {schema}");
    let path = format!("/openapi/v3/apis/{group_version}");
    let pointer = format!("/components/schemas/{schema}");
    let document = crate::eventually(&what, std::time::Duration::from_secs(60), || {
        let out = cluster().kubectl(&["get", "--raw", &path]);
        let document: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        document.pointer(&pointer).is_some().then_some(document)
    })
    .await;
    (crd, document)
}
