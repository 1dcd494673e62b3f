//! Kubernetes' documentation's ValidatingAdmissionPolicy examples,
//! tested before they reach a cluster: each is created in the real API
//! server (bound to a namespace of its own), Deployments on both sides of
//! its edges are created there by kubectl (server-side dry run), and the
//! same YAML is given to `portcullis-validator check` with the same
//! objects. Denied or not, the denial's message and every warning must be
//! the same. The example that reads `namespaceObject` is judged by `check`
//! with the namespace among the objects, and fails closed, with the
//! reason, without it.

use std::process::{Command, Stdio};
use std::time::Duration;

use portcullis_e2e::webhook::namespace;
use portcullis_e2e::{binaries, cluster, eventually, ok, unique};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

/// The examples, as the documentation writes them (names made unique, the
/// binding narrowed to the test's namespace, params as ConfigMaps).
fn examples(ns: &str) -> Vec<(String, String)> {
    let binding = |name: &str, actions: &str, extra: &str| {
        format!(
            "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {{name: {name}}}\nspec:\n  policyName: {name}\n  validationActions: {actions}\n{extra}\
             \x20 matchResources:\n    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/example: {ns}}}}}\n"
        )
    };
    let deployments = "  matchConstraints:\n    resourceRules:\n    - apiGroups: [apps]\n      apiVersions: [v1]\n      \
                       operations: [CREATE, UPDATE]\n      resources: [deployments]\n";
    let demo = format!("demo-policy.{ns}");
    let warn = format!("warn-policy.{ns}");
    let limit = format!("replicalimit-policy.{ns}");
    let images = format!("image-registry.{ns}");
    let environment = format!("image-matches-namespace-environment.{ns}");
    vec![
        (
            demo.clone(),
            format!(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {demo}}}\n\
                 spec:\n  failurePolicy: Fail\n{deployments}  validations:\n  - expression: \"object.spec.replicas <= 5\"\n{}",
                binding(&demo, "[Deny]", "")
            ),
        ),
        (
            warn.clone(),
            format!(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {warn}}}\n\
                 spec:\n{deployments}  validations:\n  - expression: \"object.spec.replicas <= 3\"\n    \
                 message: \"replicas above 3\"\n  - expression: \"has(object.metadata.labels) && 'app' in object.metadata.labels\"\n\
                 \x20   reason: Invalid\n  auditAnnotations:\n  - key: high-replica-count\n    valueExpression: \
                 \"'Deployment spec.replicas set to ' + string(object.spec.replicas)\"\n{}",
                binding(&warn, "[Warn, Audit]", "")
            ),
        ),
        (
            limit.clone(),
            format!(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {limit}}}\n\
                 spec:\n  failurePolicy: Fail\n  paramKind: {{apiVersion: v1, kind: ConfigMap}}\n{deployments}  validations:\n  \
                 - expression: \"object.spec.replicas <= int(params.data.maxReplicas)\"\n    messageExpression: \
                 \"'object.spec.replicas must be no greater than ' + params.data.maxReplicas\"\n    reason: Invalid\n{}",
                binding(
                    &limit,
                    "[Deny]",
                    &format!("  paramRef: {{name: replica-limit, namespace: {ns}, parameterNotFoundAction: Deny}}\n")
                )
            ),
        ),
        (
            images.clone(),
            format!(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {images}}}\n\
                 spec:\n{deployments}  matchConditions:\n  - name: not-exempt\n    expression: \
                 \"!has(object.metadata.annotations) || !('exempt' in object.metadata.annotations)\"\n  variables:\n  \
                 - name: containers\n    expression: object.spec.template.spec.containers\n  validations:\n  \
                 - expression: \"variables.containers.all(c, c.image.startsWith('registry.example.com/'))\"\n    \
                 messageExpression: \"'images must come from registry.example.com: ' + \
                 variables.containers.filter(c, !c.image.startsWith('registry.example.com/')).map(c, c.image).join(', ')\"\n{}",
                binding(&images, "[Deny]", "")
            ),
        ),
        (environment.clone(), format!("{}{}", environment_example(&environment), binding(&environment, "[Deny]", ""))),
    ]
}

