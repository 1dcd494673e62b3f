//! Policies and exceptions as API objects: the CRDs the validator ships,
//! one object compiled on its own (with the reason and message its status
//! shows), and what a namespaced policy or exception may reach.

mod support;

use std::sync::Arc;

use portcullis_validator::exception::{Exception, ExceptionNamespaces};
use portcullis_validator::policy::{Policy, PolicySet, PolicySpec};
use portcullis_validator::resources::{self, NamespacedValidatorPolicy, PolicyException, ValidatorPolicy};
use serde_json::{Value, json};
use support::{create, policies_with_cost_limit, run, validator};

const LIMIT: u64 = portcullis_cel::cost::DEFAULT_LIMIT;

fn spec(yaml: &str) -> PolicySpec {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("{e}: {yaml}"))
}

fn refusal(namespace: Option<&str>, yaml: &str) -> (String, String) {
    match Policy::compile("web", namespace.map(str::to_owned), spec(yaml), LIMIT) {
        Ok(_) => panic!("compiled: {yaml}"),
        Err(refusal) => (refusal.reason, refusal.message),
    }
}

#[test]
fn the_shipped_crds_are_what_the_binary_prints() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/base/crds/validator.yaml");
    let shipped = std::fs::read_to_string(&path).unwrap_or_default();
    let printed = resources::crds_yaml().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        shipped == printed,
        "{} differs from `portcullis-validator crds`; regenerate it with\n  \
         cargo run -q -p portcullis-validator -- crds > deploy/base/crds/validator.yaml",
        path.display()
    );
}

/// Every schema node the API server would call non-structural: no type,
/// a bare `{}`, or a keyword it refuses.
fn unstructural(at: &str, schema: &Value, out: &mut Vec<String>) {
    let Some(node) = schema.as_object() else {
        out.push(format!("{at}: not an object"));
        return;
    };
    let preserved = node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if node.get("type").is_none() && !preserved && node.get("x-kubernetes-int-or-string").is_none() {
        out.push(format!("{at}: no type"));
    }
    for keyword in ["$ref", "oneOf", "anyOf", "allOf", "not", "definitions", "$defs"] {
        if node.contains_key(keyword) {
            out.push(format!("{at}: {keyword}"));
        }
    }
    if node.get("additionalProperties").is_some_and(Value::is_boolean) {
        out.push(format!("{at}: additionalProperties: bool"));
    }
    if node.contains_key("properties") && node.get("type") != Some(&json!("object")) {
        out.push(format!("{at}: properties without type: object"));
    }
    for (name, property) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
        unstructural(&format!("{at}.{name}"), property, out);
    }
    if let Some(items) = node.get("items") {
        unstructural(&format!("{at}[]"), items, out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        unstructural(&format!("{at}{{}}"), values, out);
    }
}

#[test]
fn the_crd_schemas_are_structural_and_described() {
    for crd in resources::crds() {
        let crd = serde_json::to_value(&crd).unwrap_or_default();
        let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        let version = &crd["spec"]["versions"][0];
        let schema = &version["schema"]["openAPIV3Schema"];
        let mut problems = Vec::new();
        unstructural(&kind, schema, &mut problems);
        assert!(problems.is_empty(), "{kind}: {problems:#?}");
        assert_eq!(crd.pointer("/spec/names/categories/0"), Some(&json!("portcullis")), "{kind}");
        assert!(version.pointer("/subresources/status").is_some(), "{kind} has a status subresource");
        let spec = &schema["properties"]["spec"];
        assert!(spec["description"].as_str().is_some_and(|d| !d.contains('[')), "{kind}: {}", spec["description"]);
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        if kind == "PolicyException" {
            assert_eq!(columns, ["Policies", "Expires", "Ready", "Age"]);
            assert_eq!(spec["required"], json!(["policies", "reason"]));
            assert_eq!(spec["properties"]["policies"]["minItems"], json!(1));
            assert_eq!(spec["properties"]["reason"]["minLength"], json!(1));
        } else if kind == "ValidatorPolicy" {
            assert_eq!(columns, ["Action", "Ready", "Reason", "Enforced-By", "Age"]);
            assert_eq!(spec["properties"]["enforcement"]["enum"], json!(["Webhook", "InProcess", "Auto"]));
        } else {
            assert_eq!(columns, ["Action", "Ready", "Reason", "Age"]);
        }
        if kind != "PolicyException" {
            assert_eq!(spec["properties"]["action"]["enum"], json!(["Deny", "Warn", "Audit"]));
            assert_eq!(spec["properties"]["action"]["default"], json!("Deny"));
            let validation = &spec["properties"]["validations"]["items"];
            assert_eq!(validation["required"], json!(["expression"]));
            assert_eq!(validation["properties"]["expression"]["minLength"], json!(1));
            let rules = schema["x-kubernetes-validations"].to_string();
            assert!(rules.contains("a policy needs rules or validations"), "{kind}: {rules}");
            let namespaced = kind == "NamespacedValidatorPolicy";
            assert_eq!(rules.contains("spec.match.excludeNamespaces"), namespaced, "{kind}: {rules}");
            assert_eq!(rules.contains("spec.match.includeSystemNamespaces"), namespaced, "{kind}: {rules}");
        }
    }
}

