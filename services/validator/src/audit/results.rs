//! What the audit found, in memory: for each namespace, each judged object
//! and its result under each policy that applies to it. Only results are
//! kept, never the objects themselves, so memory grows with the number of
//! objects a policy applies to, a few hundred bytes each.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::policy::Action;

/// An OpenReports result, from best to worst (so `max` is the worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The policy applies and the object satisfies it.
    Pass,
    /// The policy does not judge the object (an exception).
    Skip,
    /// A Warn policy's violation.
    Warn,
    /// A Deny or Audit policy's violation.
    Fail,
    /// The policy could not be evaluated (failurePolicy: Fail).
    Error,
}

impl Status {
    /// The name OpenReports uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Skip => "skip",
            Self::Warn => "warn",
            Self::Fail => "fail",
            Self::Error => "error",
        }
    }
}

/// One object's result under one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The policy's name.
    pub policy: String,
    /// What the policy does with violations at admission.
    pub action: Action,
    /// The result.
    pub status: Status,
    /// Every finding's message, one per line; empty for a pass.
    pub message: String,
    /// The binding, for a native ValidatingAdmissionPolicy.
    pub binding: Option<String>,
}

/// Which object: its resource (`apps/v1/deployments`) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectId {
    /// `group/version/plural`, shared by every object of the resource.
    pub resource: Arc<str>,
    /// `metadata.name`.
    pub name: String,
}

/// A judged object.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `apiVersion` of the object.
    pub api_version: Arc<str>,
    /// `kind` of the object.
    pub kind: Arc<str>,
    /// `metadata.uid`.
    pub uid: String,
    /// When it was last judged, in store stamps: what a relist sweeps by.
    pub stamp: u64,
    /// One outcome per policy that applies, by policy name.
    pub outcomes: Vec<Outcome>,
}

/// Counts by status, as in a report's `summary`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Passed.
    pub pass: u64,
    /// Failed.
    pub fail: u64,
    /// Warned.
    pub warn: u64,
    /// Could not be evaluated.
    pub error: u64,
    /// Skipped.
    pub skip: u64,
}

impl Summary {
    /// Fail, warn and error results together.
    pub fn violations(&self) -> u64 {
        self.fail + self.warn + self.error
    }

    fn add(&mut self, status: Status) {
        match status {
            Status::Pass => self.pass += 1,
            Status::Fail => self.fail += 1,
            Status::Warn => self.warn += 1,
            Status::Error => self.error += 1,
            Status::Skip => self.skip += 1,
        }
    }
}

/// Every result, by namespace (`""` for cluster-scoped objects), and the
/// namespaces whose report is out of date.
#[derive(Debug, Default)]
pub struct Results {
    namespaces: BTreeMap<String, BTreeMap<ObjectId, Entry>>,
    dirty: BTreeSet<String>,
    stamp: u64,
}

impl Results {
    /// A new stamp, later than every earlier one.
    pub fn next_stamp(&mut self) -> u64 {
        self.stamp += 1;
        self.stamp
    }

    /// Records `entry` for `id` in `namespace`; an entry without outcomes
    /// (no policy applies) removes the object. The report is marked out of
    /// date only when the outcomes changed.
    pub fn put(&mut self, namespace: &str, id: ObjectId, entry: Entry) {
        if entry.outcomes.is_empty() {
            self.remove(namespace, &id);
            return;
        }
        let objects = self.namespaces.entry(namespace.to_owned()).or_default();
        let changed = objects.get(&id).is_none_or(|old| old.outcomes != entry.outcomes || old.uid != entry.uid);
        objects.insert(id, entry);
        if changed {
            self.dirty.insert(namespace.to_owned());
        }
    }

    /// Forgets an object (deleted, or no longer judged).
    pub fn remove(&mut self, namespace: &str, id: &ObjectId) {
        if self.namespaces.get_mut(namespace).and_then(|objects| objects.remove(id)).is_some() {
            self.dirty.insert(namespace.to_owned());
        }
    }

    /// Forgets every object that `stale` says is no longer current.
    pub fn sweep(&mut self, stale: impl Fn(&ObjectId, &Entry) -> bool) {
        for (namespace, objects) in &mut self.namespaces {
            let before = objects.len();
            objects.retain(|id, entry| !stale(id, entry));
            if objects.len() != before {
                self.dirty.insert(namespace.clone());
            }
        }
    }

