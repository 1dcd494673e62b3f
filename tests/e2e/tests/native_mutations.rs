//! MutatingAdmissionPolicies, the API server's and `portcullis-injector
//! mutate`'s, on the same objects. Each case's MAP is created in the real
//! API server, bound to a namespace of its own; each object is created
//! there (server-side dry run) with the MAP in force, and, separately, the
//! object as the API server admits it without the MAP (what a webhook
//! receives) is given to `mutate --policy` with the same YAML and the
//! result created (dry run) where no MAP applies. The two stored objects
//! must be equal field for field, or both refused with the same message.
//! A custom resource's case runs `mutate` twice, with the kind's schema
//! given as its CRD and as the API server's OpenAPI v3 document.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use portcullis_e2e::cleanup::{Cleanup, install_crd};
use portcullis_e2e::webhook::namespace;
use portcullis_e2e::{binaries, cluster, eventually, ok, stored_dry_run, unique};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

const PODS: (&str, &str) = ("\"\"", "pods");
const DEPLOYMENTS: (&str, &str) = ("apps", "deployments");
const WIDGETS: (&str, &str) = ("e2e.portcullis.dev", "widgets");

/// A custom resource with a list-map, a set, an atomic list, an atomic
/// map and a granular one: what an apply configuration merges by schema.
const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.e2e.portcullis.dev}
spec:
  group: e2e.portcullis.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
                    protocol: {type: string, default: TCP}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              args:
                type: array
                items: {type: string}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                additionalProperties: {type: string}
              settings:
                type: object
                additionalProperties: {type: string}
"#;

/// A case: its MAP's spec (without `matchConstraints`, which every case
/// shares: CREATEs of `resource`), and its objects; the first one must be
/// changed or refused by the MAP (that is how the test knows the MAP is in
/// force).
struct Case {
    name: &'static str,
    /// The API group (flow YAML) and resource the MAP matches.
    resource: (&'static str, &'static str),
    spec: &'static str,
    objects: Vec<Value>,
    /// The binding's `paramRef` (flow YAML), if the MAP has `paramKind`.
    param_ref: Option<&'static str>,
    /// The parameter objects, created in the case's namespace.
    params: Vec<Value>,
}

fn pod(name: &str, containers: Value, extra: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                         "spec": {"containers": containers}});
    merge(&mut pod, extra);
    pod
}

fn merge(into: &mut Value, extra: Value) {
    match (into, extra) {
        (Value::Object(into), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(into.entry(k).or_insert(Value::Null), v);
            }
        }
        (into, extra) => *into = extra,
    }
}

fn app() -> Value {
    json!([{"name": "app", "image": "registry.example.com/app:1"}])
}

fn cases() -> Vec<Case> {
    let labelled = json!({"metadata": {"labels": {"team": "a", "env": "dev"}}});
    let annotated = json!({"metadata": {"annotations": {"existing": "yes"}}});
    let with_proxy = json!([{"name": "app", "image": "app:1"}, {"name": "mesh-proxy", "image": "old/proxy:0.1"}]);
    vec![
        // Kubernetes' documentation: a sidecar as an init container, with
        // ApplyConfiguration, unless the pod has it already.
        Case {
            name: "docs-apply-sidecar",
            resource: PODS,
            spec: r#"
  matchConditions:
  - name: does-not-already-have-sidecar
    expression: "!object.spec.?initContainers.orValue([]).exists(ic, ic.name == 'mesh-proxy')"
  reinvocationPolicy: IfNeeded
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{initContainers: [Object.spec.initContainers{
          name: "mesh-proxy", image: "mesh/proxy:v1.0.0", restartPolicy: "Always"}]}}
"#,
            objects: vec![
                pod("plain", app(), json!({})),
                pod("has-init", app(), json!({"spec": {"initContainers": [{"name": "setup", "image": "busybox"}]}})),
                pod("has-sidecar", app(), json!({"spec": {"initContainers": [{"name": "mesh-proxy", "image": "x"}]}})),
            ],
            param_ref: None,
            params: Vec::new(),
        },
        // The documentation's JSONPatch form: `add` to `-` of a list that
        // exists (args, an atomic list, included: JSON Patch may set it).
        Case {
            name: "docs-jsonpatch-sidecar",
            resource: PODS,
            spec: r#"
  matchConditions:
  - name: has-init-containers
    expression: "has(object.spec.initContainers)"
  - name: does-not-already-have-sidecar
    expression: "!object.spec.initContainers.exists(ic, ic.name == 'mesh-proxy')"
  reinvocationPolicy: IfNeeded
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/spec/initContainers/-", value: Object.spec.initContainers{
          name: "mesh-proxy", image: "mesh-proxy/v1.0.0", args: ["proxy", "sidecar"], restartPolicy: "Always"}}]
