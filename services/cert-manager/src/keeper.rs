//! Keeps every replica's view of the CAs current: reads the stored state
//! every interval and, where allowed (the leader; the one standalone
//! process), takes the rotation step that is due and writes it back.

use std::sync::Arc;
use std::time::Duration;

use portcullis_telemetry::error_chain;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::authority::{Authority, RotationPolicy};
use crate::ca::CaError;
use crate::store::{Store, StoreError};

/// Why the state could not be read, made or advanced.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    /// Reading or writing the store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The CAs in it.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// Others keep writing.
    #[error("the CA state keeps changing under this replica")]
    Contended,
}

/// The stored authority, or a new one (a new CA) stored first when there is
/// none. Replicas starting at once cannot make two: all but one lose the
/// write and read the winner's.
pub async fn load_or_create(store: &Store, policy: &RotationPolicy) -> Result<Authority, KeepError> {
    for _ in 0..3 {
        if let Some(loaded) = store.load().await? {
            return Ok(Authority::from_data(&loaded.data)?);
        }
        let authority = Authority::create(policy.ca_lifetime)?;
        if store.save(&authority.to_data(), None).await? {
            tracing::info!("made a new CA and stored it");
            return Ok(authority);
        }
    }
    Err(KeepError::Contended)
}

/// Every `interval` until `shutdown`: reads the state into `current` and,
/// with `rotates`, takes the due rotation step first.
pub async fn run(
    store: Store,
    policy: RotationPolicy,
    interval: Duration,
    rotates: bool,
    current: Arc<watch::Sender<Arc<Authority>>>,
    shutdown: CancellationToken,
) {
    loop {
        if let Err(err) = tick(&store, &policy, rotates, &current).await {
            tracing::warn!(error = %error_chain(&err), "could not refresh the CA state; keeping the one in hand");
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

async fn tick(
    store: &Store,
    policy: &RotationPolicy,
    rotates: bool,
    current: &watch::Sender<Arc<Authority>>,
) -> Result<(), KeepError> {
    let Some(loaded) = store.load().await? else {
        // Deleted by hand: the one in hand is the truth; write it back.
        if rotates {
            tracing::error!("the stored CA state is gone; writing back the one in hand");
            let held = current.borrow().to_data();
            store.save(&held, None).await?;
        }
        return Ok(());
    };
    let mut authority = Authority::from_data(&loaded.data)?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if rotates && let Some((next, what)) = authority.step(now, loaded.rotate_requested, policy)? {
        // Each step is its own trace in Jaeger: a controller's decision,
        // not part of a request.
        let span = tracing::info_span!("rotate CA", generation = next.generation, step = %what);
        if !store.save(&next.to_data(), Some(&loaded)).instrument(span.clone()).await? {
            return Ok(()); // another writer was first: read theirs next time
        }
        span.in_scope(|| tracing::info!(generation = next.generation, "CA rotation: {what}"));
        authority = next;
    }
    current.send_if_modified(|held| {
        let changed = held.trust_bundle() != authority.trust_bundle();
        if changed {
            *held = Arc::new(authority);
        }
        changed
    });
    Ok(())
}
