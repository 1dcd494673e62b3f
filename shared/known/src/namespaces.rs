//! The cluster's namespaces, for `namespaceSelector` (their labels) and
//! CEL's `namespaceObject`, kept in memory by a watch on Namespaces, so the
//! admission path never calls the API. Each is reduced to what the
//! admission path reads as it arrives, not once per request.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use portcullis_admission::Request;
use portcullis_admission::native_match::{KnownNamespaces, namespace_object};

/// How long a request waits for its namespace to reach the watch
/// ([`wait_for_namespace`]). The CEL deadline (`--cel-timeout`, 250 ms by
/// default) counts from the end of the wait, so a request can take this
/// plus that: well within the 5 s `timeoutSeconds` of the shipped webhook
/// configurations while `--cel-timeout` stays under about 4 s.
pub const NAMESPACE_WAIT: Duration = Duration::from_secs(1);

/// Until the namespace of `req` is known to `namespaces`, at most
/// [`NAMESPACE_WAIT`]; at once when `req` has no namespace or it is known.
/// A namespaced object is admitted only in a namespace the API server
/// already has, so one the watch does not know yet is on its way (created
/// just before, as `kubectl apply` of a namespace and its workloads
/// does): waiting for it gives the verdict the API server's own lookup
/// would. One still unknown after the wait is decided as before: a
/// policy needing it fails by its failure policy.
pub async fn wait_for_namespace(namespaces: &dyn KnownNamespaces, req: &Request) {
    // A Namespace's request names the namespace itself, which does not
    // exist before its CREATE is admitted and is never its own
    // `namespaceObject`.
    let kind = &req.inner.kind;
    if kind.group.is_empty() && kind.kind == "Namespace" {
        return;
    }
    let Some(name) = req.inner.namespace.as_deref().filter(|n| !n.is_empty()) else { return };
    if namespaces.object(name).is_some() {
        return;
    }
    let started = std::time::Instant::now();
    let known = namespaces.arrival(name, NAMESPACE_WAIT).await;
    tracing::debug!(namespace = name, known, waited = ?started.elapsed(), "waited for the namespace to be watched");
}

/// The watched Namespaces.
#[derive(Debug, Clone)]
pub struct WatchedNamespaces {
    store: Store<Reduced>,
    /// Whether the first list has arrived. One task waits on the store for
    /// it: kube-runtime's `Store::wait_until_ready` wakes only the last of
    /// several concurrent waiters (its oneshot keeps one waker), so every
    /// other waiter waits on this instead.
    ready: watch::Receiver<bool>,
    /// Marked changed whenever the store takes namespaces in ([`tell`]),
    /// for requests waiting for theirs ([`KnownNamespaces::arrival`]).
    arrivals: watch::Receiver<()>,
}

impl WatchedNamespaces {
    /// Starts watching with `client` until `shutdown`.
    pub fn start(client: kube::Client, shutdown: CancellationToken) -> Self {
        // Whole objects: `namespaceObject` has their spec and status.
        let api = kube::Api::<Namespace>::all(client);
        let (store, writer) = reflector::store();
        let (arrived, arrivals) = watch::channel(());
        // The reflector has stored each event when it passes it on.
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).map_ok(reduce))
            .inspect_ok(move |event| tell(event, &arrived))
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
        Self { store, ready, arrivals }
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

    fn arrival<'a>(&'a self, name: &'a str, within: Duration) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            // Subscribed before looking, so that no arrival is missed between.
            let mut arrivals = self.arrivals.clone();
            arrivals.borrow_and_update();
            let (key, deadline) = (ObjectRef::new(name), tokio::time::Instant::now() + within);
            loop {
                if self.store.get(&key).is_some() {
                    return true;
                }
                // Past the deadline, or the watch stopped: not known.
                if !matches!(tokio::time::timeout_at(deadline, arrivals.changed()).await, Ok(Ok(()))) {
                    return false;
                }
            }
        })
    }
}

