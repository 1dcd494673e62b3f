//! The same verdicts as the API server: every case below is loaded both as
//! a Portcullis ValidatorPolicy (evaluated by `portcullis-validator check`,
//! the code the webhook runs) and as a ValidatingAdmissionPolicy with a
//! Deny binding in the real kube-apiserver, and generated ConfigMaps go
//! through both (server-side dry run on the API server's side), as creates
//! and as updates of stored objects (`oldObject`). Allowed or
//! denied must agree, and so must the message. Known, documented
//! differences (docs/validator-policy.md#known-differences-from-the-api-server):
//! Portcullis reports every failed validation of a policy where the API
//! server reports the first, so the first is compared; when an expression
//! fails to evaluate both deny, each in its own words, so only the verdict
//! is compared. Policies with parameters (`paramKind` ConfigMap, by name or
//! selector, found or not) are compared the same way, the parameter
//! objects stored in the cluster and given to `check` with `--params`.
//! Each case is also given to `check` as the native policy and binding
//! themselves, the YAML the API server was given: that verdict and message
//! must be the API server's too (the first failed validation, as it says).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use portcullis_e2e::webhook::namespace;
use portcullis_e2e::{binaries, cluster, config_map_review, ok, unique};
use serde_json::{Value, json};

/// One policy: `(validations, matchConditions, variables)`; a validation is
/// `(expression, message, messageExpression)`.
struct Case {
    validations: &'static [(&'static str, Option<&'static str>, Option<&'static str>)],
    match_conditions: &'static [&'static str],
    variables: &'static [(&'static str, &'static str)],
}

const fn case(validations: &'static [(&'static str, Option<&'static str>, Option<&'static str>)]) -> Case {
    Case { validations, match_conditions: &[], variables: &[] }
}

