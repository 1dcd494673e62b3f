use std::path::Path;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use portcullis_admission::{Request, decode};
use serde_json::{Value, json};

use portcullis_admission::native_match::NamespacesByLabels;

use crate::evaluate::{Evaluation, Settings, evaluate};
use crate::policy::{Action, PolicyError, PolicySet};
use portcullis_known::params::FileParams;

/// `team-x` (labelled `team: x`), `*-system` and `legacy` are known.
fn labels(name: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let team = name.strip_prefix("team-").unwrap_or_default();
    let known = !team.is_empty() || name.ends_with("-system") || name == "legacy";
    let labels = [("team", team), ("kubernetes.io/metadata.name", name)];
    known.then(|| labels.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
}

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas <= 5
    message: at most 5 replicas
  - expression: object.metadata.name.size() < 10
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-binding}
spec:
  policyName: replicas
  validationActions: [Deny]
"#;

fn load(yaml: &str) -> Result<PolicySet, PolicyError> {
    PolicySet::from_sources([(Path::new("vap.yaml"), yaml.as_bytes())], portcullis_cel::cost::DEFAULT_LIMIT)
}

fn request(operation: &str, namespace: &str, mut object: Value) -> Request {
    object["metadata"]["namespace"] = json!(namespace);
    let mut review = portcullis_admission::manifest::as_review(object).unwrap_or_else(|e| panic!("{e}"));
    review["request"]["operation"] = json!(operation);
    if review["request"]["kind"]["kind"] == "Namespace" {
        review["request"]["namespace"] = review["request"]["name"].clone();
    }
    decode(&serde_json::to_vec(&review).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(set: &PolicySet, req: &Request) -> Evaluation {
    let settings = Settings {
        system_namespaces: crate::policy::system_namespaces("portcullis-system"),
        cel_deadline: std::time::Duration::from_secs(1),
        cel_limits: Default::default(),
    };
    let params = FileParams::new(Vec::new());
    let cluster = crate::evaluate::Cluster { namespaces: &NamespacesByLabels(labels), params: &params };
    evaluate(set, &settings, cluster, req, std::time::Instant::now() + std::time::Duration::from_secs(1))
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": replicas}})
}

#[test]
fn a_denial_names_the_first_failed_validation_in_the_api_servers_words() {
    let set = load(POLICY).unwrap_or_else(|e| panic!("{e}"));
    let found = run(&set, &request("CREATE", "kube-system", deployment("much-too-long-name", 9))).findings;
    assert_eq!(found.len(), 1, "the first failed validation only: {found:?}");
    assert_eq!(found[0].policy, "replicas");
    assert_eq!(found[0].binding.as_deref(), Some("replicas-binding"));
    assert_eq!(found[0].message, "at most 5 replicas");
    assert_eq!(
        super::worded("replicas", "replicas-binding", Action::Deny, &found[0].message),
        "ValidatingAdmissionPolicy 'replicas' with binding 'replicas-binding' denied request: at most 5 replicas"
    );
    let found = run(&set, &request("CREATE", "default", deployment("much-too-long-name", 1))).findings;
    assert_eq!(found[0].message, "failed expression: object.metadata.name.size() < 10");
    assert!(run(&set, &request("DELETE", "default", deployment("web", 9))).findings.is_empty(), "not an operation");
}

#[test]
fn warn_reports_every_failed_validation_and_audit_alone_audits() {
    let warn = POLICY.replace("validationActions: [Deny]", "validationActions: [Warn, Audit]");
    let set = load(&warn).unwrap_or_else(|e| panic!("{e}"));
    let found = run(&set, &request("CREATE", "default", deployment("much-too-long-name", 9))).findings;
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|f| f.action == Action::Warn));
    let audit = POLICY.replace("validationActions: [Deny]", "validationActions: [Audit]");
    let set = load(&audit).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(set.policies[0].action, Action::Audit);
}

