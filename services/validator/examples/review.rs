//! Reviews the benchmark's Deployment (tests/data/deployment.json, or the
//! object file given third) against a policy file N times and prints the
//! time per review: decode, evaluate, encode, as `benches/evaluate.rs` does. Its use is counting instructions,
//! which a noisy machine does not change (docs/BENCHMARKS.md):
//!
//! ```sh
//! cargo build --release -p portcullis-validator --example review
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*review_once*' \
//!   target/release/examples/review services/validator/tests/data/policies.yaml 100
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use portcullis_admission::{decode, encode, manifest};
use portcullis_cel::workers::Workers;
use portcullis_validator::evaluate::Settings;
use portcullis_validator::policy::PolicySet;
use portcullis_validator::webhook::{NoNamespaces, Validator};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().context("usage: review POLICIES.yaml [N] [OBJECT.json]")?;
    let n: u32 = args.next().map_or(Ok(10_000), |n| n.parse()).context("N is a number")?;
    let object = match args.next() {
        Some(file) => std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?,
        None => include_str!("../tests/data/deployment.json").to_owned(),
    };
    let yaml = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let policies = PolicySet::from_sources([(Path::new(&path), yaml.as_slice())], portcullis_cel::cost::DEFAULT_LIMIT)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let settings = Settings {
        system_namespaces: vec!["kube-system".into()],
        cel_deadline: Duration::from_secs(1),
        cel_limits: Default::default(),
    };
    let validator = Validator::new(policies, settings, Arc::new(NoNamespaces), Workers::new(1)?);
    let deployment = serde_json::from_str(&object)?;
    let body = serde_json::to_vec(&manifest::as_review(deployment)?)?;
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(review_once(&validator, &body));
    }
    println!("{:.2} µs per review", start.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1)));
    Ok(())
}

#[inline(never)]
fn review_once(validator: &Validator, body: &[u8]) -> usize {
    let answer = decode(body).map(|req| encode(validator.review(&req, validator.deadline()).0.respond(&req).0));
    answer.map(|bytes| bytes.len()).unwrap_or_default()
}