"#,
            objects: vec![
                pod("has-init", app(), json!({"spec": {"initContainers": [{"name": "setup", "image": "busybox"}]}})),
                pod("plain", app(), json!({})),
            ],
            param_ref: None,
            params: Vec::new(),
        },
        // Labels added, and replaced where the key is there.
        Case {
            name: "labels",
            resource: PODS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'env': 'prod', 'managed': 'true'}}}"
"#,
            objects: vec![pod("unlabelled", app(), json!({})), pod("labelled", app(), labelled.clone())],
            param_ref: None,
            params: Vec::new(),
        },
        // Annotations by JSON Patch with an escaped key; an object without
        // annotations makes the patch fail, and the policy refuse it.
        Case {
            name: "annotations-escaped",
            resource: PODS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/owner~team"),
                   value: "platform"}]
"#,
            objects: vec![pod("annotated", app(), annotated.clone()), pod("bare", app(), json!({}))],
            param_ref: None,
            params: Vec::new(),
        },
        // The same with failurePolicy Ignore: the failing object passes.
        Case {
            name: "annotations-ignore",
            resource: PODS,
            spec: r#"
  failurePolicy: Ignore
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: "[JSONPatch{op: 'replace', path: '/metadata/annotations/existing', value: 'no'}]"
"#,
            objects: vec![pod("annotated", app(), annotated), pod("bare", app(), json!({}))],
            param_ref: None,
            params: Vec::new(),
        },
        // A JSON Patch `test` that fails leaves the object as it was.
        Case {
            name: "jsonpatch-test",
            resource: PODS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "test", path: "/metadata/labels/team", value: "a"},
         JSONPatch{op: "add", path: "/metadata/labels/checked", value: "yes"}]
"#,
            objects: vec![
                pod("team-a", app(), labelled.clone()),
                pod("team-b", app(), json!({"metadata": {"labels": {"team": "b"}}})),
            ],
            param_ref: None,
            params: Vec::new(),
        },
        // Removing what may not be there: refused in the API server's
        // words whether the key or its parent is missing.
        Case {
            name: "jsonpatch-remove",
            resource: PODS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: "[JSONPatch{op: 'remove', path: '/metadata/labels/team'}]"
"#,
            objects: vec![
                pod("team", app(), json!({"metadata": {"labels": {"team": "a", "keep": "x"}}})),
                pod("other-label", app(), json!({"metadata": {"labels": {"keep": "x"}}})),
                pod("unlabelled", app(), json!({})),
            ],
            param_ref: None,
            params: Vec::new(),
        },
        // A sidecar merged into containers by name: added to a pod without
        // one, and updated in place in a pod that has one.
        Case {
            name: "sidecar-by-name",
            resource: PODS,
            spec: r#"
  variables:
  - name: image
    expression: "'mesh/proxy:' + 'v2'"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{containers: [Object.spec.containers{name: "mesh-proxy", image: variables.image,
          ports: [Object.spec.containers.ports{containerPort: 15001, name: "proxy"}]}]}}
"#,
            objects: vec![pod("without", app(), json!({})), pod("with", with_proxy, json!({}))],
            param_ref: None,
            params: Vec::new(),
        },
        // What MAP refuses: a sidecar with args (an atomic list).
        Case {
            name: "atomic-refused",
            resource: PODS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{containers: [Object.spec.containers{name: "sidecar", image: "s:1", args: ["run"]}]}}
"#,
            objects: vec![pod("any", app(), json!({}))],
            param_ref: None,
            params: Vec::new(),
        },
        // Defaults on a Deployment's pod template, where not set, read
        // through a variable; two mutations in order.
        Case {
            name: "deployment-defaults",
            resource: DEPLOYMENTS,
            spec: r#"
  matchConditions:
  - name: no-security-context
    expression: "!has(object.spec.template.spec.securityContext) || !has(object.spec.template.spec.securityContext.runAsNonRoot)"
  variables:
  - name: replicas
    expression: "object.spec.?replicas.orValue(1)"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
          securityContext: Object.spec.template.spec.securityContext{runAsNonRoot: true}}}}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        variables.replicas > 3 ? [] : [JSONPatch{op: "replace", path: "/spec/replicas", value: variables.replicas + 1}]
"#,
            objects: vec![deployment("small", 1, json!({})), deployment("large", 5, json!({})), {
                deployment(
                    "set",
                    1,
                    json!({"spec": {"template": {"spec": {"securityContext": {"runAsNonRoot": false}}}}}),
                )
            }],
            param_ref: None,
            params: Vec::new(),
        },
        // A custom resource merged by its CRD's schema: an item added to
        // a list-map and one replaced by key, a set grown, a granular map
        // merged key by key.
        Case {
            name: "crd-merge",
            resource: WIDGETS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{ports: [Object.spec.ports{name: "metrics", port: 9090}],
          tags: ["managed"], settings: {"mode": "strict"}}}