/// Tells the requests waiting for a namespace that the store has taken
/// some in: a namespace added or changed, or a (re)list complete. The
/// objects of a list reach the store all at once, at its end, not as
/// they arrive.
fn tell(event: &watcher::Event<Reduced>, arrived: &watch::Sender<()>) {
    if matches!(event, watcher::Event::Apply(_) | watcher::Event::InitDone) {
        arrived.send_replace(());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(name: &str) -> Reduced {
        Reduced {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
            object: Arc::default(),
        }
    }

    /// The store and its notifier as [`WatchedNamespaces::start`] wires
    /// them, fed by hand: each event stored, then told.
    fn watched() -> (WatchedNamespaces, impl FnMut(watcher::Event<Reduced>)) {
        let (store, mut writer) = reflector::store::<Reduced>();
        let (_listed, ready) = watch::channel(true);
        let (arrived, arrivals) = watch::channel(());
        let feed = move |event: watcher::Event<Reduced>| {
            writer.apply_watcher_event(&event);
            tell(&event, &arrived);
        };
        (WatchedNamespaces { store, ready, arrivals }, feed)
    }

    /// Spawns a wait for `name`, and lets it run until it waits.
    async fn waiting_for(namespaces: &WatchedNamespaces, name: &'static str) -> tokio::task::JoinHandle<bool> {
        let namespaces = namespaces.clone();
        let waiting = tokio::spawn(async move { namespaces.arrival(name, Duration::from_secs(60)).await });
        tokio::task::yield_now().await;
        waiting
    }

    /// A request whose namespace the watch delivers while it waits goes on
    /// as soon as it is stored; another namespace arriving does not end
    /// the wait.
    #[tokio::test]
    async fn a_request_waits_for_its_namespace_to_reach_the_watch() {
        let (namespaces, mut feed) = watched();
        let waiting = waiting_for(&namespaces, "team-a").await;
        feed(watcher::Event::Apply(namespace("team-b")));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "still waiting for team-a");
        feed(watcher::Event::Apply(namespace("team-a")));
        assert!(waiting.await.expect("the waiting task"), "team-a known once stored");
        assert!(namespaces.arrival("team-a", Duration::ZERO).await, "known at once now");
    }

    /// A namespace that comes with a list (the watch's first, or a re-list
    /// after an error) is in the store only once the list is complete; the
    /// request waiting for it goes on then.
    #[tokio::test]
    async fn a_request_waits_for_a_relist_to_complete() {
        let (namespaces, mut feed) = watched();
        let waiting = waiting_for(&namespaces, "team-a").await;
        feed(watcher::Event::Init);
        feed(watcher::Event::InitApply(namespace("team-a")));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the list is not complete");
        feed(watcher::Event::InitDone);
        assert!(waiting.await.expect("the waiting task"), "team-a known once the list is stored");
    }

    /// A Namespace's own request names itself as its namespace, which
    /// exists only once it is admitted: it does not wait; a pod's does.
    #[tokio::test]
    async fn a_namespace_request_does_not_wait_for_itself() {
        let (namespaces, _feed) = watched();
        let review = |kind: &str, name: &str| {
            let object =
                serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "new"}});
            let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind},
                "resource": {"group": "", "version": "v1", "resource": format!("{}s", kind.to_lowercase())},
                "namespace": "new", "name": name, "operation": "CREATE", "userInfo": {}, "object": object}});
            portcullis_admission::decode(review.to_string().as_bytes()).expect("a review")
        };
        let at_once = Duration::from_millis(200);
        let namespace = review("Namespace", "new");
        assert!(tokio::time::timeout(at_once, wait_for_namespace(&namespaces, &namespace)).await.is_ok());
        let pod = review("Pod", "web");
        assert!(tokio::time::timeout(at_once, wait_for_namespace(&namespaces, &pod)).await.is_err(), "a pod waits");
    }

    /// A namespace that never comes: the request goes on after the wait,
    /// not knowing it.
    #[tokio::test]
    async fn a_namespace_that_never_comes_ends_the_wait_at_its_bound() {
        let (namespaces, _feed) = watched();
        let (bound, started) = (Duration::from_millis(20), std::time::Instant::now());
        assert!(!namespaces.arrival("never", bound).await, "not known");
        assert!(started.elapsed() >= bound, "gave up after {:?}, before its bound", started.elapsed());
    }
}
