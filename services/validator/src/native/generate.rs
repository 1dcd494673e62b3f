//! A `ValidatorPolicy` as the native ValidatingAdmissionPolicy and binding
//! that make the API server enforce it in-process, without a webhook call:
//! the core of pushing policies down. Only what the API server can do is
//! translated, the built-in rules that CEL expresses included
//! ([`builtin`]); anything else (the other built-in rules, selection by
//! kind) is refused with the field that stands in the way, never
//! approximated.

use k8s_openapi::api::admissionregistration::v1 as reg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use portcullis_admission::names::{GENERATED_PREFIX, MANAGED_BY};
use portcullis_admission::selector;
use portcullis_cel::cost::DEFAULT_LIMIT;

use super::builtin;
use crate::cel;
use crate::policy::{Action, FailurePolicy, PolicySpec};

/// The label the API server sets on every namespace: its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Why a policy cannot be enforced by the API server alone: the field,
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct NotPushable {
    /// The field that stands in the way.
    pub field: String,
    /// Why.
    pub why: &'static str,
}

/// The generated pair.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The policy.
    pub policy: reg::ValidatingAdmissionPolicy,
    /// Its binding, of the same name.
    pub binding: reg::ValidatingAdmissionPolicyBinding,
}

/// The name of the pair generated for the policy `name` (in `namespace`,
/// for a NamespacedValidatorPolicy).
pub fn generated_name(name: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{GENERATED_PREFIX}{ns}.{name}"),
        None => format!("{GENERATED_PREFIX}{name}"),
    }
}

