//! The audit under leadership: find the resources the policies select,
//! watch them (a paginated list, then every change), judge each object with
//! the admission code, and write the reports once a full pass is complete
//! and then as objects change. A new policy set, or the periodic interval,
//! starts a new pass; a pass that relists replaces what the last one found.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, stream};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::discovery::{Discovery, verbs};
use kube::runtime::{WatchStreamExt as _, watcher};
use portcullis_admission::{GroupVersionKind, GroupVersionResource, existing};
use portcullis_cel::workers::Workers;
use portcullis_telemetry::error_chain;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::AuditMetrics;
use super::report;
use super::results::{Entry, ObjectId, Outcome, Results, Status};
use crate::evaluate::{Cluster, Evaluation, FindingKind, KnownNamespaces, Settings, evaluate};
use crate::policy::{Action, Policy, PolicySet};
use portcullis_known::params::WatchedParams;

/// The longest a pass waits for the parameter objects to be listed.
const PARAMS_WAIT: Duration = Duration::from_secs(30);

/// Resources never audited, even by a policy that selects every resource:
/// they change all the time and no policy is about them, or they are the
/// audit's own output.
const SKIPPED: [(&str, &str); 5] = [
    ("", "events"),
    ("events.k8s.io", "events"),
    ("coordination.k8s.io", "leases"),
    ("openreports.io", "reports"),
    ("openreports.io", "clusterreports"),
];

/// The user an audited object's review names.
pub const AUDIT_USER: &str = "portcullis:audit";

/// Everything a pass needs; cloned for each term of leadership.
#[derive(Clone)]
pub struct Auditor {
    /// The cluster.
    pub client: kube::Client,
    /// The policies in force, changed by reloads.
    pub policies: watch::Receiver<Arc<PolicySet>>,
    /// Evaluation limits, as at admission.
    pub settings: Arc<Settings>,
    /// Namespaces, for `namespaceSelector` and `namespaceObject`.
    pub namespaces: Arc<dyn KnownNamespaces>,
    /// Parameter objects, for `paramKind`.
    pub params: Arc<WatchedParams>,
    /// Where evaluation runs: never on the async runtime.
    pub workers: Arc<Workers>,
    /// The audit's series.
    pub metrics: Arc<AuditMetrics>,
    /// How often everything is listed again.
    pub interval: Duration,
    /// How long changes gather before reports are written.
    pub report_delay: Duration,
    /// Most results in one report.
    pub max_results: usize,
}

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auditor")
            .field("interval", &self.interval)
            .field("report_delay", &self.report_delay)
            .field("max_results", &self.max_results)
            .finish_non_exhaustive()
    }
}

/// One watched resource.
struct Target {
    resource: ApiResource,
    key: Arc<str>,
    list: List,
}

/// Where a watched resource's list stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    /// The watch has not started listing yet.
    Pending,
    /// Listing, since the stamp: what was judged before it is stale once
    /// the list is done.
    Since(u64),
    /// Listed (or left out: the audit may not read it); changes follow.
    Done,
}

impl Auditor {
    /// Audits until `leading` is cancelled.
    pub async fn run(self, leading: CancellationToken) {
        let mut results = Results::default();
        let mut updates = self.policies.clone();
        loop {
            let policies = updates.borrow_and_update().clone();
            tokio::select! {
                () = async {
                    self.params_listed().await;
                    self.pass(&policies, &mut results).await;
                } => {}
                changed = updates.changed() => {
                    if changed.is_err() { return; }
                    tracing::info!("policies changed: auditing again");
                }
                () = leading.cancelled() => return,
            }
        }
    }

    /// Until every `paramKind` the policies read has been listed (or is
    /// known not to exist), for at most [`PARAMS_WAIT`]: a pass started
    /// with a kind the policies have just added would report its
    /// policies' "not yet synced" as errors; a kind that cannot be listed
    /// (its watch failing) holds the audit back no longer than the wait.
    async fn params_listed(&self) {
        let _ = tokio::time::timeout(PARAMS_WAIT, self.params.listed()).await;
    }

