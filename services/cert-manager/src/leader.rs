//! Leader election with a coordination.k8s.io Lease: with several replicas,
//! one runs the signer and the caBundle controller; every replica serves
//! gRPC.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

/// How long a lease is valid without renewal.
const LEASE_SECONDS: i32 = 15;
/// How often the holder renews it, and others look at it.
const RETRY: Duration = Duration::from_secs(5);

/// Runs `work` whenever this replica holds the Lease `namespace/name`, until
/// `shutdown`. `work` gets a token cancelled when leadership is lost.
pub async fn run<F, Fut>(
    client: kube::Client,
    namespace: String,
    name: String,
    identity: String,
    shutdown: CancellationToken,
    work: F,
) where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let leases: Api<Lease> = Api::namespaced(client, &namespace);
    let mut leading: Option<CancellationToken> = None;
    loop {
        let holds = match try_hold(&leases, &name, &identity).await {
            Ok(holds) => holds,
            Err(err) => {
                tracing::warn!(lease = %name, error = %err, "cannot read or renew the lease");
                false
            }
        };
        match (holds, &leading) {
            (true, None) => {
                tracing::info!(lease = %name, %identity, "became the leader: running the signer and the caBundle controller");
                let token = shutdown.child_token();
                tokio::spawn(work(token.clone()));
                leading = Some(token);
            }
            (false, Some(token)) => {
                tracing::warn!(lease = %name, %identity, "lost the lease: stopping the signer and the caBundle controller");
                token.cancel();
                leading = None;
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Takes or renews the lease; whether this replica holds it now. Conflicts
/// (another replica wrote first) are a plain "no".
async fn try_hold(leases: &Api<Lease>, name: &str, identity: &str) -> Result<bool, kube::Error> {
    let now = MicroTime(Timestamp::now());
    let mine = |current: Option<Lease>| {
        let mut lease = current.unwrap_or_else(|| Lease {
            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
            spec: None,
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(identity) {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(identity.to_owned());
        spec.lease_duration_seconds = Some(LEASE_SECONDS);
        spec.renew_time = Some(now.clone());
        lease
    };
    let conflict = |r: Result<Lease, kube::Error>| match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    };
    let Some(current) = leases.get_opt(name).await? else {
        return conflict(leases.create(&PostParams::default(), &mine(None)).await);
    };
    let spec = current.spec.clone().unwrap_or_default();
    let held_by_me = spec.holder_identity.as_deref() == Some(identity);
    let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
        (Some(renewed), Some(seconds)) => renewed.0.as_second() + i64::from(seconds) < Timestamp::now().as_second(),
        _ => true,
    };
    if !held_by_me && !expired {
        return Ok(false);
    }
    // resourceVersion is kept, so two replicas cannot both win.
    conflict(leases.replace(name, &PostParams::default(), &mine(Some(current))).await)
}
