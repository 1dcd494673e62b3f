//! decode + mutate + diff + encode, the whole admission path minus the
//! network, for a typical pod, a pod with 30 containers and a Deployment's
//! pod as the API server sends it.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis_admission::encode;
use portcullis_injector::pod::decode;
use portcullis_injector::webhook::Injector;

/// The allocator the service binary runs with (its `main.rs`), so that the
/// figures are those of production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/fixture.rs"]
mod fixture;

const CONFIG: &str = include_str!("../tests/data/config.yaml");

fn bench(c: &mut Criterion) {
    let config =
        portcullis_injector::serve::parse(&vec![(Path::new("config.yaml").to_path_buf(), CONFIG.as_bytes().to_vec())])
            .unwrap_or_default();
    let injector = Injector::new(config);
    let deployment: serde_json::Value =
        serde_json::from_str(include_str!("../tests/data/pod-from-deployment.json")).unwrap_or_default();
    let cases = [
        ("typical pod (2 containers)", fixture::pod(2)),
        ("pod with 30 containers", fixture::pod(30)),
        ("a Deployment's pod as stored", deployment),
    ];
    for (name, pod) in cases {
        let body = fixture::review(&pod);
        c.bench_function(&format!("admission: {name}"), |b| {
            b.iter(|| {
                let req = decode(&body).map(|req| {
                    let (response, _) = injector.decide(&req).respond(&req);
                    encode(response)
                });
                std::hint::black_box(req.map(|r| r.len()).unwrap_or_default())
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