const CASES: &[Case] = &[
    case(&[("object.metadata.name.startsWith('app')", Some("the name must start with app"), None)]),
    case(&[("object.metadata.name.matches('^[a-z]+(-[0-9]+)?$')", None, None)]),
    case(&[(
        "!has(object.data) || size(object.data) <= 3",
        None,
        Some("'too many keys: ' + string(size(object.data))"),
    )]),
    case(&[("!has(object.metadata.labels) || object.metadata.labels.all(k, k.size() <= 8)", None, None)]),
    case(&[("has(object.data) && object.data.exists(k, k == 'config')", Some("a config key is required"), None)]),
    case(&[("!has(object.data) || !object.data.exists_one(k, object.data[k] == 'bad')", None, None)]),
    case(&[(
        "!has(object.data) || !('mem' in object.data) || !isQuantity(object.data.mem) || \
         quantity(object.data.mem).compareTo(quantity('1Gi')) <= 0",
        Some("mem above 1Gi"),
        None,
    )]),
    case(&[(
        "!has(object.data) || !('mem' in object.data) || quantity(object.data.mem).isLessThan(quantity('1Gi'))",
        None,
        None,
    )]),
    case(&[("object.?data.?config.orValue('') != 'bad'", Some("config may not be bad"), None)]),
    case(&[(
        "object.metadata.name.size() <= 12",
        None,
        Some("'name ' + object.metadata.name + ' is longer than 12 characters'"),
    )]),
    Case {
        validations: &[(
            "has(object.metadata.labels) && 'team' in object.metadata.labels",
            Some("a team label is required"),
            None,
        )],
        match_conditions: &["!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"],
        variables: &[],
    },
    Case {
        validations: &[
            ("variables.keys.all(k, k.size() < 10)", Some("keys are short"), None),
            ("size(variables.keys) < 4", None, Some("'has ' + string(size(variables.keys)) + ' keys'")),
        ],
        match_conditions: &[],
        variables: &[("keys", "has(object.data) ? object.data.map(k, k) : []")],
    },
    case(&[("!has(object.data) || !('replicas' in object.data) || int(object.data.replicas) <= 5", None, None)]),
    // Variables are bound lazily, as the API server binds them: `replicas`
    // fails to evaluate where there is no such key (or no integer), and
    // denies only where the validation comes to read it; `unread` always
    // fails and is never read.
    Case {
        validations: &[(
            "!has(object.data) || !('replicas' in object.data) || variables.replicas <= 5",
            Some("at most five replicas"),
            None,
        )],
        match_conditions: &[],
        variables: &[("unread", "object.data.nothing"), ("replicas", "int(object.data.replicas)")],
    },
    case(&[("!has(object.data) || object.data.all(k, object.data[k].lowerAscii() == object.data[k])", None, None)]),
    case(&[("object.metadata.name.split('-').size() <= 2", Some("at most one dash"), None)]),
    case(&[("object.metadata.name.replace('-', '').size() >= 4", None, None)]),
    case(&[(
        "!has(object.metadata.labels) || !('env' in object.metadata.labels) || object.metadata.labels.env in ['dev', 'prod']",
        Some("env must be dev or prod"),
        Some("'env ' + object.metadata.labels.env + ' is not allowed'"),
    )]),
    case(&[(
        "!has(object.data) || !('ttl' in object.data) || duration(object.data.ttl) < duration('24h')",
        None,
        None,
    )]),
    case(&[(
        "!has(object.data) || !('url' in object.data) || isURL(object.data.url)",
        Some("url must be a URL"),
        None,
    )]),
    case(&[(
        "!has(object.metadata.annotations) || object.metadata.annotations.all(k, !object.metadata.annotations[k].contains('secret'))",
        None,
        None,
    )]),
    case(&[("oldObject == null || oldObject.metadata.name == object.metadata.name", None, None)]),
    case(&[("!has(object.data) || object.data.filter(k, k.startsWith('x')).size() == 0", Some("no x keys"), None)]),
    case(&[(
        "(has(object.data) ? size(object.data) : 0) + (has(object.metadata.labels) ? size(object.metadata.labels) : 0) < 5",
        None,
        Some(
            "'data and labels: ' + string((has(object.data) ? size(object.data) : 0) + (has(object.metadata.labels) ? size(object.metadata.labels) : 0))",
        ),
    )]),
    case(&[("!has(object.data) || !('config' in object.data) || object.data.config.find('[0-9]+') == ''", None, None)]),
    case(&[
        ("!has(object.data) || !('mem' in object.data) || object.data.mem.endsWith('i')", Some("binary units"), None),
        ("object.metadata.name.indexOf('-') != 0", None, None),
    ]),
    // The macros of cel-go's extensions Kubernetes enables: the
    // two-variable comprehensions (1.32), `sortBy` (1.34), `optMap` and
    // `optFlatMap`.
    case(&[("!has(object.data) || object.data.all(k, v, v.size() <= 6 || k == 'url')", Some("short values"), None)]),
    case(&[("!has(object.data) || !object.data.exists(k, v, k.startsWith('x') && v == 'bad')", None, None)]),
    case(&[(
        "!has(object.data) || object.data.existsOne(k, v, v == 'good') || !object.data.exists(k, v, v == 'good')",
        Some("at most one good value"),
        None,
    )]),
    case(&[(
        "!has(object.metadata.labels) || object.metadata.labels.transformList(k, v, v != 'qa', k).size() <= 2",
        None,
        Some("'labels not qa: ' + object.metadata.labels.transformList(k, v, v != 'qa', k).sortBy(k, k).join(',')"),
    )]),
    case(&[("!has(object.data) || object.data.transformMap(k, v, v.size()).all(k, n, n < 10)", None, None)]),
    // An error (`int('bad')`) absorbed by a later false (`all`) or true
    // (`exists`), as cel-go absorbs it, or the verdict where none comes.
    case(&[("!has(object.data) || object.data.all(k, v, int(v) < 5)", Some("small numbers"), None)]),
    case(&[("!has(object.data) || !object.data.exists(k, v, int(v) > 5)", Some("no big numbers"), None)]),
    // Two keys with one value: `transformMapEntry` fails on both sides.
    case(&[(
        "!has(object.data) || object.data.transformMapEntry(k, v, {v: k}).size() == object.data.size()",
        Some("values must be distinct"),
        None,
    )]),
    case(&[(
        "!has(object.data) || object.data.map(k, k).sortBy(k, k)[0] != 'config'",
        None,
        Some("'first key: ' + object.data.map(k, k).sortBy(k, k)[0]"),
    )]),
    case(&[("object.?data.?replicas.optMap(r, r.size() <= 1).orValue(true)", Some("one-digit replicas"), None)]),
    case(&[(
        "object.?data.?ttl.optFlatMap(t, t.endsWith('h') ? optional.of(t) : optional.none()).orValue('h') != '48h'",
        None,
        None,
    )]),
    // Negations in pairs cancel out (`!!x` is `x`, `--n` is `n`).
    case(&[("!!has(object.data) || --size(object.metadata.name) < 0", Some("double negations cancel"), None)]),
    // The object's namespace (given to `check` among the objects).
    case(&[(
        "!has(object.metadata.labels) || !('team' in object.metadata.labels) || \
         namespaceObject.metadata.labels['e2e.portcullis.dev/diff'] == namespaceObject.metadata.name && \
         object.metadata.labels.team != 'qa'",
        None,
        Some("'team ' + object.metadata.labels.team + ' may not be in namespace ' + namespaceObject.metadata.name"),
    )]),
];

