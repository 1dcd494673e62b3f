//! Table tests for every built-in rule kind: allowed and denied cases, with
//! the exact message a user would read.

mod support;

use rstest::rstest;
use serde_json::{Value, json};
use support::{create, messages, run, validator};

fn deployment(labels: Value, replicas: Option<i64>, pod_spec: Value) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": labels},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec}}
    });
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

fn container(image: &str) -> Value {
    json!({"name": "app", "image": image})
}

const LABELS: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: labels}\nspec:\n  rules:\n    requiredLabels: {team: '[a-z]+', app: ''}\n";

#[rstest]
#[case::both(json!({"team": "shop", "app": "web"}), vec![])]
#[case::missing(json!({"app": "web"}), vec![r#"[labels] Deployment shop/web: label "team" is required"#])]
#[case::bad_value(json!({"team": "Shop", "app": "web"}), vec![r#"[labels] Deployment shop/web: label "team" is "Shop", which does not match "[a-z]+""#])]
#[case::value_escaped(json!({"team": "a\"b\\c\nd\u{1b}", "app": "web"}), vec!["[labels] Deployment shop/web: label \"team\" is \"a\\\"b\\\\c\\nd\\u{1b}\", which does not match \"[a-z]+\""])]
#[case::none(json!({}), vec![r#"[labels] Deployment shop/web: label "app" is required"#, r#"[labels] Deployment shop/web: label "team" is required"#])]
fn required_labels(#[case] labels: Value, #[case] expected: Vec<&str>) {
    let (allowed, message, _, findings) =
        run(&validator(LABELS), &create(deployment(labels, Some(2), json!({"containers": [container("nginx:1")]}))));
    assert_eq!(messages(&findings), expected);
    assert_eq!(allowed, expected.is_empty());
    for e in expected {
        assert!(message.contains(e), "all violations are in the denial: {message}");
    }
}

const REPLICAS: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: replicas}\nspec:\n  match:\n    resources: [{apiGroups: [apps], resources: [deployments, deployments/scale, statefulsets]}]\n  rules:\n    replicas: {min: 2, max: 10}\n";

#[rstest]
#[case::within(Some(3), None)]
#[case::absent_means_one(None, Some("spec.replicas is 1, below the minimum of 2"))]
#[case::below(Some(1), Some("spec.replicas is 1, below the minimum of 2"))]
#[case::above(Some(11), Some("spec.replicas is 11, above the maximum of 10"))]
fn replica_bounds(#[case] replicas: Option<i64>, #[case] expected: Option<&str>) {
    let (allowed, message, _, _) = run(
        &validator(REPLICAS),
        &create(deployment(json!({}), replicas, json!({"containers": [container("nginx:1")]}))),
    );
    assert_eq!(allowed, expected.is_none(), "{message}");
    if let Some(e) = expected {
        assert_eq!(message, format!("[replicas] Deployment shop/web: {e}"));
    }
}

#[test]
fn the_scale_subresource_is_checked_too() {
    let mut review = create(
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 1}}),
    );
    review["request"]["operation"] = json!("UPDATE");
    review["request"]["resource"] = json!({"group": "apps", "version": "v1", "resource": "deployments"});
    review["request"]["subResource"] = json!("scale");
    let (allowed, message, _, _) = run(&validator(REPLICAS), &review);
    assert!(!allowed);
    assert_eq!(message, "[replicas] Scale shop/web: spec.replicas is 1, below the minimum of 2");
    // A policy on `deployments` alone does not see the subresource.
    let only_main = REPLICAS.replace("deployments, deployments/scale, statefulsets", "deployments");
    assert!(run(&validator(&only_main), &review).0);
}

const SERVICES: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: services}\nspec:\n  rules:\n    services: {forbiddenTypes: [LoadBalancer, NodePort], forbidExternalIPs: true}\n";

#[rstest]
#[case::cluster_ip(json!({"type": "ClusterIP", "ports": [{"port": 80}]}), vec![])]
#[case::default_type(json!({"ports": [{"port": 80}]}), vec![])]
#[case::load_balancer(json!({"type": "LoadBalancer"}), vec!["spec.type LoadBalancer is not allowed"])]
#[case::node_port_and_ips(json!({"type": "NodePort", "externalIPs": ["1.2.3.4"]}), vec!["spec.type NodePort is not allowed", "spec.externalIPs is not allowed"])]
fn services(#[case] spec: Value, #[case] expected: Vec<&str>) {
    let svc =
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": "shop"}, "spec": spec});
    let (_, _, _, findings) = run(&validator(SERVICES), &create(svc));
    let expected: Vec<String> = expected.iter().map(|e| format!("[services] Service shop/api: {e}")).collect();
    assert_eq!(messages(&findings), expected);
}

