//! The checks added beside the e2e suite's (`native_invalid`, which
//! compares them with the real API server): label selectors, `paramKind`,
//! the order of `paramRef`'s errors, and errors said once.

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use rstest::rstest;

const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or \
                           '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
                           'my_value',  or '12345', regex used for validation is \
                           '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                         with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                         validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS_1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
                        alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
                        regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
                             or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
                             used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// A valid policy with `extra` (flow YAML lines under `spec`) and
/// `selector` (a flow mapping) as its `namespaceSelector`.
fn policy(extra: &str, selector: &str) -> ValidatingAdmissionPolicy {
    let yaml = format!(
        "metadata: {{name: p}}\nspec:\n  matchConstraints:\n    namespaceSelector: {selector}\n    resourceRules:\n    \
         - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}\n  \
         validations: [{{expression: 'true'}}]\n{extra}"
    );
    serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn errors_of_policy(policy: &ValidatingAdmissionPolicy) -> Vec<String> {
    super::policy(policy).err().map(|e| e.errors).unwrap_or_default()
}

fn binding(spec: &str) -> ValidatingAdmissionPolicyBinding {
    let yaml = format!("metadata: {{name: b}}\nspec:\n  policyName: p\n  validationActions: [Deny]\n{spec}");
    serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn errors_of_binding(spec: &str) -> Vec<String> {
    super::binding(&binding(spec)).err().map(|e| e.errors).unwrap_or_default()
}

const AT: &str = "spec.matchConstraints.namespaceSelector";

#[rstest]
#[case::empty("{}", vec![])]
#[case::valid_labels("{matchLabels: {example.com/Team_1: a.B-c, empty: ''}}", vec![])]
#[case::valid_expressions(
    "{matchExpressions: [{key: a, operator: In, values: [x, '']}, {key: b, operator: NotIn, values: [y]}, \
     {key: c, operator: Exists}, {key: d, operator: DoesNotExist, values: []}]}",
    vec![]
)]
#[case::label_key_and_value(
    "{matchLabels: {-bad: -bad}}",
    vec![
        format!("{AT}.matchLabels: Invalid value: \"-bad\": {NAME_PART}"),
        format!("{AT}.matchLabels: Invalid value: \"-bad\": {LABEL_VALUE}"),
    ]
)]
#[case::label_value_too_long(
    &format!("{{matchLabels: {{a: {}}}}}", "v".repeat(64)),
    vec![format!("{AT}.matchLabels: Invalid value: \"{}\": must be no more than 63 bytes", "v".repeat(64))]
)]
#[case::in_without_values(
    "{matchExpressions: [{key: a, operator: In}]}",
    vec![format!("{AT}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'")]
)]
#[case::exists_with_values(
    "{matchExpressions: [{key: a, operator: Exists, values: [x]}]}",
    vec![format!(
        "{AT}.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    )]
)]
#[case::unknown_operator_bad_key_bad_value(
    "{matchExpressions: [{key: 'a/b/c', operator: Gt, values: ['x y']}]}",
    vec![
        format!("{AT}.matchExpressions[0].operator: Invalid value: \"Gt\": not a valid selector operator"),
        format!(
            "{AT}.matchExpressions[0].key: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric \
             characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
             'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with \
             an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ),
        format!("{AT}.matchExpressions[0].values[0]: Invalid value: \"x y\": {LABEL_VALUE}"),
    ]
)]
#[case::operator_printed_as_json(
    "{matchExpressions: [{key: a, operator: '<in>'}]}",
    vec![format!("{AT}.matchExpressions[0].operator: Invalid value: \"\\u003cin\\u003e\": not a valid selector operator")]
)]
#[case::empty_key(
    "{matchExpressions: [{key: '', operator: Exists}]}",
    vec![
        format!("{AT}.matchExpressions[0].key: Invalid value: \"\": name part must be non-empty"),
        format!("{AT}.matchExpressions[0].key: Invalid value: \"\": {NAME_PART}"),
    ]
)]
#[case::the_same_error_once(
    "{matchLabels: {a: -x, b: -x}}",
    vec![format!("{AT}.matchLabels: Invalid value: \"-x\": {LABEL_VALUE}")]
)]
fn a_selector_is_checked_as_the_api_server_checks_it(#[case] selector: &str, #[case] expected: Vec<String>) {
    assert_eq!(errors_of_policy(&policy("", selector)), expected);
}

