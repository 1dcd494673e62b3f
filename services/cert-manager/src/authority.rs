//! The signing CA across rotations. A rotation has three steps, each taken
//! by [`Authority::step`] when its time has come:
//!
//! 1. A new CA is made. It is trusted at once (it joins every bundle) but
//!    does not sign yet, so that bundles everywhere can learn of it.
//! 2. After the overlap it signs, and the old CA becomes "previous": still
//!    trusted, signing nothing. Clients see the new issuer on the trust
//!    bundle stream and renew onto it.
//! 3. The previous CA leaves the bundle once the last certificate it can
//!    have signed has expired (activation + the longest leaf lifetime).
//!
//! The state is a flat map of strings (the CA Secret's data, or the files
//! of the CA directory), so that every replica reads the same thing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use portcullis_proto::certs::v1::TrustBundle;

use crate::ca::{CaError, LocalCa};

/// Keys of the state map.
pub mod keys {
    /// The signing CA's certificate.
    pub const ACTIVE_CERT: &str = "tls.crt";
    /// The signing CA's key.
    pub const ACTIVE_KEY: &str = "tls.key";
    /// The next CA's certificate (trusted, not signing yet).
    pub const NEXT_CERT: &str = "next.crt";
    /// The next CA's key.
    pub const NEXT_KEY: &str = "next.key";
    /// When the next CA starts signing, Unix seconds.
    pub const NEXT_SIGNS_FROM: &str = "next.signs-from";
    /// The previous CA's certificate (trusted, no longer signing).
    pub const PREVIOUS_CERT: &str = "previous.crt";
    /// Until when the previous CA stays trusted, Unix seconds.
    pub const PREVIOUS_TRUSTED_UNTIL: &str = "previous.trusted-until";
    /// Increases with every change of the trust bundle.
    pub const GENERATION: &str = "generation";
    /// Every key whose value is a private key.
    pub const PRIVATE: [&str; 2] = [ACTIVE_KEY, NEXT_KEY];
}

/// Clocks of different machines disagree a little; leaves are backdated by
/// five minutes too.
const SKEW: i64 = 300;

/// When rotations happen.
#[derive(Debug, Clone, Copy)]
pub struct RotationPolicy {
    /// Lifetime of each new CA. A CA is replaced when a third of it is left.
    pub ca_lifetime: Duration,
    /// How long a new CA is only trusted before it signs.
    pub overlap: Duration,
    /// The longest leaf lifetime the signer grants.
    pub max_leaf_lifetime: Duration,
}

impl RotationPolicy {
    /// Whether a CA made under this policy is replaced in time: the
    /// rotation (overlap, then the old leaves expiring) fits in the last
    /// third of its life.
    pub fn check(&self) -> Result<(), CaLifetimeTooShort> {
        let rotation = self.overlap + self.max_leaf_lifetime + Duration::from_secs(2 * SKEW as u64);
        if self.ca_lifetime / 3 <= rotation {
            return Err(CaLifetimeTooShort { ca_lifetime: self.ca_lifetime, rotation });
        }
        Ok(())
    }
}

/// A CA lifetime too short for a rotation to finish before it expires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--ca-lifetime {} s is too short: a third of it must exceed --ca-overlap plus the longest leaf lifetime ({} s)",
    ca_lifetime.as_secs(),
    rotation.as_secs()
)]
pub struct CaLifetimeTooShort {
    /// The CA lifetime asked for.
    pub ca_lifetime: Duration,
    /// What a rotation takes.
    pub rotation: Duration,
}

/// A CA that is trusted and will sign from `signs_from`.
#[derive(Debug, Clone)]
pub struct Next {
    /// The CA.
    pub ca: Arc<LocalCa>,
    /// Unix seconds.
    pub signs_from: i64,
}

/// A CA that no longer signs, trusted until its last leaf has expired.
#[derive(Debug, Clone)]
pub struct Previous {
    /// Its certificate, PEM.
    pub cert_pem: String,
    /// Unix seconds.
    pub trusted_until: i64,
}