#[test]
fn the_binding_narrows_the_policy_by_namespace_and_rule() {
    let narrowed = format!(
        "{POLICY}  matchResources:\n    namespaceSelector: {{matchLabels: {{team: a}}}}\n    excludeResourceRules:\n    \
         - {{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*'], resourceNames: [legacy]}}\n"
    );
    let set = load(&narrowed).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run(&set, &request("CREATE", "team-a", deployment("web", 9))).findings.len(), 1);
    assert!(run(&set, &request("CREATE", "team-b", deployment("web", 9))).findings.is_empty(), "other labels");
    assert!(run(&set, &request("CREATE", "team-a", deployment("legacy", 9))).findings.is_empty(), "excluded name");
    let unknown = run(&set, &request("CREATE", "unknown", deployment("web", 9))).findings;
    assert_eq!(unknown.len(), 1, "labels not known: the failure policy decides");
}

#[test]
fn scope_cluster_matches_namespaces_and_not_namespaced_objects() {
    let policy = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: labelled}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*'], scope: Cluster}
  validations: [{expression: "has(object.metadata.labels)"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: labelled}
spec: {policyName: labelled, validationActions: [Deny]}
"#;
    let set = load(policy).unwrap_or_else(|e| panic!("{e}"));
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}});
    assert_eq!(run(&set, &request("CREATE", "team-c", namespace)).findings.len(), 1);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert!(run(&set, &request("CREATE", "team-c", cm)).findings.is_empty());
}

#[test]
fn what_the_api_server_refuses_is_refused_with_the_field() {
    let both = POLICY.replace("validationActions: [Deny]", "validationActions: [Deny, Warn]");
    let error = load(&both).err().map(|e| portcullis_telemetry::error_chain(&e)).unwrap_or_default();
    assert!(error.contains("must not contain both Deny and Warn"), "{error}");
    let bad = POLICY.replace("object.spec.replicas <= 5", "object.spec.replicas <=");
    let error = load(&bad).err().map(|e| portcullis_telemetry::error_chain(&e)).unwrap_or_default();
    assert!(
        error.contains(
            "spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: \
             <input>:1:24: Syntax error: mismatched input '<EOF>'"
        ),
        "in the API server's words: {error}"
    );
    let authorizer = POLICY.replace("object.spec.replicas <= 5", "authorizer.requestResource.check('get').allowed()");
    let error = load(&authorizer).err().map(|e| portcullis_telemetry::error_chain(&e)).unwrap_or_default();
    assert!(error.contains("authorizer"), "{error}");
}

#[test]
fn a_quadratic_expression_is_taken_with_a_warning() {
    let quadratic = POLICY.replace(
        "object.spec.replicas <= 5",
        "'!has(object.metadata.annotations) || object.metadata.annotations.all(a, \
         object.metadata.annotations.all(b, a == b || a != b))'",
    );
    let set = load(&quadratic).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
    assert!(set.warnings[0].contains("estimated worst-case cost"), "{}", set.warnings[0]);
}

/// Portcullis' bound on an expression's length is its own: the API server
/// takes a longer one, and so does a native policy's load, with a warning.
#[test]
fn a_long_expression_is_taken_with_a_warning_and_judged() {
    let names = (0..500).map(|i| format!("'name-{i:03}'")).collect::<Vec<_>>().join(", ");
    let long = POLICY.replace("object.spec.replicas <= 5", &format!("\"!(object.metadata.name in [{names}])\""));
    let set = load(&long).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
    assert!(set.warnings[0].contains("the limit is 5000"), "{}", set.warnings[0]);
    let found = run(&set, &request("CREATE", "team-a", deployment("name-399", 1))).findings;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(run(&set, &request("CREATE", "team-a", deployment("web", 1))).findings.is_empty());
}

#[test]
fn a_binding_without_its_policy_binds_nothing_and_the_webhook_refuses_natives() {
    let lonely = POLICY.split("---").nth(1).unwrap_or_default();
    let set = load(lonely).unwrap_or_else(|e| panic!("{e}"));
    assert!(set.policies.is_empty());
    let set = load(POLICY).unwrap_or_else(|e| panic!("{e}"));
    assert!(set.has_native());
    let contents = vec![(std::path::PathBuf::from("vap.yaml"), POLICY.as_bytes().to_vec())];
    let limit = portcullis_cel::cost::DEFAULT_LIMIT;
    let any = crate::exception::ExceptionNamespaces::Any;
    let served = crate::serve::parse(&contents, limit, &any, crate::serve::Natives::Refused);
    assert!(matches!(served, Err(PolicyError::NativeInWebhook)), "the webhook takes no native policy");
    assert!(crate::serve::parse(&contents, limit, &any, crate::serve::Natives::Judged).is_ok());
}

