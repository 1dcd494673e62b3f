//! Running the policy set over one admission request: matching, built-in
//! rules, CEL, and the findings that become the decision.

use std::time::{Duration, Instant};

use portcullis_admission::native_match::namespace_object_for;
use portcullis_admission::{Decision, Request, json};
use portcullis_cel::budget::{Limit, Limits};
use portcullis_cel::{Bindings, Converted};
use serde_json::Value;

use crate::cel::Outcome;
use crate::matching::exception_for;
use crate::policy::{Action, FailurePolicy, Policy, PolicySet};
pub use portcullis_known::Cluster;

/// One violation (or evaluation failure) found by one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The policy's name.
    pub policy: String,
    /// What the policy does with it.
    pub action: Action,
    /// What is wrong, naming the object and the field.
    pub message: String,
    /// HTTP-style status code of a denial.
    pub code: u16,
    /// A violation, or a rule that could not be evaluated.
    pub kind: FindingKind,
    /// The binding, when the policy is a native ValidatingAdmissionPolicy.
    pub binding: Option<String>,
}

/// Whether the object broke a rule or the rule could not be judged (an
/// error under `failurePolicy: Fail`); reports tell the two apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingKind {
    /// The object breaks the rule.
    Violation,
    /// The rule could not be evaluated.
    Error,
}

pub use portcullis_admission::native_match::KnownNamespaces;

/// The limits and context of an evaluation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespaces no policy applies to without `includeSystemNamespaces`.
    pub system_namespaces: Vec<String>,
    /// Wall-clock bound for all CEL of one request, from its arrival.
    pub cel_deadline: Duration,
    /// The runtime cost limits of each policy's CEL.
    pub cel_limits: Limits,
}

/// What the policy set found in one request.
#[derive(Debug, Default)]
pub struct Evaluation {
    /// Every finding of every matching policy.
    pub findings: Vec<Finding>,
    /// The policies that applied.
    pub applied: Vec<Applied>,
    /// Policies whose CEL a cost or time limit stopped, and which limit.
    pub exceeded: Vec<(String, Limit)>,
    /// Audit annotations of the policies that applied, `<policy>.<key>`.
    pub audit_annotations: Vec<(String, String)>,
    /// Policies that matched but were not evaluated: an exception exempts
    /// the object from them.
    pub exempted: Vec<Exempted>,
}

/// A policy that applied: its name, and its binding for a native policy
/// (a native policy with two bindings applies through each on its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The policy's name.
    pub policy: String,
    /// The binding of a native policy.
    pub binding: Option<String>,
}

impl Applied {
    fn of(policy: &Policy) -> Self {
        Self { policy: policy.name.clone(), binding: policy.matching.binding().map(str::to_owned) }
    }
}

/// A policy an exception kept from judging the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exempted {
    /// The policy.
    pub policy: String,
    /// The exception's name.
    pub exception: String,
    /// The exception's reason.
    pub reason: String,
}

