//! Parameter objects kept in memory by one watch per `paramKind` in use.
//!
//! The set of kinds follows the policies: a reload that adds a kind starts
//! its watch, one that drops it stops it, and a kind added again gets a
//! fresh watch (the API server's shared informer for built-in kinds is
//! known to keep serving a frozen copy in that case). Until a kind's first
//! list has arrived, requests it concerns get "not yet synced" under the
//! policy's failure policy, as in the API server.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::{self, Scope as ApiScope};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ParamKind, ParamSource, ParamsError, Scope, Selection};

/// How long an unknown kind waits before discovery is asked again (a CRD
/// may be installed after the policy).
const REDISCOVER: Duration = Duration::from_secs(10);

/// Watched parameter objects, by kind.
pub struct WatchedParams {
    client: kube::Client,
    shutdown: CancellationToken,
    kinds: RwLock<HashMap<ParamKind, Arc<Kind>>>,
    progress: Arc<Progress>,
}

/// What the kinds' watches tell of their progress: a kind found unknown,
/// found after all, or first listed.
#[derive(Debug, Default)]
struct Progress {
    /// For the status of what reads the kinds, which says so: one waiter
    /// ([`WatchedParams::forward_progress`]).
    discovered: Arc<tokio::sync::Notify>,
    /// For every waiter until all kinds are listed ([`WatchedParams::listed`]).
    changed: tokio::sync::watch::Sender<()>,
}

impl Progress {
    fn tell(&self) {
        self.discovered.notify_one();
        self.changed.send_replace(());
    }
}

impl std::fmt::Debug for WatchedParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedParams").field("kinds", &self.kinds).finish_non_exhaustive()
    }
}

/// One watched kind.
#[derive(Debug)]
struct Kind {
    state: RwLock<State>,
    synced: AtomicBool,
    stop: CancellationToken,
}

impl Kind {
    /// [`WatchedParams::remark`] for this kind.
    fn remark(&self) -> Option<KindRemark> {
        match &*self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner) {
            State::Unknown(why) => Some(KindRemark::Unknown(why.clone())),
            State::Watching { .. } if self.synced.load(Ordering::Relaxed) => None,
            State::Discovering | State::Watching { .. } => Some(KindRemark::Pending),
        }
    }
}

#[derive(Debug)]
enum State {
    /// Discovery has not answered yet.
    Discovering,
    /// Discovery failed (an unknown kind, or the API unreachable).
    Unknown(Arc<str>),
    /// Watching.
    Watching { resource: ApiResource, scope: Scope, store: Store<DynamicObject> },
}

/// What the status of something reading a `paramKind` says while the kind
/// is not listed ([`WatchedParams::remark`]); each service words the
/// message, the reason and whether the reader is in force are these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindRemark {
    /// Discovery says the API does not serve the kind (why). What reads it
    /// is in force meanwhile, failing by its failure policy, as in the API
    /// server. Shared with the kind's state: asking costs no copy.
    Unknown(Arc<str>),
    /// The kind is not yet discovered or not yet listed: what reads it is
    /// not yet judged as it will be.
    Pending,
}

impl KindRemark {
    /// The status condition's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unknown(_) => "UnknownParamKind",
            Self::Pending => portcullis_resources::verdict::PENDING,
        }
    }

    /// Whether what reads the kind counts as in force meanwhile.
    pub fn in_force(&self) -> bool {
        matches!(self, Self::Unknown(_))
    }
}