/// Policies on UPDATE, judged with `oldObject` (the stored object).
const UPDATE_CASES: &[Case] = &[
    case(&[(
        "oldObject == null || !has(oldObject.data) || (has(object.data) && size(object.data) >= size(oldObject.data))",
        Some("keys may not be removed"),
        None,
    )]),
    case(&[(
        "oldObject == null || object.metadata.?labels.?team.orValue('') == oldObject.metadata.?labels.?team.orValue('')",
        None,
        Some("'the team label may not change from ' + oldObject.metadata.?labels.?team.orValue('none')"),
    )]),
    case(&[(
        "request.operation != 'UPDATE' || !has(oldObject.data) || !('config' in oldObject.data) || \
         (has(object.data) && 'config' in object.data && object.data.config == oldObject.data.config)",
        Some("config is immutable"),
        None,
    )]),
];

/// Key-value pairs (labels, data).
type Pairs = &'static [(&'static str, &'static str)];

/// A policy with parameters: the policy, its `paramRef` (JSON) and the
/// ConfigMaps stored as parameters, `(name, labels, data)`.
struct ParamCase {
    case: Case,
    param_ref: &'static str,
    params: &'static [(&'static str, Pairs, Pairs)],
}

const PARAM_CASES: &[ParamCase] = &[
    // By name, in the request's namespace.
    ParamCase {
        case: case(&[(
            "!has(object.data) || size(object.data) <= int(params.data.maxKeys)",
            None,
            Some("'at most ' + params.data.maxKeys + ' data keys, from ' + params.metadata.name"),
        )]),
        param_ref: r#"{"name": "limits", "parameterNotFoundAction": "Deny"}"#,
        params: &[("limits", &[], &[("maxKeys", "2")])],
    },
    // A variable built from the parameter.
    ParamCase {
        case: Case {
            validations: &[(
                "!has(object.metadata.labels) || !('team' in object.metadata.labels) || object.metadata.labels.team in variables.teams",
                Some("team not allowed"),
                Some("'team ' + object.metadata.labels.team + ' is not one of ' + params.data.teams"),
            )],
            match_conditions: &[],
            variables: &[("teams", "params.data.teams.split(',')")],
        },
        param_ref: r#"{"name": "teams", "parameterNotFoundAction": "Deny"}"#,
        params: &[("teams", &[], &[("teams", "shop,qa")])],
    },
    // A match condition that reads the parameter.
    ParamCase {
        case: Case {
            validations: &[("has(object.metadata.labels)", Some("labels are required"), None)],
            match_conditions: &["params.data.enforce == 'true'"],
            variables: &[],
        },
        param_ref: r#"{"name": "switch", "parameterNotFoundAction": "Deny"}"#,
        params: &[("switch", &[], &[("enforce", "true")])],
    },
    // Every parameter a selector picks (the API server judges them in no
    // set order, so the message names none of them).
    ParamCase {
        case: case(&[("object.metadata.name.size() <= int(params.data.maxName)", Some("the name is too long"), None)]),
        param_ref: r#"{"selector": {"matchLabels": {"role": "limit"}}, "parameterNotFoundAction": "Deny"}"#,
        params: &[
            ("loose", &[("role", "limit")], &[("maxName", "9")]),
            ("strict", &[("role", "limit")], &[("maxName", "6")]),
            ("ignored", &[("role", "other")], &[("maxName", "1")]),
        ],
    },
    // No parameter where one is required.
    ParamCase {
        case: case(&[("object.metadata.name.size() <= int(params.data.maxName)", None, None)]),
        param_ref: r#"{"name": "absent", "parameterNotFoundAction": "Deny"}"#,
        params: &[],
    },
];

