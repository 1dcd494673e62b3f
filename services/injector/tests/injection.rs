//! The injector's decisions on AdmissionReview fixtures, checked the way a
//! user would: apply the returned patch (with an independent RFC 6902
//! implementation) and look at the pod, then run the result again.

mod support;

use rstest::rstest;
use serde_json::{Value, json};
use support::{admit, again, injector, names, review};

#[test]
fn injects_rewrites_and_defaults_a_typical_pod() {
    let injector = injector();
    let review = review("pod-v1.json");
    let pod = admit(&injector, &review);
    let spec = &pod.object["spec"];

    assert_eq!(pod.response["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(pod.response["response"]["uid"], review["request"]["uid"]);
    assert_eq!(pod.response["response"]["allowed"], true);
    // Native sidecar first, the pod's own init container after it.
    assert_eq!(names(&spec["initContainers"]), ["proxy-init", "migrate"]);
    assert_eq!(spec["initContainers"][0]["restartPolicy"], "Always");
    assert_eq!(names(&spec["containers"]), ["web", "metrics"], "log-shipper is not a default template");
    assert_eq!(names(&spec["volumes"]), ["kube-api-access-x1", "proxy-certs"]);
    for container in ["web", "metrics"] {
        let c = spec["containers"].as_array().unwrap().iter().find(|c| c["name"] == container).unwrap();
        let mounts: Vec<&str> =
            c["volumeMounts"].as_array().unwrap().iter().filter_map(|m| m["mountPath"].as_str()).collect();
        assert_eq!(mounts, ["/var/run/secrets/kubernetes.io/serviceaccount", "/etc/proxy/certs"], "{container}");
        assert_eq!(c["imagePullPolicy"], "Always");
    }
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "mirror-pull"}]));
    // Images: Docker Hub short name normalised and mirrored, tag kept;
    // registry with a port untouched; digest kept.
    assert_eq!(spec["containers"][0]["image"], "mirror.example.com/dockerhub/library/nginx:1.27");
    assert_eq!(spec["containers"][1]["image"], "registry.local:5000/team/exporter:v2");
    assert_eq!(spec["initContainers"][0]["image"], "mirror.example.com/ghcr/example/proxy-init:v1.2.0");
    assert_eq!(
        spec["initContainers"][1]["image"],
        "quay.io/team/migrate@sha256:4c1d5b9d2f6a7e8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b"
    );
    assert_eq!(spec["enableServiceLinks"], false);
    // Existing annotations with / and ~ in keys and values survive.
    let annotations = &pod.object["metadata"]["annotations"];
    assert_eq!(annotations["a/b~c"], "kept");
    assert_eq!(annotations["example.com/owner"], "team/a~b");
    assert_eq!(annotations["app.kubernetes.io/part-of"], "shop");
    assert_eq!(annotations["example.com/cost-center"], "platform");
    assert_eq!(pod.object["metadata"]["labels"], json!({"app": "web", "portcullis.dev/injected": "true"}));
    let status = pod.status();
    assert_eq!(status["templates"], json!(["proxy"]));
    assert_eq!(status["initContainers"], json!(["proxy-init"]));
    assert_eq!(
        status["images"]["web"],
        json!({"from": "nginx:1.27", "to": "mirror.example.com/dockerhub/library/nginx:1.27"})
    );
    // Nothing else changed.
    let mut expected_rest = pod.original.clone();
    let mut actual_rest = pod.object.clone();
    for v in [&mut expected_rest, &mut actual_rest] {
        v["spec"].as_object_mut().unwrap().retain(|k, _| {
            !["containers", "initContainers", "volumes", "imagePullSecrets", "enableServiceLinks"].contains(&k.as_str())
        });
        v["metadata"].as_object_mut().unwrap().retain(|k, _| k != "annotations" && k != "labels");
    }
    assert_eq!(actual_rest, expected_rest);
}

