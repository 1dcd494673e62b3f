//! The caBundle controller: every Mutating/ValidatingWebhookConfiguration
//! labelled `portcullis.dev/inject-ca=true` gets the current trust bundle
//! in each webhook's `clientConfig.caBundle`, and gets it back when someone
//! changes it.
//!
//! A kube-runtime [`Controller`] per kind: it reconciles a configuration
//! when it is created or changed, every configuration when the bundle
//! changes, and retries a failed patch with a per-object exponential
//! backoff (1 s doubling to 5 min) until it succeeds.

use std::sync::Arc;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use portcullis_admission::names::INJECT_CA_SELECTOR;
use portcullis_proto::certs::v1::TrustBundle;
use portcullis_telemetry::error_chain;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::backoff::Backoff;

/// Why a configuration's caBundle could not be set.
#[derive(Debug, thiserror::Error)]
#[error("cannot set the caBundle of {configuration}")]
pub struct CaBundleError {
    /// The configuration.
    configuration: String,
    /// What the API server said.
    #[source]
    source: kube::Error,
}

/// What each reconciliation reads: the API, the bundle, and the failures in
/// a row per configuration.
struct Context {
    api: Api<DynamicObject>,
    bundle: watch::Receiver<TrustBundle>,
    backoff: Backoff,
}

/// Keeps the caBundles of both kinds of labelled configurations equal to
/// `bundle`, until `shutdown`.
pub async fn run(client: kube::Client, bundle: watch::Receiver<TrustBundle>, shutdown: CancellationToken) {
    let kinds = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];
    let tasks = kinds.map(|kind| {
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        tokio::spawn(control(client.clone(), ApiResource::from_gvk(&gvk), bundle.clone(), shutdown.clone()))
    });
    for task in tasks {
        let _ = task.await;
    }
}

async fn control(
    client: kube::Client,
    resource: ApiResource,
    bundle: watch::Receiver<TrustBundle>,
    shutdown: CancellationToken,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    // A new bundle: every labelled configuration, now.
    let changes = WatchStream::from_changes(bundle.clone()).map(|_| ());
    let context = Arc::new(Context { api: api.clone(), bundle, backoff: Backoff::default() });
    let controller = Controller::new_with(api, watcher::Config::default().labels(INJECT_CA_SELECTOR), resource)
        .reconcile_all_on(changes)
        .run(reconcile, retry, context.clone())
        .for_each(|result| {
            context.backoff.settle("caBundle controller", result);
            std::future::ready(())
        });
    tokio::select! {
        () = controller => {}
        () = shutdown.cancelled() => {}
    }
}

/// Patches the webhooks of `object` whose caBundle is not the current
/// bundle, then waits for the next change.
async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, CaBundleError> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let desired = encoded(&context.bundle.borrow());
    if let Some(patch) = patch(&object, &desired) {
        context
            .api
            .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .instrument(tracing::info_span!("patch caBundle", otel.kind = "client", configuration = %name))
            .await
            .map_err(|source| CaBundleError { configuration: name.clone(), source })?;
        tracing::info!(configuration = %name, "caBundle set to the current trust bundle");
    }
    context.backoff.forget(&name);
    Ok(Action::await_change())
}

/// A failed patch is retried after 1 s, 2 s, 4 s... up to 5 min.
fn retry(object: Arc<DynamicObject>, err: &CaBundleError, context: Arc<Context>) -> Action {
    let name = object.metadata.name.clone().unwrap_or_default();
    let wait = context.backoff.failed(&name);
    tracing::warn!(error = %error_chain(err), retry_in_seconds = wait.as_secs(), "could not set caBundle");
    Action::requeue(wait)
}

fn encoded(bundle: &TrustBundle) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bundle.ca_bundle_pem.as_bytes())
}

/// A JSON patch setting the caBundle of every webhook of `object` that
/// does not have `desired`; `None` when all do.
fn patch(object: &DynamicObject, desired: &str) -> Option<json_patch::Patch> {
    let webhooks = object.data.get("webhooks").and_then(Value::as_array)?;
    let operations: Vec<json_patch::PatchOperation> = webhooks
        .iter()
        .enumerate()
        .filter(|(_, w)| w.pointer("/clientConfig/caBundle").and_then(Value::as_str) != Some(desired))
        .filter_map(|(i, _)| {
            let operation =
                json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": desired});
            serde_json::from_value(operation).ok()
        })
        .collect();
    (!operations.is_empty()).then_some(json_patch::Patch(operations))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_only_the_webhooks_whose_bundle_differs() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "v"},
            "webhooks": [{"name": "a", "clientConfig": {"caBundle": "Q0E="}}, {"name": "b", "clientConfig": {}}]
        }))
        .unwrap();
        let patch = patch(&object, "Q0E=").unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "Q0E="}])
        );
        assert!(super::patch(&object, "other").is_some_and(|p| p.0.len() == 2));
        let current = json!({"metadata": {"name": "v"}, "webhooks": [{"clientConfig": {"caBundle": "Q0E="}}]});
        assert!(super::patch(&serde_json::from_value(current).unwrap(), "Q0E=").is_none());
    }
}