/// The documentation's example that reads `namespaceObject`.
fn environment_example(name: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}}
  variables:
  - name: environment
    expression: "'environment' in namespaceObject.metadata.labels ? namespaceObject.metadata.labels['environment'] : 'prod'"
  - name: exempt
    expression: "has(object.metadata.labels) && 'exempt' in object.metadata.labels && object.metadata.labels['exempt'] == 'true'"
  - name: containers
    expression: "object.spec.template.spec.containers"
  - name: containersToCheck
    expression: "variables.containers.filter(c, c.image.contains('example.com/'))"
  validations:
  - expression: "variables.exempt || variables.containersToCheck.all(c, c.image.startsWith(variables.environment + '.'))"
    messageExpression: "'only ' + variables.environment + ' images are allowed in namespace ' + namespaceObject.metadata.name"
"#
    )
}

fn deployment(ns: &str, name: &str, replicas: u32, images: &[&str], labelled: bool, exempt: bool) -> Value {
    let containers: Vec<Value> =
        images.iter().enumerate().map(|(i, image)| json!({"name": format!("c{i}"), "image": image})).collect();
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}}}
    });
    if labelled {
        d["metadata"]["labels"] = json!({"app": name});
    }
    if exempt {
        d["metadata"]["annotations"] = json!({"exempt": "yes"});
    }
    d
}

/// Deployments on both sides of every example's edges.
fn corpus(ns: &str) -> Vec<Value> {
    let good = "registry.example.com/web:1";
    let mut all = Vec::new();
    for (i, replicas) in [0, 1, 3, 4, 5, 6, 7, 60].into_iter().enumerate() {
        all.push(deployment(ns, &format!("r{i}"), replicas, &[good], i % 2 == 0, false));
    }
    all.push(deployment(ns, "foreign", 1, &[good, "docker.io/nginx", "nginx:1.27"], true, false));
    all.push(deployment(ns, "foreign-exempt", 1, &["nginx"], true, true));
    all.push(deployment(ns, "staging", 2, &["staging.example.com/web:1"], true, false));
    // Last: every example finds fault with it.
    all.push(deployment(ns, "foreign-many", 9, &["quay.io/a", good], false, false));
    all
}

/// What one side says of one object: the denial's message, and the
/// warnings, each as `ValidatingAdmissionPolicy 'P' with binding 'B'...`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    denied: Option<String>,
    warnings: Vec<String>,
}

/// The API server's verdict (kubectl, server-side dry run).
fn api_server(object: &Value) -> Verdict {
    let out = cluster().kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &object.to_string());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut warnings: Vec<String> =
        stderr.lines().filter_map(|l| l.strip_prefix("Warning: ")).map(str::to_owned).collect();
    warnings.sort();
    let denied = (!out.status.success()).then(|| {
        let at = stderr.find("ValidatingAdmissionPolicy '").unwrap_or_else(|| panic!("{stderr}"));
        stderr[at..].trim().to_owned()
    });
    Verdict { denied, warnings }
}

