//! The injector reads only the parts of a pod its configuration reads or
//! may change (`pod::parts_for`) and diffs those; on generated pods, with every shipped
//! configuration and on a second pass after the configuration changed, the
//! patch it answers must give exactly the pod that the same mutation of the
//! whole pod gives (`mutate::mutated_whole`).

mod support;

use std::path::{Path, PathBuf};

use portcullis_injector::config::Config;
use portcullis_injector::mutate::mutated_whole;
use portcullis_injector::webhook::Injector;
use portcullis_server::webhook::Webhook;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use support::{admit, again, review};

/// The configurations the injector ships or is tested with, the test one
/// with its `proxy` template changed (so that a second pass takes the old
/// injection out), and the one with CEL mutations.
fn configs() -> Vec<Config> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files: [PathBuf; 2] = [support::data("config.yaml"), root.join("deploy/base/policies/injector.yaml")];
    let mut configs: Vec<Config> = files
        .iter()
        .map(|file| {
            let contents =
                portcullis_server::watch::read_all(std::slice::from_ref(file)).expect("the configuration is readable");
            portcullis_injector::serve::parse(&contents).expect("the configuration is valid")
        })
        .collect();
    let mut changed = configs[0].clone();
    for template in &mut changed.templates {
        for container in template.init_containers.iter_mut().chain(&mut template.containers) {
            container["image"] = json!("ghcr.io/example/changed:v2");
            container["args"] = json!(["--version=2"]);
            if let Some(fields) = container.as_object_mut() {
                fields.remove("resources");
                fields.remove("ports");
            }
        }
        template.volumes.clear();
        template.volume_mounts.clear();
        template.image_pull_secrets.clear();
    }
    configs.push(changed);
    // CEL mutations of all three patch types: the pod is read with what
    // they read and change too.
    let cel = portcullis_server::watch::read_all(&[support::data("cel-config.yaml")]).expect("readable");
    configs.push(portcullis_injector::serve::parse(&cel).expect("the configuration is valid"));
    configs
}

fn pick<T: Clone + std::fmt::Debug + 'static>(items: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(items)
}

fn container() -> impl Strategy<Value = Value> {
    (
        pick(&["app", "web", "proxy-init", "log-shipper", "istio-proxy"]),
        pick(&[
            "nginx:1.27",
            "docker.io/library/redis:7",
            "ghcr.io/example/proxy-init:v1.2.0",
            "fluent/fluent-bit:3.1",
        ]),
        prop::option::of(pick(&["Always", "IfNotPresent"])),
        prop::option::of(prop::collection::vec(
            (pick(&["proxy-certs", "data", "kube-api-access"]), pick(&["/etc/proxy/certs", "/data", "/var/run"])),
            0..3,
        )),
        any::<bool>(),
    )
        .prop_map(|(name, image, policy, mounts, extras)| {
            let mut c = Map::new();
            c.insert("name".into(), json!(name));
            c.insert("image".into(), json!(image));
            if let Some(policy) = policy {
                c.insert("imagePullPolicy".into(), json!(policy));
            }
            if let Some(mounts) = mounts {
                let mounts: Vec<Value> = mounts.into_iter().map(|(n, p)| json!({"name": n, "mountPath": p})).collect();
                c.insert("volumeMounts".into(), Value::Array(mounts));
            }
            if extras {
                c.insert("ports".into(), json!([{"containerPort": 8080, "protocol": "TCP"}]));
                c.insert("env".into(), json!([{"name": "MODE", "value": "production"}]));
                c.insert("resources".into(), json!({"requests": {"cpu": "100m", "memory": "64Mi"}}));
            }
            Value::Object(c)
        })
}

/// Named items without duplicate names (a pod with duplicates is left
/// alone, which the other tests cover).
fn unique(items: Vec<Value>, taken: &mut Vec<String>) -> Vec<Value> {
    items
        .into_iter()
        .filter(|item| {
            let name = item["name"].as_str().unwrap_or_default().to_owned();
            let fresh = !taken.contains(&name);
            taken.push(name);
            fresh
        })
        .collect()
}