#[test]
fn today_s_documents_are_the_objects_kubectl_applies() {
    let yaml = std::fs::read_to_string(support::data("policies.yaml")).unwrap_or_default();
    let mut compiled = 0;
    for document in yaml.split("\n---\n") {
        let object: ValidatorPolicy = serde_yaml::from_str(document).unwrap_or_else(|e| panic!("{e}: {document}"));
        let policy = object.compile(LIMIT).unwrap_or_else(|r| panic!("{}: {}", r.reason, r.message));
        assert_eq!(policy.name, object.metadata.name.clone().unwrap_or_default());
        // What a client writes back reads the same.
        let again: ValidatorPolicy =
            serde_json::from_value(serde_json::to_value(&object).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(again.compile(LIMIT).is_ok());
        compiled += 1;
    }
    assert_eq!(compiled, 11);
}

#[test]
fn a_refused_policy_says_why_as_its_status_would() {
    let (reason, message) = refusal(None, "validations: [{expression: 'object.spec.replicas <'}]");
    assert_eq!(reason, "CompileError");
    assert!(message.starts_with("validations[0]: \"object.spec.replicas <\" does not compile"), "{message}");

    let costly = "validations: [{expression: 'object.spec.containers.all(a, object.spec.containers.all(b, a.name != b.name || a == b))'}]";
    let (reason, message) = match Policy::compile("web", None, spec(costly), 1000) {
        Err(refusal) => (refusal.reason, refusal.message),
        Ok(_) => panic!("a quadratic expression within 1000"),
    };
    assert_eq!(reason, "CostOverLimit");
    assert!(message.starts_with("validations[0]: ") && message.contains("over the limit of 1000"), "{message}");

    let (reason, message) = refusal(None, "match: {resources: []}");
    assert_eq!((reason.as_str(), message.as_str()), ("Invalid", "has neither rules nor validations"));

    let (reason, message) = refusal(None, "rules: {replicas: {min: 3, max: 2}}");
    assert_eq!((reason.as_str(), message.as_str()), ("Invalid", "rules.replicas: min 3 is above max 2"));
}

#[test]
fn the_status_message_is_the_text_check_prints() {
    let document = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: web}\nspec:\n  validations: [{expression: 'object.spec.replicas <'}]\n";
    let printed = policies_with_cost_limit(document, LIMIT).err().unwrap_or_default();
    let (_, message) = refusal(None, "validations: [{expression: 'object.spec.replicas <'}]");
    assert!(printed.ends_with(&format!("policy web: {message}")), "{printed}\nvs {message}");
}

#[test]
fn a_namespaced_policy_may_not_reach_other_namespaces() {
    let team = Some("team-a");
    for (yaml, field) in [
        ("match: {excludeNamespaces: [team-b]}\nrules: {requiredLabels: {team: ''}}", "match.excludeNamespaces"),
        (
            "match: {includeSystemNamespaces: true}\nrules: {requiredLabels: {team: ''}}",
            "match.includeSystemNamespaces",
        ),
        (
            "paramKind: {apiVersion: v1, kind: ConfigMap}\nparamRef: {name: limits, namespace: shared, parameterNotFoundAction: Deny}\nvalidations: [{expression: 'object.spec.replicas <= int(params.data.max)'}]",
            "paramRef.namespace: shared",
        ),
    ] {
        let (reason, message) = refusal(team, yaml);
        assert_eq!(reason, "OutOfNamespace", "{yaml}");
        assert!(message.starts_with(field) && message.contains("(team-a)"), "{message}");
        // A cluster-wide policy may.
        assert!(Policy::compile("web", None, spec(yaml), LIMIT).is_ok(), "{yaml}");
    }
    let own = "paramKind: {apiVersion: v1, kind: ConfigMap}\nparamRef: {name: limits, namespace: team-a, parameterNotFoundAction: Deny}\nvalidations: [{expression: 'object.spec.replicas <= int(params.data.max)'}]";
    let policy = Policy::compile("web", team.map(str::to_owned), spec(own), LIMIT).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(policy.name, "team-a/web");
}

