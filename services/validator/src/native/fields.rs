//! What the API server's validation refuses in a ValidatingAdmissionPolicy
//! or its binding besides CEL (compiling checks that): names, the shape
//! of the rules, match conditions, variables, messages and `paramRef`. The
//! errors are the API server's field errors, word for word
//! (`k8s.io/kubernetes/pkg/apis/admissionregistration/validation`), so that
//! `check` says what `kubectl apply` would say, and a generated pair the
//! API server would refuse for one of these is not handed to it. Every
//! error is given, not the first, as the API server gives them. Not
//! checked here: label selectors' syntax (NativeMatch refuses a selector
//! that does not parse, in its own words) and the format of `paramKind`'s
//! `apiVersion` and `kind`.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ParamRef, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The API server's limit on a policy's match conditions.
const MAX_MATCH_CONDITIONS: usize = 64;
/// The API server's limit on a policy's audit annotations.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// The API server's limit on an audit annotation's value expression.
const MAX_AUDIT_ANNOTATION_VALUE: usize = 5 * 1024;
const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                             '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
                             used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                         with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                         validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
/// CEL's reserved words, which a variable may not be named.
const CEL_RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A native policy or binding the API server refuses, with every field
/// error, as its answer (422 Unprocessable Entity) says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}.admissionregistration.k8s.io {} is invalid: {}", go_quoted(name), listed(errors))]
pub struct Invalid {
    /// `ValidatingAdmissionPolicy` or `ValidatingAdmissionPolicyBinding`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// Each `<field>: <what is wrong>`, in the API server's order.
    pub errors: Vec<String>,
}

/// One error as it is, several in brackets, as Go's aggregate prints them.
fn listed(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// `policy`, or why the API server refuses it.
pub fn policy(policy: &ValidatingAdmissionPolicy) -> Result<(), Invalid> {
    let name = policy.metadata.name.clone().unwrap_or_default();
    let errors = of_policy(policy);
    if errors.is_empty() { Ok(()) } else { Err(Invalid { kind: super::POLICY_KIND, name, errors }) }
}

/// `binding`, or why the API server refuses it.
pub fn binding(binding: &ValidatingAdmissionPolicyBinding) -> Result<(), Invalid> {
    let name = binding.metadata.name.clone().unwrap_or_default();
    let errors = of_binding(binding);
    if errors.is_empty() { Ok(()) } else { Err(Invalid { kind: super::BINDING_KIND, name, errors }) }
}

/// The field errors of `policy`, in the API server's order and words.
fn of_policy(policy: &ValidatingAdmissionPolicy) -> Vec<String> {
    let mut errors = Errors::default();
    let name = errors.object_name(&policy.metadata);
    // No spec is an empty one, as the API server reads it.
    let default = Default::default();
    let spec: &ValidatingAdmissionPolicySpec = policy.spec.as_ref().unwrap_or(&default);
    if let Some(failure) = &spec.failure_policy {
        errors.unsupported("spec.failurePolicy", failure, &["Fail", "Ignore"]);
    }
    if let Some(kind) = &spec.param_kind {
        if kind.api_version.as_deref().unwrap_or_default().is_empty() {
            errors.required("spec.paramKind.apiVersion", "");
        }
        if kind.kind.as_deref().unwrap_or_default().is_empty() {
            errors.required("spec.paramKind.kind", "");
        }
    }
    match &spec.match_constraints {
        None => errors.required("spec.matchConstraints", ""),
        Some(constraints) => {
            errors.match_resources("spec.matchConstraints", constraints);
            // At least one rule: it gives the expressions their types.
            if constraints.resource_rules.as_deref().unwrap_or_default().is_empty() {
                errors.required("spec.matchConstraints.resourceRules", "");
            }
        }
    }
    let conditions = spec.match_conditions.as_deref().unwrap_or_default();
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errors.push(
            "spec.matchConditions",
            format!("Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items", conditions.len()),
        );
    }
    let mut names = BTreeSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = format!("spec.matchConditions[{i}]");
        if condition.expression.trim().is_empty() {
            errors.required(&format!("{at}.expression"), "");
        }
        if condition.name.is_empty() {
            errors.required(&format!("{at}.name"), "");
        } else {
            errors.qualified_name(&format!("{at}.name"), &condition.name);
            if !names.insert(condition.name.as_str()) {
                errors.push(&format!("{at}.name"), format!("Duplicate value: {}", go_quoted(&condition.name)));
            }
        }
    }
    for (i, variable) in spec.variables.iter().flatten().enumerate() {
        let at = format!("spec.variables[{i}]");
        if variable.name.trim().is_empty() {
            errors.required(&format!("{at}.name"), "name is not specified");
        } else if !cel_identifier(&variable.name) {
            errors.invalid(&format!("{at}.name"), &variable.name, "must be a valid CEL identifier");
        }
        if variable.expression.trim().is_empty() {
            errors.required(&format!("{at}.expression"), "expression is not specified");
        }
    }
    let validations = spec.validations.as_deref().unwrap_or_default();
    let annotations = spec.audit_annotations.as_deref().unwrap_or_default();
    if validations.is_empty() && annotations.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        errors.required("spec.validations", detail);
        errors.required("spec.auditAnnotations", detail);
        return errors.0;
    }
    for (i, validation) in validations.iter().enumerate() {
        errors.validation(&format!("spec.validations[{i}]"), validation);
    }
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        // The API server prints the list as JSON of its internal type.
        let list: Vec<_> = annotations
            .iter()
            .map(|a| serde_json::json!({"Key": a.key, "ValueExpression": a.value_expression}))
            .collect();
        let list = go_json(&list);
        errors.push(
            "spec.auditAnnotations",
            format!("Invalid value: {list}: must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        );
    }
    let mut keys = BTreeSet::new();
    for (i, annotation) in annotations.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        if name.is_empty() {
            errors.invalid(&format!("{at}.key"), &annotation.key, "requires metadata.name be non-empty");
        } else {
            errors.qualified_name(&format!("{at}.key"), &format!("{name}/{}", annotation.key));
        }
        let value = annotation.value_expression.trim();
        if value.is_empty() {
            errors.required(&format!("{at}.valueExpression"), "valueExpression is not specified");
        } else if value.len() > MAX_AUDIT_ANNOTATION_VALUE {
            let detail = format!("must not exceed {MAX_AUDIT_ANNOTATION_VALUE} bytes in length");
            errors.required(&format!("{at}.valueExpression"), &detail);
        }
        if !keys.insert(annotation.key.as_str()) {
            errors.push(&format!("{at}.key"), format!("Duplicate value: {}", go_quoted(&annotation.key)));
        }
    }
    errors.0
}