/// `policy` (either form) with `paramKind: ConfigMap` and `param_ref`:
/// ValidatingAdmissionPolicy keeps the reference on its binding.
fn with_params(mut policy: Value, param_ref: &str) -> Value {
    let param_ref: Value = serde_json::from_str(param_ref).expect("JSON of the expected shape");
    let param_kind = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    if policy["kind"] == "List" {
        policy["items"][0]["spec"]["paramKind"] = param_kind;
        policy["items"][1]["spec"]["paramRef"] = param_ref;
    } else {
        policy["spec"]["paramKind"] = param_kind;
        policy["spec"]["paramRef"] = param_ref;
    }
    policy
}

/// A sentinel every case carries: the policy is in force in the API server
/// once it denies an object of this name.
const SENTINEL: &str = "sentinel";

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn object(rng: &mut Rng, index: usize) -> Value {
    let stem = rng.pick(&["app", "web", "db", "x", "appserver", "cache"]);
    let mut name = format!("{stem}{index}");
    if rng.chance(50) {
        name = format!("{stem}-{index}");
    }
    if rng.chance(25) {
        name.push_str(rng.pick(&["-extra", "-a-b", "-zz"]));
    }
    let values = [
        "bad",
        "good",
        "512Mi",
        "2Gi",
        "abc",
        "3",
        "10",
        "x",
        "SECRET",
        "has secret",
        "1h",
        "48h",
        "soon",
        "https://example.com/x",
        "not a url",
        "Mixed",
        "0",
        "v42",
    ];
    let mut metadata = json!({"name": name});
    if rng.chance(70) {
        let labels: BTreeMap<&str, &str> = (0..1 + rng.next() % 4)
            .map(|_| {
                (rng.pick(&["team", "env", "exempt", "app", "verylonglabel"]), rng.pick(&["dev", "prod", "qa", "shop"]))
            })
            .collect();
        metadata["labels"] = json!(labels);
    }
    if rng.chance(30) {
        metadata["annotations"] = json!({"note": rng.pick(&values)});
    }
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
    if rng.chance(80) {
        let data: BTreeMap<&str, &str> = (0..1 + rng.next() % 5)
            .map(|_| {
                let key = rng.pick(&["config", "mem", "replicas", "ttl", "url", "xtra", "other", "verylongkeyname"]);
                (key, rng.pick(&values))
            })
            .collect();
        cm["data"] = json!(data);
    }
    cm
}

fn validations(case: &Case) -> Vec<Value> {
    // The sentinel comes first, so that it is the first failure for the
    // sentinel object whatever the other validations say.
    let sentinel = json!({"expression": format!("object.metadata.name != '{SENTINEL}'"), "message": SENTINEL});
    let all: Vec<Value> = std::iter::once(sentinel)
        .chain(case.validations.iter().map(|(expression, message, message_expression)| {
            let mut v = json!({"expression": expression});
            if let Some(m) = message {
                v["message"] = json!(m);
            }
            if let Some(m) = message_expression {
                v["messageExpression"] = json!(m);
            }
            v
        }))
        .collect();
    all
}

fn named(list: &[&str]) -> Vec<Value> {
    list.iter().enumerate().map(|(i, e)| json!({"name": format!("c{i}"), "expression": e})).collect()
}

fn vap(name: &str, case: &Case) -> Value {
    let variables: Vec<Value> = case.variables.iter().map(|(n, e)| json!({"name": n, "expression": e})).collect();
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
                "matchConditions": named(case.match_conditions),
                "variables": variables,
                "validations": validations(case),
            }
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"e2e.portcullis.dev/diff": name}}},
            }
        }
    ]})
}

