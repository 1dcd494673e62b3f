//! The API server type-checks each ValidatingAdmissionPolicy against the
//! schemas of the kinds it matches and writes what it finds in the
//! policy's `status.typeChecking` (kube-controller-manager's status
//! controller); `check` says the same offline, before the policy reaches a
//! cluster. Each policy here is created in the real API server, its status
//! awaited, and its warnings compared with `check`'s, field by field and
//! word for word. The built-in schemas `check` reads are the ones this API
//! server publishes (`scripts/openapi-schemas`).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

use portcullis_e2e::cleanup::{Cleanup, install_crd};
use portcullis_e2e::{check_policies, cluster, eventually, ok, repo};
use serde_json::Value;

/// A policy named `name` matching `rules` (flow YAML lines), with `rest`
/// after its match constraints.
fn policy(name: &str, rules: &[&str], rest: &str) -> String {
    let rules: String = rules.iter().map(|r| format!("    - {r}\n")).collect();
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\n\
         spec:\n  matchConstraints:\n    resourceRules:\n{rules}{rest}"
    )
}

const DEPLOYMENTS: &str =
    "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}";
const PODS: &str = "{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods, pods/status]}";
const JOBS: &str = "{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs, cronjobs]}";

/// The validations of a policy, each `(expression, messageExpression)`.
fn validations(list: &[(&str, Option<&str>)]) -> String {
    let mut out = "  validations:\n".to_owned();
    for (expression, message) in list {
        out.push_str(&format!("  - expression: {expression:?}\n"));
        if let Some(message) = message {
            out.push_str(&format!("    messageExpression: {message:?}\n"));
        }
    }
    out
}

