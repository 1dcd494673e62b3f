//! Per-object retry delays for the kube-runtime controllers (the signer,
//! the caBundle controller): 1 s after a failure, doubling with each
//! failure in a row up to 5 min, back to nothing after a success.
//! kube-runtime's error policy is told only of the failure at hand, so the
//! count in a row is kept here, and forgotten once the object succeeds,
//! needs nothing more or is gone (CSR names are generated: a count never
//! forgotten would stay for the leader's lifetime).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::Resource;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use portcullis_telemetry::error_chain;

/// The first retry; doubled per failure in a row.
const FIRST: Duration = Duration::from_secs(1);
/// The longest wait between retries.
const LAST: Duration = Duration::from_secs(300);

/// Failures in a row, per object name.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// How long to wait before retrying `name` after one more failure.
    pub(crate) fn failed(&self, name: &str) -> Duration {
        let mut failures = self.lock();
        let count = failures.entry(name.to_owned()).or_default();
        *count = count.saturating_add(1);
        FIRST.saturating_mul(2u32.saturating_pow(*count - 1)).min(LAST)
    }

    /// `name` succeeded, needs nothing more or is gone: its next failure
    /// waits the shortest time again.
    pub(crate) fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    /// Reads one result of `controller`'s stream: a failed reconcile was
    /// logged by the error policy, which knows the wait; an object deleted
    /// while its retry was scheduled is forgotten; anything else (the
    /// watcher's errors: RBAC forbidding list or watch, an API server
    /// away) comes only this way, and is logged.
    pub(crate) fn settle<K, R, Q>(
        &self,
        controller: &str,
        result: Result<(ObjectRef<K>, Action), controller::Error<R, Q>>,
    ) where
        K: Resource,
        R: std::error::Error + 'static,
        Q: std::error::Error + 'static,
    {
        match result {
            Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
            Err(controller::Error::ObjectNotFound(object)) => self.forget(&object.name),
            Err(err) => tracing::warn!(error = %error_chain(&err), "{controller}"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_failure_in_a_row_up_to_five_minutes_and_starts_over_after_a_success() {
        let backoff = Backoff::default();
        let waits: Vec<u64> = (0..10).map(|_| backoff.failed("a").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        assert_eq!(backoff.failed("b").as_secs(), 1, "per object");
        backoff.forget("a");
        assert_eq!(backoff.failed("a").as_secs(), 1);
        backoff.forget("a");
        backoff.forget("b");
        assert!(backoff.lock().is_empty(), "nothing kept of forgotten objects");
    }
}