fn portcullis_policy(name: &str, case: &Case) -> Value {
    let variables: Vec<Value> = case.variables.iter().map(|(n, e)| json!({"name": n, "expression": e})).collect();
    json!({
        "apiVersion": "portcullis.dev/v1alpha1",
        "kind": "ValidatorPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "match": {"resources": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "matchConditions": named(case.match_conditions),
            "variables": variables,
            "validations": validations(case),
        }
    })
}

/// A verdict: allowed, denied with a message, or denied because an
/// expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Allowed,
    Denied(String),
    Error,
    /// The binding could not be configured (its parameters): the API
    /// server's message.
    Config(String),
}

/// How both sides word a binding that cannot be configured.
const CONFIG: &str = "failed to configure binding: ";

fn in_namespace(object: &Value, ns: &str) -> Value {
    let mut object = object.clone();
    object["metadata"]["namespace"] = json!(ns);
    object
}

/// The API server's verdict on a create or replace (server-side dry run).
fn verdict<T>(result: Result<T, kube::Error>) -> Verdict {
    match result {
        Ok(_) => Verdict::Allowed,
        Err(kube::Error::Api(status)) => {
            let (_, message) = status.message.split_once("denied request: ").unwrap_or_else(|| panic!("{status:?}"));
            if let Some(config) = message.strip_prefix(CONFIG) {
                Verdict::Config(config.to_owned())
            } else if message.contains("resulted in error") {
                Verdict::Error
            } else {
                Verdict::Denied(message.to_owned())
            }
        }
        Err(other) => panic!("{other}"),
    }
}

/// The API server's verdict on creating `cm` in `ns` (server-side dry run).
async fn api_server(api: &Api<ConfigMap>, cm: &Value) -> Verdict {
    let cm: ConfigMap = serde_json::from_value(cm.clone()).expect("JSON of the expected shape");
    verdict(api.create(&PostParams { dry_run: true, ..Default::default() }, &cm).await)
}

/// The comparisons made so far.
#[derive(Default)]
struct Tally {
    compared: usize,
    denied: usize,
    errors: usize,
    differences: Vec<String>,
}

impl Tally {
    /// Compares the API server's verdict on `what` with Portcullis' (`check`
    /// must have said something of every object).
    fn record(&mut self, what: String, theirs: Verdict, mine: Option<&Verdict>) {
        let mine = mine.unwrap_or_else(|| panic!("check said nothing of {what}"));
        self.compared += 1;
        self.denied += usize::from(theirs != Verdict::Allowed);
        self.errors += usize::from(theirs == Verdict::Error);
        if *mine != theirs {
            self.differences.push(format!("{what}: API server {theirs:?}, Portcullis {mine:?}"));
        }
    }
}

/// Waits until the API server enforces the policy bound for `api`'s
/// namespace: it denies the sentinel.
async fn enforced(api: &Api<ConfigMap>, what: &str) {
    enforced_as(api, what, Verdict::Denied(SENTINEL.to_owned())).await;
}