/// The policies: misspelt fields in every place an expression reads one,
/// and reads the API server's types take.
fn policies() -> Vec<(&'static str, String)> {
    vec![
        (
            "typecheck-kinds.example.com",
            policy(
                "typecheck-kinds.example.com",
                &[
                    DEPLOYMENTS,
                    PODS,
                    "{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}",
                ],
                &validations(&[
                    ("object.spec.replicsa > 1", Some("'x' + object.metadata.nme")),
                    (
                        "has(object.spec.foo) || object.metadata.namespace == '' || object.?spec.?bar.orValue(1) == 1",
                        None,
                    ),
                    ("object.data.foo == 'a' && object.spec.template.metadata.labels.a == 'b'", None),
                ]),
            ),
        ),
        (
            "typecheck-loops.example.com",
            policy(
                "typecheck-loops.example.com",
                &[DEPLOYMENTS],
                &format!(
                    "  variables:\n  - {{name: cs, expression: 'object.spec.template.spec.containers'}}\n{}",
                    validations(&[
                        (
                            "object.spec.template.spec.containers.all(c, c.imagee != '' && has(c.resources.limits))",
                            None
                        ),
                        ("object.spec.template.spec.containers.map(c, c).all(x, x.nam != '')", None),
                        (
                            "object.spec.template.spec.containers.filter(c, c.name != '').exists(x, x.foo == 1)",
                            Some("object.spec.template.spec.containers.map(c, c.name).join(', ')"),
                        ),
                        (
                            "object.spec.template.spec.containers.exists(c, c.ports.exists(p, p.containerPrt == 1))",
                            None
                        ),
                        (
                            "variables.cs.all(c, c.nam != '') && object.spec.selector.matchLabels.all(k, v, v != k)",
                            None
                        ),
                        ("object.spec.template.spec.containers.all(i, c, c.imag != '' && i >= 0)", None),
                        ("object.spec.strategy.rollingUpdate.maxSurge.anything == 1", None),
                        ("object.spec.template.spec.initContainers[0].name == '' ||\n  object.spec.paused.x", None),
                        (
                            "object.metadata.labels.all(k, k.x == '') && object.spec.template.spec.containers.all(i, c, \
                             i.y == 1) && object.metadata.creationTimestamp.z == 1",
                            None,
                        ),
                    ])
                ),
            ),
        ),
        (
            // Variables typed by the kind's schema where they hold a
            // scalar (or a map of them); an object is `dyn` and a list of
            // objects `list(dyn)`, as the status controller types them.
            "typecheck-variables.example.com",
            policy(
                "typecheck-variables.example.com",
                &[DEPLOYMENTS, PODS],
                &format!(
                    "  variables:\n  - {{name: cs, expression: 'object.spec.template.spec.containers'}}\n  \
                     - {{name: spec, expression: 'object.spec'}}\n  \
                     - {{name: r, expression: 'object.spec.replicas'}}\n  \
                     - {{name: labels, expression: 'object.metadata.labels'}}\n  \
                     - {{name: r2, expression: 'variables.r'}}\n  \
                     - {{name: image, expression: 'object.spec.template.spec.containers[0].image'}}\n{}",
                    validations(&[
                        ("variables.cs.all(c, c.nam != '') && variables.cs[0].imagee == ''", None),
                        ("variables.spec.replicsa > 1", None),
                        ("variables.r.x == 1", Some("'r is ' + string(variables.r2.y)")),
                        ("variables.labels.a.b == ''", None),
                        ("variables.image.w == ''", None),
                        ("variables.cs.nam == '' || variables.spec.nam == ''", None),
                    ])
                ),
            ),
        ),
        (
            // The status controller does not resolve the authorizer's
            // `requestResource`, and says so at each use.
            "typecheck-authorizer.example.com",
            policy(
                "typecheck-authorizer.example.com",
                &[DEPLOYMENTS],
                &validations(&[
                    ("authorizer.requestResource.check('create').allowed()", None),
                    (
                        "authorizer.group('apps').resource('deployments').check('get').allowed() || object.spec.x == 1",
                        None,
                    ),
                    (
                        "authorizer.requestResource.namespace('a').check('get').allowed() && \
                         authorizer.requestResource.check('x').allowed()",
                        None,
                    ),
                ]),
            ),
        ),
        (
            "typecheck-params.example.com",
            policy(
                "typecheck-params.example.com",
                &[JOBS],
                &format!(
                    "  paramKind: {{apiVersion: v1, kind: ConfigMap}}\n{}",
                    validations(&[
                        ("params.data.max == '1' && params.spec.max == 1", None),
                        (
                            "object.spec.template.spec.restartPolicy == 'Never' || object.spec.jobTemplate.spec.x == 1",
                            None
                        ),
                        ("object.metadata.labels.all(k, k != '') && object.status.succeded == 1", None),
                    ])
                ),
            ),
        ),
        (
            "typecheck-clean.example.com",
            policy(
                "typecheck-clean.example.com",
                &[DEPLOYMENTS],
                &validations(&[
                    ("object.spec.replicas <= 5 && object.metadata.name.startsWith('a')", None),
                    (
                        "request.userInfo.username != '' && object.spec.template.spec.containers.all(c, c.image != '')",
                        None,
                    ),
                ]),
            ),
        ),
        (
            "typecheck-groups.example.com",
            policy(
                "typecheck-groups.example.com",
                &[
                    "{apiGroups: [networking.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [ingresses]}",
                    "{apiGroups: [rbac.authorization.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [roles]}",
                ],
                &validations(&[
                    ("has(object.spec) && object.spec.rules.all(r, r.hostt != '')", None),
                    ("!has(object.rules) || object.rules.all(r, r.verb.size() > 0)", None),
                ]),
            ),
        ),
        (
            "typecheck-mapper.example.com",
            policy(
                "typecheck-mapper.example.com",
                &[
                    "{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [deployment, Jobs]}",
                    "{apiGroups: [policy], apiVersions: [v1], operations: [CREATE], resources: [evictions, poddisruptionbudgets]}",
                ],
                &validations(&[("object.spec.replicsa > 1", None)]),
            ),
        ),
        (
            "typecheck-wide.example.com",
            policy(
                "typecheck-wide.example.com",
                &["{apiGroups: ['*'], apiVersions: [v1], operations: [CREATE], resources: [deployments]}"],
                &validations(&[("object.spec.replicsa > 1", None)]),
            ),
        ),
    ]
}

/// The policy's `status.typeChecking` warnings by field, once its status
/// controller has checked its current generation.
async fn api_server_warnings(name: &str) -> BTreeMap<String, String> {
    let status = eventually(&format!("status.typeChecking of {name}"), Duration::from_secs(120), || {
        let out = cluster().kubectl(&["get", "validatingadmissionpolicy", name, "-o", "json"]);
        let policy: Value = serde_json::from_slice(&out.stdout).ok()?;
        let generation = policy.pointer("/metadata/generation")?.as_i64()?;
        let observed = policy.pointer("/status/observedGeneration").and_then(Value::as_i64)?;
        (observed == generation).then(|| policy["status"].clone())
    })
    .await;
    let warnings = status.pointer("/typeChecking/expressionWarnings").and_then(Value::as_array);
    warnings
        .into_iter()
        .flatten()
        .map(|w| {
            let text = |key: &str| w[key].as_str().unwrap_or_default().to_owned();
            (text("fieldRef"), text("warning").trim_end().to_owned())
        })
        .collect()
}