const TEAM_POLICIES: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: NamespacedValidatorPolicy\nmetadata: {name: require-owner, namespace: team-a}\nspec:\n  match: {operations: [CREATE]}\n  rules: {requiredLabels: {owner: ''}}\n---\napiVersion: portcullis.dev/v1alpha1\nkind: NamespacedValidatorPolicy\nmetadata: {name: require-owner, namespace: team-b}\nspec:\n  action: Warn\n  rules: {requiredLabels: {owner: ''}}\n";

fn object(kind: &str, namespace: Option<&str>, name: &str) -> Value {
    let mut metadata = json!({"name": name});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    json!({"apiVersion": "v1", "kind": kind, "metadata": metadata, "data": {}})
}

#[test]
fn a_namespaced_policy_applies_only_in_its_namespace_and_says_which_it_is() {
    let validator = validator(TEAM_POLICIES);
    let (allowed, message, warnings, _) = run(&validator, &create(object("ConfigMap", Some("team-a"), "a")));
    assert!(!allowed);
    assert!(message.contains("[team-a/require-owner]") && !message.contains("team-b"), "{message}");
    assert!(warnings.is_empty(), "team-b's policy stays in team-b: {warnings:?}");
    let (allowed, _, warnings, _) = run(&validator, &create(object("ConfigMap", Some("team-b"), "b")));
    assert!(allowed);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].starts_with("[team-b/require-owner]"), "{warnings:?}");
    let (allowed, _, warnings, _) = run(&validator, &create(object("ConfigMap", Some("shop"), "c")));
    assert!(allowed && warnings.is_empty(), "another namespace: {warnings:?}");
    // Never a cluster-scoped object, not even its own Namespace (whose
    // request carries its name as namespace), whatever the selectors say.
    let mut review = create(object("Namespace", None, "team-a"));
    review["request"]["namespace"] = json!("team-a");
    let (allowed, message, _, _) = run(&validator, &review);
    assert!(allowed, "{message}");
    let (allowed, _, _, _) = run(&validator, &create(object("ClusterRole", None, "team-a")));
    assert!(allowed);
}

#[test]
fn files_hold_the_new_kinds_with_namespaced_identities() {
    let set = policies_with_cost_limit(TEAM_POLICIES, LIMIT).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = set.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["team-a/require-owner", "team-b/require-owner"]);
    let twice = format!("{TEAM_POLICIES}---\n{}", TEAM_POLICIES.split("---\n").next().unwrap_or_default());
    let err = policies_with_cost_limit(&twice, LIMIT).err().unwrap_or_default();
    assert!(err.contains("policy \"team-a/require-owner\" is defined twice"), "{err}");
    let homeless = TEAM_POLICIES.replace(", namespace: team-a", "");
    let err = policies_with_cost_limit(&homeless, LIMIT).err().unwrap_or_default();
    assert!(err.contains("NamespacedValidatorPolicy require-owner: metadata.namespace is required"), "{err}");
    let wide = TEAM_POLICIES.replace("operations: [CREATE]", "excludeNamespaces: [team-b]");
    let err = policies_with_cost_limit(&wide, LIMIT).err().unwrap_or_default();
    assert!(err.contains("policy team-a/require-owner: match.excludeNamespaces: a NamespacedValidatorPolicy"), "{err}");
}

const CLUSTER_POLICY: &str = "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {name: require-team}\nspec:\n  rules: {requiredLabels: {team: ''}}\n";

fn exception_document(namespace: &str, policies: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: portcullis.dev/v1alpha1\nkind: PolicyException\nmetadata: {{name: legacy, namespace: {namespace}}}\nspec:\n  policies: {policies}\n  reason: migrating\n{extra}"
    )
}

