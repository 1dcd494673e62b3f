//! One watched kind: every object compiled on its own, its last good
//! compilation kept in force when a new generation is refused.
//!
//! The watch is kube-runtime's [`watcher`], restarted with its backoff
//! after an error. After a restart (an API server outage) the objects are
//! listed again into a buffer that replaces the catalog only once the list
//! is complete, so enforcement never has a gap and objects deleted during
//! the outage are dropped. An object is compiled again only when its
//! `metadata.generation` (or uid) changes: status writes do not recompile.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt as _, watcher::watcher};
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::status::{Refusal, ResourceStatus};

/// Which object of a kind: its namespace (none for cluster-scoped kinds)
/// and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// What this replica knows of one object.
#[derive(Debug, Clone)]
pub struct ObjectState {
    /// Which object.
    pub key: Key,
    /// Its uid.
    pub uid: String,
    /// Its current `metadata.generation`.
    pub generation: i64,
    /// The generation in force here, if any.
    pub enforced: Option<i64>,
    /// Why the current generation was refused, if it was.
    pub refusal: Option<Refusal>,
    /// Its `status` as last seen.
    pub status: Option<ResourceStatus>,
}

/// A kind as the replica report and the status writer see it, whatever
/// its Rust type.
pub trait WatchedKind: Send + Sync + fmt::Debug {
    /// The kind (`ValidatorPolicy`).
    fn kind(&self) -> &'static str;
    /// Its plural resource name (`validatorpolicies`).
    fn plural(&self) -> &'static str;
    /// Whether the first list is complete.
    fn is_synced(&self) -> bool;
    /// Every object, by key.
    fn objects(&self) -> Vec<ObjectState>;
}

struct Entry<C> {
    uid: String,
    created: Option<k8s_openapi::jiff::Timestamp>,
    generation: i64,
    enforced: Option<(i64, Arc<C>)>,
    refusal: Option<Refusal>,
    status: Option<ResourceStatus>,
}

/// The objects of kind `K`, compiled to `C`.
pub struct Catalog<K, C> {
    kind: &'static str,
    plural: &'static str,
    entries: Mutex<BTreeMap<Key, Entry<C>>>,
    synced: AtomicBool,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K, C> fmt::Debug for Catalog<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog").field("kind", &self.kind).field("synced", &self.synced).finish_non_exhaustive()
    }
}

/// How an object of `K` is compiled: on its own, from the object.
pub type Compile<K, C> = Arc<dyn Fn(&K) -> Result<C, Refusal> + Send + Sync>;

/// Reads an object's `status`, if its type has ours.
pub type StatusOf<K> = fn(&K) -> Option<ResourceStatus>;

impl<K, C> Catalog<K, C>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    C: Send + Sync + 'static,
{
    /// An empty catalog of `kind` (`plural`), not yet synced.
    pub fn new(kind: &'static str, plural: &'static str) -> Arc<Self> {
        Arc::new(Self {
            kind,
            plural,
            entries: Mutex::default(),
            synced: AtomicBool::new(false),
            _kind: std::marker::PhantomData,
        })
    }