#[test]
fn a_costly_expression_is_stopped_at_the_per_call_limit_and_is_an_error() {
    let quadratic = POLICY.replace(
        "object.spec.replicas <= 5",
        "'object.metadata.annotations.all(a, object.metadata.annotations.all(b, a == b || a != b))'",
    );
    let set = load(&quadratic).unwrap_or_else(|e| panic!("{e}"));
    let annotations: serde_json::Map<String, Value> = (0..300).map(|i| (format!("k{i}"), json!("v"))).collect();
    let mut object = deployment("web", 1);
    object["metadata"]["annotations"] = Value::Object(annotations);
    let settings = Settings {
        system_namespaces: Vec::new(),
        cel_deadline: std::time::Duration::from_secs(5),
        cel_limits: portcullis_cel::budget::Limits { per_call: 10_000, per_policy: 100_000 },
    };
    let params = FileParams::new(Vec::new());
    let cluster = crate::evaluate::Cluster { namespaces: &NamespacesByLabels(labels), params: &params };
    let req = request("CREATE", "default", object);
    let started = std::time::Instant::now();
    let evaluation = evaluate(&set, &settings, cluster, &req, started + std::time::Duration::from_secs(5));
    assert_eq!(evaluation.exceeded.len(), 1, "{:?}", evaluation.findings);
    let found = &evaluation.findings[0];
    assert_eq!(found.kind, crate::evaluate::FindingKind::Error, "{found:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "stopped, not run to the end");
}

/// The native pair of `ours` (one ValidatorPolicy), loaded as `check` loads it.
fn pushed_down(ours: &str) -> PolicySet {
    let pair = generated(ours).unwrap_or_else(|e| panic!("{e}"));
    let yaml = format!(
        "{}---\n{}",
        serde_yaml::to_string(&pair.policy).unwrap_or_default(),
        serde_yaml::to_string(&pair.binding).unwrap_or_default()
    );
    load(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// The pair generated from the first policy of `ours`, as `vap` does.
fn generated(ours: &str) -> Result<super::generate::Generated, super::generate::NotPushable> {
    let specs = crate::policy::specs([(Path::new("p.yaml"), ours.as_bytes())]).unwrap_or_else(|e| panic!("{e}"));
    let (name, namespace, spec) = &specs[0];
    let system = crate::policy::system_namespaces("portcullis-system");
    super::generate::generate(name, namespace.as_deref(), spec, &system)
}

/// The messages of the findings of `set` on `req`, without the webhook's
/// `Kind namespace/name: ` prefix.
fn messages(set: &PolicySet, req: &Request) -> Vec<String> {
    run(set, req)
        .findings
        .into_iter()
        .map(|f| f.message.split_once(": ").map_or(f.message.clone(), |(_, m)| m.to_owned()))
        .collect()
}

#[test]
fn built_in_rules_pushed_down_say_what_the_webhook_says() {
    let ours = r#"
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: built-in}
spec:
  match:
    resources: [{apiGroups: [apps], resources: [deployments]}, {apiGroups: [""], resources: [services]}]
  rules:
    requiredLabels: {team: "", tier: "web|db"}
    requiredAnnotations: {"example.com/owner": ".+@example\\.com"}
    replicas: {min: 2, max: 5}
    services: {forbiddenTypes: [NodePort, LoadBalancer], forbidExternalIPs: true}
"#;
    let ours_set = load(ours).unwrap_or_else(|e| panic!("{e}"));
    let native_set = pushed_down(ours);
    let labelled = |mut o: Value, tier: &str, owner: &str| {
        o["metadata"]["labels"] = json!({"team": "a", "tier": tier});
        o["metadata"]["annotations"] = json!({"example.com/owner": owner});
        o
    };
    let service = |kind: Option<&str>, ips: bool| {
        let mut s = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}});
        if let Some(kind) = kind {
            s["spec"]["type"] = json!(kind);
        }
        if ips {
            s["spec"]["externalIPs"] = json!(["1.2.3.4"]);
        }
        labelled(s, "web", "a@example.com")
    };
    let mut no_replicas = labelled(deployment("web", 1), "db", "a@example.com");
    no_replicas["spec"] = json!({});
    let cases = [
        deployment("web", 3),
        labelled(deployment("web", 3), "web", "a@example.com"),
        labelled(deployment("web", 1), "web", "a@example.com"),
        labelled(deployment("web", 9), "cache", "a@example.org"),
        // Values from the object are quoted and escaped alike.
        labelled(deployment("web", 3), "ca\"che\\", "a@example.com"),
        labelled(deployment("web", 3), "web", "\"a\" \\ b\nc\r\td\u{1b}@example.org"),
        no_replicas,
        service(None, false),
        service(Some("NodePort"), false),
        service(Some("ClusterIP"), true),
        service(Some("LoadBalancer"), true),
    ];
    for object in cases {
        let req = request("CREATE", "team-a", object.clone());
        let (theirs, mine) = (messages(&native_set, &req), messages(&ours_set, &req));
        // The API server's denial names the first; the webhook's, every one.
        assert_eq!(theirs.first(), mine.first(), "{object}");
        assert_eq!(theirs.is_empty(), mine.is_empty(), "{object}");
    }
}