/// `check`'s type-checking warnings for the policy in `yaml`, by field.
fn check_warnings(yaml: &str, args: &[&OsStr]) -> BTreeMap<String, String> {
    let out = check_policies(yaml, args);
    assert!(out.status.success(), "check: {}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut found = BTreeMap::new();
    for block in stderr.split("warning: ").filter(|b| !b.is_empty()) {
        let (head, warning) = block.split_once('\n').expect("a warning's first line");
        let field = head.split(": ").nth(1).expect("the warning's field");
        assert!(head.contains("type checking"), "another warning: {head}");
        found.insert(field.to_owned(), warning.trim_end().to_owned());
    }
    found
}

#[tokio::test]
async fn check_says_what_the_api_servers_type_checking_says() {
    let mut differences = Vec::new();
    let mut warned = 0;
    for (name, yaml) in policies() {
        let _policy = Cleanup::apply("validatingadmissionpolicy", name, &yaml);
        let theirs = api_server_warnings(name).await;
        let ours = check_warnings(&yaml, &[]);
        warned += theirs.len();
        if theirs != ours {
            differences.push(format!("{name}:\n  API server: {theirs:#?}\n  check:      {ours:#?}"));
        }
    }
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
    assert!(warned >= 12, "the cases warn of something: {warned} warnings");
}

/// A custom resource's kind, for `check --schema`.
const GADGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.typecheck.portcullis.dev}
spec:
  group: typecheck.portcullis.dev
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gadget, listKind: GadgetList}
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
              size: {type: integer}
              port: {x-kubernetes-int-or-string: true}
              since: {type: string, format: date-time}
              labels: {type: object, additionalProperties: {type: string}}
              items:
                type: array
                items: {type: object, properties: {name: {type: string}, weight: {type: number}}}
              template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// A VAP on a custom resource (its plural not the kind's: `gizmos`),
/// type-checked offline with the CRD (`check --schema`) as the API server
/// checks it.
#[tokio::test]
async fn a_custom_resources_schema_is_read_from_its_crd() {
    // The status controller reads the schema from the API server's
    // OpenAPI, once it publishes the new kind.
    let crd_name = "gizmos.typecheck.portcullis.dev";
    let (_crd, _) =
        install_crd(crd_name, GADGET_CRD, "typecheck.portcullis.dev/v1", "dev.portcullis.typecheck.v1.Gadget").await;
    let dir = tempfile::tempdir().expect("a test step");
    let crd = dir.path().join("crd.yaml");
    std::fs::write(&crd, GADGET_CRD).expect("a test step");
    let name = "typecheck-gadgets.example.com";
    let yaml = policy(
        name,
        &["{apiGroups: [typecheck.portcullis.dev], apiVersions: [v1], operations: [CREATE], resources: [gizmos]}"],
        &validations(&[
            ("object.spec.sise > 1 && object.spec.size > 1", None),
            ("object.spec.items.all(i, i.nam != '' && i.weight > 0.5)", None),
            ("object.spec.template.metadata.name != '' && object.spec.template.spec.x == 1", None),
            ("object.spec.extra.anything == 1", Some("'x' + object.metadata.nme")),
            ("object.spec.port.x == 1 || object.spec.since.y == 1 || object.spec.labels.z == 'a'", None),
        ]),
    );
    let _policy = Cleanup::apply("validatingadmissionpolicy", name, &yaml);
    // The controller manager may check the policy before its discovery
    // knows the new kind (it then checks nothing): a change of the spec has
    // it check again, until it does.
    let mut theirs = api_server_warnings(name).await;
    for failure_policy in ["Ignore", "Fail"].iter().cycle().take(10) {
        if !theirs.is_empty() {
            break;
        }
        let changed = yaml.replacen("spec:\n", &format!("spec:\n  failurePolicy: {failure_policy}\n"), 1);
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &changed));
        theirs = api_server_warnings(name).await;
    }
    assert!(theirs.len() >= 4, "the API server warns of the cases: {theirs:#?}");
    let ours = check_warnings(&yaml, &[OsStr::new("--schema"), crd.as_os_str()]);
    assert_eq!(ours, theirs, "with the CRD");
    let unchecked = check_warnings(&yaml, &[]);
    assert!(unchecked.is_empty(), "without the schema, nothing is said: {unchecked:#?}");
}

/// The schemas `check` and the injector's offline merge read are the
/// ones the API server publishes, as `scripts/openapi-schemas` writes them.
#[test]
fn the_built_in_schemas_are_the_api_servers() {
    let dir = tempfile::tempdir().expect("a test step");
    let written = dir.path().join("builtin.json");
    let bin = cluster().var("PORTCULLIS_CP_BIN");
    let out = Command::new(repo().join("scripts/openapi-schemas"))
        .arg(&written)
        .env("KUBECONFIG", cluster().var("KUBECONFIG"))
        .env("KUBECTL", format!("{bin}/kubectl"))
        .output()
        .expect("a test step");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let committed = std::fs::read(repo().join("shared/cel/schemas/builtin.json")).expect("the committed schemas");
    assert!(
        std::fs::read(&written).expect("written") == committed,
        "shared/cel/schemas/builtin.json is not what scripts/openapi-schemas writes from this API server: run it"
    );
}
