//! What an object's status should say, from the live replicas' reports:
//! `Ready=True` only when every live replica enforces the current
//! generation. Pure: the writer decides when to write it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::catalog::ObjectState;
use crate::replica::Held;
use crate::status::ResourceStatus;

/// The condition type.
pub const READY: &str = "Ready";
/// `Ready`'s reason while an object is not yet judged as it will be (a
/// replica has not loaded it, a kind it reads is not listed yet): `False`
/// for now, but not a refusal, so no Warning event.
pub const PENDING: &str = "Pending";

/// One live replica's view of the object, if it has one.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The replica's name.
    pub replica: &'a str,
    /// Its entry for the object (matched by kind, key and uid).
    pub held: Option<&'a Held>,
}

/// The status `object` should have, given the live replicas' `views`.
/// `lastTransitionTime` is kept from the object's current condition when
/// the condition's status does not change.
pub fn desired(object: &ObjectState, views: &[View<'_>], now: Timestamp) -> ResourceStatus {
    let generation = object.generation;
    fn current<'a>(v: &View<'a>, generation: i64) -> Option<&'a Held> {
        v.held.filter(|h| h.generation >= generation)
    }
    let refused = views.iter().filter_map(|v| current(v, generation)).find_map(|h| h.refusal());
    let enforcing: Vec<&str> = views
        .iter()
        .filter(|v| current(v, generation).is_some_and(|h| h.enforced == Some(generation)))
        .map(|v| v.replica)
        .collect();
    let waiting: Vec<&str> = views.iter().filter(|v| current(v, generation).is_none()).map(|v| v.replica).collect();
    let enforced = {
        let mut generations = views.iter().map(|v| v.held.and_then(|h| h.enforced));
        match generations.next() {
            Some(first) if generations.all(|g| g == first) => first,
            _ => None,
        }
    };
    let replicas = format!("{}/{}", enforcing.len(), views.len());
    let (status, reason, message) = if let Some(refusal) = refused {
        let kept = match enforced {
            Some(g) => format!("generation {g} stays in force"),
            None => "nothing of it is in force".to_owned(),
        };
        ("False", refusal.reason, format!("{} ({kept})", refusal.message))
    } else if views.is_empty() {
        ("Unknown", "NoReplicas".to_owned(), "no replica of the webhook is running".to_owned())
    } else if waiting.is_empty() && enforcing.len() == views.len() {
        ("True", "Loaded".to_owned(), format!("generation {generation} is in force in {replicas} replicas"))
    } else {
        (
            "False",
            PENDING.to_owned(),
            format!("generation {generation} is in force in {replicas} replicas; waiting for {}", waiting.join(", ")),
        )
    };
    let previous = object.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == READY));
    let last_transition_time = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    ResourceStatus {
        observed_generation: Some(generation),
        conditions: vec![Condition {
            type_: READY.to_owned(),
            status: status.to_owned(),
            reason,
            message,
            observed_generation: Some(generation),
            last_transition_time,
        }],
        enforced_generation: enforced,
        replicas: Some(replicas),
        enforced_by: None,
    }
}

/// Whether two statuses say the same, `lastTransitionTime` aside.
pub fn same(a: &ResourceStatus, b: &ResourceStatus) -> bool {
    let strip = |s: &ResourceStatus| {
        let mut s = s.clone();
        // Not the status writer's to write.
        s.enforced_by = None;
        s.conditions.iter_mut().for_each(|c| c.last_transition_time = Time(Timestamp::UNIX_EPOCH));
        s
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Key;

    fn object(generation: i64) -> ObjectState {
        ObjectState {
            key: Key { namespace: None, name: "p".into() },
            uid: "u".into(),
            generation,
            enforced: None,
            refusal: None,
            status: None,
        }
    }

    fn held(generation: i64, enforced: Option<i64>, reason: Option<&str>) -> Held {
        Held {
            kind: "ValidatorPolicy".into(),
            name: "p".into(),
            uid: "u".into(),
            generation,
            enforced,
            reason: reason.map(Into::into),
            message: reason.map(|_| "spec.validations[0].expression: undeclared reference".into()),
            ..Held::default()
        }
    }

    fn ready(status: &ResourceStatus) -> (&str, &str) {
        let c = &status.conditions[0];
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn ready_only_when_every_live_replica_enforces_the_generation() {
        let (a, b) = (held(2, Some(2), None), held(1, Some(1), None));
        let both = [View { replica: "a", held: Some(&a) }, View { replica: "b", held: Some(&b) }];
        let status = desired(&object(2), &both, Timestamp::now());
        assert_eq!(ready(&status), ("False", "Pending"));
        assert!(status.conditions[0].message.contains("waiting for b"), "{status:?}");
        assert_eq!(status.replicas.as_deref(), Some("1/2"));
        let b = held(2, Some(2), None);
        let both = [View { replica: "a", held: Some(&a) }, View { replica: "b", held: Some(&b) }];
        let status = desired(&object(2), &both, Timestamp::now());
        assert_eq!(ready(&status), ("True", "Loaded"));
        assert_eq!(status.enforced_generation, Some(2));
    }

    #[test]
    fn a_refused_generation_says_why_and_what_stays_in_force() {
        let a = held(3, Some(2), Some("CompileError"));
        let status = desired(&object(3), &[View { replica: "a", held: Some(&a) }], Timestamp::now());
        assert_eq!(ready(&status), ("False", "CompileError"));
        assert!(status.conditions[0].message.contains("undeclared reference (generation 2 stays in force)"));
        assert_eq!(status.enforced_generation, Some(2));
    }

    #[test]
    fn unseen_objects_and_no_replicas() {
        let status = desired(&object(1), &[View { replica: "a", held: None }], Timestamp::now());
        assert_eq!(ready(&status), ("False", "Pending"));
        let status = desired(&object(1), &[], Timestamp::now());
        assert_eq!(ready(&status), ("Unknown", "NoReplicas"));
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let a = held(1, Some(1), None);
        let views = [View { replica: "a", held: Some(&a) }];
        let first = desired(&object(1), &views, Timestamp::UNIX_EPOCH);
        let mut seen = object(1);
        seen.status = Some(first.clone());
        let again = desired(&seen, &views, Timestamp::now());
        assert_eq!(again, first);
        assert!(same(&again, &first));
    }

    /// The push-down controller's field is not the status writer's: seen on
    /// the object, it is no reason to write, and the writer never writes it.
    #[test]
    fn who_enforces_is_not_the_status_writers() {
        use crate::status::{EnforcedBy, Path};
        let a = held(2, Some(2), None);
        let views = [View { replica: "a", held: Some(&a) }];
        let mut seen = object(2);
        let mut status = desired(&seen, &views, Timestamp::now());
        status.enforced_by = Some(EnforcedBy {
            path: Path::ApiServer,
            observed_generation: 2,
            reason: "PushedDown".into(),
            message: "ValidatingAdmissionPolicy portcullis.p and its binding".into(),
        });
        seen.status = Some(status.clone());
        let desired = desired(&seen, &views, Timestamp::now());
        assert_eq!(desired.enforced_by, None);
        assert!(same(&status, &desired));
        assert!(serde_json::to_value(&desired).expect("json").get("enforcedBy").is_none());
        assert!(status.delegates(2) && !status.delegates(3), "only the generation the API server was proven to hold");
        status.enforced_by.as_mut().expect("set").path = Path::Webhook;
        assert!(!status.delegates(2));
    }
}