/// Evaluates every policy of `set` on `req`; CEL stops at `deadline`.
pub fn evaluate(
    set: &PolicySet,
    settings: &Settings,
    cluster: Cluster<'_>,
    req: &Request,
    deadline: Instant,
) -> Evaluation {
    let namespaces = cluster.namespaces;
    let inner = &req.inner;
    let old = req.old_object.as_ref();
    // DELETE has only the old object; every other operation is judged on the new one.
    let subject = req.object.as_ref().or(old);
    let mut findings = Vec::new();
    let mut applied = Vec::new();
    let mut exempted = Vec::new();
    let mut with_cel = Vec::new();
    let mut what = None;
    for (index, policy) in set.policies.iter().enumerate() {
        match policy.matching.applies(&settings.system_namespaces, namespaces, req) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(reason) => {
                misconfigured(policy, "policy", reason, &mut findings);
                continue;
            }
        }
        // PolicyExceptions exempt from Portcullis' policies; the API server
        // knows nothing of them, so a native policy's verdict stands.
        let exception = match policy.matching.binding() {
            None => exception_for(&set.exceptions, &policy.name, req),
            Some(_) => None,
        };
        if let Some(exception) = exception {
            let (exception, reason) = (exception.name.clone(), exception.spec.reason.clone());
            exempted.push(Exempted { policy: policy.name.clone(), exception, reason });
            continue;
        }
        if let Some(object) = subject {
            // Named only when a rule has something to say.
            for message in policy.rules.violations(&inner.kind.kind, object) {
                let what = what.get_or_insert_with(|| describe(req, object));
                findings.push(finding(policy, format!("{what}: {message}"), 403));
            }
        }
        if policy.cel.is_empty() {
            applied.push(Applied::of(policy));
        } else {
            with_cel.push(index);
        }
    }
    let (mut exceeded, mut audit_annotations) = (Vec::new(), Vec::new());
    let limits = settings.cel_limits;
    if !with_cel.is_empty() {
        // Converted once, as far as any policy reads it, and borrowed by
        // every policy's evaluation.
        // The namespace is looked up only when an expression reads it; when
        // it is not known, the policies that read it fail.
        let namespace_object = match set.cel_reads.namespace_object {
            Some(_) => namespace_object_for(namespaces, req),
            None => Ok(None),
        };
        let bindings = Bindings::of(req, namespace_object.as_ref().ok().and_then(Option::as_deref), &set.cel_reads);
        let mut judged = Judged { findings, exceeded: Vec::new(), audit_annotations: Vec::new() };
        let namespace = inner.namespace.as_deref().unwrap_or_default();
        for index in with_cel {
            let policy = &set.policies[index];
            if let (Err(unknown), Some(_)) = (&namespace_object, &policy.cel.data_reads.namespace_object) {
                misconfigured(policy, "policy", unknown, &mut judged.findings);
                continue;
            }
            let matched = match &policy.params {
                None => judged.record(policy, req, subject, policy.cel.evaluate(&bindings, None, limits, deadline)),
                // With a selector, the policy is judged once per parameter object.
                Some(p) => {
                    match p.objects(cluster.params, namespace) {
                        Ok(objects) => {
                            for object in &objects {
                                let params = Converted::reading(object, policy.cel.data_reads.params.as_ref());
                                let outcome = policy.cel.evaluate(&bindings, Some(&params), limits, deadline);
                                judged.record(policy, req, subject, outcome);
                            }
                        }
                        Err(reason) => misconfigured(policy, "binding", reason, &mut judged.findings),
                    }
                    true
                }
            };
            if matched {
                applied.push(Applied::of(policy));
            }
        }
        Judged { findings, exceeded, audit_annotations } = judged;
    }
    Evaluation { findings, applied, exceeded, audit_annotations, exempted }
}

/// The decision for `findings`: denied when any Deny finding exists (every
/// Deny message in it), warnings for Warn findings; Audit findings only
/// show in logs, metrics and the trace.
pub fn decide(findings: &[Finding], applied: Vec<Applied>) -> Decision {
    let denials: Vec<&Finding> = findings.iter().filter(|f| f.action == Action::Deny).collect();
    let warnings =
        findings.iter().filter(|f| f.action == Action::Warn).map(|f| format!("[{}] {}", f.policy, f.message)).collect();
    let mut decision = match denials.first() {
        Some(first) => {
            let message =
                denials.iter().map(|f| format!("[{}] {}", f.policy, f.message)).collect::<Vec<_>>().join("\n");
            Decision::deny(first.code, message)
        }
        None => Decision::allow(),
    };
    decision.warnings = warnings;
    decision.applied = applied.into_iter().map(|a| a.policy).collect();
    decision
}

/// Adds `policy`'s audit annotations under `<policy>.<key>`.
fn annotate(all: &mut Vec<(String, String)>, policy: &Policy, annotations: Vec<(String, String)>) {
    all.extend(annotations.into_iter().map(|(key, value)| (format!("{}.{key}", policy.name), value)));
}

fn finding(policy: &Policy, message: String, code: u16) -> Finding {
    Finding {
        policy: policy.name.clone(),
        action: policy.action,
        message,
        code,
        kind: FindingKind::Violation,
        binding: policy.matching.binding().map(str::to_owned),
    }
}

/// What the CEL of the matching policies found.
struct Judged {
    findings: Vec<Finding>,
    exceeded: Vec<(String, Limit)>,
    audit_annotations: Vec<(String, String)>,
}