/// `check`'s verdicts, by Deployment name; the namespace, labelled as the
/// bindings select it, is among the manifests.
fn check(policies: &str, params: &Value, ns: &str, objects: &[Value]) -> std::collections::BTreeMap<String, Verdict> {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": ns, "labels": {"e2e.portcullis.dev/example": ns, "environment": "staging"}}});
    let objects: Vec<&Value> = std::iter::once(&namespace).chain(objects).collect();
    let dir = tempfile::tempdir().expect("a test step");
    let (policy, manifests, params_file) =
        (dir.path().join("vap.yaml"), dir.path().join("objects.json"), dir.path().join("params.json"));
    std::fs::write(&policy, policies).expect("a test step");
    std::fs::write(&manifests, json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string())
        .expect("a test step");
    std::fs::write(&params_file, params.to_string()).expect("a test step");
    let out = Command::new(binaries().join("portcullis-validator"))
        .arg("check")
        .arg("--policy")
        .arg(&policy)
        .arg("-f")
        .arg(&manifests)
        .arg("--params")
        .arg(&params_file)
        .stderr(Stdio::inherit())
        .output()
        .expect("a test step");
    assert!(out.status.code().is_some_and(|c| c <= 1), "check failed");
    let mut verdicts = std::collections::BTreeMap::new();
    let mut current = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.strip_prefix("Deployment ") {
            let (what, _) = rest.split_once(": ").expect("a test step");
            let name = what.split_once('/').map_or(what, |(_, n)| n).to_owned();
            verdicts.insert(name.clone(), Verdict { denied: None, warnings: Vec::new() });
            current = Some(name);
        } else if let Some(name) = &current {
            let verdict = verdicts.get_mut(name).expect("a test step");
            if let Some(denial) = line.strip_prefix("  deny: ") {
                assert!(verdict.denied.is_none(), "one denial per policy, and one Deny policy at a time here");
                verdict.denied = Some(denial.to_owned());
            } else if let Some(warning) = line.strip_prefix("  warning: ") {
                verdict.warnings.push(warning.to_owned());
                verdict.warnings.sort();
            }
        }
    }
    verdicts
}

#[tokio::test]
async fn the_documentations_examples_give_the_api_servers_verdicts() {
    let client = cluster().client().await;
    let ns = unique("examples");
    namespace(&client, &ns, &[("e2e.portcullis.dev/example", &ns), ("environment", "staging")]).await;
    let params = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "replica-limit", "namespace": ns}, "data": {"maxReplicas": "4"}});
    ok(cluster().kubectl_stdin(&["create", "-f", "-"], &params.to_string()));
    let corpus = corpus(&ns);
    let (mut compared, mut denied, mut warned, mut differences) = (0, 0, 0, Vec::new());
    for (name, yaml) in examples(&ns) {
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &yaml));
        // In force once the API server names this example (not the one
        // deleted before it) on the object every example finds fault with,
        // with its params: the API server's informer of a param kind
        // starts with the first binding that names it, and until it has
        // synced the binding fails (`failed to configure binding: no
        // params found`), though the params exist.
        let faulty = &corpus[corpus.len() - 1];
        let named = format!("ValidatingAdmissionPolicy '{name}'");
        eventually(&format!("the API server enforces {name}"), MINUTE, || {
            let verdict = api_server(faulty);
            let in_force = |m: &String| m.contains(&named) && !m.contains("failed to configure binding");
            verdict.denied.iter().chain(&verdict.warnings).any(in_force).then_some(())
        })
        .await;
        let ours = check(&yaml, &params, &ns, &corpus);
        for object in &corpus {
            let object_name = object["metadata"]["name"].as_str().expect("a test step");
            let theirs = api_server(object);
            compared += 1;
            denied += usize::from(theirs.denied.is_some());
            warned += usize::from(!theirs.warnings.is_empty());
            if ours.get(object_name) != Some(&theirs) {
                differences
                    .push(format!("{name} {object_name}: API server {theirs:?}, check {:?}", ours.get(object_name)));
            }
        }
        ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", &name]));
    }
    println!("{compared} verdicts compared: {denied} denials, {warned} with warnings");
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
    assert!(denied > 5 && warned > 3 && denied < compared, "the corpus should deny, warn and allow");
}

