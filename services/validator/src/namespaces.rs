//! Namespace labels for `namespaceSelector`, kept in memory by a watch on
//! Namespaces (metadata only), so the admission path never calls the API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use tokio_util::sync::CancellationToken;

use crate::evaluate::NamespaceLabels;

/// The watched Namespaces.
#[derive(Debug, Clone)]
pub struct WatchedNamespaces {
    store: Store<PartialObjectMeta<Namespace>>,
    ready: Arc<AtomicBool>,
}

impl WatchedNamespaces {
    /// Starts watching with `client` until `shutdown`.
    pub fn start(client: kube::Client, shutdown: CancellationToken) -> Self {
        // An Api of PartialObjectMeta makes metadata-only list and watch calls.
        let api = kube::Api::<PartialObjectMeta<Namespace>>::all(client);
        let (store, writer) = reflector::store();
        let stream =
            reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff().applied_objects();
        let ready = Arc::new(AtomicBool::new(false));
        let (waiting, flag) = (store.clone(), ready.clone());
        tokio::spawn(async move {
            if waiting.wait_until_ready().await.is_ok() {
                flag.store(true, Ordering::Relaxed);
                tracing::info!("namespace labels are in memory");
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
}

impl NamespaceLabels for WatchedNamespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let ns = self.store.get(&ObjectRef::new(name))?;
        Some(ns.metadata.labels.clone().unwrap_or_default())
    }
}
