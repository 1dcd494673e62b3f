//! Answers the benchmark's review (`benches/support/fixture.rs`: a pod with
//! CONTAINERS app containers, 2 by default, or the pod in POD.json) N times with the injector
//! configured by CONFIG, and prints the time per review: decode, decide,
//! patch, encode, as `benches/admission.rs` does. Its use is counting
//! instructions, which a noisy machine does not change (docs/BENCHMARKS.md):
//!
//! ```sh
//! cargo build --release -p portcullis-injector --example admit
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*admit_once*' \
//!   target/release/examples/admit services/injector/tests/data/config.yaml 100 2
//! ```

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use portcullis_admission::encode;
use portcullis_injector::config::Config;
use portcullis_injector::webhook::Injector;
use portcullis_server::webhook::Webhook as _;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../benches/support/fixture.rs"]
mod fixture;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().context("usage: admit CONFIG.yaml [N] [CONTAINERS | POD.json]")?;
    let n: u32 = args.next().map_or(Ok(10_000), |n| n.parse()).context("N is a number")?;
    let pod = match args.next() {
        None => fixture::pod(2),
        Some(arg) => match arg.parse() {
            Ok(containers) => fixture::pod(containers),
            Err(_) => serde_json::from_slice(&std::fs::read(&arg).with_context(|| format!("reading {arg}"))?)?,
        },
    };
    let yaml = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let config = Config::from_sources([(Path::new(&path), yaml.as_slice())])?;
    let injector = Injector::new(config);
    let body = fixture::review(&pod);
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(admit_once(&injector, &body));
    }
    println!("{:.2} µs per review", start.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1)));
    Ok(())
}

#[inline(never)]
fn admit_once(injector: &Injector, body: &[u8]) -> usize {
    let answer = injector.decode(body).map(|req| encode(injector.decide(&req).respond(&req).0));
    answer.map(|bytes| bytes.len()).unwrap_or_default()
}