/// Waits until the API server's verdict on the sentinel is `expected`.
async fn enforced_as(api: &Api<ConfigMap>, what: &str, expected: Verdict) {
    let sentinel = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SENTINEL}});
    let deadline = Instant::now() + Duration::from_secs(60);
    while api_server(api, &sentinel).await != expected {
        assert!(Instant::now() < deadline, "the API server does not enforce {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Portcullis' verdicts on `policy` by `check`, by object name, with the
/// namespace (labelled as the policy's or binding's namespaceSelector
/// selects it) among the manifests, as it would be in a repository: used
/// with the native policy and binding themselves (the very YAML the API
/// server was given), and with a policy that selects its namespace.
fn native(name: &str, policy: &Value, ns: &str, items: &[Value], params: Vec<Value>) -> BTreeMap<String, Verdict> {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": ns, "labels": {"e2e.portcullis.dev/diff": name}}});
    let items = std::iter::once(namespace).chain(items.iter().cloned()).collect();
    check(name, policy, ns, items, params)
}

/// Portcullis' verdicts, by object name, from `check` on every object
/// (the namespace among them, as for a native policy).
fn portcullis(name: &str, case: &Case, ns: &str, items: &[Value]) -> BTreeMap<String, Verdict> {
    native(name, &portcullis_policy(name, case), ns, items, Vec::new())
}

/// Runs `check` with `policy` over `items`, `params` given as parameter
/// objects.
fn check(name: &str, policy: &Value, ns: &str, items: Vec<Value>, params: Vec<Value>) -> BTreeMap<String, Verdict> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy_file = dir.path().join("policy.json");
    std::fs::write(&policy_file, policy.to_string()).expect("writing test files");
    let manifests = dir.path().join("objects.json");
    std::fs::write(&manifests, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
        .expect("reading or writing a test file");
    let mut command = Command::new(binaries().join("portcullis-validator"));
    command.args([
        "check",
        "--policy",
        policy_file.to_str().expect("a UTF-8 path"),
        "-f",
        manifests.to_str().expect("a UTF-8 path"),
    ]);
    if !params.is_empty() {
        let params_file = dir.path().join("params.json");
        std::fs::write(&params_file, json!({"apiVersion": "v1", "kind": "List", "items": params}).to_string())
            .expect("reading or writing a test file");
        command.args(["--params", params_file.to_str().expect("a UTF-8 path")]);
    }
    let out = command.output().expect("running a command");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c <= 1) && stderr.is_empty(), "check failed: {stderr}\n{stdout}");
    let mut verdicts = BTreeMap::new();
    let mut current: Option<String> = None;
    let native_denial = format!("  deny: ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: ");
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix(&format!("ConfigMap {ns}/")) {
            let (object, verdict) = rest.split_once(": ").expect("the expected format");
            verdicts.insert(object.to_owned(), Verdict::Allowed);
            current = (verdict == "DENIED").then(|| object.to_owned());
        } else if let (Some(object), Some(message)) = (&current, line.strip_prefix(&native_denial)) {
            // A native policy: in the API server's words, its first failed validation only.
            assert_eq!(verdicts[object], Verdict::Allowed, "a native denial says one thing: {stdout}");
            let verdict = match message.strip_prefix(CONFIG) {
                Some(config) => Verdict::Config(config.to_owned()),
                None if message.contains("resulted in error") => Verdict::Error,
                None => Verdict::Denied(message.to_owned()),
            };
            verdicts.insert(object.clone(), verdict);
        } else if let (Some(object), Some(finding)) = (&current, line.strip_prefix(&format!("  deny: [{name}] "))) {
            // The first finding is the one compared (see the module doc).
            if verdicts[object] == Verdict::Allowed {
                let config =
                    finding.strip_prefix("policy could not be evaluated: ").and_then(|f| f.strip_prefix(CONFIG));
                let verdict = match finding.strip_prefix(&format!("ConfigMap {ns}/{object}: ")) {
                    Some(message) => Verdict::Denied(message.to_owned()),
                    None if config.is_some() => Verdict::Config(config.unwrap_or_default().to_owned()),
                    None if finding.starts_with("policy could not be evaluated") => Verdict::Error,
                    None => panic!("unexpected finding: {line}"),
                };
                verdicts.insert(object.clone(), verdict);
            }
        }
    }
    verdicts
}

