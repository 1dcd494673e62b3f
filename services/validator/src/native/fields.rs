//! What the API server's validation refuses in a ValidatingAdmissionPolicy
//! or its binding besides CEL (compiling checks that): names, the shape
//! of the rules, match conditions, variables, messages and `paramRef`. The
//! errors are the API server's field errors, word for word
//! (`k8s.io/kubernetes/pkg/apis/admissionregistration/validation`), so that
//! `check` says what `kubectl apply` would say, and a generated pair the
//! API server would refuse is never handed to it. Every error is given,
//! not the first, as the API server gives them.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ParamRef, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};

/// The API server's limit on a policy's match conditions.
const MAX_MATCH_CONDITIONS: usize = 64;
/// The API server's limit on a policy's audit annotations.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
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
#[error("{kind}.admissionregistration.k8s.io {} is invalid: {}", quoted(name), listed(errors))]
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
    errors.name("metadata.name", policy.metadata.name.as_deref().unwrap_or_default(), true);
    let Some(spec) = &policy.spec else { return errors.0 };
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
            for problem in qualified_name(&condition.name) {
                errors.invalid(&format!("{at}.name"), &condition.name, &problem);
            }
            if !names.insert(condition.name.as_str()) {
                errors.push(&format!("{at}.name"), format!("Duplicate value: {}", quoted(&condition.name)));
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
    for (i, validation) in spec.validations.iter().flatten().enumerate() {
        let at = format!("spec.validations[{i}]");
        if validation.expression.trim().is_empty() {
            errors.required(&format!("{at}.expression"), "expression is not specified");
        }
        let message_expression = validation.message_expression.as_deref().unwrap_or_default();
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errors.invalid(&format!("{at}.messageExpression"), message_expression, "must be non-empty if specified");
        }
        let message = validation.message.as_deref().unwrap_or_default();
        if !message.is_empty() && message.trim().is_empty() {
            errors.invalid(&format!("{at}.message"), message, "must be non-empty if specified");
        } else if message.trim().contains(['\n', '\r']) {
            errors.invalid(&format!("{at}.message"), message, "must not contain line breaks");
        }
    }
    let annotations = spec.audit_annotations.as_deref().unwrap_or_default();
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        // The API server prints the whole list as its value; the count is what matters.
        errors.push(
            "spec.auditAnnotations",
            format!(
                "Invalid value: {} items: must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations",
                annotations.len()
            ),
        );
    }
    errors.0
}

/// The field errors of `binding`, in the API server's order and words.
fn of_binding(binding: &ValidatingAdmissionPolicyBinding) -> Vec<String> {
    let mut errors = Errors::default();
    errors.name("metadata.name", binding.metadata.name.as_deref().unwrap_or_default(), true);
    let spec = &binding.spec;
    errors.name("spec.policyName", &spec.policy_name, false);
    if let Some(param_ref) = &spec.param_ref {
        errors.param_ref(param_ref);
    }
    if let Some(resources) = &spec.match_resources {
        errors.match_resources("spec.matchResources", resources);
    }
    let mut seen = BTreeSet::new();
    for (i, action) in spec.validation_actions.iter().enumerate() {
        if !seen.insert(action.as_str()) {
            errors.push(&format!("spec.validationActions[{i}]"), format!("Duplicate value: {}", quoted(action)));
        }
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

    fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.push(field, format!("Invalid value: {}: {detail}", quoted(value)));
    }

    /// As [`Errors::invalid`], for a list, which the API server prints as
    /// JSON.
    fn invalid_list(&mut self, field: &str, values: &[String], detail: &str) {
        let values = serde_json::to_string(values).unwrap_or_default();
        self.push(field, format!("Invalid value: {values}: {detail}"));
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
        for (list, rules) in
            [("resourceRules", &resources.resource_rules), ("excludeResourceRules", &resources.exclude_resource_rules)]
        {
            for (i, rule) in rules.iter().flatten().enumerate() {
                self.rule(&format!("{at}.{list}[{i}]"), rule);
            }
        }
    }

    fn rule(&mut self, at: &str, rule: &NamedRuleWithOperations) {
        let operations = rule.operations.as_deref().unwrap_or_default();
        if operations.is_empty() {
            self.required(&format!("{at}.operations"), "");
        }
        for (i, operation) in operations.iter().enumerate() {
            if !OPERATIONS.contains(&operation.as_str()) {
                let supported: Vec<String> = OPERATIONS.iter().map(|o| quoted(o)).collect();
                let field = format!("{at}.operations[{i}]");
                self.push(
                    &field,
                    format!("Unsupported value: {}: supported values: {}", quoted(operation), supported.join(", ")),
                );
            }
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
        let resources = rule.resources.as_deref().unwrap_or_default();
        if resources.is_empty() {
            self.required(&format!("{at}.resources"), "");
        }
        for (i, resource) in resources.iter().enumerate() {
            if resource.is_empty() {
                self.required(&format!("{at}.resources[{i}]"), "");
            }
        }
    }

    fn param_ref(&mut self, param_ref: &ParamRef) {
        let at = "spec.paramRef";
        let name = param_ref.name.as_deref().unwrap_or_default();
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
            "Deny" | "Allow" => {}
            other => self.push(
                &format!("{at}.parameterNotFoundAction"),
                format!("Unsupported value: {}: supported values: \"Deny\", \"Allow\"", quoted(other)),
            ),
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
    let edge = |c: char| c.is_ascii_alphanumeric();
    let valid = name.starts_with(edge)
        && name.ends_with(edge)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        problems.push(NAME_PART.to_owned());
    }
    problems
}

/// Whether `name` is a CEL identifier that is not a reserved word.
fn cel_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !CEL_RESERVED.contains(&name)
}

/// `value` as Go's `%q` prints it, as the API server's field errors do.
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && c.is_ascii() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