/// The documentation's example that reads `namespaceObject`, given to
/// `check` without the object's namespace among the manifests: it fails
/// closed and says why, never passing.
#[test]
fn a_namespace_check_cannot_see_fails_closed_with_the_reason() {
    let name = "image-matches-namespace-environment.policy.example.com";
    let yaml = format!(
        "{}---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: image-matches}}\nspec: {{policyName: {name}, validationActions: [Deny]}}\n",
        environment_example(name)
    );
    let dir = tempfile::tempdir().expect("a test step");
    let policy = dir.path().join("vap.yaml");
    std::fs::write(&policy, yaml).expect("a test step");
    let objects = dir.path().join("d.json");
    std::fs::write(&objects, deployment("default", "web", 1, &["nginx"], true, false).to_string())
        .expect("a test step");
    let out = Command::new(binaries().join("portcullis-validator"))
        .arg("check")
        .arg("--policy")
        .arg(&policy)
        .arg("-f")
        .arg(&objects)
        .output()
        .expect("a test step");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "denied: {stdout}");
    assert!(
        stdout.contains(name) && stdout.contains("namespace default is not known, so namespaceObject cannot be bound"),
        "{stdout}"
    );
}

/// Built-in rules pushed down: a ValidatorPolicy with required labels and
/// annotations and replica bounds, turned into a native pair by
/// `portcullis-validator vap` and applied to the API server, which then
/// denies the same Deployments as the webhook (`check`), naming the
/// webhook's first finding.
#[tokio::test]
async fn built_in_rules_pushed_down_deny_what_the_webhook_denies() {
    let ns = unique("builtin");
    let rules = "requiredLabels: {app: \"r[0-9]+|foreign.*\"}\n    replicas: {min: 1, max: 6}";
    pushed_down_matches_the_webhook(
        &ns,
        "[{apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]",
        rules,
        &corpus(&ns),
    )
    .await;
}

/// The resource rule pushed down: the API server's denial is the webhook's
/// first finding (init containers first; requests, then limits), for
/// Deployments and Pods.
#[tokio::test]
async fn resource_rules_pushed_down_deny_what_the_webhook_denies() {
    let ns = unique("resources");
    let rules = "resources: {requests: [cpu, memory], limits: [memory]}";
    let full = json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}});
    let container = |name: &str, resources: Value| json!({"name": name, "image": "registry.example.com/web:1", "resources": resources});
    let mut corpus = Vec::new();
    let specs = [
        ("all-set", json!({"containers": [container("web", full.clone())]})),
        ("none-set", json!({"containers": [container("web", json!({}))]})),
        (
            "second-lacks",
            json!({"containers": [container("web", full.clone()), container("side", json!({"requests": {"cpu": "1"}}))]}),
        ),
        (
            "init-lacks",
            json!({"initContainers": [container("init", json!({"limits": {"memory": "1Mi"}}))], "containers": [container("web", json!({}))]}),
        ),
        (
            "init-set",
            json!({"initContainers": [container("init", full.clone())], "containers": [container("web", json!({"requests": {"cpu": "1", "memory": "1Mi"}}))]}),
        ),
        ("limits-only", json!({"containers": [container("web", json!({"limits": {"memory": "1Mi", "cpu": "1"}}))]})),
    ];
    for (name, spec) in &specs {
        let [deployment, pod] = as_deployment_and_pod(&ns, name, spec);
        corpus.push(deployment);
        // The API server defaults a Pod's missing requests to its limits
        // (not a template's): `check` reads the manifest as written.
        if !["init-lacks", "limits-only"].contains(name) {
            corpus.push(pod);
        }
    }
    pushed_down_matches_the_webhook(&ns, PODS_AND_DEPLOYMENTS, rules, &corpus).await;
}