#[rstest]
#[case("pod-v1.json")]
#[case("pod-v1beta1.json")]
#[case("pod-host-network.json")]
#[case("pod-clash.json")]
fn a_second_pass_changes_nothing(#[case] fixture: &str) {
    let injector = injector();
    let review = review(fixture);
    let first = admit(&injector, &review);
    assert!(first.patch().is_some(), "the first pass mutates {fixture}");
    let second = admit(&injector, &again(&review, &first.object));
    assert_eq!(second.patch(), None, "{fixture}: second pass patch");
    assert_eq!(second.object, first.object);
}

#[test]
fn v1beta1_is_answered_in_v1beta1() {
    let pod = admit(&injector(), &review("pod-v1beta1.json"));
    assert_eq!(pod.response["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(pod.object["spec"]["containers"][0]["image"], "mirror.example.com/dockerhub/library/busybox");
}

#[test]
fn host_network_pods_skip_templates_that_say_so_but_get_rewrites() {
    let pod = admit(&injector(), &review("pod-host-network.json"));
    let spec = &pod.object["spec"];
    assert!(spec.get("initContainers").is_none());
    assert_eq!(names(&spec["volumes"]), ["kube-api-access-x1"]);
    assert_eq!(spec["containers"][0]["image"], "mirror.example.com/ghcr/example/agent:v3");
    assert_eq!(pod.status()["templates"], json!([]));
}

#[rstest]
#[case::opt_out("pod-opt-out.json")]
#[case::mirror_pod("pod-mirror.json")]
#[case::other_kind("deployment.json")]
fn leaves_alone(#[case] fixture: &str) {
    let admitted = admit(&injector(), &review(fixture));
    assert_eq!(admitted.response["response"]["allowed"], true);
    assert_eq!(admitted.patch(), None);
    assert_eq!(admitted.object, admitted.original);
}

#[test]
fn name_clashes_keep_the_pods_own_and_warn() {
    let pod = admit(&injector(), &review("pod-clash.json"));
    let spec = &pod.object["spec"];
    let shipper = spec["containers"].as_array().unwrap().iter().find(|c| c["name"] == "log-shipper").unwrap();
    assert_eq!(shipper["image"], "example.com/my-own-shipper:1", "the pod's own container wins");
    assert_eq!(names(&spec["containers"]), ["app", "log-shipper"]);
    let certs: Vec<&Value> =
        spec["volumes"].as_array().unwrap().iter().filter(|v| v["name"] == "proxy-certs").collect();
    assert_eq!(certs, [&json!({"name": "proxy-certs", "secret": {"secretName": "mine"}})]);
    let warnings = pod.warnings().join("\n");
    assert!(warnings.contains("container \"log-shipper\" already exists"), "{warnings}");
    assert!(warnings.contains("volume \"proxy-certs\" already exists"), "{warnings}");
    assert!(warnings.contains("unknown template \"nope\""), "{warnings}");
    // The proxy template still applied what did not clash.
    assert_eq!(names(&spec["initContainers"]), ["proxy-init"]);
    assert_eq!(pod.status()["templates"], json!(["proxy", "log-shipper"]));
}

#[test]
fn a_changed_template_replaces_exactly_the_old_injection() {
    let review = review("pod-v1.json");
    let first = admit(&injector(), &review);
    let mut config = injector().config().as_ref().clone();
    let proxy = config.templates.iter_mut().find(|t| t.name == "proxy").unwrap();
    proxy.init_containers[0]["image"] = json!("ghcr.io/example/proxy-init:v1.3.0");
    proxy.volumes.clear();
    proxy.volume_mounts.clear();
    let updated = portcullis_injector::webhook::Injector::new(config);
    let second = admit(&updated, &again(&review, &first.object));
    let spec = &second.object["spec"];
    assert_eq!(names(&spec["initContainers"]), ["proxy-init", "migrate"]);
    assert_eq!(spec["initContainers"][0]["image"], "mirror.example.com/ghcr/example/proxy-init:v1.3.0");
    assert_eq!(names(&spec["volumes"]), ["kube-api-access-x1"]);
    for c in spec["containers"].as_array().unwrap() {
        assert_eq!(c["volumeMounts"].as_array().unwrap().len(), 1, "the old mount is gone from {}", c["name"]);
    }
    // The pod's own parts are exactly as after the first pass.
    assert_eq!(spec["containers"][0]["image"], first.object["spec"]["containers"][0]["image"]);
    assert_eq!(spec["initContainers"][1], first.object["spec"]["initContainers"][1]);
}

#[test]
fn ephemeral_containers_get_their_images_rewritten() {
    let pod = admit(&injector(), &review("pod-ephemeral.json"));
    let spec = &pod.object["spec"];
    assert_eq!(spec["ephemeralContainers"][0]["image"], "mirror.example.com/dockerhub/library/busybox:1.36");
    assert_eq!(spec["containers"], pod.original["spec"]["containers"], "only ephemeral containers change");
    let warnings = pod.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("container \"debugger\": image busybox:1.36 rewritten"), "{warnings:?}");
}

#[test]
fn an_update_that_sets_an_image_back_keeps_it_on_the_mirror() {
    // `kubectl apply` of the original manifest sends the Docker Hub image
    // again; the stored pod must not change.
    let injector = injector();
    let create = review("pod-v1.json");
    let stored = admit(&injector, &create).object;
    let mut applied = stored.clone();
    applied["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    let mut update = again(&create, &applied);
    update["request"]["operation"] = json!("UPDATE");
    update["request"]["oldObject"] = stored.clone();
    let result = admit(&injector, &update);
    assert_eq!(result.object, stored);
    // An UPDATE that changes nothing rewritable gets no patch.
    let unchanged = admit(&injector, &again(&update, &stored));
    assert_eq!(unchanged.patch(), None);
}

/// Found by fuzzing (`fuzz/fuzz_targets/inject.rs`): two containers without
/// a name got the sidecar's mount recorded twice under the name `""`, so a
/// second pass rewrote the status annotation. Containers that cannot be told
/// apart by name are left alone (the API server refuses the pod anyway).
#[rstest]
#[case::unnamed(json!([{"image": "nginx"}, {"image": "redis"}]), "an item of spec.containers has no name")]
#[case::duplicate(json!([{"name": "web", "image": "nginx"}, {"name": "web"}]), "the container name \"web\" is used twice")]
fn containers_without_unique_names_are_left_alone(#[case] containers: Value, #[case] why: &str) {
    let injector = injector();
    let mut review = review("pod-v1.json");
    review["request"]["object"]["spec"]["containers"] = containers;
    let pod = admit(&injector, &review);
    assert_eq!(pod.patch(), None);
    assert_eq!(pod.warnings(), [format!("portcullis: {why}; the pod is left unchanged")]);
}

/// Found by fuzzing: a number in a container that the patch moves (the pod's
/// own init containers shift behind an injected native sidecar) was read
/// one unit in the last place off and written back so. Numbers are read
/// exactly (serde_json's `float_roundtrip`), so the patch carries the value
/// the API server sent.
#[test]
fn numbers_in_moved_containers_survive_to_the_last_bit() {
    let injector = injector();
    let mut review = review("pod-v1.json");
    let text = serde_json::to_string(&review).unwrap().replacen(
        r#""name":"migrate""#,
        r#""name":"migrate","x-weight":-7.3934276970545275e-59"#,
        1,
    );
    review = serde_json::from_str(&text).unwrap();
    let pod = admit(&injector, &review);
    let moved = &pod.object["spec"]["initContainers"][1];
    assert_eq!(moved["name"], "migrate");
    assert_eq!(moved["x-weight"].as_f64(), Some(-7.3934276970545275e-59));
}
