//! What the API server's validation refuses in a ValidatingAdmissionPolicy
//! or its binding: expressions that do not compile (syntax and undeclared
//! names, `portcullis_cel::refusal`, at the field the API server names,
//! with its `compilation failed: ...`), names, the shape
//! of the rules, label selectors (`namespaceSelector`, `objectSelector`,
//! `paramRef.selector`: label keys and values, operators and their
//! values), `paramKind`'s `apiVersion` and `kind`, match conditions,
//! variables, messages, validation actions and `paramRef`. The errors are
//! the API server's field errors, word for word
//! (`k8s.io/kubernetes/pkg/apis/admissionregistration/validation`), so that
//! `check` says what `kubectl apply` would say, and a generated pair the
//! API server would refuse for one of these is not handed to it. Every
//! error is given, not the first, as the API server gives them, each once.
//! These checks are the only place those rules are written: compiling
//! ([`super::compile`]) maps the values they take, and words what it
//! cannot take with these errors where they find it. One order cannot be
//! followed: the API server checks a selector's `matchLabels` in Go's
//! random map order, here in the order of their keys.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use portcullis_cel::refusal::{Declarations, Returns, compilation_failed, compiled_variable};
use portcullis_cel::typecheck::Variable;

use formats::{cel_identifier, dns_subdomain, path_segment, qualified_name};
use go::{json as go_json, quoted as go_quoted};

mod formats;
mod go;
mod selectors;
#[cfg(test)]
mod tests;

/// The API server's limit on a policy's match conditions.
const MAX_MATCH_CONDITIONS: usize = 64;
/// The API server's limit on a policy's audit annotations.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// The API server's limit on an audit annotation's value expression.
const MAX_AUDIT_ANNOTATION_VALUE: usize = 5 * 1024;
const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];

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

impl Invalid {
    /// The refusal of an object of `kind` named `name` that compiling
    /// cannot take though these checks found nothing wrong with it: they
    /// and compiling disagree, a bug, said as the API server says one.
    pub fn unexplained(kind: &'static str, name: &str) -> Self {
        let error = "spec: Internal error: Portcullis cannot compile a value its field checks take, a bug to report";
        Self { kind, name: name.to_owned(), errors: vec![error.to_owned()] }
    }

    /// `errors` of the object `kind` named `name`, each once, as the API
    /// server's aggregate lists them; `None` without any.
    fn of(kind: &'static str, name: &str, errors: Vec<String>) -> Option<Self> {
        let mut seen = BTreeSet::new();
        let errors: Vec<String> = errors.into_iter().filter(|e| seen.insert(e.clone())).collect();
        (!errors.is_empty()).then(|| Self { kind, name: name.to_owned(), errors })
    }
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
    let name = policy.metadata.name.as_deref().unwrap_or_default();
    Invalid::of(super::POLICY_KIND, name, of_policy(policy)).map_or(Ok(()), Err)
}

/// `binding`, or why the API server refuses it.
pub fn binding(binding: &ValidatingAdmissionPolicyBinding) -> Result<(), Invalid> {
    let name = binding.metadata.name.as_deref().unwrap_or_default();
    Invalid::of(super::BINDING_KIND, name, of_binding(binding)).map_or(Ok(()), Err)
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
        errors.param_kind(kind);
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
    // What the expressions may use: `params` only with a `paramKind`,
    // `authorizer` everywhere but in a message expression, and the
    // variables everywhere but in a match condition (a variable only
    // those before it, each typed by its expression where it compiles).
    let base =
        Declarations { params: spec.param_kind.is_some(), authorizer: true, variables: None, returns: Returns::Bool };
    // The variables' errors, said after the match conditions' as the API
    // server orders them, found while each variable is typed for those
    // after it.
    let mut variables: Vec<Variable> = Vec::new();
    let mut variable_errors = Errors::default();
    for (i, variable) in spec.variables.iter().flatten().enumerate() {
        let at = format!("spec.variables[{i}]");
        if variable.name.trim().is_empty() {
            variable_errors.required(&format!("{at}.name"), "name is not specified");
        } else if !cel_identifier(&variable.name) {
            variable_errors.invalid(&format!("{at}.name"), &variable.name, "must be a valid CEL identifier");
        }
        let mut value = None;
        if variable.expression.trim().is_empty() {
            variable_errors.required(&format!("{at}.expression"), "expression is not specified");
        } else {
            let before = Declarations { variables: Some(&variables), ..base };
            match compiled_variable(&variable.expression, before) {
                Ok(typed) => value = typed,
                Err(refused) => variable_errors.invalid(&format!("{at}.expression"), &variable.expression, &refused),
            }
        }
        variables.push(Variable { name: &variable.name, value });
    }
    // A policy without variables is compiled without `variables`.
    let all = Declarations { variables: (!variables.is_empty()).then_some(variables.as_slice()), ..base };
    let mut names = BTreeSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = format!("spec.matchConditions[{i}]");
        let expression = condition.expression.trim();
        if expression.is_empty() {
            errors.required(&format!("{at}.expression"), "");
        } else {
            // The API server compiles, and quotes, the trimmed expression.
            let conditions = Declarations { variables: None, ..all };
            errors.compiles(&format!("{at}.expression"), expression, expression, conditions);
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
    errors.0.extend(variable_errors.0);
    let validations = spec.validations.as_deref().unwrap_or_default();
    let annotations = spec.audit_annotations.as_deref().unwrap_or_default();
    if validations.is_empty() && annotations.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        errors.required("spec.validations", detail);
        errors.required("spec.auditAnnotations", detail);
        return errors.0;
    }
    for (i, validation) in validations.iter().enumerate() {
        errors.validation(&format!("spec.validations[{i}]"), validation, all);
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
        } else {
            // Compiled trimmed, quoted as written.
            let value_of = Declarations { returns: Returns::StringOrNull, ..all };
            errors.compiles(&format!("{at}.valueExpression"), value, &annotation.value_expression, value_of);
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
            // A named type (`ValidationAction`): printed as JSON.
            errors.push(&at, format!("Duplicate value: {}", go_json(action)));
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

    fn validation(&mut self, at: &str, validation: &Validation, declarations: Declarations<'_>) {
        let expression = &validation.expression;
        if expression.trim().is_empty() {
            self.required(&format!("{at}.expression"), "expression is not specified");
        } else {
            self.compiles(&format!("{at}.expression"), expression, expression, declarations);
        }
        let message_expression = validation.message_expression.as_deref().unwrap_or_default();
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            self.invalid(&format!("{at}.messageExpression"), message_expression, "must be non-empty if specified");
        } else if !message_expression.is_empty() {
            let declarations = Declarations { authorizer: false, returns: Returns::String, ..declarations };
            self.compiles(&format!("{at}.messageExpression"), message_expression, message_expression, declarations);
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

    /// `source` unless the API server's compiler refuses it, with the
    /// declarations of `field`; the error quotes `value` (the source as
    /// written, where the API server compiles it trimmed).
    fn compiles(&mut self, field: &str, source: &str, value: &str, declarations: Declarations<'_>) {
        if let Some(detail) = compilation_failed(source, declarations) {
            self.invalid(field, value, &detail);
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
        // Both default to the empty selector: never missing.
        for (field, selector) in
            [("namespaceSelector", &resources.namespace_selector), ("objectSelector", &resources.object_selector)]
        {
            if let Some(selector) = selector {
                self.label_selector(&format!("{at}.{field}"), selector);
            }
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
}