/// The first finding of the native pair and of our policy on `req`, ours
/// without the webhook's `Kind namespace/name: ` prefix.
fn first_findings(native: &PolicySet, ours: &PolicySet, req: &Request) -> (Option<String>, Option<String>) {
    let theirs = run(native, req).findings.into_iter().next().map(|f| f.message);
    let mine = run(ours, req).findings.into_iter().next();
    (theirs, mine.map(|f| f.message.split_once(": ").map(|(_, m)| m.to_owned()).unwrap_or(f.message)))
}

/// `patch` merged into `target` as a JSON merge patch (null removes).
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// The pod rules together (images, then resources, then pod security),
/// pushed down: the pair compiles, and its denial is the webhook's first
/// finding, for Pods and workloads, init and regular containers.
#[test]
fn pod_rules_pushed_down_say_what_the_webhook_says() {
    let ours = r#"
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: pods}
spec:
  match:
    resources: [{apiGroups: [apps], resources: [deployments]}, {apiGroups: [batch], resources: [cronjobs]}, {apiGroups: [""], resources: [pods]}]
  rules:
    images: {allowedRegistries: [registry.example.com], forbidLatest: true}
    resources: {requests: [cpu], limits: [memory]}
    podSecurity: {forbidPrivileged: true, forbidHostNamespaces: true, forbidHostPath: true, allowedCapabilities: [], requireRunAsNonRoot: true}
"#;
    let ours_set = load(ours).unwrap_or_else(|e| panic!("{e}"));
    let native_set = pushed_down(ours);
    let good = json!({"name": "web", "image": "registry.example.com/web:1",
                      "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Mi"}}});
    let with = |patch: Value| {
        let mut c = good.clone();
        merge(&mut c, &patch);
        c
    };
    let spec = |init: Vec<Value>, containers: Vec<Value>, extra: Value| {
        let mut spec =
            json!({"securityContext": {"runAsNonRoot": true}, "initContainers": init, "containers": containers});
        merge(&mut spec, &extra);
        spec
    };
    let mut denied = 0;
    let specs = [
        spec(vec![], vec![good.clone()], json!({})),
        spec(vec![], vec![good.clone(), with(json!({"image": "nginx"}))], json!({})),
        spec(vec![with(json!({"image": "quay.io/x:1"}))], vec![with(json!({"resources": null}))], json!({})),
        spec(vec![], vec![with(json!({"resources": {"limits": null}}))], json!({"hostNetwork": true})),
        spec(
            vec![],
            vec![good.clone()],
            json!({"hostPID": true, "volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
        ),
        spec(
            vec![],
            vec![good.clone()],
            json!({"volumes": [{"name": "e", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]}),
        ),
        spec(vec![with(json!({"securityContext": {"privileged": true}}))], vec![good.clone()], json!({})),
        spec(vec![], vec![with(json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}))], json!({})),
        spec(vec![], vec![good.clone(), with(json!({"securityContext": {"runAsNonRoot": false}}))], json!({})),
        spec(vec![], vec![good.clone()], json!({"securityContext": null})),
        spec(vec![], vec![with(json!({"image": "reg/\"x\"\\y\n:\t1"}))], json!({})),
    ];
    for spec in specs {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
        let mut workload = deployment("web", 1);
        workload["spec"]["template"] = json!({"spec": spec});
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                          "spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}});
        for object in [pod, workload, cron] {
            let (theirs, mine) = first_findings(&native_set, &ours_set, &request("CREATE", "team-a", object.clone()));
            denied += usize::from(mine.is_some());
            assert_eq!(theirs, mine, "{object}");
        }
    }
    assert_eq!(denied, 30, "every spec but the first is denied, in a Pod, a Deployment and a CronJob");
}