/// The VAP and binding enforcing the policy `name` (in `namespace`) with
/// `spec`, outside `system_namespaces` unless it includes them, as the
/// webhook would. `Err` names the first field the API server cannot
/// enforce (or, should the generated CEL not compile, says so).
pub fn generate(
    name: &str,
    namespace: Option<&str>,
    spec: &PolicySpec,
    system_namespaces: &[String],
) -> Result<Generated, NotPushable> {
    let refuse = |field: String, why| Err(NotPushable { field, why });
    let m = &spec.matching;
    let operations =
        if m.operations.is_empty() { vec!["CREATE".into(), "UPDATE".into()] } else { m.operations.clone() };
    if namespace.is_some_and(|ns| system_namespaces.iter().any(|s| s == ns)) {
        return refuse("metadata.namespace".into(), "a policy in a system namespace applies nowhere in the webhook");
    }
    if let Some(i) = spec.validations.iter().position(|v| v.reason == Some(cel::Reason::Unauthorized)) {
        return refuse(
            format!("spec.validations[{i}].reason"),
            "a ValidatingAdmissionPolicy's reason is Forbidden, Invalid or RequestEntityTooLarge, not Unauthorized",
        );
    }
    let (rule_variables, rule_validations) = builtin::as_cel(&spec.rules)?;
    if !rule_validations.is_empty() && (!spec.match_conditions.is_empty() || spec.param_kind.is_some()) {
        let field = if spec.param_kind.is_some() { "spec.paramKind" } else { "spec.matchConditions" };
        return refuse(
            field.into(),
            "the webhook runs built-in rules whatever matchConditions and parameters say; a ValidatingAdmissionPolicy \
             would let them decide",
        );
    }
    if !rule_validations.is_empty() && operations.iter().any(|o| o == "DELETE" || o == "*") {
        return refuse(
            "spec.match.operations".into(),
            "built-in rules judge the old object of a DELETE, which a ValidatingAdmissionPolicy sees as `oldObject`",
        );
    }
    let scope = namespace.map(|_| "Namespaced".to_owned());
    let mut rules = Vec::new();
    if m.resources.is_empty() {
        return refuse(
            "spec.match.resources".into(),
            "a policy for every resource judges only what its webhook configuration sends the webhook; pushed down, \
             it would judge every request (Events, Leases, reviews): name the resources",
        );
    }
    for (i, rule) in m.resources.iter().enumerate() {
        let wide = rule.resources.is_empty() || rule.resources.iter().any(|r| r.contains('*'));
        if wide {
            return refuse(
                format!("spec.match.resources[{i}].resources"),
                "wildcards reach further in a ValidatingAdmissionPolicy (`x/*` also matches `x`) and every \
                 resource a webhook configuration never sends: name the resources",
            );
        }
        if !rule.kinds.is_empty() {
            return refuse(
                format!("spec.match.resources[{i}].kinds"),
                "a ValidatingAdmissionPolicy selects by resource, not by kind: name the resources instead",
            );
        }
        // Empty is every group or version in a ValidatorPolicy (its
        // default); the API server requires a VAP's rule to say `*`.
        let every = |list: &Vec<String>| if list.is_empty() { vec!["*".to_owned()] } else { list.clone() };
        rules.push(reg::NamedRuleWithOperations {
            api_groups: Some(every(&rule.api_groups)),
            api_versions: Some(every(&rule.api_versions)),
            resources: Some(rule.resources.clone()),
            operations: Some(operations.clone()),
            scope: scope.clone(),
            resource_names: None,
        });
    }
    if m.include_system_namespaces {
        return refuse(
            "spec.match.includeSystemNamespaces".into(),
            "the webhook configuration leaves the system namespaces out, so that a policy cannot lock the cluster's \
             own components out; pushed down, it would judge kube-system's requests too",
        );
    }
    let mut namespace_selector = m.namespace_selector.as_ref().map(to_k8s).unwrap_or_default();
    let mut left_out: Vec<String> = m.exclude_namespaces.clone();
    left_out.extend(system_namespaces.iter().cloned());
    let expressions = namespace_selector.match_expressions.get_or_insert_with(Vec::new);
    if let Some(own) = namespace {
        expressions.push(requirement("In", vec![own.to_owned()]));
    } else if !left_out.is_empty() {
        expressions.push(requirement("NotIn", left_out));
    }
    if expressions.is_empty() {
        namespace_selector.match_expressions = None;
    }
    let (param_kind, param_ref) = match (&spec.param_kind, &spec.param_ref) {
        (Some(kind), Some(reference)) => {
            let param_ref: reg::ParamRef = serde_json::from_value(reference.clone()).map_err(|_| NotPushable {
                field: "spec.paramRef".into(),
                why: "not a ValidatingAdmissionPolicyBinding paramRef",
            })?;
            let kind = reg::ParamKind { api_version: Some(kind.api_version.clone()), kind: Some(kind.kind.clone()) };
            (Some(kind), Some(param_ref))
        }
        _ => (None, None),
    };
    // A policy whose rules all stay in the webhook checks nothing here:
    // the API server refuses a VAP without validations or audit
    // annotations, and the field to name is the rules'.
    if rule_validations.is_empty() && spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        return refuse(
            "spec.rules".into(),
            "it checks nothing a ValidatingAdmissionPolicy can run, and the API server refuses one without \
             validations",
        );
    }
    let generated = generated_name(name, namespace);
    let metadata = ObjectMeta {
        name: Some(generated.clone()),
        labels: Some([("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned())].into()),
        ..Default::default()
    };
    let policy = reg::ValidatingAdmissionPolicy {
        metadata: metadata.clone(),
        spec: Some(reg::ValidatingAdmissionPolicySpec {
            failure_policy: Some(
                match spec.failure_policy {
                    FailurePolicy::Fail => "Fail",
                    FailurePolicy::Ignore => "Ignore",
                }
                .into(),
            ),
            match_constraints: Some(reg::MatchResources {
                resource_rules: Some(rules),
                namespace_selector: Some(namespace_selector),
                object_selector: m.object_selector.as_ref().map(to_k8s),
                match_policy: Some("Equivalent".into()),
                exclude_resource_rules: None,
            }),
            match_conditions: some(
                spec.match_conditions
                    .iter()
                    .map(|c| reg::MatchCondition { name: c.name.clone(), expression: c.expression.clone() }),
            ),
            // The built-in rules first: the webhook reports their findings first.
            variables: some(rule_variables.into_iter().chain(
                spec.variables.iter().map(|v| reg::Variable { name: v.name.clone(), expression: v.expression.clone() }),
            )),
            validations: some(rule_validations.into_iter().chain(spec.validations.iter().map(validation))),
            audit_annotations: some(
                spec.audit_annotations
                    .iter()
                    .map(|a| reg::AuditAnnotation { key: a.key.clone(), value_expression: a.value_expression.clone() }),
            ),
            param_kind,
        }),
        status: None,
    };
    let action = match spec.action {
        Action::Deny => "Deny",
        Action::Warn => "Warn",
        Action::Audit => "Audit",
    };
    let binding = reg::ValidatingAdmissionPolicyBinding {
        metadata,
        spec: reg::ValidatingAdmissionPolicyBindingSpec {
            policy_name: generated,
            validation_actions: vec![action.into()],
            param_ref,
            match_resources: None,
        },
    };
    // The pair is compiled and checked as `check` compiles and checks a
    // native one: what the API server would refuse is not handed to it.
    if let Err(refused) = super::compile(&policy, &binding, DEFAULT_LIMIT) {
        return refuse(
            format!("the generated ValidatingAdmissionPolicy ({})", portcullis_telemetry::error_chain(&refused)),
            "Portcullis generated a ValidatingAdmissionPolicy the API server would refuse, a bug to report",
        );
    }
    // The generated object's fields, which the message says: the indexes
    // of its validations follow the built-in rules pushed down first.
    if let Err(invalid) = super::fields::policy(&policy).and_then(|()| super::fields::binding(&binding)) {
        return refuse(format!("the generated {invalid}"), "the API server would refuse it");
    }
    Ok(Generated { policy, binding })
}

fn validation(v: &cel::Validation) -> reg::Validation {
    reg::Validation {
        expression: v.expression.clone(),
        message: v.message.clone(),
        message_expression: v.message_expression.clone(),
        // Said even when it is the default: a VAP's default is Invalid (422).
        reason: Some(format!("{:?}", v.reason.unwrap_or_default())),
    }
}

fn some<T>(items: impl Iterator<Item = T>) -> Option<Vec<T>> {
    let items: Vec<T> = items.collect();
    (!items.is_empty()).then_some(items)
}

fn requirement(operator: &str, values: Vec<String>) -> LabelSelectorRequirement {
    LabelSelectorRequirement { key: NAMESPACE_NAME_LABEL.into(), operator: operator.into(), values: Some(values) }
}

fn to_k8s(s: &selector::LabelSelector) -> LabelSelector {
    LabelSelector {
        match_labels: (!s.match_labels.is_empty()).then(|| s.match_labels.clone()),
        match_expressions: (!s.match_expressions.is_empty()).then(|| {
            s.match_expressions
                .iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: format!("{:?}", r.operator),
                    values: (!r.values.is_empty()).then(|| r.values.clone()),
                })
                .collect()
        }),
    }
}