    /// One pass: returns after `interval`, when the next pass should start.
    async fn pass(&self, policies: &Arc<PolicySet>, results: &mut Results) {
        let started = Instant::now();
        let span = tracing::info_span!(
            "audit pass",
            policies = policies.policies.len(),
            resources = tracing::field::Empty,
            objects = tracing::field::Empty,
            violations = tracing::field::Empty,
        );
        let mut targets = match self.targets(policies).await {
            Ok(targets) => targets,
            Err(err) => {
                tracing::warn!(parent: &span, error = %error_chain(&err), "API discovery failed; retrying");
                tokio::time::sleep(self.report_delay.max(Duration::from_secs(1))).await;
                return;
            }
        };
        span.record("resources", targets.len());
        let names: Vec<&str> = targets.iter().map(|t| &*t.key).collect();
        tracing::info!(parent: &span, resources = ?names, "audit pass started");
        let watches = targets.iter().enumerate().map(|(index, target)| {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &target.resource);
            let config = watcher::Config::default().page_size(100);
            watcher(api, config).default_backoff().map(move |event| (index, event)).boxed()
        });
        let mut events = stream::select_all(watches);
        let mut span = Some(span);
        let mut listed = false;
        let mut flush = tokio::time::interval(self.report_delay);
        let next_pass = tokio::time::sleep(self.interval);
        tokio::pin!(next_pass);
        loop {
            tokio::select! {
                Some((index, event)) = events.next() => {
                    self.handle(policies, &mut targets[index], event, results).await;
                }
                _ = flush.tick() => {}
                () = &mut next_pass => return,
            }
            if !listed && targets.iter().all(|t| t.list == List::Done) {
                listed = true;
                // Objects of resources this pass no longer watches are gone.
                let keys: BTreeSet<Arc<str>> = targets.iter().map(|t| t.key.clone()).collect();
                results.sweep(|id, _| !keys.contains(&id.resource));
                self.write_reports(results).await;
                // Over every namespace, not only those whose report changed.
                let (objects, violations) = (results.objects(), results.totals().violations());
                self.metrics.pass_finished(started.elapsed().as_secs_f64(), objects);
                if let Some(span) = span.take() {
                    span.record("objects", objects);
                    span.record("violations", violations);
                    tracing::info!(parent: &span, objects, violations, "audit pass complete");
                }
            } else if listed {
                self.write_reports(results).await;
            }
        }
    }

    /// The resources some policy selects, at their preferred version, that
    /// can be listed and watched.
    async fn targets(&self, policies: &PolicySet) -> Result<Vec<Target>, kube::Error> {
        let discovery = Discovery::new(self.client.clone()).run_aggregated().await?;
        let mut targets = Vec::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                let listable = caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::WATCH);
                if !listable || SKIPPED.contains(&(resource.group.as_str(), resource.plural.as_str())) {
                    continue;
                }
                let selected = policies.policies.iter().any(|p| audits(p, &resource));
                if selected {
                    let key = format!("{}/{}", resource.api_version, resource.plural).into();
                    targets.push(Target { resource, key, list: List::Pending });
                }
            }
        }
        Ok(targets)
    }

    async fn handle(
        &self,
        policies: &Arc<PolicySet>,
        target: &mut Target,
        event: Result<watcher::Event<DynamicObject>, watcher::Error>,
        results: &mut Results,
    ) {
        match event {
            Ok(watcher::Event::Init) => target.list = List::Since(results.next_stamp()),
            Ok(watcher::Event::InitApply(object) | watcher::Event::Apply(object)) => {
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                let id =
                    ObjectId { resource: target.key.clone(), name: object.metadata.name.clone().unwrap_or_default() };
                let stamp = results.next_stamp();
                if let Some(entry) = self.judge(policies, &target.resource, object, stamp).await {
                    results.put(&namespace, id, entry);
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                let id = ObjectId { resource: target.key.clone(), name: object.metadata.name.unwrap_or_default() };
                results.remove(&namespace, &id);
            }
            Ok(watcher::Event::InitDone) => {
                if let List::Since(since) = target.list {
                    let key = target.key.clone();
                    results.sweep(|id, entry| id.resource == key && entry.stamp < since);
                }
                target.list = List::Done;
            }
            Err(err) => {
                tracing::warn!(resource = %target.key, error = %error_chain(&err), "cannot list or watch; retrying with backoff");
                // A resource the audit may not read must not hold the pass
                // open for ever: its objects are left out, with this warning.
                if let watcher::Error::InitialListFailed(kube::Error::Api(status)) = &err
                    && matches!(status.code, 403 | 404)
                {
                    target.list = List::Done;
                }
            }
        }
    }

    /// Judges `object` with every policy, as admission would judge its
    /// creation, on the audit's evaluation thread.
    async fn judge(
        &self,
        policies: &Arc<PolicySet>,
        resource: &ApiResource,
        object: DynamicObject,
        stamp: u64,
    ) -> Option<Entry> {
        let mut value = serde_json::to_value(object).ok()?;
        // List items carry no apiVersion and kind; admission's objects do.
        value["apiVersion"] = resource.api_version.clone().into();
        value["kind"] = resource.kind.clone().into();
        let uid = value.pointer("/metadata/uid").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
        let kind = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
        let gvr = GroupVersionResource::gvr(&resource.group, &resource.version, &resource.plural);
        let req = match existing(kind, gvr, value, AUDIT_USER) {
            Ok(req) => req,
            Err(err) => {
                tracing::warn!(error = %error_chain(&err), "an existing object cannot be judged");
                return None;
            }
        };
        let (set, settings) = (policies.clone(), self.settings.clone());
        let (namespaces, params) = (self.namespaces.clone(), self.params.clone());
        let job = move || {
            let deadline = std::time::Instant::now() + settings.cel_deadline;
            let cluster = Cluster { namespaces: namespaces.as_ref(), params: params.as_ref() };
            let evaluation = evaluate(&set, &settings, cluster, &req, deadline);
            outcomes(&set, &req.inner.kind.kind, evaluation)
        };
        let outcomes = self.workers.run(job).await.ok()?;
        Some(Entry {
            api_version: resource.api_version.clone().into(),
            kind: resource.kind.clone().into(),
            uid,
            stamp,
            outcomes,
        })
    }

    /// Writes the report of every namespace whose results changed.
    async fn write_reports(&self, results: &mut Results) {
        for namespace in results.take_dirty() {
            self.metrics.update(results, &namespace);
            let report = report::build(results, &namespace, self.max_results, Timestamp::now());
            match report::write(&self.client, &namespace, &report).await {
                Ok(()) => self.metrics.report_written(true),
                Err(err) => {
                    self.metrics.report_written(false);
                    tracing::warn!(%namespace, error = %error_chain(&err), "cannot write the report (are the OpenReports CRDs installed? deploy/components/reports)");
                    results.mark_dirty(namespace);
                }
            }
        }
    }
}

