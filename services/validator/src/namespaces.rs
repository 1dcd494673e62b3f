//! The cluster's namespaces, for `namespaceSelector` (their labels) and
//! CEL's `namespaceObject`, kept in memory by a watch on Namespaces, so the
//! admission path never calls the API.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::evaluate::KnownNamespaces;
use portcullis_admission::native_match::namespace_object;

/// The watched Namespaces.
#[derive(Debug, Clone)]
pub struct WatchedNamespaces {
    store: Store<Namespace>,
    /// Whether the first list has arrived. One task waits on the store for
    /// it: kube-runtime's `Store::wait_until_ready` wakes only the last of
    /// several concurrent waiters (its oneshot keeps one waker), so every
    /// other waiter waits on this instead.
    ready: watch::Receiver<bool>,
}

impl WatchedNamespaces {
    /// Starts watching with `client` until `shutdown`.
    pub fn start(client: kube::Client, shutdown: CancellationToken) -> Self {
        // Whole objects: `namespaceObject` has their spec and status. The
        // managed fields are dropped as they arrive (CEL never sees them).
        let api = kube::Api::<Namespace>::all(client);
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).modify(|ns| ns.metadata.managed_fields = None),
        )
        .default_backoff()
        .applied_objects();
        let (listed, ready) = watch::channel(false);
        let waiting = store.clone();
        tokio::spawn(async move {
            if waiting.wait_until_ready().await.is_ok() {
                listed.send_replace(true);
                tracing::info!("namespaces are in memory");
            }
        });
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    item = stream.next() => match item {
                        Some(Ok(_)) => {}
                        Some(Err(err)) => tracing::warn!(error = %error_chain(&err), "namespace watch failed; retrying with backoff"),
                        None => return,
                    },
                    _ = shutdown.cancelled() => return,
                }
            }
        });
        Self { store, ready }
    }

    /// Whether the first list has arrived.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Until the first list has arrived (never, when the watch stops
    /// before it).
    pub async fn wait_until_ready(&self) {
        if self.ready.clone().wait_for(|listed| *listed).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl KnownNamespaces for WatchedNamespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let ns = self.store.get(&ObjectRef::new(name))?;
        Some(ns.metadata.labels.clone().unwrap_or_default())
    }

    fn object(&self, name: &str) -> Option<serde_json::Value> {
        let ns = self.store.get(&ObjectRef::new(name))?;
        // A Namespace always serializes.
        Some(namespace_object(&serde_json::to_value(&*ns).ok()?))
    }
}