/// A registry's port is not a tag: pushed down, an untagged image from a
/// registry with a port has no tag, as the webhook says.
#[test]
fn a_registry_port_is_not_a_tag() {
    let ours = r#"
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: tags}
spec:
  match: {resources: [{apiGroups: [""], resources: [pods]}]}
  rules: {images: {forbidLatest: true}}
"#;
    let (ours_set, native_set) = (load(ours).unwrap_or_else(|e| panic!("{e}")), pushed_down(ours));
    for (image, denied) in [
        ("localhost:5000/app", true),
        ("registry.local:5000/team/app", true),
        ("registry.local:5000/team/app:1", false),
        ("registry.local:5000/team/app@sha256:abc", false),
        ("registry.local:5000/team/app:latest", true),
    ] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c", "image": image}]}});
        let (theirs, mine) = first_findings(&native_set, &ours_set, &request("CREATE", "team-a", pod));
        assert_eq!(mine.is_some(), denied, "{image}: {mine:?}");
        assert_eq!(theirs, mine, "{image}");
    }
}

/// A ValidatorPolicy and the native pair generated from it judge alike.
#[test]
fn a_generated_pair_judges_as_its_policy_does() {
    let ours = r#"
apiVersion: portcullis.dev/v1alpha1
kind: ValidatorPolicy
metadata: {name: small}
spec:
  match:
    resources: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
    excludeNamespaces: [legacy]
  matchConditions: [{name: not-exempt, expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}]
  variables: [{name: r, expression: "object.spec.replicas"}]
  validations:
    - expression: "variables.r <= 5"
      messageExpression: "'replicas ' + string(variables.r) + ' above 5'"
"#;
    let ours_set = load(ours).unwrap_or_else(|e| panic!("{e}"));
    let native_set = pushed_down(ours);
    let mut labelled = deployment("web", 9);
    labelled["metadata"]["labels"] = json!({"exempt": "yes"});
    let cases = [
        ("team-a", deployment("web", 9)),
        ("team-a", deployment("web", 2)),
        ("legacy", deployment("web", 9)),
        ("kube-system", deployment("web", 9)),
        ("portcullis-system", deployment("web", 9)),
        ("team-a", labelled),
    ];
    for (namespace, object) in cases {
        let req = request("CREATE", namespace, object.clone());
        let (theirs, mine) = (messages(&native_set, &req), messages(&ours_set, &req));
        assert_eq!(theirs, mine, "{namespace} {object}");
    }
}

#[test]
fn the_audit_lists_what_a_create_would_match() {
    let named = POLICY.replace("resources: [deployments]}", "resources: [deployments], resourceNames: [web]}");
    let set = load(&named).unwrap_or_else(|e| panic!("{e}"));
    let selects = |plural| set.policies[0].matching.selects_resource("apps", "v1", "Deployment", plural);
    assert_eq!(selects("deployments"), Some(true), "names are matched object by object");
    assert_eq!(selects("statefulsets"), Some(false));
    let updates = POLICY.replace("operations: [CREATE, UPDATE]", "operations: [UPDATE]");
    let set = load(&updates).unwrap_or_else(|e| panic!("{e}"));
    let selects = set.policies[0].matching.selects_resource("apps", "v1", "Deployment", "deployments");
    assert_eq!(selects, Some(false), "the audit judges as a create");
}

