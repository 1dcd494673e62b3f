//! Leader election with a `coordination.k8s.io` Lease, shared by the
//! services that run work on one replica at a time (the cert-manager's
//! signer and caBundle controller, the validator's audit).
//!
//! Like client-go's leader election, a replica never compares another
//! replica's `renewTime` with its own clock: it notes *when it saw* the
//! Lease record change, on its own monotonic clock, and takes the Lease only
//! when the record has not changed for a whole lease duration. Clock skew
//! between nodes therefore cannot make two replicas lead at once, or none.
//! Writes carry the `resourceVersion` they read, so of two replicas that
//! try at once only one wins. This crate does no work of its own beyond the
//! Lease: what runs under leadership is the caller's.

#![forbid(unsafe_code)]

mod observe;

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use observe::Observer;

/// Which Lease, who we are, and how long a lease lasts.
#[derive(Debug, Clone)]
pub struct Election {
    /// The namespace of the Lease.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's name in `holderIdentity` (the pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews it, and others look at it.
    pub retry: Duration,
    /// What the leader runs, for log lines ("the audit").
    pub work: &'static str,
}

impl Election {
    /// An election for Lease `namespace/name` with client-go's usual
    /// timings scaled down: 15 s leases, looked at every 5 s. This replica
    /// is `pod_name` in the Lease, or `<name>-<pid>` without one.
    pub fn new(namespace: String, name: String, pod_name: Option<String>, work: &'static str) -> Self {
        let identity = pod_name.unwrap_or_else(|| format!("{name}-{}", std::process::id()));
        Self { namespace, name, identity, lease_duration: Duration::from_secs(15), retry: Duration::from_secs(5), work }
    }

    /// Runs `work` whenever this replica holds the Lease, until `shutdown`.
    /// `work` gets a token that is cancelled when leadership is lost.
    pub async fn run<F, Fut>(self, client: kube::Client, shutdown: CancellationToken, work: F)
    where
        F: Fn(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let leases: Api<Lease> = Api::namespaced(client, &self.namespace);
        let mut observer = Observer::default();
        let mut leading: Option<CancellationToken> = None;
        let mut standing_by = false;
        loop {
            let (holds, seen) = match self.try_hold(&leases, &mut observer).await {
                Ok(holds) => (holds, true),
                Err(err) => {
                    tracing::warn!(lease = %self.name, error = %err, "cannot read or renew the lease");
                    (false, false)
                }
            };
            match (holds, &leading) {
                (true, None) => {
                    tracing::info!(lease = %self.name, identity = %self.identity, "became the leader: running {}", self.work);
                    let token = shutdown.child_token();
                    tokio::spawn(work(token.clone()));
                    leading = Some(token);
                }
                (false, Some(token)) => {
                    tracing::warn!(lease = %self.name, identity = %self.identity, "lost the lease: stopping {}", self.work);
                    token.cancel();
                    leading = None;
                }
                (false, None) if seen && !standing_by => {
                    tracing::info!(lease = %self.name, identity = %self.identity, "standing by: another replica holds the lease");
                }
                _ => {}
            }
            standing_by = seen && !holds;
            tokio::select! {
                _ = tokio::time::sleep(self.retry) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// Takes or renews the lease; whether this replica holds it now.
    /// Conflicts (another replica wrote first) are a plain "no".
    async fn try_hold(&self, leases: &Api<Lease>, observer: &mut Observer) -> Result<bool, kube::Error> {
        let conflict = |r: Result<Lease, kube::Error>| match r {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
        let Some(current) = leases.get_opt(&self.name).await? else {
            return conflict(leases.create(&PostParams::default(), &self.mine(None)).await);
        };
        let spec = current.spec.clone().unwrap_or_default();
        let now = Instant::now();
        observer.observe(&spec, now);
        let held_by_me = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let free = spec.holder_identity.as_deref().is_none_or(str::is_empty);
        let duration = spec
            .lease_duration_seconds
            .map_or(self.lease_duration, |s| Duration::from_secs(u64::try_from(s).unwrap_or_default()));
        if !held_by_me && !free && !observer.expired(duration, now) {
            return Ok(false);
        }
        // resourceVersion is kept, so two replicas cannot both win.
        conflict(leases.replace(&self.name, &PostParams::default(), &self.mine(Some(current))).await)
    }

    /// The Lease as this replica writes it: held by us, renewed now.
    fn mine(&self, current: Option<Lease>) -> Lease {
        let now = MicroTime(Timestamp::now());
        let mut lease = current.unwrap_or_else(|| Lease {
            metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
            spec: None,
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX));
        spec.renew_time = Some(now);
        lease
    }
}