#[test]
fn a_namespaced_exception_applies_in_its_namespace_only() {
    let yaml = format!(
        "{CLUSTER_POLICY}---\n{TEAM_POLICIES}{}",
        exception_document("team-a", "[require-team, require-owner]", "")
    );
    let validator = validator(&yaml);
    let (allowed, message, _, _) = run(&validator, &create(object("ConfigMap", Some("team-a"), "a")));
    assert!(allowed, "both exempted in team-a: {message}");
    let (allowed, message, warnings, _) = run(&validator, &create(object("ConfigMap", Some("team-b"), "b")));
    assert!(!allowed && message.contains("[require-team]"), "not in team-b: {message}");
    assert!(
        warnings.iter().any(|w| w.contains("[team-b/require-owner]")),
        "team-b's own policy is not named: {warnings:?}"
    );
    let (allowed, _, _, _) = run(&validator, &create(object("ClusterRole", None, "x")));
    assert!(!allowed, "nor a cluster-scoped object");
}

#[test]
fn an_exception_lives_only_where_the_admin_allows_and_reaches_no_further() {
    let allowed = ExceptionNamespaces::from_list(&["team-a".to_owned(), " ".to_owned()]);
    assert_eq!(ExceptionNamespaces::from_list(&[]), ExceptionNamespaces::Any);
    assert_eq!(ExceptionNamespaces::from_list(&["*".to_owned()]), ExceptionNamespaces::Any);
    let exception = |namespace: &str, yaml: &str| {
        let spec = serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("{e}"));
        Exception::compile("legacy", Some(namespace.to_owned()), spec, &allowed)
    };
    let refused = exception("team-b", "policies: [require-team]\nreason: x").err().unwrap_or_else(|| panic!("allowed"));
    assert_eq!(refused.reason, "NamespaceNotAllowed");
    assert!(refused.message.contains("namespace team-b may not hold policy exceptions"), "{}", refused.message);
    let refused = exception("team-a", "policies: [require-team]\nnamespaces: [team-a, team-b]\nreason: x")
        .err()
        .unwrap_or_else(|| panic!("reaches team-b"));
    assert_eq!(refused.reason, "Invalid");
    assert!(refused.message.starts_with("spec.namespaces: "), "{}", refused.message);
    let refused =
        exception("team-a", "policies: [require-team]\nreason: ''").err().unwrap_or_else(|| panic!("no reason"));
    assert_eq!(
        (refused.reason.as_str(), refused.message.as_str()),
        ("Invalid", "spec.reason is required: say why the exception exists")
    );
    // In a cluster the policy may come later: compiling does not look for it.
    let ok =
        exception("team-a", "policies: [not-yet]\nnamespaces: [team-a]\nreason: x").unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(ok.name, "team-a/legacy");
    // Files: the admin's setting applies to exceptions with a namespace.
    let yaml = format!("{CLUSTER_POLICY}{}", exception_document("team-b", "[require-team]", ""));
    let sources = [(std::path::Path::new("policy.yaml"), yaml.as_bytes())];
    let err = PolicySet::from_sources_in(sources, LIMIT, &allowed).err().map(|e| portcullis_telemetry::error_chain(&e));
    assert!(err.unwrap_or_default().contains("exception team-b/legacy: namespace team-b may not hold"));
}

#[test]
fn objects_compile_one_by_one_and_assemble_into_the_set() {
    let policy: ValidatorPolicy = serde_yaml::from_str(CLUSTER_POLICY).unwrap_or_else(|e| panic!("{e}"));
    let team: NamespacedValidatorPolicy =
        serde_yaml::from_str(TEAM_POLICIES.split("---\n").next().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
    let exception: PolicyException = serde_yaml::from_str(&exception_document("team-a", "[require-team, gone]", ""))
        .unwrap_or_else(|e| panic!("{e}"));
    let policy = Arc::new(policy.compile(LIMIT).unwrap_or_else(|r| panic!("{r:?}")));
    let team = Arc::new(team.compile(LIMIT).unwrap_or_else(|r| panic!("{r:?}")));
    let exception = Arc::new(exception.compile(&ExceptionNamespaces::Any).unwrap_or_else(|r| panic!("{r:?}")));
    assert_eq!((policy.name.as_str(), team.name.as_str()), ("require-team", "team-a/require-owner"));
    let set = PolicySet::assemble(vec![policy.clone(), team], vec![exception]);
    assert!(Arc::ptr_eq(&set.policies[0], &policy), "an unchanged object is shared, not compiled again");
    assert_eq!(set.exceptions[0].name, "team-a/legacy");
}