    /// The namespaces whose report is out of date, now marked current.
    pub fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }

    /// Marks `namespace`'s report out of date again (a write failed).
    pub fn mark_dirty(&mut self, namespace: String) {
        self.dirty.insert(namespace);
    }

    /// How many objects are held.
    pub fn objects(&self) -> usize {
        self.namespaces.values().map(BTreeMap::len).sum()
    }

    /// The summary of every namespace together.
    pub fn totals(&self) -> Summary {
        let mut summary = Summary::default();
        let outcomes = self.namespaces.values().flat_map(BTreeMap::values).flat_map(|e| &e.outcomes);
        outcomes.for_each(|o| summary.add(o.status));
        summary
    }

    /// The summary of `namespace` and its results, worst first, at most
    /// `max` of them (the summary counts all).
    pub fn report(&self, namespace: &str, max: usize) -> (Summary, Vec<(&ObjectId, &Entry, &Outcome)>) {
        let mut summary = Summary::default();
        let mut all = Vec::new();
        for (id, entry) in self.namespaces.get(namespace).into_iter().flatten() {
            for outcome in &entry.outcomes {
                summary.add(outcome.status);
                all.push((id, entry, outcome));
            }
        }
        // Worst first; within a status by policy, kind and name, so that a
        // report does not reorder itself between writes.
        all.sort_by(|a, b| {
            (b.2.status, &a.2.policy, &a.1.kind, &a.0.name).cmp(&(a.2.status, &b.2.policy, &b.1.kind, &b.0.name))
        });
        all.truncate(max);
        (summary, all)
    }

    /// Counts of fail, warn and error results by policy in `namespace`.
    pub fn violations(&self, namespace: &str) -> BTreeMap<(String, Status), u64> {
        let mut counts = BTreeMap::new();
        for entry in self.namespaces.get(namespace).into_iter().flat_map(BTreeMap::values) {
            for outcome in entry.outcomes.iter().filter(|o| o.status >= Status::Warn) {
                *counts.entry((outcome.policy.clone(), outcome.status)).or_default() += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(stamp: u64, statuses: &[(&str, Status)]) -> Entry {
        Entry {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            uid: "u".into(),
            stamp,
            outcomes: statuses
                .iter()
                .map(|(policy, status)| Outcome {
                    policy: (*policy).to_owned(),
                    action: Action::Deny,
                    status: *status,
                    message: String::new(),
                    binding: None,
                })
                .collect(),
        }
    }

    fn id(name: &str) -> ObjectId {
        ObjectId { resource: "v1/configmaps".into(), name: name.into() }
    }

    #[test]
    fn reports_are_worst_first_capped_and_count_everything() {
        let mut results = Results::default();
        for (i, status) in [Status::Pass, Status::Fail, Status::Pass, Status::Error, Status::Warn].iter().enumerate() {
            results.put("a", id(&format!("cm-{i}")), entry(1, &[("p", *status)]));
        }
        let (summary, shown) = results.report("a", 3);
        assert_eq!(summary, Summary { pass: 2, fail: 1, warn: 1, error: 1, skip: 0 });
        let statuses: Vec<Status> = shown.iter().map(|r| r.2.status).collect();
        assert_eq!(statuses, [Status::Error, Status::Fail, Status::Warn]);
        results.put("b", id("cm-0"), entry(1, &[("p", Status::Fail)]));
        assert_eq!(results.totals().violations(), 4, "every namespace counts");
    }

    #[test]
    fn only_changes_make_a_report_out_of_date() {
        let mut results = Results::default();
        results.put("a", id("x"), entry(1, &[("p", Status::Fail)]));
        assert_eq!(results.take_dirty().len(), 1);
        results.put("a", id("x"), entry(2, &[("p", Status::Fail)]));
        assert!(results.take_dirty().is_empty(), "a relist of an unchanged object rewrote the report");
        results.sweep(|_, e| e.stamp < 3);
        assert_eq!(results.take_dirty().into_iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(results.objects(), 0);
    }

    #[test]
    fn an_object_no_policy_applies_to_is_not_kept() {
        let mut results = Results::default();
        results.put("a", id("x"), entry(1, &[("p", Status::Pass)]));
        results.put("a", id("x"), entry(2, &[]));
        assert_eq!(results.objects(), 0);
    }
}
