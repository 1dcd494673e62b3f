//! Any bytes as a configuration file of each service (`ValidatorPolicy`,
//! `InjectorConfig`, `CertManagerConfig`): a configuration or a clear error,
//! never a panic. A policy that loads is then run over a pod.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use portcullis_admission::decode;
use portcullis_cel::budget::Limits;
use portcullis_fuzz::review::Envelope;
use portcullis_fuzz::{cluster, settings};
use portcullis_validator::evaluate::evaluate;
use portcullis_validator::policy::PolicySet;
use serde_json::json;

fuzz_target!(|bytes: &[u8]| {
    let source = || [(Path::new("fuzzed.yaml"), bytes)];
    let _ = portcullis_injector::config::Config::from_sources(source());
    let _ = portcullis_cert_manager::config::Config::from_sources(source());
    let Ok(set) = PolicySet::from_sources(source(), portcullis_cel::cost::DEFAULT_LIMIT) else { return };
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"team": "a"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:latest"}]}});
    let Ok(req) = decode(&Envelope::pod_create().body(Some(&pod), None)) else { return };
    let settings = settings(Limits { per_call: 20_000, per_policy: 50_000 });
    let deadline = std::time::Instant::now() + settings.cel_deadline;
    let _ = evaluate(&set, &settings, cluster(), &req, deadline);
});