impl Judged {
    /// Records what `policy`'s CEL found on `req`; whether the policy
    /// applied (its match conditions held).
    fn record(&mut self, policy: &Policy, req: &Request, subject: Option<&Value>, outcome: Outcome) -> bool {
        match outcome {
            Outcome::NotMatched => return false,
            Outcome::Passed(annotations) => annotate(&mut self.audit_annotations, policy, annotations),
            Outcome::Violations(v, annotations) => {
                if policy.matching.binding().is_some() {
                    // In the API server's words: the message alone, and a
                    // denial says the first failed validation only.
                    let shown = if policy.action == Action::Deny { 1 } else { v.len() };
                    for (message, reason) in v.into_iter().take(shown) {
                        push_once(&mut self.findings, finding(policy, message, reason.code()));
                    }
                } else {
                    let what = subject.map(|o| describe(req, o)).unwrap_or_default();
                    for (message, reason) in v {
                        push_once(&mut self.findings, finding(policy, format!("{what}: {message}"), reason.code()));
                    }
                }
                annotate(&mut self.audit_annotations, policy, annotations);
            }
            Outcome::Error(reason) if policy.matching.binding().is_some() => {
                fail(policy, format!("expression resulted in error: {reason}"), &mut self.findings)
            }
            Outcome::Error(reason) => fail(policy, reason, &mut self.findings),
            Outcome::Exceeded { limit, message } => {
                self.exceeded.push((policy.name.clone(), limit));
                fail(policy, message, &mut self.findings);
            }
        }
        true
    }
}

/// Adds `finding` unless the same policy already said the same (a policy
/// judged once per parameter object may find the same thing twice).
fn push_once(findings: &mut Vec<Finding>, finding: Finding) {
    if !findings.contains(&finding) {
        findings.push(finding);
    }
}

/// A policy that cannot be configured for the request (its namespace's
/// labels or its parameters not found): `failed to configure policy: ...`
/// or `... binding: ...`. The API server denies a native policy's such
/// request under `failurePolicy: Fail` whatever the binding's actions say,
/// with reason Invalid; a ValidatorPolicy fails by its action.
fn misconfigured(policy: &Policy, what: &str, reason: impl std::fmt::Display, findings: &mut Vec<Finding>) {
    let message = format!("failed to configure {what}: {reason}");
    match (policy.matching.binding(), policy.failure_policy) {
        (Some(_), FailurePolicy::Fail) => {
            let denial = Finding { kind: FindingKind::Error, action: Action::Deny, ..finding(policy, message, 422) };
            push_once(findings, denial);
        }
        (Some(_), FailurePolicy::Ignore) => fail(policy, message, findings),
        // A ValidatorPolicy's words, as they were: the binding is its paramRef.
        (None, _) if what == "binding" => fail(policy, message, findings),
        (None, _) => fail(policy, reason, findings),
    }
}

fn fail(policy: &Policy, reason: impl std::fmt::Display, findings: &mut Vec<Finding>) {
    let message = match policy.matching.binding() {
        // A native policy's denial says what the API server's would
        // (`failed to configure binding: ...`, `... resulted in error: ...`).
        Some(_) => reason.to_string(),
        None => format!("policy could not be evaluated: {reason}"),
    };
    match policy.failure_policy {
        FailurePolicy::Fail => {
            push_once(findings, Finding { kind: FindingKind::Error, ..finding(policy, message, 403) })
        }
        FailurePolicy::Ignore => {
            tracing::warn!(policy = %policy.name, %reason, "policy could not be evaluated; ignored (failurePolicy: Ignore)");
        }
    }
}

/// `Deployment demo/web`, `Namespace team-a`, `Pod demo/web-*` (generateName).
fn describe(req: &Request, object: &Value) -> String {
    let inner = &req.inner;
    let name = if inner.name.is_empty() {
        json::at(object, &["metadata", "generateName"])
            .and_then(Value::as_str)
            .map(|g| format!("{g}*"))
            .unwrap_or_else(|| "(unnamed)".into())
    } else {
        inner.name.clone()
    };
    match inner.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{} {ns}/{name}", inner.kind.kind),
        None => format!("{} {name}", inner.kind.kind),
    }
}
