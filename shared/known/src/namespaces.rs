//! The cluster's namespaces, for `namespaceSelector` (their labels) and
//! CEL's `namespaceObject`, kept in memory by a watch on Namespaces, so the
//! admission path never calls the API. Each is reduced to what the
//! admission path reads as it arrives, not once per request.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use portcullis_admission::native_match::{KnownNamespaces, namespace_object};

/// The watched Namespaces.
#[derive(Debug, Clone)]
pub struct WatchedNamespaces {
    store: Store<Reduced>,
    /// Whether the first list has arrived. One task waits on the store for
    /// it: kube-runtime's `Store::wait_until_ready` wakes only the last of
    /// several concurrent waiters (its oneshot keeps one waker), so every
    /// other waiter waits on this instead.
    ready: watch::Receiver<bool>,
}

impl WatchedNamespaces {
    /// Starts watching with `client` until `shutdown`.
    pub fn start(client: kube::Client, shutdown: CancellationToken) -> Self {
        // Whole objects: `namespaceObject` has their spec and status.
        let api = kube::Api::<Namespace>::all(client);
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).map_ok(reduce))
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

    fn object(&self, name: &str) -> Option<Arc<Value>> {
        Some(self.store.get(&ObjectRef::new(name))?.object.clone())
    }
}

/// A Namespace as the admission path reads it: its name and labels, and
/// the object `namespaceObject` is bound to ([`namespace_object`]).
#[derive(Debug, Clone)]
struct Reduced {
    metadata: ObjectMeta,
    object: Arc<Value>,
}

/// Each namespace of `event` reduced.
fn reduce(event: watcher::Event<Namespace>) -> watcher::Event<Reduced> {
    let one = |ns: Namespace| {
        // A Namespace always serializes.
        let object = Arc::new(namespace_object(&serde_json::to_value(&ns).unwrap_or_default()));
        let metadata = ObjectMeta { name: ns.metadata.name, labels: ns.metadata.labels, ..ObjectMeta::default() };
        Reduced { metadata, object }
    };
    match event {
        watcher::Event::Apply(ns) => watcher::Event::Apply(one(ns)),
        // The store needs only the key of what it removes.
        watcher::Event::Delete(ns) => watcher::Event::Delete(Reduced {
            metadata: ObjectMeta { name: ns.metadata.name, ..ObjectMeta::default() },
            object: Arc::default(),
        }),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(ns) => watcher::Event::InitApply(one(ns)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// A reduced Namespace is stored by the reflector as a Namespace is.
impl kube::Resource for Reduced {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Namespace::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Namespace::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Namespace::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Namespace::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