#[test]
fn an_unknown_namespace_matters_only_to_a_request_the_rules_match() {
    let narrowed = format!("{POLICY}  matchResources:\n    namespaceSelector: {{matchLabels: {{team: a}}}}\n");
    let set = load(&narrowed).unwrap_or_else(|e| panic!("{e}"));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert!(run(&set, &request("CREATE", "unknown", cm)).findings.is_empty(), "not a deployment: no lookup");
    assert_eq!(run(&set, &request("CREATE", "unknown", deployment("web", 1))).findings.len(), 1);
}

#[test]
fn no_policy_judges_the_admission_policies_themselves() {
    let everything = POLICY.replace(
        "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}",
        "{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*']}",
    );
    let set = load(&everything).unwrap_or_else(|e| panic!("{e}"));
    let matching = &set.policies[0].matching;
    assert_eq!(
        matching.selects_resource("admissionregistration.k8s.io", "v1", "X", "validatingadmissionpolicies"),
        Some(false)
    );
    assert_eq!(matching.selects_resource("", "v1", "ConfigMap", "configmaps"), Some(true));
}

#[test]
fn what_would_judge_differently_in_the_api_server_is_not_pushed_down() {
    let refused = |yaml: &str| generated(yaml).err().map(|e| e.field);
    let head = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: p}\nspec:\n";
    let configmaps = "  match: {resources: [{apiGroups: [''], resources: [configmaps]}]}\n";
    let checked = "  validations: [{expression: 'true'}]\n";
    assert_eq!(refused(&format!("{head}{checked}")).as_deref(), Some("spec.match.resources"));
    let wild = "  match: {resources: [{apiGroups: [apps], resources: ['deployments/*']}]}\n";
    assert_eq!(refused(&format!("{head}{wild}{checked}")).as_deref(), Some("spec.match.resources[0].resources"));
    let gated = "  matchConditions: [{name: c, expression: 'true'}]\n  rules: {requiredLabels: {team: ''}}\n";
    assert_eq!(refused(&format!("{head}{configmaps}{gated}")).as_deref(), Some("spec.matchConditions"));
    let system_ns = "apiVersion: portcullis.dev/v1alpha1\nkind: NamespacedValidatorPolicy\n\
                     metadata: {name: p, namespace: kube-system}\nspec:\n";
    assert_eq!(refused(&format!("{system_ns}{configmaps}{checked}")).as_deref(), Some("metadata.namespace"));
    let everywhere =
        "  match: {resources: [{apiGroups: [''], resources: [configmaps]}], includeSystemNamespaces: true}\n";
    assert_eq!(refused(&format!("{head}{everywhere}{checked}")).as_deref(), Some("spec.match.includeSystemNamespaces"));
    assert_eq!(refused(&format!("{head}{configmaps}{checked}")), None);
}

#[test]
fn a_binding_that_cannot_be_configured_denies_whatever_its_actions() {
    let params =
        POLICY.replace("  validations:\n", "  paramKind: {apiVersion: v1, kind: ConfigMap}\n  validations:\n").replace(
            "validationActions: [Deny]",
            "validationActions: [Warn]\n  paramRef: {name: absent, parameterNotFoundAction: Deny}",
        );
    let set = load(&params).unwrap_or_else(|e| panic!("{e}"));
    let found = run(&set, &request("CREATE", "default", deployment("web", 1))).findings;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].action, Action::Deny, "the API server denies, though the binding only warns");
    assert_eq!(found[0].code, 422);
    assert_eq!(
        found[0].message,
        "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
}

