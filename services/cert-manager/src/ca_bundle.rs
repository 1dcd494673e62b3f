//! The caBundle controller: every Mutating/ValidatingWebhookConfiguration
//! labelled `portcullis.dev/inject-ca=true` gets the current trust bundle
//! in each webhook's `clientConfig.caBundle`, and gets it back when someone
//! changes it.

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_admission::names::INJECT_CA_SELECTOR;
use portcullis_proto::certs::v1::TrustBundle;
use portcullis_server::error::error_chain;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// Keeps the caBundles of both kinds of labelled configurations equal to
/// `bundle`, until `shutdown`.
pub async fn run(client: kube::Client, bundle: watch::Receiver<TrustBundle>, shutdown: CancellationToken) {
    let kinds = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"];
    let tasks = kinds.map(|kind| {
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
        tokio::spawn(reconcile_kind(api, bundle.clone(), shutdown.clone()))
    });
    for task in tasks {
        let _ = task.await;
    }
}

async fn reconcile_kind(
    api: Api<DynamicObject>,
    mut bundle: watch::Receiver<TrustBundle>,
    shutdown: CancellationToken,
) {
    let stream =
        watcher(api.clone(), watcher::Config::default().labels(INJECT_CA_SELECTOR)).default_backoff().applied_objects();
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            item = stream.next() => match item {
                Some(Ok(object)) => {
                    let desired = encoded(&bundle.borrow());
                    repair(&api, &object, &desired).await;
                }
                Some(Err(err)) => tracing::warn!(error = %error_chain(&err), "watching webhook configurations failed; retrying"),
                None => return,
            },
            changed = bundle.changed() => {
                if changed.is_err() {
                    return;
                }
                // A new bundle: every labelled configuration, now.
                let desired = encoded(&bundle.borrow_and_update());
                match api.list(&kube::api::ListParams::default().labels(INJECT_CA_SELECTOR)).await {
                    Ok(list) => for object in list.items { repair(&api, &object, &desired).await },
                    Err(err) => tracing::warn!(error = %error_chain(&err), "listing webhook configurations failed"),
                }
            }
            _ = shutdown.cancelled() => return,
        }
    }
}

fn encoded(bundle: &TrustBundle) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bundle.ca_bundle_pem.as_bytes())
}

/// Patches the webhooks of `object` whose caBundle is not `desired`.
async fn repair(api: &Api<DynamicObject>, object: &DynamicObject, desired: &str) {
    let name = object.metadata.name.clone().unwrap_or_default();
    let webhooks = object.data.get("webhooks").and_then(Value::as_array).cloned().unwrap_or_default();
    let operations: Vec<Value> = webhooks
        .iter()
        .enumerate()
        .filter(|(_, w)| w.pointer("/clientConfig/caBundle").and_then(Value::as_str) != Some(desired))
        .map(|(i, _)| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": desired}))
        .collect();
    if operations.is_empty() {
        return;
    }
    let patch: json_patch::Patch = match serde_json::from_value(Value::Array(operations)) {
        Ok(p) => p,
        Err(err) => return tracing::error!(error = %error_chain(&err), "building the caBundle patch"),
    };
    let patched = api
        .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .instrument(tracing::info_span!("patch caBundle", otel.kind = "client", configuration = %name))
        .await;
    match patched {
        Ok(_) => tracing::info!(configuration = %name, "caBundle set to the current trust bundle"),
        Err(err) => tracing::warn!(configuration = %name, error = %error_chain(&err), "could not set caBundle"),
    }
}