/// The signing CA, and the CAs of a rotation in progress.
#[derive(Debug, Clone)]
pub struct Authority {
    /// Signs every new certificate.
    pub active: Arc<LocalCa>,
    /// Made by a rotation, trusted, not signing yet.
    pub next: Option<Next>,
    /// Replaced by a rotation, trusted until its leaves have expired.
    pub previous: Option<Previous>,
    /// Increases with every change of the trust bundle.
    pub generation: u64,
}

impl Authority {
    /// A new authority with a new CA.
    pub fn create(ca_lifetime: Duration) -> Result<Self, CaError> {
        let (cert, key) = LocalCa::generate(ca_lifetime)?;
        Ok(Self { active: Arc::new(LocalCa::from_pem(&cert, &key)?), next: None, previous: None, generation: 1 })
    }

    /// Every CA to trust: the active one first, then the next and the
    /// previous during a rotation.
    pub fn bundle_pem(&self) -> String {
        let mut bundle = pem_line(self.active.bundle_pem());
        if let Some(next) = &self.next {
            bundle.push_str(&pem_line(next.ca.bundle_pem()));
        }
        if let Some(previous) = &self.previous {
            bundle.push_str(&pem_line(&previous.cert_pem));
        }
        bundle
    }

    /// The trust bundle as the gRPC API sends it.
    pub fn trust_bundle(&self) -> TrustBundle {
        TrustBundle {
            ca_bundle_pem: self.bundle_pem(),
            generation: self.generation,
            issuer_pem: self.active.bundle_pem().to_owned(),
        }
    }

    /// The authority after whatever step of a rotation is due at `now`
    /// (Unix seconds), with a line saying what changed; `None` when nothing
    /// is due. `requested` asks for a rotation now.
    pub fn step(&self, now: i64, requested: bool, policy: &RotationPolicy) -> Result<Option<(Self, String)>, CaError> {
        let mut out = self.clone();
        let mut done = Vec::new();
        if out.previous.as_ref().is_some_and(|p| now >= p.trusted_until) {
            out.previous = None;
            done.push("the previous CA left the trust bundle: its last certificate has expired");
        }
        // A second rotation waits until the first one's old CA has gone:
        // the bundle never drops a CA that may still have live leaves.
        if out.previous.is_none()
            && let Some(next) = out.next.take_if(|n| now >= n.signs_from)
        {
            let old = std::mem::replace(&mut out.active, next.ca);
            let longest = i64::try_from(policy.max_leaf_lifetime.as_secs()).unwrap_or(i64::MAX / 2);
            out.previous =
                Some(Previous { cert_pem: old.bundle_pem().to_owned(), trusted_until: now + longest + SKEW });
            done.push("the new CA signs from now on; the old one stays trusted until its certificates expire");
        }
        let third = i64::try_from(policy.ca_lifetime.as_secs() / 3).unwrap_or(i64::MAX);
        let ageing = out.active.not_after().is_none_or(|end| end - now < third);
        if out.next.is_none() && (requested || ageing) {
            let (cert, key) = LocalCa::generate(policy.ca_lifetime)?;
            // An expired CA (the cert-manager was down for its whole last
            // third) has nothing valid left to protect: replace it at once.
            let expired = out.active.not_after().is_none_or(|end| end <= now);
            let overlap = if expired { 0 } else { i64::try_from(policy.overlap.as_secs()).unwrap_or(i64::MAX / 2) };
            out.next = Some(Next { ca: Arc::new(LocalCa::from_pem(&cert, &key)?), signs_from: now + overlap });
            done.push(if requested {
                "made a new CA on request: trusted now, signing after the overlap"
            } else {
                "made a new CA (a third of the current one's life is left): trusted now, signing after the overlap"
            });
        }
        if done.is_empty() {
            return Ok(None);
        }
        out.generation += 1;
        Ok(Some((out, done.join("; "))))
    }