/// A generated pair is compiled before it is handed over: one that checks
/// nothing (the API server refuses a policy without validations) is not
/// pushed down, with the field; one over Portcullis' own bound on an
/// expression's length, which the API server does not have, still is.
#[test]
fn a_generated_pair_is_compiled_before_it_is_pushed_down() {
    let policy = |rules: &str| {
        format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: p}}\nspec:\n  match:\n    \
             resources: [{{apiGroups: [apps], resources: [deployments]}}]\n  rules: {rules}\n"
        )
    };
    let nothing = generated(&policy("{services: {}}")).expect_err("nothing to push down");
    assert_eq!(nothing.field, "spec.rules", "{nothing}");
    // Empty groups and versions are every one in a ValidatorPolicy; the API server wants `*`.
    let every =
        generated(&policy("{replicas: {max: 3}}").replace("apiGroups: [apps]", "apiGroups: [], apiVersions: []"))
            .unwrap_or_else(|e| panic!("{e}"));
    let rules = every.policy.spec.and_then(|s| s.match_constraints?.resource_rules).unwrap_or_default();
    assert_eq!(rules[0].api_groups, Some(vec!["*".to_owned()]));
    assert_eq!(rules[0].api_versions, Some(vec!["*".to_owned()]));
    let registries = (0..100).map(|i| format!("registry-{i:03}.example.com")).collect::<Vec<_>>().join(", ");
    let long = generated(&policy(&format!("{{images: {{allowedRegistries: [{registries}], forbidLatest: true}}}}")))
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = long.policy.spec.unwrap_or_default();
    let variables = spec.variables.iter().flatten().map(|v| Some(&v.expression));
    let validations =
        spec.validations.iter().flatten().flat_map(|v| [Some(&v.expression), v.message_expression.as_ref()]);
    let mut expressions = variables.chain(validations).flatten();
    assert!(expressions.any(|e| e.len() > portcullis_cel::MAX_EXPRESSION_LEN), "the case is over the bound");
}