const IMAGES: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: images}\nspec:\n  rules:\n    images: {allowedRegistries: [registry.example.com, docker.io], forbidLatest: true, requireDigest: false}\n";

#[rstest]
#[case::tagged_hub("nginx:1.27", vec![])]
#[case::own_registry("registry.example.com/shop/web:v3", vec![])]
#[case::digest_only("registry.example.com/shop/web@sha256:abc", vec![])]
#[case::latest("nginx:latest", vec!["image nginx:latest uses the latest tag"])]
#[case::no_tag("nginx", vec!["image nginx has no tag (it means latest)"])]
#[case::other_registry("quay.io/x/y:1", vec!["image quay.io/x/y:1 is not from an allowed registry (registry.example.com, docker.io)"])]
#[case::not_a_reference("reg/\"x\":\t1", vec![r#"image "reg/\"x\":\t1" is not a valid image reference"#])]
fn images(#[case] image: &str, #[case] expected: Vec<&str>) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {"containers": [container(image)]}});
    let (_, _, _, findings) = run(&validator(IMAGES), &create(pod));
    let expected: Vec<String> =
        expected.iter().map(|e| format!("[images] Pod shop/p: spec.containers[0] (app): {e}")).collect();
    assert_eq!(messages(&findings), expected);
}

#[test]
fn every_pod_template_is_checked() {
    let pod_spec = json!({"initContainers": [container("nginx:latest")], "containers": [container("nginx:1")]});
    let cases = [
        (
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "w", "namespace": "shop"}, "spec": {"template": {"spec": pod_spec}}}),
            "spec.template.spec",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "w", "namespace": "shop"}, "spec": {"template": {"spec": pod_spec}}}),
            "spec.template.spec",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "w", "namespace": "shop"}, "spec": {"template": {"spec": pod_spec}}}),
            "spec.template.spec",
        ),
        (
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w", "namespace": "shop"}, "spec": {"template": {"spec": pod_spec}}}),
            "spec.template.spec",
        ),
        (
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "w", "namespace": "shop"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": pod_spec}}}}}),
            "spec.jobTemplate.spec.template.spec",
        ),
    ];
    for (object, path) in cases {
        let kind = object["kind"].as_str().unwrap().to_owned();
        let (allowed, message, _, _) = run(&validator(IMAGES), &create(object));
        assert!(!allowed, "{kind}");
        assert_eq!(
            message,
            format!("[images] {kind} shop/w: {path}.initContainers[0] (app): image nginx:latest uses the latest tag")
        );
    }
}

const RESOURCES: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: resources}\nspec:\n  action: Warn\n  rules:\n    resources: {requests: [cpu, memory], limits: [memory]}\n";

#[test]
fn resources_are_required_of_init_containers_too_and_warn_only() {
    let complete = json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {
        "initContainers": [{"name": "init", "image": "x:1", "resources": {"requests": {"cpu": "1m"}}}],
        "containers": [{"name": "app", "image": "x:1", "resources": complete}]
    }});
    let (allowed, _, warnings, _) = run(&validator(RESOURCES), &create(pod));
    assert!(allowed, "a Warn policy never denies");
    assert_eq!(
        warnings,
        [
            "[resources] Pod shop/p: spec.initContainers[0] (init): resources.requests.memory is required",
            "[resources] Pod shop/p: spec.initContainers[0] (init): resources.limits.memory is required",
        ]
    );
}

const SECURITY: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: psa}\nspec:\n  rules:\n    podSecurity: {forbidPrivileged: true, forbidHostNamespaces: true, forbidHostPath: true, allowedCapabilities: [NET_BIND_SERVICE], requireRunAsNonRoot: true}\n";