fn pod() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(container(), 0..4),
        prop::collection::vec(container(), 0..2),
        prop::option::of(prop::collection::vec(pick(&["proxy-certs", "data", "config"]), 0..3)),
        prop::option::of(prop::collection::vec(pick(&["mirror-pull", "other-pull"]), 0..2)),
        prop::option::of(pick(&["proxy", "log-shipper", "proxy,log-shipper", "nope, proxy", ""])),
        (any::<bool>(), prop::option::of(any::<bool>()), 0..3usize, any::<bool>()),
    )
        .prop_map(|(containers, inits, volumes, secrets, templates, (host_network, links, labels, own))| {
            let mut taken = Vec::new();
            let mut spec = Map::new();
            spec.insert("containers".into(), Value::Array(unique(containers, &mut taken)));
            let inits = unique(inits, &mut taken);
            if !inits.is_empty() {
                spec.insert("initContainers".into(), Value::Array(inits));
            }
            if let Some(volumes) = volumes {
                let mut seen = Vec::new();
                let volumes: Vec<Value> = volumes.into_iter().map(|v| json!({"name": v, "emptyDir": {}})).collect();
                spec.insert("volumes".into(), Value::Array(unique(volumes, &mut seen)));
            }
            if let Some(secrets) = secrets {
                spec.insert("imagePullSecrets".into(), secrets.into_iter().map(|s| json!({"name": s})).collect());
            }
            if host_network {
                spec.insert("hostNetwork".into(), json!(true));
            }
            if let Some(links) = links {
                spec.insert("enableServiceLinks".into(), json!(links));
            }
            spec.insert("restartPolicy".into(), json!("Always"));
            let mut metadata = json!({"name": "p", "namespace": "demo"});
            // Labels and annotations of the pod's own, some under the keys
            // the configurations' defaults set, with other values.
            match labels {
                1 => metadata["labels"] = json!({"app": "p"}),
                2 => metadata["labels"] = json!({"app": "p", "portcullis.dev/injected": "no"}),
                _ => {}
            }
            if own {
                metadata["annotations"] = json!({"example.com/cost-center": "finance",
                                                 "kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Pod\"}"});
            }
            if let Some(templates) = templates {
                metadata["annotations"]["portcullis.dev/templates"] = json!(templates);
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
        })
}

/// Admits `object` with `config` and checks the patched pod against the
/// whole-pod mutation; returns the patched pod.
fn same_as_whole(config: &Config, object: &Value) -> Result<Value, TestCaseError> {
    let review = again(&review("pod-v1.json"), object);
    let admitted = admit(&Injector::new(config.clone()), &review);
    let req = portcullis_admission::decode(&serde_json::to_vec(&review).expect("JSON")).expect("a review");
    let whole = mutated_whole(&req, object, config).unwrap_or_else(|| object.clone());
    prop_assert_eq!(&admitted.object, &whole, "the patch from the editable parts differs from the whole-pod mutation");
    Ok(admitted.object)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_patch_gives_what_mutating_the_whole_pod_gives(
        object in pod(),
        first in prop::sample::select(vec![0usize, 1, 3]),
        late in any::<bool>(),
    ) {
        let configs = configs();
        let mut injected = same_as_whole(&configs[first], &object)?;
        if late && let Some(containers) = injected["spec"]["containers"].as_array_mut() {
            // Someone added a container after the injected ones (a copied,
            // edited pod): taking the old injection out moves it.
            containers.push(json!({"name": "late", "image": "busybox:1.36", "ports": [{"containerPort": 9000}]}));
        }
        // A second pass, with the changed configuration: the old injection
        // comes out and the new one goes in.
        same_as_whole(&configs[2], &injected)?;
    }
}

#[test]
fn every_fixture_pod_gives_what_mutating_the_whole_pod_gives() {
    for fixture in ["pod-v1.json", "pod-v1beta1.json", "pod-host-network.json", "pod-clash.json", "pod-mirror.json"] {
        let object = review(fixture)["request"]["object"].clone();
        for config in configs() {
            let injected = same_as_whole(&config, &object).unwrap();
            for next in configs() {
                same_as_whole(&next, &injected).unwrap();
            }
        }
    }
}

#[test]
fn the_webhook_builds_only_the_editable_parts_unless_injected_containers_would_move() {
    let injector = Injector::new(configs().remove(0));
    let mut review = review("pod-v1.json");
    let pod = &mut review["request"]["object"];
    pod["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8080}]);
    pod["spec"]["restartPolicy"] = json!("Always");
    pod["metadata"]["labels"] = json!({"app": "p", "portcullis.dev/injected": "no"});
    pod["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
    pod["spec"]["volumes"] = json!([{"name": "data", "emptyDir": {}}]);
    let read = |review: &Value| {
        let body = serde_json::to_vec(review).unwrap();
        Webhook::decode(&injector, &body).unwrap().object.unwrap()
    };

    let pod = read(&review);
    assert_eq!(pod["metadata"]["labels"], json!({"portcullis.dev/injected": "no"}), "a label the defaults set is read");
    assert_eq!(pod["metadata"]["annotations"], json!({}), "other labels and annotations are not");
    assert_eq!(pod["spec"]["volumes"], json!([{"name": "data"}]), "of a volume, its name");
    assert_eq!(pod["spec"]["containers"][0]["image"], review["request"]["object"]["spec"]["containers"][0]["image"]);
    assert_eq!(pod["spec"]["containers"][0].get("ports"), None, "a container's ports are never built");
    assert_eq!(pod["spec"].get("restartPolicy"), None, "nor the spec's other fields");
    assert_eq!(pod["metadata"].get("name"), None);

    // An earlier pass injected an app container: taking it out moves the
    // containers after it, so the pod is read whole.
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"portcullis.dev/status": r#"{"templates":["log-shipper"],"containers":["log-shipper"]}"#});
    assert_eq!(read(&review), review["request"]["object"]);

    // An earlier pass injected a volume: taking it out moves the volumes
    // after it, so the pod is read whole too.
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"portcullis.dev/status": r#"{"templates":["proxy"],"volumes":["proxy-certs"]}"#});
    assert_eq!(read(&review), review["request"]["object"]);
}