    /// The state map.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::from([
            (keys::ACTIVE_CERT.to_owned(), self.active.bundle_pem().to_owned()),
            (keys::ACTIVE_KEY.to_owned(), self.active.key_pem()),
            (keys::GENERATION.to_owned(), self.generation.to_string()),
        ]);
        if let Some(next) = &self.next {
            data.insert(keys::NEXT_CERT.to_owned(), next.ca.bundle_pem().to_owned());
            data.insert(keys::NEXT_KEY.to_owned(), next.ca.key_pem());
            data.insert(keys::NEXT_SIGNS_FROM.to_owned(), next.signs_from.to_string());
        }
        if let Some(previous) = &self.previous {
            data.insert(keys::PREVIOUS_CERT.to_owned(), previous.cert_pem.clone());
            data.insert(keys::PREVIOUS_TRUSTED_UNTIL.to_owned(), previous.trusted_until.to_string());
        }
        data
    }

    /// The authority of a state map. A map with only the active CA (a
    /// Secret made by hand, say) is an authority with no rotation under way.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, CaError> {
        let field = |key: &str| data.get(key).map(String::as_str).unwrap_or_default();
        let number = |key: &str| {
            field(key).trim().parse::<i64>().map_err(|_| CaError::State(format!("{key} is not a number of seconds")))
        };
        let active = Arc::new(LocalCa::from_pem(field(keys::ACTIVE_CERT), field(keys::ACTIVE_KEY))?);
        let next = match data.contains_key(keys::NEXT_CERT) {
            true => Some(Next {
                ca: Arc::new(LocalCa::from_pem(field(keys::NEXT_CERT), field(keys::NEXT_KEY))?),
                signs_from: number(keys::NEXT_SIGNS_FROM)?,
            }),
            false => None,
        };
        let previous = match data.contains_key(keys::PREVIOUS_CERT) {
            true => Some(Previous {
                cert_pem: field(keys::PREVIOUS_CERT).to_owned(),
                trusted_until: number(keys::PREVIOUS_TRUSTED_UNTIL)?,
            }),
            false => None,
        };
        let generation = field(keys::GENERATION).trim().parse().unwrap_or(1);
        Ok(Self { active, next, previous, generation })
    }
}

