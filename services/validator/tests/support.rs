//! Evaluate objects against policies the way the webhook does.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use portcullis_admission::{decode, manifest};
use portcullis_cel::Bindings;
use portcullis_cel::reads::DataReads;
use portcullis_cel::workers::Workers;
use portcullis_validator::evaluate::{Finding, KnownNamespaces, Settings};
use portcullis_validator::policy::{PolicySet, SYSTEM_NAMESPACES};
use portcullis_validator::webhook::{NoNamespaces, Validator};
use serde_json::Value;

pub(crate) fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

pub(crate) fn settings() -> Settings {
    let mut system_namespaces: Vec<String> = SYSTEM_NAMESPACES.iter().map(|s| s.to_string()).collect();
    system_namespaces.push("portcullis-system".into());
    Settings { system_namespaces, cel_deadline: Duration::from_secs(2), cel_limits: Default::default() }
}

pub(crate) fn policies(yaml: &str) -> PolicySet {
    policies_with_cost_limit(yaml, portcullis_cel::cost::DEFAULT_LIMIT).unwrap()
}

pub(crate) fn policies_with_cost_limit(yaml: &str, limit: u64) -> Result<PolicySet, String> {
    PolicySet::from_sources([(Path::new("policy.yaml"), yaml.as_bytes())], limit)
        .map_err(|e| portcullis_telemetry::error_chain(&e))
}

pub(crate) fn validator_with(yaml: &str, namespaces: Arc<dyn KnownNamespaces>) -> Validator {
    Validator::new(policies(yaml), settings(), namespaces, Workers::new(1).unwrap())
}

pub(crate) fn validator(yaml: &str) -> Validator {
    validator_with(yaml, Arc::new(NoNamespaces))
}

/// The review the API server would send for creating `object`.
pub(crate) fn create(object: Value) -> Value {
    manifest::as_review(object).unwrap()
}

/// The CEL variables of a request creating `object`, converted whole.
pub(crate) fn bindings(object: Value) -> Bindings {
    let req = decode(&serde_json::to_vec(&create(object)).unwrap()).unwrap();
    Bindings::of(&req, None, &DataReads::everything())
}

/// An UPDATE review from `old` to `new`.
pub(crate) fn update(old: Value, new: Value) -> Value {
    let mut review = create(new);
    review["request"]["operation"] = "UPDATE".into();
    review["request"]["oldObject"] = old;
    review
}

/// Runs `review` and returns (allowed, denial message, warnings, findings).
pub(crate) fn run(validator: &Validator, review: &Value) -> (bool, String, Vec<String>, Vec<Finding>) {
    let req = decode(&serde_json::to_vec(review).unwrap()).unwrap();
    let (decision, findings) = validator.review(&req, validator.deadline());
    let (response, _) = decision.respond(&req);
    (response.allowed, response.result.message.clone(), response.warnings.unwrap_or_default(), findings)
}

pub(crate) fn messages(findings: &[Finding]) -> Vec<String> {
    findings.iter().map(|f| format!("[{}] {}", f.policy, f.message)).collect()
}