/// The field errors of `binding`, in the API server's order and words.
fn of_binding(binding: &ValidatingAdmissionPolicyBinding) -> Vec<String> {
    let mut errors = Errors::default();
    errors.object_name(&binding.metadata);
    let spec = &binding.spec;
    errors.name("spec.policyName", &spec.policy_name, false);
    if let Some(param_ref) = &spec.param_ref {
        errors.param_ref(param_ref);
    }
    if let Some(resources) = &spec.match_resources {
        errors.match_resources("spec.matchResources", resources);
    }
    let actions = &spec.validation_actions;
    let mut seen = BTreeSet::new();
    for (i, action) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{i}]");
        errors.unsupported(&at, action, &["Audit", "Deny", "Warn"]);
        if !seen.insert(action.as_str()) {
            errors.push(&at, format!("Duplicate value: {}", go_quoted(action)));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        let detail = "must not contain both Deny and Warn (repeating the same validation failure information in the \
                      API response and headers serves no purpose)";
        errors.invalid_list("spec.validationActions", actions, detail);
    }
    if seen.is_empty() {
        errors.required("spec.validationActions", "at least one validation action is required");
    }
    errors.0
}

/// Field errors, each `<field>: <what is wrong>`.
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn push(&mut self, field: &str, error: String) {
        self.0.push(format!("{field}: {error}"));
    }

    fn required(&mut self, field: &str, detail: &str) {
        let detail = if detail.is_empty() { String::new() } else { format!(": {detail}") };
        self.push(field, format!("Required value{detail}"));
    }

    /// `value` unless it is one of `supported` (in the API server's
    /// order: sorted).
    fn unsupported(&mut self, field: &str, value: &str, supported: &[&str]) {
        if !supported.contains(&value) {
            let supported: Vec<String> = supported.iter().map(|s| go_quoted(s)).collect();
            self.push(
                field,
                format!("Unsupported value: {}: supported values: {}", go_json(value), supported.join(", ")),
            );
        }
    }

    fn qualified_name(&mut self, field: &str, name: &str) {
        for problem in qualified_name(name) {
            self.invalid(field, name, &problem);
        }
    }

    fn validation(&mut self, at: &str, validation: &Validation) {
        if validation.expression.trim().is_empty() {
            self.required(&format!("{at}.expression"), "expression is not specified");
        }
        let message_expression = validation.message_expression.as_deref().unwrap_or_default();
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            self.invalid(&format!("{at}.messageExpression"), message_expression, "must be non-empty if specified");
        }
        let message = validation.message.as_deref().unwrap_or_default();
        if !message.is_empty() && message.trim().is_empty() {
            self.invalid(&format!("{at}.message"), message, "must be non-empty if specified");
        } else if message.trim().contains(['\n', '\r']) {
            self.invalid(&format!("{at}.message"), message, "must not contain line breaks");
        }
        if let Some(reason) = &validation.reason {
            self.unsupported(&format!("{at}.reason"), reason, &["Forbidden", "Invalid", "RequestEntityTooLarge"]);
        }
    }

    fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.push(field, format!("Invalid value: {}: {detail}", go_quoted(value)));
    }

    /// As [`Errors::invalid`], for a list, which the API server prints as
    /// JSON.
    fn invalid_list(&mut self, field: &str, values: &[String], detail: &str) {
        let values = go_json(values);
        self.push(field, format!("Invalid value: {values}: {detail}"));
    }

    /// An object's `name`, or its `generateName` without one; the name
    /// it will have (a generated one ends in five characters of the API
    /// server's choice, all valid in a name).
    fn object_name(&mut self, metadata: &ObjectMeta) -> String {
        let name = metadata.name.as_deref().unwrap_or_default();
        match metadata.generate_name.as_deref().unwrap_or_default() {
            prefix if name.is_empty() && !prefix.is_empty() => {
                // As the API server: a trailing `-` checked as if followed by more.
                let masked = match prefix.get(..prefix.len().saturating_sub(2)) {
                    Some(kept) if prefix.len() > 1 && prefix.ends_with('-') => format!("{kept}a"),
                    _ => prefix.to_owned(),
                };
                for problem in dns_subdomain(&masked, "characters") {
                    self.invalid("metadata.generateName", prefix, &problem);
                }
                format!("{prefix}xxxxx")
            }
            _ => {
                self.name("metadata.name", name, true);
                name.to_owned()
            }
        }
    }

    /// A name that must be a DNS subdomain; `object`: an object's own
    /// name, which says `generateName` when missing.
    fn name(&mut self, field: &str, name: &str, object: bool) {
        if name.is_empty() {
            let detail = if object { "name or generateName is required" } else { "" };
            return self.required(field, detail);
        }
        for problem in dns_subdomain(name, "characters") {
            self.invalid(field, name, &problem);
        }
    }

    fn match_resources(&mut self, at: &str, resources: &MatchResources) {
        if let Some(policy) = &resources.match_policy {
            self.unsupported(&format!("{at}.matchPolicy"), policy, &["Equivalent", "Exact"]);
        }
        for (list, rules) in
            [("resourceRules", &resources.resource_rules), ("excludeResourceRules", &resources.exclude_resource_rules)]
        {
            for (i, rule) in rules.iter().flatten().enumerate() {
                self.rule(&format!("{at}.{list}[{i}]"), rule);
            }
        }
    }

    fn rule(&mut self, at: &str, rule: &NamedRuleWithOperations) {
        let mut names = BTreeSet::new();
        for (i, name) in rule.resource_names.iter().flatten().enumerate() {
            let field = format!("{at}.resourceNames[{i}]");
            for problem in path_segment(name) {
                self.invalid(&field, name, &problem);
            }
            if !names.insert(name.as_str()) {
                self.push(&field, format!("Duplicate value: {}", go_quoted(name)));
            }
        }
        let operations = rule.operations.as_deref().unwrap_or_default();
        if operations.is_empty() {
            self.required(&format!("{at}.operations"), "");
        }
        if operations.len() > 1 && operations.iter().any(|o| o == "*") {
            self.invalid_list(
                &format!("{at}.operations"),
                operations,
                "if '*' is present, must not specify other operations",
            );
        }
        for (i, operation) in operations.iter().enumerate() {
            self.unsupported(&format!("{at}.operations[{i}]"), operation, &OPERATIONS);
        }

        for (field, values, what) in
            [("apiGroups", &rule.api_groups, "API groups"), ("apiVersions", &rule.api_versions, "API versions")]
        {
            let values = values.as_deref().unwrap_or_default();
            if values.is_empty() {
                self.required(&format!("{at}.{field}"), "");
            }
            if values.len() > 1 && values.iter().any(|v| v == "*") {
                let detail = format!("if '*' is present, must not specify other {what}");
                self.invalid_list(&format!("{at}.{field}"), values, &detail);
            }
        }
        for (i, version) in rule.api_versions.iter().flatten().enumerate() {
            if version.is_empty() {
                self.required(&format!("{at}.apiVersions[{i}]"), "");
            }
        }
        self.resources(&format!("{at}.resources"), rule.resources.as_deref().unwrap_or_default());
        if let Some(scope) = &rule.scope {
            self.unsupported(&format!("{at}.scope"), scope, &["*", "Cluster", "Namespaced"]);
        }
    }

    /// A rule's `resources`, subresources allowed (`x/y`, `x/*`, `*/y`).
    fn resources(&mut self, at: &str, resources: &[String]) {
        if resources.is_empty() {
            self.required(at, "");
        }
        let (mut any_sub, mut any_resource) = (BTreeSet::new(), BTreeSet::new());
        let (mut double, mut single, mut plain) = (false, false, false);
        for (i, resource) in resources.iter().enumerate() {
            if resource.is_empty() {
                self.required(&format!("{at}[{i}]"), "");
                continue;
            }
            double |= resource == "*/*";
            single |= resource == "*";
            let Some((res, sub)) = resource.split_once('/') else {
                // As the API server: the last plain resource decides.
                plain = resource != "*";
                continue;
            };
            if any_sub.contains(res) {
                self.invalid(
                    &format!("{at}[{i}]"),
                    resource,
                    &format!("if '{res}/*' is present, must not specify {resource}"),
                );
            }
            if any_resource.contains(sub) {
                self.invalid(
                    &format!("{at}[{i}]"),
                    resource,
                    &format!("if '*/{sub}' is present, must not specify {resource}"),
                );
            }
            if sub == "*" {
                any_sub.insert(res);
            }
            if res == "*" {
                any_resource.insert(sub);
            }
        }
        if resources.len() > 1 && double {
            self.invalid_list(at, resources, "if '*/*' is present, must not specify other resources");
        }
        if single && plain {
            self.invalid_list(
                at,
                resources,
                "if '*' is present, must not specify other resources without subresources",
            );
        }
    }

    fn param_ref(&mut self, param_ref: &ParamRef) {
        let at = "spec.paramRef";
        let name = param_ref.name.as_deref().unwrap_or_default();
        for problem in path_segment(name) {
            self.invalid(&format!("{at}.name"), name, &problem);
        }
        let exclusive = "Forbidden: name and selector are mutually exclusive".to_owned();
        if !name.is_empty() && param_ref.selector.is_some() {
            self.push(&format!("{at}.name"), exclusive.clone());
            self.push(&format!("{at}.selector"), exclusive);
        }
        if name.is_empty() && param_ref.selector.is_none() {
            self.required(at, "one of name or selector must be specified");
        }
        match param_ref.parameter_not_found_action.as_deref().unwrap_or_default() {
            "" => self.required(&format!("{at}.parameterNotFoundAction"), ""),
            action => self.unsupported(&format!("{at}.parameterNotFoundAction"), action, &["Deny", "Allow"]),
        }
    }
}

