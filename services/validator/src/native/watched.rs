//! The cluster's native policies and bindings for the audit: both kinds
//! watched into memory (kube-runtime reflectors), the pairs compiled anew
//! after every change. Read only: their status is the API server's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_telemetry::error_chain;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Natives, assemble};

/// The watched ValidatingAdmissionPolicies and their bindings.
#[derive(Debug, Clone)]
pub struct WatchedNatives {
    policies: Store<ValidatingAdmissionPolicy>,
    bindings: Store<ValidatingAdmissionPolicyBinding>,
    synced: Arc<[AtomicBool; 2]>,
    cost_limit: u64,
}

impl WatchedNatives {
    /// Starts both watches with `client` until `shutdown`; `changed` is
    /// woken after every change once both are listed.
    pub fn start(client: &kube::Client, cost_limit: u64, changed: Arc<Notify>, shutdown: &CancellationToken) -> Self {
        let synced: Arc<[AtomicBool; 2]> = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        // Kept without what compiling them never reads: the managed fields
        // (about as large as the spec) and the VAP's status (its
        // type-checking warnings).
        let policies = follow(client, 0, &synced, &changed, shutdown, |p: &mut ValidatingAdmissionPolicy| {
            p.metadata.managed_fields = None;
            p.status = None;
        });
        let bindings = follow(client, 1, &synced, &changed, shutdown, |b: &mut ValidatingAdmissionPolicyBinding| {
            b.metadata.managed_fields = None;
        });
        Self { policies, bindings, synced, cost_limit }
    }

    /// Whether both kinds have been listed.
    pub fn is_synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Relaxed))
    }

    /// Every binding's policy as it stands, compiled; refusals and
    /// warnings logged.
    pub fn compile(&self) -> Natives {
        let policies: Vec<ValidatingAdmissionPolicy> = self.policies.state().iter().map(|p| (**p).clone()).collect();
        let bindings: Vec<ValidatingAdmissionPolicyBinding> =
            self.bindings.state().iter().map(|b| (**b).clone()).collect();
        let natives = assemble(&policies, &bindings, self.cost_limit);
        for refused in &natives.refused {
            tracing::warn!(error = %error_chain(refused), "native policy not audited");
        }
        for warning in &natives.warnings {
            tracing::warn!(%warning, "native policy audited with a warning");
        }
        natives
    }
}

/// A reflector of `K`, each object `reduce`d before it is stored, whose
/// every change (once listed) wakes `changed`.
fn follow<K>(
    client: &kube::Client,
    index: usize,
    synced: &Arc<[AtomicBool; 2]>,
    changed: &Arc<Notify>,
    shutdown: &CancellationToken,
    reduce: fn(&mut K),
) -> Store<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api = kube::Api::<K>::all(client.clone());
    let (store, writer) = reflector::store();
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default()).modify(reduce)).default_backoff();
    let (synced, changed, shutdown) = (synced.clone(), changed.clone(), shutdown.clone());
    let ready = store.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                item = stream.next() => match item {
                    Some(Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_))) => {
                        if ready.wait_until_ready().await.is_ok() {
                            synced[index].store(true, Ordering::Relaxed);
                            changed.notify_one();
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(err)) => {
                        tracing::warn!(
                            kind = K::kind(&()).as_ref(),
                            error = %error_chain(&err),
                            "native policy watch failed; retrying with backoff"
                        );
                        // Not served (before 1.30) or not allowed (RBAC): audit
                        // without them rather than not at all; a later list fills in.
                        if unavailable(&err) && !synced[index].swap(true, Ordering::Relaxed) {
                            tracing::warn!(kind = K::kind(&()).as_ref(), "native policies left out until they can be listed");
                            changed.notify_one();
                        }
                    }
                    None => return,
                },
                () = shutdown.cancelled() => return,
            }
        }
    });
    store
}

/// A first list refused because the kind is not served or not allowed.
fn unavailable(err: &watcher::Error) -> bool {
    matches!(err, watcher::Error::InitialListFailed(kube::Error::Api(status)) if matches!(status.code, 403 | 404))
}
