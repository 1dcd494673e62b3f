//! The cluster's namespaces, for `namespaceSelector` (their labels) and
//! CEL's `namespaceObject`, kept in memory by a watch on Namespaces, so the
//! admission path never calls the API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use tokio_util::sync::CancellationToken;

use crate::evaluate::KnownNamespaces;
use portcullis_admission::native_match::namespace_object;

/// The watched Namespaces.
#[derive(Debug, Clone)]
pub struct WatchedNamespaces {
    store: Store<Namespace>,
    ready: Arc<AtomicBool>,
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
        let ready = Arc::new(AtomicBool::new(false));
        let (waiting, flag) = (store.clone(), ready.clone());
        tokio::spawn(async move {
            if waiting.wait_until_ready().await.is_ok() {
                flag.store(true, Ordering::Relaxed);
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
        self.ready.load(Ordering::Relaxed)
    }

    /// Until the first list has arrived (never, when the watch stops
    /// before it).
    pub async fn wait_until_ready(&self) {
        if self.store.wait_until_ready().await.is_err() {
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