/// Both selectors of `matchConstraints` and of the binding's
/// `matchResources`, between `matchPolicy` and the rules.
#[test]
fn both_selectors_are_checked_in_the_api_servers_order() {
    let bad = "{matchLabels: {a: -x}}";
    let mut bad_policy = policy("", bad);
    if let Some(m) = bad_policy.spec.as_mut().and_then(|s| s.match_constraints.as_mut()) {
        m.object_selector = m.namespace_selector.clone();
        m.match_policy = Some("Loose".into());
        m.resource_rules.iter_mut().flatten().for_each(|r| r.operations = Some(vec!["PATCH".into()]));
    }
    let errors = errors_of_policy(&bad_policy);
    let fields: Vec<&str> = errors.iter().filter_map(|e| e.split_once(": ").map(|(f, _)| f)).collect();
    assert_eq!(
        fields,
        [
            "spec.matchConstraints.matchPolicy",
            "spec.matchConstraints.namespaceSelector.matchLabels",
            "spec.matchConstraints.objectSelector.matchLabels",
            "spec.matchConstraints.resourceRules[0].operations[0]",
        ]
    );
    let errors = errors_of_binding(&format!(
        "  matchResources: {{namespaceSelector: {bad}, objectSelector: {{matchExpressions: [{{key: k, operator: In}}]}}}}\n"
    ));
    assert_eq!(
        errors,
        [
            format!("spec.matchResources.namespaceSelector.matchLabels: Invalid value: \"-x\": {LABEL_VALUE}"),
            "spec.matchResources.objectSelector.matchExpressions[0].values: Required value: must be specified when \
             `operator` is 'In' or 'NotIn'"
                .to_owned(),
        ]
    );
}

/// The selector's errors come between `name`'s and the selector's
/// `Forbidden`, as `validateParamRef` appends them.
#[test]
fn a_param_refs_selector_is_checked_between_its_forbidden_errors() {
    let errors = errors_of_binding(
        "  paramRef: {name: a/b, selector: {matchExpressions: [{key: k, operator: Exists, values: [v]}]}, \
         parameterNotFoundAction: Deny}\n",
    );
    assert_eq!(
        errors,
        [
            "spec.paramRef.name: Invalid value: \"a/b\": may not contain '/'",
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is \
             'Exists' or 'DoesNotExist'",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
        ]
    );
    assert_eq!(errors_of_binding("  paramRef: {selector: {}, parameterNotFoundAction: Allow}\n"), Vec::<String>::new());
}

#[rstest]
#[case::core("v1", "ConfigMap", vec![])]
#[case::grouped("example.com/v1beta1", "Limit-Range2", vec![])]
#[case::missing("", "", vec![
    "spec.paramKind.apiVersion: Required value".to_owned(),
    "spec.paramKind.kind: Required value".to_owned(),
])]
#[case::two_slashes("a/b/v1", "Limits", vec![
    "spec.paramKind.apiVersion: Invalid value: \"a/b/v1\": unexpected GroupVersion string: a/b/v1".to_owned(),
])]
#[case::bad_group_and_version("Example.com/V1", "Limits", vec![
    format!("spec.paramKind.apiVersion: Invalid value: \"Example.com\": {DNS_SUBDOMAIN}"),
    format!("spec.paramKind.apiVersion: Invalid value: \"V1\": {DNS_1035}"),
])]
#[case::no_version("example.com/", "Limits", vec![
    "spec.paramKind.apiVersion: Invalid value: \"example.com/\": version must be specified".to_owned(),
])]
#[case::only_a_slash("/", "Limits", vec![
    "spec.paramKind.apiVersion: Invalid value: \"/\": version must be specified".to_owned(),
])]
#[case::no_group("/v1", "Limits", vec![])]
#[case::version_too_long_and_not_a_label(&format!("{}-", "v".repeat(63)), "Limits", vec![
    format!(
        "spec.paramKind.apiVersion: Invalid value: \"{}-\": must be no more than 63 characters,{DNS_1035}",
        "v".repeat(63)
    ),
])]
#[case::kind_not_a_label("v1", "1Config_Map", vec![
    format!(
        "spec.paramKind.kind: Invalid value: \"1Config_Map\": may have mixed case, but should otherwise match: {DNS_1035}"
    ),
])]
fn param_kind_is_checked_as_the_api_server_checks_it(
    #[case] api_version: &str,
    #[case] kind: &str,
    #[case] expected: Vec<String>,
) {
    let extra = format!("  paramKind: {{apiVersion: '{api_version}', kind: '{kind}'}}\n");
    assert_eq!(errors_of_policy(&policy(&extra, "{}")), expected);
}
