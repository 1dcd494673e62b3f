//! When this replica last saw the Lease record change, by its own clock.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use tokio::time::Instant;

/// The last Lease record seen and the local instant it was first seen.
/// The record's own times are only compared for change, never with our
/// clock, so another node's skewed clock cannot fool the election.
#[derive(Debug, Default)]
pub struct Observer {
    last: Option<(LeaseSpec, Instant)>,
}

impl Observer {
    /// Notes `record` as read at `now`; the instant moves only when the
    /// record differs from the last one seen.
    pub fn observe(&mut self, record: &LeaseSpec, now: Instant) {
        match &self.last {
            Some((seen, _)) if seen == record => {}
            _ => self.last = Some((record.clone(), now)),
        }
    }

    /// Whether the holder has failed to renew for `duration`: the record
    /// has not changed for that long, as this replica measured it.
    pub fn expired(&self, duration: Duration, now: Instant) -> bool {
        self.last.as_ref().is_none_or(|(_, since)| now.duration_since(*since) >= duration)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    /// A record as a holder whose clock is `skew` off writes it.
    fn renewed(holder: &str, skew: SignedDuration) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(15),
            renew_time: Timestamp::now().checked_add(skew).ok().map(MicroTime),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_holder_with_a_slow_clock_keeps_its_lease_while_it_renews() {
        // Its renewTime is an hour in the past by our clock: comparing
        // clocks would call the lease expired and make two leaders.
        let mut observer = Observer::default();
        let start = Instant::now();
        for step in 0..10u32 {
            let now = start + Duration::from_secs(5) * step;
            observer.observe(&renewed("other", SignedDuration::from_hours(-1)), now);
            assert!(!observer.expired(LEASE, now), "renewed at step {step}, yet taken");
        }
    }

    #[test]
    fn a_silent_holder_with_a_fast_clock_loses_its_lease_after_one_duration() {
        // Its last renewTime is an hour in the future by our clock:
        // comparing clocks would leave the cluster without a leader for an hour.
        let mut observer = Observer::default();
        let start = Instant::now();
        let frozen = renewed("other", SignedDuration::from_hours(1));
        observer.observe(&frozen, start);
        observer.observe(&frozen, start + Duration::from_secs(10));
        assert!(!observer.expired(LEASE, start + Duration::from_secs(10)));
        observer.observe(&frozen, start + LEASE);
        assert!(observer.expired(LEASE, start + LEASE));
    }

    #[test]
    fn nothing_seen_yet_is_expired() {
        assert!(Observer::default().expired(LEASE, Instant::now()));
    }
}