/// `pem` ending in exactly one newline, so that concatenations stay PEM.
fn pem_line(pem: &str) -> String {
    format!("{}\n", pem.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn policy() -> RotationPolicy {
        RotationPolicy {
            ca_lifetime: Duration::from_secs(365 * DAY),
            overlap: Duration::from_secs(600),
            max_leaf_lifetime: Duration::from_secs(7 * DAY),
        }
    }

    fn now() -> i64 {
        time::OffsetDateTime::now_utc().unix_timestamp()
    }

    fn count(bundle: &str) -> usize {
        bundle.matches("BEGIN CERTIFICATE").count()
    }

    #[test]
    fn a_young_ca_is_left_alone() {
        let authority = Authority::create(policy().ca_lifetime).unwrap();
        assert!(authority.step(now(), false, &policy()).unwrap().is_none());
        assert_eq!(count(&authority.bundle_pem()), 1);
    }

    #[test]
    fn a_rotation_adds_first_switches_later_and_drops_the_old_ca_after_its_last_leaf() {
        let policy = policy();
        let t0 = now();
        let start = Authority::create(policy.ca_lifetime).unwrap();
        let old = start.active.bundle_pem().to_owned();

        let (added, _) = start.step(t0, true, &policy).unwrap().unwrap();
        assert_eq!(added.active.bundle_pem(), old, "the old CA signs until the overlap is over");
        assert_eq!(count(&added.bundle_pem()), 2, "the new CA is trusted at once");
        assert_eq!(added.generation, start.generation + 1);
        assert!(added.step(t0 + 599, false, &policy).unwrap().is_none(), "nothing before the overlap is over");

        let (switched, _) = added.step(t0 + 600, false, &policy).unwrap().unwrap();
        assert_ne!(switched.active.bundle_pem(), old, "the new CA signs");
        assert!(switched.bundle_pem().contains(old.trim()), "the old CA is still trusted");
        assert_eq!(switched.trust_bundle().issuer_pem, switched.active.bundle_pem());
        let until = switched.previous.as_ref().unwrap().trusted_until;
        assert_eq!(until, t0 + 600 + 7 * DAY as i64 + SKEW, "trusted until a leaf signed just before can expire");
        assert!(switched.step(until - 1, false, &policy).unwrap().is_none());

        let (done, _) = switched.step(until, false, &policy).unwrap().unwrap();
        assert_eq!(count(&done.bundle_pem()), 1);
        assert!(!done.bundle_pem().contains(old.trim()), "the old CA is gone");
        assert_eq!(done.generation, start.generation + 3);
    }

    #[test]
    fn an_ageing_ca_is_rotated_without_being_asked() {
        let policy = policy();
        let authority = Authority::create(policy.ca_lifetime).unwrap();
        let late = authority.active.not_after().unwrap() - (policy.ca_lifetime.as_secs() / 3) as i64 + 1;
        let (rotating, what) = authority.step(late, false, &policy).unwrap().unwrap();
        assert!(rotating.next.is_some(), "{what}");
    }

    #[test]
    fn an_expired_ca_is_replaced_without_waiting_for_the_overlap() {
        let policy = policy();
        let authority = Authority::create(policy.ca_lifetime).unwrap();
        let after_expiry = authority.active.not_after().unwrap() + 1;
        let (rotating, _) = authority.step(after_expiry, false, &policy).unwrap().unwrap();
        assert_eq!(rotating.next.as_ref().unwrap().signs_from, after_expiry);
        let (switched, _) = rotating.step(after_expiry, false, &policy).unwrap().unwrap();
        assert_eq!(switched.active.bundle_pem(), rotating.next.as_ref().unwrap().ca.bundle_pem(), "the new CA signs");
    }

    #[test]
    fn a_second_rotation_waits_for_the_first_ones_old_ca_to_go() {
        let policy = policy();
        let t0 = now();
        let (a, _) = Authority::create(policy.ca_lifetime).unwrap().step(t0, true, &policy).unwrap().unwrap();
        let (b, _) = a.step(t0 + 600, false, &policy).unwrap().unwrap();
        let (c, _) = b.step(t0 + 601, true, &policy).unwrap().unwrap();
        assert_eq!(count(&c.bundle_pem()), 3, "signing, next and previous");
        assert!(c.step(t0 + 2000, false, &policy).unwrap().is_none(), "the next CA must wait");
        let until = c.previous.as_ref().unwrap().trusted_until;
        let (d, _) = c.step(until, false, &policy).unwrap().unwrap();
        assert_eq!(d.active.bundle_pem(), c.next.as_ref().unwrap().ca.bundle_pem(), "retired, then switched");
        assert_eq!(count(&d.bundle_pem()), 2);
    }

    #[test]
    fn the_state_map_round_trips_and_a_map_of_only_the_active_ca_is_read() {
        let policy = policy();
        let (rotating, _) = Authority::create(policy.ca_lifetime).unwrap().step(now(), true, &policy).unwrap().unwrap();
        let back = Authority::from_data(&rotating.to_data()).unwrap();
        assert_eq!(back.bundle_pem(), rotating.bundle_pem());
        assert_eq!(back.generation, rotating.generation);
        let mut old = rotating.to_data();
        old.retain(|k, _| k == keys::ACTIVE_CERT || k == keys::ACTIVE_KEY);
        let read = Authority::from_data(&old).unwrap();
        assert!(read.next.is_none() && read.previous.is_none());
        assert_eq!(read.generation, 1);
        old.remove(keys::ACTIVE_KEY);
        assert!(Authority::from_data(&old).is_err(), "a CA without its key is refused");
    }

    #[test]
    fn a_policy_whose_rotation_cannot_finish_in_time_is_refused() {
        let mut policy = policy();
        assert!(policy.check().is_ok());
        policy.ca_lifetime = Duration::from_secs(20 * DAY);
        assert!(policy.check().unwrap_err().to_string().contains("--ca-lifetime"));
    }
}