#[tokio::test]
async fn policies_with_parameters_give_the_same_verdicts() {
    let client = cluster().client().await;
    // The API server stops its shared ConfigMap informer when no binding
    // names the kind any more, and a policy bound later reads a frozen copy
    // (a known Kubernetes bug; Portcullis starts a fresh watch, see
    // validator.rs). Each case below deletes its binding, so a binding that
    // matches nothing keeps the informer alive through the test.
    let anchor = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": "e2e-param-anchor"},
         "spec": {"failurePolicy": "Ignore", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                  "validations": [{"expression": "true"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "e2e-param-anchor"},
         "spec": {"policyName": "e2e-param-anchor", "validationActions": ["Deny"],
                  "paramRef": {"name": "none", "parameterNotFoundAction": "Allow"},
                  "matchResources": {"namespaceSelector": {"matchLabels": {"e2e.portcullis.dev/none": "none"}}}}}
    ]});
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &anchor.to_string()));
    let mut rng = Rng(0x9a7a_3e7e_75ee_d5ee);
    let mut tally = Tally::default();
    for (index, param_case) in PARAM_CASES.iter().enumerate() {
        let name = unique(&format!("param{index}"));
        namespace(&client, &name, &[("e2e.portcullis.dev/diff", &name)]).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
        // The parameters are stored before the policy is in force.
        let mut stored = Vec::new();
        for (param, labels, data) in param_case.params {
            let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
            let data: BTreeMap<&str, &str> = data.iter().copied().collect();
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": param, "labels": labels}, "data": data});
            let created = api.create(&PostParams::default(), &serde_json::from_value(cm).unwrap()).await.unwrap();
            let mut value = serde_json::to_value(created).unwrap();
            value["apiVersion"] = json!("v1");
            value["kind"] = json!("ConfigMap");
            stored.push(value);
        }
        let policy = with_params(vap(&name, &param_case.case), param_case.param_ref);
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &policy.to_string()));
        let expected = if stored.is_empty() {
            Verdict::Config("no params found for policy binding with `Deny` parameterNotFoundAction".into())
        } else {
            Verdict::Denied(SENTINEL.to_owned())
        };
        enforced_as(&api, &format!("parameter case {index}"), expected).await;
        let objects: Vec<Value> = (0..10).map(|i| object(&mut rng, i)).collect();
        let items: Vec<Value> = objects.iter().map(|o| in_namespace(o, &name)).collect();
        let natives = native(&name, &policy, &name, &items, stored.clone());
        let ours = check(
            &name,
            &with_params(portcullis_policy(&name, &param_case.case), param_case.param_ref),
            &name,
            items,
            stored,
        );
        for object in &objects {
            let object_name = object["metadata"]["name"].as_str().unwrap();
            let theirs = api_server(&api, object).await;
            tally.record(format!("parameter case {index} (native) {object}"), theirs.clone(), natives.get(object_name));
            tally.record(format!("parameter case {index} {object}"), theirs, ours.get(object_name));
        }
        ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", &name]));
    }
    ok(cluster().kubectl(&[
        "delete",
        "validatingadmissionpolicybinding,validatingadmissionpolicy",
        "e2e-param-anchor",
    ]));
    let Tally { compared, denied, differences, .. } = tally;
    println!("{compared} objects compared with parameters, {denied} denied by the API server");
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
    assert!(denied > compared / 10 && denied < compared * 9 / 10, "the corpus should both allow and deny: {denied}");
}

