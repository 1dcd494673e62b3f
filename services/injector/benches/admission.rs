//! decode + mutate + diff + encode, the whole admission path minus the
//! network, for a typical pod, a pod with 30 containers and a Deployment's
//! pod as the API server sends it; and the typical pod again with one
//! MutatingAdmissionPolicy-style CEL mutation added to the configuration
//! (what such a mutation adds to the decision): one of constants, which
//! is evaluated once at load (`portcullis_cel::fold`), and one whose value
//! reads the pod, evaluated on each review.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis_admission::encode;
use portcullis_injector::webhook::Injector;
use portcullis_server::webhook::Webhook as _;

/// The allocator the service binary runs with (its `main.rs`), so that the
/// figures are those of production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/fixture.rs"]
mod fixture;

const CONFIG: &str = include_str!("../tests/data/config.yaml");

/// A typical MAP-style mutation: a label set where it is missing.
const CEL_MUTATION: &str = r#"
apiVersion: portcullis.dev/v1alpha1
kind: InjectorConfig
metadata: {name: cel}
spec:
  mutations:
    - name: team-label
      matchConditions:
        - name: no-team
          expression: "!has(object.metadata.labels) || !('team' in object.metadata.labels)"
      mutations:
        - patchType: ApplyConfiguration
          applyConfiguration:
            expression: 'Object{metadata: Object.metadata{labels: {"team": "unassigned"}}}'
"#;

/// The same mutation with a value read from the pod: evaluated per review.
fn reading_mutation() -> String {
    CEL_MUTATION.replace("name: cel", "name: cel-reading").replace(r#""unassigned""#, "object.metadata.namespace")
}

fn bench(c: &mut Criterion) {
    let parse = |files: &[&str]| {
        let contents = files.iter().map(|text| (Path::new("config.yaml").to_path_buf(), text.as_bytes().to_vec()));
        portcullis_injector::serve::parse(&contents.collect()).unwrap_or_default()
    };
    let injector = Injector::new(parse(&[CONFIG]));
    let with_cel = Injector::new(parse(&[CONFIG, CEL_MUTATION]));
    assert_eq!(with_cel.config().mutations.len(), 1, "the CEL mutation loads");
    let reading = reading_mutation();
    let with_reading = Injector::new(parse(&[CONFIG, &reading]));
    assert!(with_cel.config().mutations[0].compiled.mutations_folded(), "the constant mutation is folded");
    assert!(!with_reading.config().mutations[0].compiled.mutations_folded(), "it reads the pod");
    let deployment: serde_json::Value =
        serde_json::from_str(include_str!("../tests/data/pod-from-deployment.json")).unwrap_or_default();
    let cases = [
        ("typical pod (2 containers)", fixture::pod(2), &injector),
        ("pod with 30 containers", fixture::pod(30), &injector),
        ("a Deployment's pod as stored", deployment, &injector),
        ("typical pod (2 containers), one CEL mutation", fixture::pod(2), &with_cel),
        ("typical pod (2 containers), one CEL mutation reading the pod", fixture::pod(2), &with_reading),
    ];
    for (name, pod, injector) in cases {
        let body = fixture::review(&pod);
        c.bench_function(&format!("admission: {name}"), |b| {
            b.iter(|| {
                let req = injector.decode(&body).map(|req| {
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