/// A generated pair the API server's validation would refuse (here: a
/// message with a line break, which the webhook can show) is not pushed
/// down; the refusal quotes the API server's field error.
#[test]
fn a_generated_pair_the_api_server_would_refuse_is_not_pushed_down() {
    let ours = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: p}\nspec:\n  match:\n    \
                resources: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]\n  validations:\n  \
                - {expression: 'object.spec.replicas <= 5', message: \"at most\\nfive\"}\n";
    let refused = generated(ours).expect_err("refused");
    assert!(
        refused.field.starts_with("the generated ValidatingAdmissionPolicy.admissionregistration.k8s.io"),
        "{refused}"
    );
    assert!(
        refused
            .field
            .ends_with(r#"spec.validations[0].message: Invalid value: "at most\nfive": must not contain line breaks"#),
        "{refused}"
    );
    assert!(generated(&ours.replace("\\n", " ")).is_ok(), "on one line it is pushed down");
    let unauthorized = generated(&ours.replace("\\n", " ").replace("five\"}", "five\", reason: Unauthorized}"))
        .expect_err("a reason a VAP cannot have");
    assert_eq!(unauthorized.field, "spec.validations[0].reason", "{unauthorized}");
}

/// `check` refuses a native policy whose fields the API server refuses,
/// with every error in its words (the e2e suite `native_invalid` compares
/// them with the real API server's).
#[test]
fn a_native_policy_the_api_server_refuses_is_refused_with_every_error() {
    let bad = POLICY
        .replace("metadata: {name: replicas}", "metadata: {name: Replicas}")
        .replace("    message: at most 5 replicas", "    message: \"at most\\n5\"");
    let error = load(&bad).err().map(|e| portcullis_telemetry::error_chain(&e)).unwrap_or_default();
    assert_eq!(
        error,
        r#"vap.yaml: document 1: ValidatingAdmissionPolicy.admissionregistration.k8s.io "Replicas" is invalid: [metadata.name: Invalid value: "Replicas": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.validations[0].message: Invalid value: "at most\n5": must not contain line breaks]"#
    );
}

/// What the API server takes, `check` takes: a generated name, a
/// qualified name with upper case and a prefix, a variable starting with
/// `_`, a message whose only line break is trailing, `*` alone.
#[test]
fn what_the_api_server_takes_passes_the_field_checks() {
    let policy: k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy = serde_yaml::from_str(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {generateName: p-}\nspec:\n  \
         matchConstraints:\n    resourceRules: [{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*']}]\n  \
         matchConditions: [{name: example.com/Has-Replicas_1, expression: 'true'}]\n  variables: [{name: _x, expression: '1'}]\n  \
         validations: [{expression: 'true', message: \"at most five\\n\"}]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(super::fields::policy(&policy), Ok(()));
}

/// A `generateName` that cannot begin a name is refused (the API server
/// then also refuses the name it generated, with its random suffix, which
/// no offline check can say).
#[test]
fn a_generate_name_that_cannot_begin_a_name_is_refused() {
    let bad = POLICY.replace("metadata: {name: replicas}", "metadata: {generateName: Not_-}");
    let error = load(&bad).err().map(|e| portcullis_telemetry::error_chain(&e)).unwrap_or_default();
    assert!(
        error.contains(r#"is invalid: metadata.generateName: Invalid value: "Not_-": a lowercase RFC 1123"#),
        "{error}"
    );
}

/// The policy and binding of [`POLICY`], as a cluster holds them.
fn pair(yaml: &str) -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let mut documents = yaml.split("---");
    let mut next = || documents.next().unwrap_or_default();
    let policy = serde_yaml::from_str(next()).unwrap_or_else(|e| panic!("{e}"));
    (policy, serde_yaml::from_str(next()).unwrap_or_else(|e| panic!("{e}")))
}

/// Compiling maps values and checks none: one it cannot map (a cluster's
/// objects are not checked again) is refused with the field checks'
/// errors of its object, every one, in the API server's words.
#[rstest::rstest]
#[case::failure_policy(
    POLICY.replace("  validations:", "  failurePolicy: Sometimes\n  validations:"),
    r#"ValidatingAdmissionPolicy.admissionregistration.k8s.io "replicas" is invalid: spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore""#
)]
#[case::reason_with_another_error(
    POLICY.replace("message: at most 5 replicas", "message: ' '\n    reason: Teapot"),
    r#"ValidatingAdmissionPolicy.admissionregistration.k8s.io "replicas" is invalid: [spec.validations[0].message: Invalid value: " ": must be non-empty if specified, spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"]"#
)]
#[case::deny_with_warn(
    POLICY.replace("validationActions: [Deny]", "validationActions: [Deny, Warn]"),
    r#"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "replicas-binding" is invalid: spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"#
)]
#[case::no_action(
    POLICY.replace("validationActions: [Deny]", "validationActions: []"),
    r#"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "replicas-binding" is invalid: spec.validationActions: Required value: at least one validation action is required"#
)]
#[case::unknown_action(
    POLICY.replace("validationActions: [Deny]", "validationActions: [Block]"),
    r#"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "replicas-binding" is invalid: spec.validationActions[0]: Unsupported value: "Block": supported values: "Audit", "Deny", "Warn""#
)]
fn a_value_compiling_cannot_map_is_refused_in_the_api_servers_words(#[case] yaml: String, #[case] expected: &str) {
    let (policy, binding) = pair(&yaml);
    let refused = super::compile(&policy, &binding, portcullis_cel::cost::DEFAULT_LIMIT).err();
    let problem = refused.map(|e| e.problem);
    assert!(matches!(problem.as_deref(), Some(super::Problem::Invalid(_))), "{problem:?}");
    assert_eq!(problem.map(|p| p.to_string()).as_deref(), Some(expected));
}

/// Nothing to validate is the field checks' to refuse: compiling takes a
/// cluster's pair as the API server took it.
#[test]
fn compiling_takes_a_policy_with_only_audit_annotations() {
    let annotated = POLICY.replace(
        "  validations:\n  - expression: object.spec.replicas <= 5\n    message: at most 5 replicas\n  \
         - expression: object.metadata.name.size() < 10\n",
        "  auditAnnotations: [{key: replicas, valueExpression: 'string(object.spec.replicas)'}]\n",
    );
    let (policy, binding) = pair(&annotated);
    assert!(policy.spec.as_ref().is_some_and(|s| s.validations.is_none()), "{annotated}");
    let compiled = super::compile(&policy, &binding, portcullis_cel::cost::DEFAULT_LIMIT);
    assert!(compiled.is_ok(), "{compiled:?}");
}
