//! A request through the whole webhook router (span, trace-context
//! extraction, decision, metrics, encoding) with span export off, and with
//! the OTLP collector unreachable: admission must not slow down when the
//! collector is down.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use criterion::{Criterion, criterion_group, criterion_main};
use portcullis_injector::webhook::Injector;
use portcullis_server::AdmissionMetrics;
use portcullis_telemetry::{LogArgs, LogFormat, subscriber_exporting_to};
use tower::ServiceExt as _;

fn bench(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    let config = include_str!("../tests/data/config.yaml");
    let body = include_bytes!("../tests/data/pod-v1.json");
    let sources = vec![(Path::new("config.yaml").to_path_buf(), config.as_bytes().to_vec())];
    let injector = Arc::new(Injector::new(portcullis_injector::serve::parse(&sources).unwrap_or_default()));
    let metrics = Arc::new(AdmissionMetrics::default());
    let router = portcullis_server::webhook::router("/mutate", injector, metrics, None, Duration::from_secs(10));
    // Logs off (warn level, nothing logged on success): spans only.
    let args = LogArgs { log_level: "warn".into(), log_format: LogFormat::Plain };
    // A real collector: the Jaeger that scripts/build-control-plane.sh built.
    let jaeger = Jaeger::start();
    let up = jaeger.as_ref().map(|j| j.endpoint.clone());
    let mut cases = vec![("spans not exported", None)];
    if let Some(endpoint) = up.as_deref() {
        cases.push(("collector up (Jaeger)", Some(Some(endpoint))));
    }
    // Port 9 (discard) on loopback: nothing listens, connections are refused.
    cases.push(("collector unreachable", Some(Some("http://127.0.0.1:9"))));
    for (name, export) in cases {
        let _guard = runtime.enter();
        let Ok((subscriber, telemetry)) = subscriber_exporting_to("bench", &args, export) else { return };
        tracing::subscriber::with_default(subscriber, || {
            c.bench_function(&format!("admission through the router: {name}"), |b| {
                b.iter(|| {
                    let request = axum::http::Request::post("/mutate")
                        .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                        .body(Body::from(&body[..]))
                        .unwrap_or_default();
                    let response = runtime.block_on(router.clone().oneshot(request));
                    std::hint::black_box(response.map(|r| r.status()).ok())
                })
            });
        });
        telemetry.shutdown();
    }
}

/// Jaeger on free loopback ports, stopped on drop.
struct Jaeger {
    child: std::process::Child,
    endpoint: String,
    _dir: std::path::PathBuf,
}

impl Jaeger {
    fn start() -> Option<Self> {
        let cache = std::env::var("XDG_CACHE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|_| std::env::var("HOME").map(|h| Path::new(&h).join(".cache")))
            .ok()?;
        let binary = cache.join("portcullis/bin/jaeger");
        let port = || std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok().map(|a| a.port());
        let (grpc, http, query) = (port()?, port()?, port()?);
        let template =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/jaeger.yaml")).ok()?;
        let config = template
            .replace("@GRPC@", &grpc.to_string())
            .replace("@HTTP@", &http.to_string())
            .replace("@QUERY@", &query.to_string());
        let dir = std::env::temp_dir().join(format!("portcullis-bench-jaeger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("jaeger.yaml"), config).ok()?;
        let child = std::process::Command::new(binary)
            .arg("--config")
            .arg(dir.join("jaeger.yaml"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let jaeger = Self { child, endpoint: format!("http://127.0.0.1:{grpc}"), _dir: dir };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", grpc)).is_ok() {
                return Some(jaeger);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