    /// Watches every object of the kind until `shutdown`, compiling each
    /// with `compile` and waking `changed` after every change.
    pub fn watch(
        self: &Arc<Self>,
        api: Api<K>,
        compile: Compile<K, C>,
        status_of: StatusOf<K>,
        changed: Arc<Notify>,
        shutdown: CancellationToken,
    ) {
        let catalog = self.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
            let mut relist: Option<BTreeMap<Key, Entry<C>>> = None;
            loop {
                let event = tokio::select! {
                    event = events.next() => event,
                    () = shutdown.cancelled() => return,
                };
                match event {
                    None => return,
                    Some(Err(err)) => {
                        tracing::warn!(kind = catalog.kind, error = %portcullis_telemetry::error_chain(&err),
                            "watch failed; the objects in force stay in force while it is retried");
                    }
                    Some(Ok(Event::Init)) => relist = Some(BTreeMap::new()),
                    Some(Ok(Event::InitApply(object))) => {
                        let (key, entry, _) = catalog.load(&object, &compile, status_of).await;
                        if let Some(buffer) = relist.as_mut() {
                            buffer.insert(key, entry);
                        }
                    }
                    Some(Ok(Event::InitDone)) => {
                        if let Some(buffer) = relist.take() {
                            *catalog.lock() = buffer;
                        }
                        catalog.synced.store(true, Ordering::Release);
                        changed.notify_one();
                    }
                    Some(Ok(Event::Apply(object))) => {
                        let (key, entry, compiled) = catalog.load(&object, &compile, status_of).await;
                        let enforcer = entry.status.as_ref().and_then(|s| s.enforced_by.clone());
                        let previous = catalog.lock().insert(key, entry);
                        let moved = previous.and_then(|p| p.status.and_then(|s| s.enforced_by)) != enforcer;
                        // A status write changes nothing in force (no swap,
                        // no report, else every status write would cause
                        // one), but for a change of who enforces it.
                        if compiled || moved {
                            changed.notify_one();
                        }
                    }
                    Some(Ok(Event::Delete(object))) => {
                        catalog.lock().remove(&key_of(&object));
                        changed.notify_one();
                    }
                }
            }
        });
    }

    /// What is in force: the last good compilation of every object, in
    /// key order.
    pub fn in_force(&self) -> Vec<(Key, Arc<C>)> {
        self.lock()
            .iter()
            .filter_map(|(key, entry)| entry.enforced.as_ref().map(|(_, c)| (key.clone(), c.clone())))
            .collect()
    }

    /// The objects whose generation in force here the API server enforces
    /// itself ([`ResourceStatus::delegates`]): a webhook leaves them out
    /// of its set, an audit does not.
    pub fn delegated(&self) -> std::collections::BTreeSet<Key> {
        self.lock()
            .iter()
            .filter(|(_, e)| {
                e.enforced.as_ref().is_some_and(|(g, _)| e.status.as_ref().is_some_and(|s| s.delegates(*g)))
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// [`Catalog::in_force`] oldest first (by `creationTimestamp`, then
    /// key): where objects can contradict each other, the one that came
    /// first keeps its place.
    pub fn in_force_by_age(&self) -> Vec<(Key, Arc<C>)> {
        let entries = self.lock();
        let mut aged: Vec<_> = entries
            .iter()
            .filter_map(|(key, entry)| entry.enforced.as_ref().map(|(_, c)| (entry.created, key.clone(), c.clone())))
            .collect();
        aged.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        aged.into_iter().map(|(_, key, c)| (key, c)).collect()
    }

    /// The entry for `object`, and whether it was compiled: only when its
    /// uid or generation changed; otherwise only its status is updated.
    async fn load(&self, object: &K, compile: &Compile<K, C>, status_of: StatusOf<K>) -> (Key, Entry<C>, bool) {
        let key = key_of(object);
        let uid = object.uid().unwrap_or_default();
        let generation = object.meta().generation.unwrap_or_default();
        let status = status_of(object);
        let created = object.meta().creation_timestamp.as_ref().map(|t| t.0);
        let previous = {
            let entries = self.lock();
            entries.get(&key).filter(|e| e.uid == uid).map(|e| (e.generation, e.enforced.clone(), e.refusal.clone()))
        };
        if let Some((seen, enforced, refusal)) = &previous
            && *seen == generation
        {
            let entry =
                Entry { uid, created, generation, enforced: enforced.clone(), refusal: refusal.clone(), status };
            return (key, entry, false);
        }
        let (compile, owned) = (compile.clone(), object.clone());
        let compiled = match tokio::task::spawn_blocking(move || compile(&owned)).await {
            Ok(compiled) => compiled,
            Err(err) => Err(Refusal::new("InternalError", format!("compiling it failed: {err}"))),
        };
        let last_good = previous.and_then(|(_, enforced, _)| enforced);
        let entry = match compiled {
            Ok(compiled) => {
                tracing::info!(kind = self.kind, object = %key, generation, "loaded");
                Entry {
                    uid,
                    created,
                    generation,
                    enforced: Some((generation, Arc::new(compiled))),
                    refusal: None,
                    status,
                }
            }
            Err(refusal) => {
                tracing::warn!(kind = self.kind, object = %key, generation, reason = %refusal.reason,
                    message = %refusal.message, kept = ?last_good.as_ref().map(|(g, _)| g), "refused");
                Entry { uid, created, generation, enforced: last_good, refusal: Some(refusal), status }
            }
        };
        (key, entry, true)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Entry<C>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K, C> WatchedKind for Catalog<K, C>
where
    K: Send + Sync,
    C: Send + Sync,
{
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn plural(&self) -> &'static str {
        self.plural
    }

    fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn objects(&self) -> Vec<ObjectState> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .map(|(key, e)| ObjectState {
                key: key.clone(),
                uid: e.uid.clone(),
                generation: e.generation,
                enforced: e.enforced.as_ref().map(|(g, _)| *g),
                refusal: e.refusal.clone(),
                status: e.status.clone(),
            })
            .collect()
    }
}

fn key_of<K: Resource>(object: &K) -> Key {
    Key { namespace: object.meta().namespace.clone(), name: object.meta().name.clone().unwrap_or_default() }
}
