//! Evaluation cost of a typical policy set (ten built-in rule policies and
//! ten CEL validations, tests/data/policies.yaml) per object: decode the
//! review, match, run every rule, build the decision, encode the response;
//! and of the same request when no rule applies, the part every request
//! pays whatever its policies. The CEL set is also timed on the Deployment
//! as the API server stores and sends it (tests/data/deployment-stored.json:
//! managedFields, the last-applied annotation, status), where most of the
//! object is data no expression reads.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis_admission::{decode, encode, manifest};
use portcullis_cel::workers::Workers;
use portcullis_validator::evaluate::Settings;
use portcullis_validator::policy::PolicySet;
use portcullis_validator::webhook::{NoNamespaces, Validator};

/// The allocator the service binary runs with (its `main.rs`), so that the
/// figures are those of production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench(c: &mut Criterion) {
    let all = include_str!("../tests/data/policies.yaml");
    let built_in: String =
        all.split("\n---\n").filter(|d| !d.contains("validations:")).collect::<Vec<_>>().join("\n---\n");
    let cel_only: String = all.split("\n---\n").filter(|d| d.contains("validations:")).collect();
    let body = |json: &str| {
        serde_json::from_str(json)
            .ok()
            .and_then(|object| manifest::as_review(object).ok())
            .and_then(|review| serde_json::to_vec(&review).ok())
            .unwrap_or_default()
    };
    let typical = body(include_str!("../tests/data/deployment.json"));
    let stored = body(include_str!("../tests/data/deployment-stored.json"));
    // The cost of a request no rule applies to (decode, match, encode): a
    // rule's own cost is a set's figure less this one, over its rules.
    let none = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: config-maps}\n\
                spec:\n  match:\n    resources: [{apiGroups: [''], kinds: [ConfigMap]}]\n  \
                validations:\n    - expression: 'true'\n";
    for (name, yaml, body) in [
        ("10 built-in + 10 CEL rules", all, &typical),
        ("10 built-in rules", built_in.as_str(), &typical),
        ("10 CEL rules", cel_only.as_str(), &typical),
        ("no rule applies", none, &typical),
        ("10 CEL rules, as stored", cel_only.as_str(), &stored),
        ("no rule applies, as stored", none, &stored),
    ] {
        let Ok(policies) = PolicySet::from_sources(
            [(Path::new("policies.yaml"), yaml.as_bytes())],
            portcullis_cel::cost::DEFAULT_LIMIT,
        ) else {
            return;
        };
        let settings = Settings {
            system_namespaces: vec!["kube-system".into()],
            cel_deadline: Duration::from_secs(1),
            cel_limits: Default::default(),
        };
        let Ok(workers) = Workers::new(1) else { return };
        let validator = Validator::new(policies, settings, Arc::new(NoNamespaces), workers);
        c.bench_function(&format!("validate a Deployment: {name}"), |b| {
            b.iter(|| {
                let out = decode(body).map(|req| {
                    let (decision, _) = validator.review(&req, validator.deadline());
                    encode(decision.respond(&req).0)
                });
                std::hint::black_box(out.map(|o| o.len()).unwrap_or_default())
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