/// The image rule pushed down, with the resource rule after it: the API
/// server's denial is the webhook's first finding, for references the
/// container runtime reads in every form (short names, Docker Hub's
/// aliases, ports, `localhost`, tags and digests, and some that are none).
#[tokio::test]
async fn image_rules_pushed_down_deny_what_the_webhook_denies() {
    let ns = unique("images");
    let rules = "images: {allowedRegistries: [registry.example.com, docker.io], forbidLatest: true, requireDigest: true}\n    \
                 resources: {requests: [cpu]}";
    let pinned = "registry.example.com/web:1@sha256:0000000000000000000000000000000000000000000000000000000000000000";
    let images = [
        pinned,
        "nginx",
        "nginx:latest",
        "nginx:1.27",
        "nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "quay.io/a:1@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "docker.io/library/nginx:1@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "index.docker.io/x/y:latest",
        "localhost/app:dev",
        "registry.example.com:5000/x:1",
        "registry.example.com/web:latest@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ":tag",
        "registry.local/",
        // Not references, quoted and escaped alike in both messages.
        "registry.example.com/\"web\" \\x:1",
        "registry.example.com/web:\t1",
    ];
    let cpu = json!({"requests": {"cpu": "10m"}});
    let mut corpus = Vec::new();
    for (i, image) in images.iter().enumerate() {
        let containers = json!([
            {"name": "first", "image": pinned, "resources": if i % 3 == 0 { json!({}) } else { cpu.clone() }},
            {"name": "second", "image": image, "resources": cpu},
        ]);
        let [deployment, _] = as_deployment_and_pod(&ns, &format!("d{i}"), &json!({"containers": containers}));
        let init = json!({"initContainers": [{"name": "init", "image": image, "resources": cpu}],
                          "containers": [{"name": "web", "image": pinned, "resources": cpu}]});
        let [_, pod] = as_deployment_and_pod(&ns, &format!("p{i}"), &init);
        corpus.extend([deployment, pod]);
    }
    pushed_down_matches_the_webhook(&ns, PODS_AND_DEPLOYMENTS, rules, &corpus).await;
}

