//! The loop of one replica: after every change, swap the caller's set,
//! then report what is in force; and, on the replica holding the Lease,
//! the status writer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use portcullis_lease::Election;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Key, WatchedKind};
use crate::metrics::ResourceMetrics;
use crate::replica::{HEARTBEAT, Identity, Reporter};
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

/// One replica's watched kinds and what it does when they change.
#[derive(Debug)]
pub struct Loader {
    ready: Arc<AtomicBool>,
}

impl Loader {
    /// Starts the loop for `kinds` (whose catalogs wake `changed`) and the
    /// status writer's election. The replica is ready once every kind is
    /// listed, swapped in and reported.
    pub fn start(
        client: kube::Client,
        identity: Identity,
        kinds: Vec<Arc<dyn WatchedKind>>,
        changed: Arc<Notify>,
        swap: Swap,
        metrics: ResourceMetrics,
        shutdown: CancellationToken,
    ) -> Self {
        let ready = Arc::new(AtomicBool::new(false));
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
        tokio::spawn(report_loop(
            Reporter::new(client, identity),
            kinds,
            changed,
            swap,
            metrics,
            ready.clone(),
            shutdown,
        ));
        Self { ready }
    }

    /// Whether this replica has every kind listed, swapped in and reported.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// A handle to the readiness flag.
    pub fn ready_flag(&self) -> Arc<AtomicBool> {
        self.ready.clone()
    }
}

async fn report_loop(
    mut reporter: Reporter,
    kinds: Vec<Arc<dyn WatchedKind>>,
    changed: Arc<Notify>,
    swap: Swap,
    metrics: ResourceMetrics,
    ready: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
    let mut dirty = true;
    let mut remarks = Vec::new();
    loop {
        let synced = kinds.iter().all(|k| k.is_synced());
        if synced && dirty {
            remarks = swap();
            metrics.update(&kinds, &remarks);
            dirty = false;
        }
        let wait = match reporter.write(&kinds, &remarks, synced).await {
            Ok(()) => {
                if synced && !ready.swap(true, Ordering::AcqRel) {
                    tracing::info!("every policy kind is listed, in force and reported: ready");
                }
                HEARTBEAT
            }
            Err(err) => {
                tracing::warn!(error = %portcullis_telemetry::error_chain(&err), "could not write this replica's report; retrying");
                RETRY
            }
        };
        tokio::select! {
            () = changed.notified() => dirty = true,
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => {
                reporter.remove().await;
                return;
            }
        }
    }
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
