//! What the fuzz targets share: generators of JSON shaped like Kubernetes
//! objects ([`json`], [`pod`]), the envelope the API server wraps them in
//! ([`review`]), and the configurations and policies the project ships
//! ([`examples`]), so that every target fuzzes what users run. The targets
//! themselves live in `fuzz_targets/`; `scripts/fuzz` runs them. Nothing
//! here is used outside fuzzing.

#![forbid(unsafe_code)]

pub mod examples;
pub mod json;
pub mod pod;
pub mod review;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use portcullis_admission::native_match::NamespacesByLabels;
use portcullis_admission::{Decision, Request, encode};
use portcullis_cel::budget::{Limit, Limits};
use portcullis_known::params::NoParams;
use portcullis_validator::evaluate::{Cluster, Settings, decide, evaluate};
use serde_json::Value;

/// Namespace labels as a small cluster would have them.
fn labels(name: &str) -> Option<BTreeMap<String, String>> {
    let team = (name == "demo").then(|| ("team".to_owned(), "a".to_owned()));
    Some(BTreeMap::from_iter(team.into_iter().chain([("kubernetes.io/metadata.name".to_owned(), name.to_owned())])))
}

/// What the fuzzed evaluations see of a cluster: every namespace, known by
/// [`labels`], and no parameter objects.
pub fn cluster() -> Cluster<'static> {
    Cluster { namespaces: &NamespacesByLabels(labels), params: &NoParams }
}

/// The validator's settings with `limits` and its default deadline.
pub fn settings(limits: Limits) -> Settings {
    Settings {
        system_namespaces: vec!["kube-system".to_owned()],
        cel_deadline: Duration::from_secs(5),
        cel_limits: limits,
    }
}

/// Runs each shipped policy file over `req`, checks each answer, and
/// returns the policies that a cost or time limit stopped.
pub fn validate(req: &Request, limits: Limits) -> Vec<(String, Limit)> {
    let settings = settings(limits);
    let mut exceeded = Vec::new();
    for set in examples::POLICY_SETS.iter() {
        let deadline = Instant::now() + settings.cel_deadline;
        let evaluation = evaluate(set, &settings, cluster(), req, deadline);
        answer(decide(&evaluation.findings, evaluation.applied), req);
        exceeded.extend(evaluation.exceeded);
    }
    exceeded
}

/// Encodes `decision` for `req` as the webhook would, and checks that the
/// answer is an `AdmissionReview` of the request's version for its uid,
/// with a base64 patch when there is one. Returns the patch, decoded.
pub fn answer(decision: Decision, req: &Request) -> Option<Value> {
    let (response, _) = decision.respond(req);
    let bytes = encode(response);
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("the answer is not JSON: {e}"));
    assert_eq!(answer["apiVersion"], req.inner.types.api_version.as_str());
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], req.uid());
    let patch = answer["response"].get("patch")?;
    let text = patch.as_str().unwrap_or_else(|| panic!("the patch is not a string: {patch}"));
    let decoded = base64_decode(text);
    Some(serde_json::from_slice(&decoded).unwrap_or_else(|e| panic!("the patch is not JSON: {e}")))
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_else(|e| panic!("the patch is not base64: {e}"))
}
