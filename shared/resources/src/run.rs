//! The loop of one replica: after every change, swap the caller's set,
//! then report what is in force; and, on the replica holding the Lease,
//! the status writer.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use portcullis_lease::Election;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Key, ObjectState, WatchedKind};
use crate::metrics::ResourceMetrics;
use crate::replica::{self, HEARTBEAT, Identity, Reporter};
use crate::status::Refusal;
use crate::writer;

/// Builds the caller's set from its catalogs and swaps it in; called after
/// every change, once every kind is synced. Returns what the set could not
/// take, or took with a problem, object by object (two objects that
/// contradict each other: the later one).
pub type Swap = Box<dyn Fn() -> Vec<Remark> + Send + Sync>;

/// An object the set refused, or holds with a problem, though it compiled.
#[derive(Debug, Clone)]
pub struct Remark {
    /// Its kind.
    pub kind: &'static str,
    /// Which object.
    pub key: Key,
    /// Why: the status's reason and message.
    pub refusal: Refusal,
    /// Whether it is in force all the same (e.g. a policy whose paramKind
    /// is unknown, which then fails by its failure policy).
    pub in_force: bool,
}

/// How long a failed report write waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// A replica whose last report is older than this is not ready: the
/// status writer stops counting it at [`crate::writer`]'s 30 s, and by
/// then the replica must no longer get traffic (it may be cut off from
/// the API, and so from changes).
const STALE: Duration = Duration::from_secs(2 * HEARTBEAT.as_secs());

/// One replica's watched kinds and what it does when they change.
pub struct Loader {
    reported: Arc<Mutex<Option<Instant>>>,
    client: kube::Client,
    identity: Identity,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader").field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl Loader {
    /// Starts the loop for `kinds` (whose catalogs wake `changed`) and the
    /// status writer's election. The replica is ready once every kind is
    /// listed, swapped in and reported, and while its reports get through.
    pub fn start(
        client: kube::Client,
        identity: Identity,
        kinds: Vec<Arc<dyn WatchedKind>>,
        changed: Arc<Notify>,
        swap: Swap,
        metrics: ResourceMetrics,
        shutdown: CancellationToken,
    ) -> Self {
        let reported = Arc::new(Mutex::new(None));
        let election = Election::new(
            identity.namespace.clone(),
            format!("portcullis-{}-status", identity.webhook),
            Some(identity.name.clone()),
            "the status writer",
        );
        let (writer_client, writer_identity, writer_kinds) = (client.clone(), identity.clone(), kinds.clone());
        tokio::spawn(election.run(client.clone(), shutdown.clone(), move |leading| {
            writer::run(writer_client.clone(), writer_identity.clone(), writer_kinds.clone(), leading)
        }));
        let reporter = Reporter::new(client.clone(), identity.clone());
        tokio::spawn(report_loop(reporter, kinds, changed, swap, metrics, reported.clone(), shutdown));
        Self { reported, client, identity }
    }

    /// The readiness check: every kind listed, swapped in and reported,
    /// the last report less than [`STALE`] old.
    pub fn ready_check(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let reported = self.reported.clone();
        move || lock(&reported).is_some_and(|at| at.elapsed() < STALE)
    }

    /// Deletes this replica's report, once it serves no more (after the
    /// drain): the status writer then stops waiting for it.
    pub async fn retire(&self) {
        Reporter::new(self.client.clone(), self.identity.clone()).remove().await;
    }
}

fn lock(reported: &Mutex<Option<Instant>>) -> std::sync::MutexGuard<'_, Option<Instant>> {
    reported.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn report_loop(
    mut reporter: Reporter,
    kinds: Vec<Arc<dyn WatchedKind>>,
    changed: Arc<Notify>,
    swap: Swap,
    metrics: ResourceMetrics,
    reported: Arc<Mutex<Option<Instant>>>,
    shutdown: CancellationToken,
) {
    let mut dirty = true;
    let mut held = Vec::new();
    loop {
        let synced = kinds.iter().all(|k| k.is_synced());
        if dirty {
            // What the catalogs hold is read before the swap, so that the
            // report never claims more than the swapped set enforces (a
            // change in between is swapped and reported on the next pass).
            let states = snapshot(&kinds);
            let remarks = if synced { swap() } else { Vec::new() };
            metrics.update(&kinds, &remarks);
            held = replica::held(states, &remarks);
            dirty = !synced;
        }
        let wait = match reporter.write(held.clone(), synced).await {
            Ok(()) if synced => {
                if lock(&reported).replace(Instant::now()).is_none() {
                    tracing::info!("every kind is listed, in force and reported: ready");
                }
                HEARTBEAT
            }
            Ok(()) => HEARTBEAT,
            Err(err) => {
                tracing::warn!(error = %portcullis_telemetry::error_chain(&err), "could not write this replica's report; retrying");
                RETRY
            }
        };
        tokio::select! {
            () = changed.notified() => dirty = true,
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

fn snapshot(kinds: &[Arc<dyn WatchedKind>]) -> Vec<(&'static str, Vec<ObjectState>)> {
    kinds.iter().map(|k| (k.kind(), k.objects())).collect()
}

/// Swaps the caller's set after every change of `kinds`, once all are
/// synced, until `shutdown`: for a reader that enforces nothing and so
/// reports nothing (the audit).
pub async fn follow(kinds: Vec<Arc<dyn WatchedKind>>, changed: Arc<Notify>, swap: Swap, shutdown: CancellationToken) {
    loop {
        if kinds.iter().all(|k| k.is_synced()) {
            swap();
        }
        tokio::select! {
            () = changed.notified() => {}
            () = shutdown.cancelled() => return,
        }
    }
}