#[tokio::test]
async fn portcullis_and_the_api_server_give_the_same_verdicts() {
    let client = cluster().client().await;
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let (mut tally, mut updates) = (Tally::default(), 0);
    for (index, case) in CASES.iter().enumerate() {
        let name = unique(&format!("diff{index}"));
        namespace(&client, &name, &[("e2e.portcullis.dev/diff", &name)]).await;
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &vap(&name, case).to_string()));
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
        enforced(&api, &format!("case {index}")).await;
        let objects: Vec<Value> = (0..10).map(|i| object(&mut rng, i)).collect();
        let items: Vec<Value> = objects.iter().map(|o| in_namespace(o, &name)).collect();
        let natives = native(&name, &vap(&name, case), &name, &items, Vec::new());
        let ours = portcullis(&name, case, &name, &items);
        for object in &objects {
            let object_name = object["metadata"]["name"].as_str().unwrap();
            let theirs = api_server(&api, object).await;
            tally.record(format!("case {index} (native) {object}"), theirs.clone(), natives.get(object_name));
            tally.record(format!("case {index} {object}"), theirs, ours.get(object_name));
        }
        ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", &name]));
    }
    // UPDATE: the objects exist before the policy, and each is replaced by
    // another generated object of the same name.
    for (index, case) in UPDATE_CASES.iter().enumerate() {
        let name = unique(&format!("update{index}"));
        namespace(&client, &name, &[("e2e.portcullis.dev/diff", &name)]).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
        let mut pairs = Vec::new();
        for i in 0..10 {
            let old: ConfigMap = serde_json::from_value(object(&mut rng, i)).unwrap();
            let stored = api.create(&PostParams::default(), &old).await.unwrap();
            let mut new = object(&mut rng, i);
            new["metadata"]["name"] = json!(stored.metadata.name);
            new["metadata"]["resourceVersion"] = json!(stored.metadata.resource_version);
            pairs.push((serde_json::to_value(&stored).unwrap(), new));
        }
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &vap(&name, case).to_string()));
        enforced(&api, &format!("update case {index}")).await;
        let reviews: Vec<Value> = pairs
            .iter()
            .map(|(old, new)| {
                let mut review = config_map_review(in_namespace(new, &name));
                review["request"]["operation"] = json!("UPDATE");
                review["request"]["oldObject"] = old.clone();
                review
            })
            .collect();
        let natives = native(&name, &vap(&name, case), &name, &reviews, Vec::new());
        let ours = portcullis(&name, case, &name, &reviews);
        for (_, new) in &pairs {
            let object_name = new["metadata"]["name"].as_str().unwrap();
            let replacement: ConfigMap = serde_json::from_value(new.clone()).unwrap();
            let params = PostParams { dry_run: true, ..Default::default() };
            let theirs = verdict(api.replace(object_name, &params, &replacement).await);
            let what = format!("update case {index} (native) {new}");
            tally.record(what, theirs.clone(), natives.get(object_name));
            tally.record(format!("update case {index} {new}"), theirs, ours.get(object_name));
            updates += 1;
        }
        ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", &name]));
    }
    println!("{updates} of them UPDATEs");
    let Tally { compared, denied, errors, differences } = tally;
    println!("{compared} objects compared, {denied} denied by the API server ({errors} by an evaluation error)");
    assert!(compared >= 400, "only {compared} cases (each object judged by the native policy and the ValidatorPolicy)");
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
    assert!(denied > compared / 10 && denied < compared * 9 / 10, "the corpus should both allow and deny: {denied}");
}

/// Pushed down: each case's ValidatorPolicy (selecting its namespace) is
/// turned into a native policy and binding by `portcullis-validator vap`,
/// applied to the API server, and the API server's verdicts must be the
/// webhook's (`check` on the ValidatorPolicy), message included.
#[tokio::test]
async fn pushed_down_policies_give_the_webhooks_verdicts() {
    let client = cluster().client().await;
    let mut rng = Rng(0x0b5e_55ed_c0ff_ee00);
    let mut tally = Tally::default();
    for (index, case) in CASES.iter().enumerate() {
        let name = unique(&format!("push{index}"));
        namespace(&client, &name, &[("e2e.portcullis.dev/diff", &name)]).await;
        let mut policy = portcullis_policy(&name, case);
        policy["spec"]["match"]["namespaceSelector"] = json!({"matchLabels": {"e2e.portcullis.dev/diff": name}});
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("policy.json");
        std::fs::write(&file, policy.to_string()).expect("writing a test file");
        let generated = Command::new(binaries().join("portcullis-validator"))
            .args(["vap", "--policy", file.to_str().expect("a UTF-8 path")])
            .output()
            .expect("running a command");
        let yaml = ok(generated);
        ok(cluster().kubectl_stdin(&["apply", "-f", "-"], &yaml));
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
        enforced(&api, &format!("pushed-down case {index}")).await;
        let objects: Vec<Value> = (0..10).map(|i| object(&mut rng, i)).collect();
        let items: Vec<Value> = objects.iter().map(|o| in_namespace(o, &name)).collect();
        let ours = native(&name, &policy, &name, &items, Vec::new());
        for object in &objects {
            let object_name = object["metadata"]["name"].as_str().unwrap();
            let theirs = api_server(&api, object).await;
            tally.record(format!("pushed-down case {index} {object}"), theirs, ours.get(object_name));
        }
        let generated = format!("portcullis.{name}");
        ok(cluster().kubectl(&["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", &generated]));
    }
    let Tally { compared, denied, differences, .. } = tally;
    println!("{compared} objects compared with pushed-down policies, {denied} denied by the API server");
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
    assert!(denied > compared / 10 && denied < compared * 9 / 10, "the corpus should both allow and deny: {denied}");
}