"#,
            objects: vec![
                widget("bare", json!({})),
                widget(
                    "full",
                    json!({"ports": [{"name": "http", "port": 80}, {"name": "metrics", "port": 8080, "protocol": "UDP"}],
                           "tags": ["a", "managed"], "settings": {"x": "y", "mode": "loose"}}),
                ),
            ],
            param_ref: None,
            params: Vec::new(),
        },
        // What MAP refuses on a custom resource: its atomic list and map.
        Case {
            name: "crd-atomic",
            resource: WIDGETS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{spec: Object.spec{args: ['--verbose'], selector: {'app': 'w'}}}"
"#,
            objects: vec![
                widget("bare", json!({})),
                widget("set", json!({"args": ["--quiet"], "selector": {"a": "b"}})),
            ],
            param_ref: None,
            params: Vec::new(),
        },
        // Parameters: one ConfigMap by name, read by a match condition
        // and the mutation.
        Case {
            name: "params-by-name",
            resource: PODS,
            spec: r#"
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConditions:
  - name: enabled
    expression: "params.data.enabled == 'true'"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'tier': params.data.tier}}}"
"#,
            objects: vec![pod("plain", app(), json!({})), pod("tiered", app(), labelled.clone())],
            param_ref: Some("{name: tiers, parameterNotFoundAction: Deny}"),
            params: vec![config_map("tiers", json!({}), json!({"tier": "gold", "enabled": "true"}))],
        },
        // namespaceObject: the pod's namespace, as the API server binds it
        // (`mutate` reads it from the Namespace document given).
        Case {
            name: "namespace-object",
            resource: PODS,
            spec: r#"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {
          "namespace": namespaceObject.metadata.labels["kubernetes.io/metadata.name"],
          "phase": namespaceObject.status.phase}}}
"#,
            objects: vec![pod("plain", app(), json!({})), pod("labelled", app(), labelled.clone())],
            param_ref: None,
            params: vec![],
        },
    ]
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "e2e.portcullis.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})
}

fn config_map(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data})
}

fn deployment(name: &str, replicas: u32, extra: Value) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    });
    merge(&mut d, extra);
    d
}

/// The YAML of a case's MAP and binding, bound to namespace `ns`.
fn policy_yaml(case: &Case, name: &str, ns: &str) -> String {
    let (group, resource) = case.resource;
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n  \
         matchConstraints:\n    resourceRules:\n    - {{apiGroups: [{group}], apiVersions: [v1], operations: [CREATE], \
         resources: [{resource}]}}\n{}---\napiVersion: admissionregistration.k8s.io/v1\n\
         kind: MutatingAdmissionPolicyBinding\nmetadata: {{name: {name}}}\nspec:\n  policyName: {name}\n  \
         matchResources:\n    namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/map: {ns}}}}}\n{}",
        case.spec.trim_start_matches('\n'),
        case.param_ref.map(|r| format!("  paramRef: {r}\n")).unwrap_or_default()
    )
}

/// `mutate --policy` on `object` as the API server admits it in `ns`,
/// with `params` (in `ns`) as `--params` and `schema` as `--schema`.
fn mutate(yaml: &str, ns: &str, params: &[Value], schema: Option<&Path>, admitted: &Value) -> Result<Value, String> {
    let dir = tempfile::tempdir().expect("a test step");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": ns, "labels": {"e2e.portcullis.dev/map": ns}}});
    let policy = dir.path().join("map.yaml");
    std::fs::write(&policy, format!("{yaml}---\n{namespace}\n")).expect("a test step");
    let params_file = dir.path().join("params.yaml");
    let params: Vec<String> = params
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p["metadata"]["namespace"] = json!(ns);
            p.to_string()
        })
        .collect();
    std::fs::write(&params_file, params.join("\n---\n")).expect("a test step");
    let input = dir.path().join("object.json");
    let mut admitted = admitted.clone();
    admitted["metadata"]["namespace"] = json!(ns);
    std::fs::write(&input, admitted.to_string()).expect("a test step");
    let mut command = Command::new(binaries().join("portcullis-injector"));
    command.args(["mutate", "--output", "review", "--policy"]).arg(&policy);
    if !params.is_empty() {
        command.arg("--params").arg(&params_file);
    }
    if let Some(schema) = schema {
        command.arg("--schema").arg(schema);
    }
    let out = command.arg("-f").arg(&input).stderr(Stdio::inherit()).output().expect("a test step");
    assert!(out.status.success(), "mutate failed");
    let review: Value = serde_json::from_slice(&out.stdout).expect("mutate prints a review");
    let response = &review["response"];
    if response["allowed"] != true {
        return Err(response["status"]["message"].as_str().unwrap_or_default().to_owned());
    }
    let Some(patch) = response["patch"].as_str() else { return Ok(admitted) };
    let patch: json_patch::Patch =
        serde_json::from_str(&portcullis_e2e::decode_base64(patch)).expect("the patch is a JSON Patch");
    json_patch::patch(&mut admitted, &patch).expect("the patch applies");
    Ok(admitted)
}