impl WatchedParams {
    /// Nothing watched yet; watches run until `shutdown`.
    pub fn new(client: kube::Client, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Self { client, shutdown, kinds: RwLock::default(), progress: Arc::default() })
    }

    /// Watches exactly `wanted`: starts a watch for each new kind, stops
    /// those no longer wanted.
    pub fn watch(self: &Arc<Self>, wanted: BTreeSet<ParamKind>) {
        let mut kinds = self.kinds.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.retain(|kind, watched| {
            let keep = wanted.contains(kind);
            if !keep {
                watched.stop.cancel();
                tracing::info!(param_kind = %kind, "no policy reads this paramKind any more; its watch stopped");
            }
            keep
        });
        for kind in wanted {
            if kinds.contains_key(&kind) {
                continue;
            }
            let watched = Arc::new(Kind {
                state: RwLock::new(State::Discovering),
                synced: AtomicBool::new(false),
                stop: self.shutdown.child_token(),
            });
            kinds.insert(kind.clone(), watched.clone());
            tokio::spawn(run(self.client.clone(), kind, watched, self.progress.clone()));
        }
    }

    /// Wakes `changed` (until shutdown) whenever what [`WatchedParams::remark`]
    /// says may have changed: discovery found a kind unknown, or found it
    /// after all, or a kind was first listed. For the status of what reads
    /// the kinds, rebuilt on `changed`.
    pub fn forward_progress(&self, changed: Arc<tokio::sync::Notify>) {
        let (discovered, stop) = (self.progress.discovered.clone(), self.shutdown.clone());
        tokio::spawn(async move {
            while tokio::select! { () = discovered.notified() => true, () = stop.cancelled() => false } {
                changed.notify_one();
            }
        });
    }

    /// What the status of a policy (or configuration) reading `kind` must
    /// say of it: nothing once its objects are listed.
    pub fn remark(&self, kind: &ParamKind) -> Option<KindRemark> {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.get(kind).map_or(Some(KindRemark::Pending), |watched| watched.remark())
    }

    /// Whether every kind has been discovered and listed once, or is
    /// known not to exist (its policies fail by their failure policy).
    pub fn is_ready(&self) -> bool {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.values().all(|k| k.remark().is_none_or(|remark| remark.in_force()))
    }

    /// Until [`WatchedParams::is_ready`]: woken by each kind's progress,
    /// not by polling.
    pub async fn listed(&self) {
        // Subscribed before asking, so that no change is missed between.
        let mut changes = self.progress.changed.subscribe();
        while !self.is_ready() {
            if changes.changed().await.is_err() {
                // Not while `self` holds the sender.
                return;
            }
        }
    }

    fn with<T>(
        &self,
        kind: &ParamKind,
        f: impl FnOnce(&Kind, &State) -> Result<T, ParamsError>,
    ) -> Result<T, ParamsError> {
        let kinds = self.kinds.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let unwatched = || ParamsError::Unknown { kind: kind.clone(), why: "no policy reads it".into() };
        let watched = kinds.get(kind).ok_or_else(unwatched)?;
        let state = watched.state.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(watched, &state)
    }
}

impl ParamSource for WatchedParams {
    fn scope(&self, kind: &ParamKind) -> Result<Scope, ParamsError> {
        self.with(kind, |watched, state| match state {
            State::Watching { scope, .. } if watched.synced.load(Ordering::Relaxed) => Ok(*scope),
            State::Unknown(why) => Err(ParamsError::Unknown { kind: kind.clone(), why: why.clone() }),
            _ => Err(ParamsError::NotSynced(kind.clone())),
        })
    }

    fn find(&self, kind: &ParamKind, namespace: Option<&str>, selection: &Selection) -> Vec<Value> {
        let found = self.with(kind, |_, state| {
            let State::Watching { resource, store, .. } = state else { return Ok(Vec::new()) };
            let objects = match selection {
                Selection::Name(name) => {
                    let mut key = ObjectRef::new_with(name, resource.clone());
                    key.namespace = namespace.map(str::to_owned);
                    store.get(&key).into_iter().collect()
                }
                // Matched on the stored metadata: only the picked objects
                // are converted for the policy.
                Selection::Labels(selector) => {
                    let mut picked = store.state_filter(|o| {
                        let labels = o.metadata.labels.as_ref();
                        o.metadata.namespace.as_deref() == namespace
                            && selector.matches(|key| labels.and_then(|l| l.get(key)).map(String::as_str))
                    });
                    picked.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                    picked
                }
            };
            Ok(objects.iter().filter_map(|o| as_json(o, resource)).collect())
        });
        found.unwrap_or_default()
    }
}