#[test]
fn pod_security() {
    let good = json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "app", "image": "x:1", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}]});
    assert!(run(&validator(SECURITY), &create(deployment(json!({}), Some(2), good))).0);
    let bad = json!({
        "hostNetwork": true, "hostPID": true,
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [{"name": "app", "image": "x:1", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}}}]
    });
    let (allowed, _, _, findings) = run(&validator(SECURITY), &create(deployment(json!({}), Some(2), bad)));
    assert!(!allowed);
    let p = "[psa] Deployment shop/web: spec.template.spec";
    assert_eq!(
        messages(&findings),
        [
            format!("{p}.hostNetwork is true"),
            format!("{p}.hostPID is true"),
            format!("{p}.volumes[0] (root): hostPath volumes are not allowed"),
            format!("{p}.containers[0] (app): securityContext.privileged is true"),
            format!("{p}.containers[0] (app): capability NET_ADMIN may not be added (allowed: NET_BIND_SERVICE)"),
            format!(
                "{p}.containers[0] (app): runAsNonRoot must be true (on the container or in the pod securityContext)"
            ),
        ]
    );
}

#[test]
fn system_namespaces_are_excluded_unless_a_policy_says_otherwise() {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kube-system"}, "spec": {"containers": [container("nginx")]}});
    assert!(run(&validator(IMAGES), &create(pod.clone())).0);
    let including = IMAGES.replace("  rules:", "  match: {includeSystemNamespaces: true}\n  rules:");
    assert!(!run(&validator(&including), &create(pod.clone())).0);
    pod["metadata"]["namespace"] = json!("portcullis-system");
    assert!(run(&validator(IMAGES), &create(pod.clone())).0);
    pod["metadata"]["namespace"] = json!("shop");
    let excluding = IMAGES.replace("  rules:", "  match: {excludeNamespaces: [shop]}\n  rules:");
    assert!(run(&validator(&excluding), &create(pod)).0);
}

#[test]
fn object_selector_and_operations() {
    let policy = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: crit}\nspec:\n  match:\n    operations: [CREATE]\n    objectSelector: {matchExpressions: [{key: tier, operator: In, values: [critical]}]}\n  rules:\n    requiredAnnotations: {runbook: ''}\n";
    let v = validator(policy);
    let obj = |tier: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "shop", "labels": {"tier": tier}}});
    assert!(!run(&v, &create(obj("critical"))).0);
    assert!(run(&v, &create(obj("low"))).0);
    assert!(run(&v, &support::update(obj("critical"), obj("critical"))).0, "UPDATE is not in operations");
}

#[test]
fn audit_findings_allow_and_are_reported() {
    let policy = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: digests}\nspec:\n  action: Audit\n  rules:\n    images: {requireDigest: true}\n";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {"containers": [container("nginx:1")]}});
    let (allowed, _, warnings, findings) = run(&validator(policy), &create(pod));
    assert!(allowed);
    assert!(warnings.is_empty());
    assert_eq!(
        messages(&findings),
        ["[digests] Pod shop/p: spec.containers[0] (app): image nginx:1 is not pinned by digest (@sha256:...)"]
    );
}

#[rstest]
#[case::no_rules("spec: {}", "has neither rules nor validations")]
#[case::min_above_max("spec: {rules: {replicas: {min: 3, max: 2}}}", "min 3 is above max 2")]
#[case::bad_service_type("spec: {rules: {services: {forbiddenTypes: [Public]}}}", "\"Public\" is not a Service type")]
#[case::bad_pattern("spec: {rules: {requiredLabels: {team: '(['}}}", "pattern \"([\"")]
#[case::bad_selector(
    "spec: {match: {objectSelector: {matchExpressions: [{key: a, operator: In}]}}, rules: {requiredLabels: {a: ''}}}",
    "needs values"
)]
#[case::unknown_field("spec: {rulez: {}}", "unknown field `rulez`")]
#[case::cel_syntax(
    "spec: {validations: [{expression: 'object.spec.replicas <='}]}",
    "validations[0]: \"object.spec.replicas <=\" does not compile"
)]
fn bad_policies_are_refused_with_a_clear_message(#[case] spec: &str, #[case] expected: &str) {
    let yaml = format!("apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: p}}\n{spec}\n");
    let err = portcullis_validator::policy::PolicySet::from_sources(
        [(std::path::Path::new("p.yaml"), yaml.as_bytes())],
        portcullis_cel::cost::DEFAULT_LIMIT,
    )
    .unwrap_err();
    let said = portcullis_telemetry::error_chain(&err);
    assert!(said.contains(expected), "{said}");
}
