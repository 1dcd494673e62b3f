//! Sends the benchmark's review N times through the injector's whole HTTP
//! handler, as `serve` builds it (router, body limit, timeout, admission
//! span, metrics, decision, response), with the production subscriber
//! installed (plain logs at `PORTCULLIS_LOG_LEVEL`, `info` by default, no
//! span export), but without TLS and sockets: the part of a request's cost
//! that is the webhook's own rather than the transport's. Compare with
//! `admit`, which is the decision path alone (docs/BENCHMARKS.md). The
//! requests are polled inside the runtime, not inside `route_all`, so
//! count the whole run twice and take the difference:
//!
//! ```sh
//! cargo build --release -p portcullis-injector --example route
//! valgrind --tool=callgrind target/release/examples/route services/injector/tests/data/config.yaml 200
//! valgrind --tool=callgrind target/release/examples/route services/injector/tests/data/config.yaml 400
//! # per request = (total at 400 - total at 200) / 200
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::body::Body;
use axum::http::Request;
use portcullis_injector::config::Config;
use portcullis_injector::webhook::Injector;
use portcullis_server::WebhookMetrics;
use portcullis_telemetry::{LogArgs, LogFormat};
use tower::ServiceExt as _;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../benches/support/fixture.rs"]
mod fixture;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().context("usage: route CONFIG.yaml [N]")?;
    let n: u32 = args.next().map_or(Ok(10_000), |n| n.parse()).context("N is a number")?;
    let yaml = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let injector = Arc::new(Injector::new(Config::from_sources([(Path::new(&path), yaml.as_slice())])?));
    let metrics = WebhookMetrics::new(|registry| injector.register(registry));
    let router =
        portcullis_server::webhook::router("/mutate", injector, metrics.admission, None, Duration::from_secs(10));
    let body = axum::body::Bytes::from(fixture::review(&fixture::pod(2)));
    let level = std::env::var("PORTCULLIS_LOG_LEVEL").unwrap_or_else(|_| "info".to_owned());
    let logs = LogArgs { log_level: level, log_format: LogFormat::Plain };
    let (subscriber, _telemetry) = portcullis_telemetry::subscriber("portcullis-injector", &logs)?;
    let _guard = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let start = Instant::now();
    let bytes = runtime.block_on(route_all(router, body, n))?;
    println!(
        "{:.2} µs per request, {bytes} response bytes in all",
        start.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1))
    );
    Ok(())
}

#[inline(never)]
async fn route_all(router: axum::Router, body: axum::body::Bytes, n: u32) -> anyhow::Result<usize> {
    let mut total = 0;
    for _ in 0..n {
        let request = Request::post("/mutate")
            .header("content-type", "application/json")
            .body(Body::from(body.clone()))
            .context("building the request")?;
        let response = router.clone().oneshot(request).await.context("routing")?;
        total += axum::body::to_bytes(response.into_body(), usize::MAX).await.context("reading the answer")?.len();
    }
    Ok(total)
}
