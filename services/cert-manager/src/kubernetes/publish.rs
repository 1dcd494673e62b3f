//! The published CA bundle: the CA certificates to trust (never a key) as
//! `ca.crt` in a ConfigMap, for the webhooks to trust the cert-manager's
//! own TLS, kept current through rotations.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use portcullis_telemetry::error_chain;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{KubeError, api_err};
use crate::authority::Authority;

/// Publishes `ca_pem` as `ca.crt` in ConfigMap `namespace/name`, creating
/// or updating it.
pub async fn publish_ca(client: &kube::Client, namespace: &str, name: &str, ca_pem: &str) -> Result<(), KubeError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let desired = BTreeMap::from([("ca.crt".to_owned(), ca_pem.to_owned())]);
    match maps.get_opt(name).await.map_err(api_err("read the CA ConfigMap"))? {
        Some(existing) if existing.data.as_ref() == Some(&desired) => Ok(()),
        Some(_) => {
            let patch = json!({"data": {"ca.crt": ca_pem}});
            maps.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err("update the CA ConfigMap"))?;
            Ok(())
        }
        None => {
            let map = ConfigMap {
                metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
                data: Some(desired),
                ..ConfigMap::default()
            };
            match maps.create(&PostParams::default(), &map).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(e) => Err(api_err("create the CA ConfigMap")(e)),
            }
        }
    }
}

/// Keeps ConfigMap `namespace/name` holding the CA bundle of `authorities`
/// (republished at each change, and checked every minute), until `shutdown`.
pub async fn keep_published(
    client: kube::Client,
    namespace: String,
    name: String,
    mut authorities: watch::Receiver<Arc<Authority>>,
    shutdown: CancellationToken,
) {
    loop {
        let bundle = authorities.borrow_and_update().bundle_pem();
        if let Err(err) = publish_ca(&client, &namespace, &name, &bundle).await {
            tracing::warn!(error = %error_chain(&err), configmap = %name, "could not publish the CA bundle; retrying");
        }
        tokio::select! {
            changed = authorities.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