/// The pod security rule pushed down: host namespaces, hostPath volumes,
/// privileged containers, added capabilities and runAsNonRoot (the
/// container's or the pod's), in init and regular containers, the API
/// server's denial the webhook's first finding.
#[tokio::test]
async fn pod_security_rules_pushed_down_deny_what_the_webhook_denies() {
    let ns = unique("podsecurity");
    let rules = "podSecurity: {forbidPrivileged: true, forbidHostNamespaces: true, forbidHostPath: true, \
                 allowedCapabilities: [NET_BIND_SERVICE], requireRunAsNonRoot: true}";
    let c = |name: &str, context: Value| json!({"name": name, "image": "registry.example.com/web:1", "securityContext": context});
    let non_root = json!({"runAsNonRoot": true});
    let host_path = json!([{"name": "e", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]);
    let specs = [
        ("clean", json!({"securityContext": non_root, "containers": [c("a", json!({}))]})),
        (
            "host-network",
            json!({"hostNetwork": true, "hostIPC": true, "securityContext": non_root, "containers": [c("a", json!({}))]}),
        ),
        ("host-path", json!({"securityContext": non_root, "volumes": host_path, "containers": [c("a", json!({}))]})),
        (
            "privileged",
            json!({"securityContext": non_root, "containers": [c("a", json!({})), c("b", json!({"privileged": true}))]}),
        ),
        (
            "capabilities",
            json!({"securityContext": non_root,
            "containers": [c("a", json!({"capabilities": {"add": ["NET_BIND_SERVICE", "SYS_ADMIN", "NET_RAW"]}}))]}),
        ),
        (
            "allowed-capability",
            json!({"securityContext": non_root,
            "containers": [c("a", json!({"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}))]}),
        ),
        ("root", json!({"containers": [c("a", non_root.clone()), c("b", json!({}))]})),
        ("root-override", json!({"securityContext": non_root, "containers": [c("a", json!({"runAsNonRoot": false}))]})),
        (
            "init",
            json!({"securityContext": non_root, "initContainers": [c("i", json!({"privileged": true, "runAsNonRoot": false}))],
            "containers": [c("a", json!({}))]}),
        ),
        (
            "several",
            json!({"hostPID": true, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
            "containers": [c("a", json!({"privileged": true}))]}),
        ),
    ];
    let mut corpus = Vec::new();
    for (name, spec) in &specs {
        corpus.extend(as_deployment_and_pod(&ns, name, spec));
    }
    pushed_down_matches_the_webhook(&ns, PODS_AND_DEPLOYMENTS, rules, &corpus).await;
}

/// The resources the pod rules' tests judge.
const PODS_AND_DEPLOYMENTS: &str = "[{apiGroups: [apps], apiVersions: [v1], resources: [deployments]}, {apiGroups: [''], apiVersions: [v1], resources: [pods]}]";

/// A labelled Deployment `name` with the pod `spec` as its template, and a
/// Pod `pod-NAME` with the same spec.
fn as_deployment_and_pod(ns: &str, name: &str, spec: &Value) -> [Value; 2] {
    let mut workload = deployment(ns, name, 1, &[], true, false);
    workload["spec"]["template"]["spec"] = spec.clone();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("pod-{name}"), "namespace": ns}, "spec": spec});
    [workload, pod]
}

/// Pushes a policy with `rules` for `resources` in namespace `ns` down with
/// `vap`, and compares the API server's denial of each object of `corpus`
/// (server-side dry run) with the webhook's first finding (`check`).
async fn pushed_down_matches_the_webhook(ns: &str, resources: &str, rules: &str, corpus: &[Value]) {
    let client = cluster().client().await;
    namespace(&client, ns, &[("e2e.portcullis.dev/example", ns)]).await;
    let policy = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {ns}}}\nspec:\n  match:\n    \
         resources: {resources}\n    \
         namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/example: {ns}}}}}\n  rules:\n    {rules}\n"
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, &policy).expect("writing a test file");
    let generated = Command::new(binaries().join("portcullis-validator"))
        .arg("vap")
        .arg("--policy")
        .arg(&file)
        .output()
        .expect("running vap");
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &ok(generated)));
    let probe = corpus.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment to wait with");
    let mut wait_with = probe.clone();
    wait_with["metadata"]["labels"] = json!({"wait": "unlabelled"});
    // Breaks every rule tested: no label, resources, tag, runAsNonRoot.
    wait_with["spec"]["template"]["spec"] = json!({"containers": [{"name": "w", "image": "w"}]});
    eventually("the API server enforces the pushed-down policy", MINUTE, || api_server(&wait_with).denied).await;
    // The webhook's words: `[NAME] Deployment NS/OBJECT: MESSAGE`.
    let checked = Command::new(binaries().join("portcullis-validator"))
        .arg("check")
        .arg("--policy")
        .arg(&file)
        .arg("-f")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": ns, "labels": {"e2e.portcullis.dev/example": ns}}});
            let items: Vec<&Value> = std::iter::once(&namespace).chain(corpus).collect();
            let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            child.stdin.take().expect("stdin").write_all(list.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .expect("running check");
    let stdout = String::from_utf8_lossy(&checked.stdout).into_owned();
    let (mut denied, mut differences) = (0, Vec::new());
    for object in corpus {
        let name = object["metadata"]["name"].as_str().expect("a name");
        let kind = object["kind"].as_str().expect("a kind");
        let prefix = format!("  deny: [{ns}] {kind} {ns}/{name}: ");
        let ours = stdout
            .split_once(&format!("{kind} {ns}/{name}: "))
            .and_then(|(_, rest)| rest.lines().skip(1).take_while(|l| l.starts_with("  ")).next().map(str::to_owned))
            .and_then(|line| line.strip_prefix(&prefix).map(str::to_owned));
        let theirs = api_server(object).denied.map(|d| d.split_once("denied request: ").map(|(_, m)| m.to_owned()));
        denied += usize::from(theirs.is_some());
        if theirs.flatten() != ours {
            differences.push(format!("{name}: API server {:?}, webhook {ours:?}", api_server(object).denied));
        }
    }
    assert!(differences.is_empty(), "{} differences:\n{}\n{stdout}", differences.len(), differences.join("\n"));
    assert!(denied > 2 && denied < corpus.len(), "the corpus should both allow and deny: {denied}");
    let name = format!("portcullis.{ns}");
    ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", &name]));
}