/// Whether `policy` can find anything in objects of `resource`: it selects
/// the resource, and (when it selects every resource) has CEL or built-in
/// rules for that kind. So a policy such as "no :latest images" lists
/// workloads and Pods, not every object in the cluster.
fn audits(policy: &Policy, resource: &ApiResource) -> bool {
    let (group, version, kind) = (&resource.group, &resource.version, &resource.kind);
    policy.matching.selects_resource(group, version, kind, &resource.plural).unwrap_or_else(|| judges(policy, kind))
}

/// Whether `policy` has anything to say about objects of `kind`: CEL, or a
/// built-in rule for the kind. A policy that merely applies (say, an image
/// rule to a ConfigMap) is not reported as passing.
fn judges(policy: &Policy, kind: &str) -> bool {
    !policy.cel.validations.is_empty() || policy.rules.kinds().is_none_or(|kinds| kinds.contains(kind))
}

/// One outcome per policy that applied: pass, or the worst of its findings
/// with every message.
fn outcomes(set: &PolicySet, kind: &str, evaluation: Evaluation) -> Vec<Outcome> {
    let Evaluation { findings, applied, exempted, .. } = evaluation;
    let mut outcomes: Vec<Outcome> = Vec::new();
    // A native policy with several bindings has one outcome per binding.
    for applied in applied {
        let same = |p: &&Arc<Policy>| p.name == applied.policy && p.matching.binding() == applied.binding.as_deref();
        let Some(policy) = set.policies.iter().find(same) else { continue };
        if judges(policy, kind) && !outcomes.iter().any(|o| o.policy == applied.policy && o.binding == applied.binding)
        {
            let (action, status, message) = (policy.action, Status::Pass, String::new());
            outcomes.push(Outcome { policy: applied.policy, action, status, message, binding: applied.binding });
        }
    }
    outcomes.extend(exempted.into_iter().filter_map(|e| {
        let policy = set.policies.iter().find(|p| p.name == e.policy)?;
        judges(policy, kind).then(|| Outcome {
            policy: e.policy,
            action: policy.action,
            status: Status::Skip,
            message: format!("exception {}: {}", e.exception, e.reason),
            binding: None,
        })
    }));
    for finding in findings {
        let status = match (finding.kind, finding.action) {
            (FindingKind::Error, _) => Status::Error,
            (FindingKind::Violation, Action::Warn) => Status::Warn,
            (FindingKind::Violation, Action::Deny | Action::Audit) => Status::Fail,
        };
        let at = match outcomes.iter().position(|o| o.policy == finding.policy && o.binding == finding.binding) {
            Some(at) => at,
            None => {
                let (policy, action, binding) = (finding.policy.clone(), finding.action, finding.binding.clone());
                outcomes.push(Outcome { policy, action, status, message: String::new(), binding });
                outcomes.len() - 1
            }
        };
        let outcome = &mut outcomes[at];
        outcome.status = outcome.status.max(status);
        if !outcome.message.is_empty() {
            outcome.message.push('\n');
        }
        outcome.message.push_str(&finding.message);
    }
    outcomes.sort_by(|a, b| (&a.policy, &a.binding).cmp(&(&b.policy, &b.binding)));
    outcomes
}