/// What is wrong with `name` as a DNS subdomain (RFC 1123), in the API
/// server's words, which count its length in `unit` (an object's name in
/// characters, a label key's prefix in bytes: two generations of its
/// validation code).
fn dns_subdomain(name: &str, unit: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 253 {
        problems.push(format!("must be no more than 253 {unit}"));
    }
    let label = |l: &str| {
        let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        l.starts_with(alphanumeric) && l.ends_with(alphanumeric) && l.chars().all(|c| alphanumeric(c) || c == '-')
    };
    if !name.split('.').all(label) {
        problems.push(DNS_SUBDOMAIN.to_owned());
    }
    problems
}

/// What is wrong with `name` as a qualified name (a label key: an
/// optional DNS subdomain prefix and `/`, then a name part), in the API
/// server's words.
fn qualified_name(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('/').collect();
    let (prefix, name) = match parts[..] {
        [name] => (None, name),
        [prefix, name] => (Some(prefix), name),
        _ => {
            return vec![
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                 with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                 validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
                    .to_owned(),
            ];
        }
    };
    let mut problems = Vec::new();
    match prefix {
        Some("") => problems.push("prefix part must be non-empty".to_owned()),
        Some(prefix) => problems.extend(dns_subdomain(prefix, "bytes").into_iter().map(|p| format!("prefix part {p}"))),
        None => {}
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 bytes".to_owned());
    }
    if !is_name_part(name) {
        problems.push(NAME_PART.to_owned());
    }
    problems
}

/// Whether `name` has the characters of a qualified name's name part (a
/// label key's, without prefix): alphanumerics, `-`, `_` and `.`, between
/// alphanumerics. Its length is the caller's to check.
pub(crate) fn is_name_part(name: &str) -> bool {
    let edge = |c: char| c.is_ascii_alphanumeric();
    name.starts_with(edge)
        && name.ends_with(edge)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// What is wrong with `name` as a path segment (a resource name), in the
/// API server's words.
fn path_segment(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"].iter().filter(|c| name.contains(*c)).map(|c| format!("may not contain '{c}'")).collect()
}

/// Whether `name` is a CEL identifier that is not a reserved word.
fn cel_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !CEL_RESERVED.contains(&name)
}

/// `value` as Go's `json.Marshal` writes it, as the API server's field
/// errors print a value of a named type or a list: serde_json's JSON with
/// `<`, `>` and `&` escaped, as Go escapes them for HTML.
fn go_json(value: &(impl serde::Serialize + ?Sized)) -> String {
    let json = serde_json::to_string(value).unwrap_or_default();
    json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// `value` as Go's `%q` prints it, as the API server's field errors print
/// a plain string.
fn go_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_control() && c.is_ascii() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
