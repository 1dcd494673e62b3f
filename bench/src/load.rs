//! Closed-loop load: `concurrency` workers, each sending its next request as
//! soon as the previous one is answered, for a fixed time; every latency is
//! kept: pod creates through the API server. A webhook is driven by the same
//! kind of loop with a generator of its own (`generator.rs`; the `load`
//! command, a process of its own pinned to its own core).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// `portcullis-bench load`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The webhook URL.
    #[arg(long)]
    url: String,
    /// The CA (PEM) that signed the webhook's certificate.
    #[arg(long)]
    ca: PathBuf,
    /// The AdmissionReview to send.
    #[arg(long)]
    body: PathBuf,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Keep-alive connections, each with one request in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Never sleep while loading (spin on the core): only when that core
    /// is the generator's alone (`taskset`), so that no answer pays to
    /// wake it and no server loses CPU to it.
    #[arg(long)]
    stay_awake: bool,
}

/// What one measurement gave.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(crate) struct Summary {
    /// Requests answered as expected.
    pub requests: u64,
    /// Requests that failed or were answered wrongly.
    pub failures: u64,
    /// Answered requests per second.
    pub rate: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Mean latency, µs.
    #[serde(default)]
    pub mean_us: f64,
    /// Largest latency, µs.
    #[serde(default)]
    pub max_us: f64,
    /// Every request made, the untimed first ones and those answered after
    /// the window included: what a server's CPU time over the whole
    /// measurement is divided by (through the API server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// CPU time the server process spent per answered request, µs (webhook
    /// level, where each server is a process of its own; measured by the
    /// caller around the load, so absent from `load`'s own output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_us: Option<f64>,
}

impl Summary {
    /// How much longer each request took than in `baseline`, µs, from the
    /// rates (1/rate − 1/baseline rate): what a server adds per create
    /// through the API server.
    pub(crate) fn added_cost_us(&self, baseline: &Summary) -> f64 {
        let per_request = |s: &Summary| 1e6 / s.rate.max(f64::MIN_POSITIVE);
        per_request(self) - per_request(baseline)
    }
}

/// Runs `request` in `concurrency` closed loops for `duration` (after each
/// worker's untimed first request, which opens its connection) and
/// summarises. A request answers whether it got the expected answer.
pub(crate) async fn measure<F, Fut>(concurrency: usize, duration: Duration, request: F) -> Summary
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let request = Arc::new(request);
    let barrier = Arc::new(tokio::sync::Barrier::new(concurrency));
    let calls = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let (request, barrier, calls) = (request.clone(), barrier.clone(), calls.clone());
            tokio::spawn(async move {
                request(worker).await;
                calls.fetch_add(1, Ordering::Relaxed);
                barrier.wait().await;
                let end = Instant::now() + duration;
                let (mut latencies, mut failures) = (Vec::new(), 0u64);
                while Instant::now() < end {
                    let started = Instant::now();
                    let answered = request(worker).await;
                    calls.fetch_add(1, Ordering::Relaxed);
                    // One answered after the window is not counted: with
                    // hundreds of clients, each one's last request would
                    // add clients ÷ seconds to the rate.
                    if Instant::now() > end {
                        break;
                    }
                    if answered {
                        latencies.push(started.elapsed().as_micros() as u32);
                    } else {
                        failures += 1;
                    }
                }
                (latencies, failures)
            })
        })
        .collect();
    let mut summary = gather(workers, duration).await;
    summary.calls = Some(calls.load(Ordering::Relaxed));
    summary
}

/// Every worker's latencies and failures, summarised.
pub(crate) async fn gather(workers: Vec<tokio::task::JoinHandle<(Vec<u32>, u64)>>, duration: Duration) -> Summary {
    let (mut latencies, mut failures) = (Vec::new(), 0);
    for worker in workers {
        if let Ok((l, f)) = worker.await {
            latencies.extend(l);
            failures += f;
        }
    }
    summarise(latencies, failures, duration)
}

pub(crate) fn summarise(mut latencies: Vec<u32>, failures: u64, duration: Duration) -> Summary {
    latencies.sort_unstable();
    let quantile = |q: f64| {
        let at = ((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1);
        latencies.get(at).map(|&us| f64::from(us)).unwrap_or_default()
    };
    Summary {
        requests: latencies.len() as u64,
        failures,
        rate: latencies.len() as f64 / duration.as_secs_f64(),
        p50_us: quantile(0.50),
        p99_us: quantile(0.99),
        mean_us: latencies.iter().map(|&us| f64::from(us)).sum::<f64>() / latencies.len().max(1) as f64,
        max_us: latencies.last().map(|&us| f64::from(us)).unwrap_or_default(),
        calls: None,
        server_cpu_us: None,
    }
}

/// `portcullis-bench load`: drives the generator (`generator.rs`) and
/// prints the [`Summary`] as one JSON line.
pub(crate) async fn main(args: Args) -> anyhow::Result<()> {
    let target = crate::generator::Target::new(&args.url, &std::fs::read(&args.ca)?, &std::fs::read(&args.body)?)?;
    let summary =
        crate::generator::run(target, args.concurrency, Duration::from_secs_f64(args.seconds), args.stay_awake).await;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}