/// The object as the policy sees it, with its apiVersion and kind (a
/// list's items may come without them).
fn as_json(object: &DynamicObject, resource: &ApiResource) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    value["apiVersion"] = Value::String(resource.api_version.clone());
    value["kind"] = Value::String(resource.kind.clone());
    Some(value)
}

/// Discovers `kind` (again every [`REDISCOVER`] while unknown), then keeps
/// its objects in memory until the watch is stopped.
async fn run(client: kube::Client, kind: ParamKind, watched: Arc<Kind>, progress: Arc<Progress>) {
    let (group, version) = match kind.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", kind.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
    let (resource, capabilities) = loop {
        let found = tokio::select! {
            found = discovery::pinned_kind(&client, &gvk) => found,
            _ = watched.stop.cancelled() => return,
        };
        match found {
            Ok(found) => break found,
            Err(err) => {
                tracing::warn!(param_kind = %kind, error = %error_chain(&err), "paramKind is not served by the API; policies reading it fail by their failure policy");
                let previous = std::mem::replace(
                    &mut *watched.state.write().unwrap_or_else(std::sync::PoisonError::into_inner),
                    State::Unknown(err.to_string().into()),
                );
                if !matches!(previous, State::Unknown(_)) {
                    progress.tell();
                }
                tokio::select! {
                    _ = tokio::time::sleep(REDISCOVER) => {}
                    _ = watched.stop.cancelled() => return,
                }
            }
        }
    };
    let scope = match capabilities.scope {
        ApiScope::Namespaced => Scope::Namespaced,
        ApiScope::Cluster => Scope::Cluster,
    };
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    let previous = std::mem::replace(
        &mut *watched.state.write().unwrap_or_else(std::sync::PoisonError::into_inner),
        State::Watching { resource, scope, store: store.clone() },
    );
    if matches!(previous, State::Unknown(_)) {
        progress.tell();
    }
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            event = stream.next() => match event {
                Some(Ok(watcher::Event::InitDone)) => {
                    if !watched.synced.swap(true, Ordering::Relaxed) {
                        tracing::info!(param_kind = %kind, objects = store.state().len(), "parameter objects are in memory");
                        progress.tell();
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => tracing::warn!(param_kind = %kind, error = %error_chain(&err), "parameter watch failed; retrying with backoff"),
                None => return,
            },
            _ = watched.stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the status of a reader says: `Pending` until discovery has
    /// answered, `UnknownParamKind` (in force meanwhile) when the API does
    /// not serve the kind, told to the status writer when it changes.
    #[tokio::test]
    async fn a_kind_is_pending_until_discovery_answers_then_unknown_when_not_served() {
        let nowhere = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let params = WatchedParams::new(kube::Client::try_from(nowhere).expect("a client"), CancellationToken::new());
        let kind = ParamKind { api_version: "example.com/v1".into(), kind: "Settings".into() };
        assert_eq!(params.remark(&kind), Some(KindRemark::Pending), "not watched yet");
        let changed = Arc::new(tokio::sync::Notify::new());
        params.forward_progress(changed.clone());
        params.watch(BTreeSet::from([kind.clone()]));
        tokio::time::timeout(Duration::from_secs(30), changed.notified()).await.expect("discovery answers");
        let remark = params.remark(&kind).expect("not listed");
        assert!(matches!(remark, KindRemark::Unknown(_)), "{remark:?}");
        assert_eq!((remark.reason(), remark.in_force()), ("UnknownParamKind", true));
        assert_eq!((KindRemark::Pending.reason(), KindRemark::Pending.in_force()), ("Pending", false));
    }
}
