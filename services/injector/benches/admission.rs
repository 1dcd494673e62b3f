//! decode + mutate + diff + encode, the whole admission path minus the
//! network, for a typical pod and for a pod with 30 containers.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis_admission::{decode, encode};
use portcullis_injector::webhook::Injector;
use serde_json::{Value, json};

/// The allocator the service binary runs with (its `main.rs`), so that the
/// figures are those of production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CONFIG: &str = include_str!("../tests/data/config.yaml");

fn review(containers: usize) -> Vec<u8> {
    let containers: Vec<Value> = (0..containers)
        .map(|i| {
            json!({
                "name": format!("app-{i}"), "image": format!("nginx:1.{i}"),
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "env": [{"name": "MODE", "value": "production"}],
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"
            })
        })
        .collect();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "bench", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "demo", "operation": "CREATE", "userInfo": {"username": "bench"},
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"},
                             "annotations": {"example.com/owner": "team-a", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                "spec": {"containers": containers, "restartPolicy": "Always", "serviceAccountName": "default",
                         "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}
            }
        }
    }))
    .unwrap_or_default()
}

fn bench(c: &mut Criterion) {
    let config =
        portcullis_injector::serve::parse(&vec![(Path::new("config.yaml").to_path_buf(), CONFIG.as_bytes().to_vec())])
            .unwrap_or_default();
    let injector = Injector::new(config);
    for (name, containers) in [("typical pod (2 containers)", 2), ("pod with 30 containers", 30)] {
        let body = review(containers);
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