/// `message` with the atomic fields it names sorted: the API server names
/// them in no fixed order (two runs of the same case differ).
fn unordered(message: &str) -> String {
    const ATOMIC: &str = "may not mutate atomic arrays, maps or structs: ";
    let Some((before, fields)) = message.split_once(ATOMIC) else { return message.to_owned() };
    let mut fields: Vec<&str> = fields.split(", ").collect();
    fields.sort_unstable();
    format!("{before}{ATOMIC}{}", fields.join(", "))
}

/// Creates the Widget CRD (deleted when its cleanup drops) and writes its
/// two schemas into `dir`: the CRD as applied, and the API server's
/// OpenAPI v3 document for its group version, once the API server
/// publishes it.
async fn widget_schemas(dir: &Path) -> (Cleanup, [PathBuf; 2]) {
    let (crd, openapi) =
        install_crd("widgets.e2e.portcullis.dev", WIDGET_CRD, "e2e.portcullis.dev/v1", "dev.portcullis.e2e.v1.Widget")
            .await;
    let (manifest, document) = (dir.join("widget-crd.yaml"), dir.join("widget-openapi.json"));
    std::fs::write(&manifest, WIDGET_CRD).expect("a test step");
    std::fs::write(&document, openapi.to_string()).expect("a test step");
    (crd, [manifest, document])
}

#[tokio::test]
async fn maps_mutate_as_the_api_server_mutates() {
    let client = cluster().client().await;
    let plain = unique("map-off");
    namespace(&client, &plain, &[]).await;
    let schemas = tempfile::tempdir().expect("a test step");
    let (_crd, widget_schemas) = widget_schemas(schemas.path()).await;
    let (mut compared, mut changed, mut refused, mut differences) = (0, 0, 0, Vec::new());
    for case in cases() {
        let ns = unique(&format!("map-{}", case.name));
        namespace(&client, &ns, &[("e2e.portcullis.dev/map", &ns)]).await;
        let name = format!("{}.{ns}", case.name);
        let yaml = policy_yaml(&case, &name, &ns);
        for param in &case.params {
            ok(cluster().kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &param.to_string()));
        }
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &yaml));
        let first = &case.objects[0];
        let without = stored_dry_run(first, &plain).expect("the object is valid without the MAP");
        // With its params: the API server's informer of a param kind
        // starts with the first binding that names it, and until it has
        // synced the binding fails (`failed to configure binding`),
        // though the params exist.
        eventually(&format!("the API server applies {name}"), MINUTE, || match stored_dry_run(first, &ns) {
            Err(error) if error.contains("failed to configure binding") => None,
            stored => (stored != Ok(without.clone())).then_some(()),
        })
        .await;
        for object in &case.objects {
            let what = format!("{} {}", case.name, object["metadata"]["name"]);
            let theirs = stored_dry_run(object, &ns);
            let admitted = stored_dry_run(object, &plain).expect("the object is valid without the MAP");
            compared += 1;
            changed += usize::from(theirs.as_ref().is_ok_and(|t| *t != admitted));
            refused += usize::from(theirs.is_err());
            let schemas: &[Option<&Path>] =
                if case.resource == WIDGETS { &[Some(&widget_schemas[0]), Some(&widget_schemas[1])] } else { &[None] };
            for schema in schemas {
                let ours = mutate(&yaml, &ns, &case.params, *schema, &admitted)
                    .and_then(|mutated| stored_dry_run(&mutated, &plain));
                let same = match (&theirs, &ours) {
                    (Ok(t), Ok(o)) => t == o,
                    // kubectl prefixes the API server's message.
                    (Err(t), Err(o)) => unordered(t).ends_with(&unordered(o)),
                    _ => false,
                };
                if !same {
                    let with = schema.map(|s| format!(" (--schema {})", s.display())).unwrap_or_default();
                    differences.push(format!("{what}:\n  API server: {theirs:?}\n  mutate{with}: {ours:?}"));
                }
            }
        }
        ok(cluster().kubectl(&["delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", &name]));
    }
    println!("{compared} objects compared: {changed} changed, {refused} refused");
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
    assert!(changed >= 8 && refused >= 4, "the cases should change and refuse objects");
}
