//! Built-in rules as the CEL a pushed-down policy carries: each check a
//! validation with the webhook's message, in the webhook's order (labels,
//! annotations, replicas, Services, then the pod rules of [`pods`]).

use k8s_openapi::api::admissionregistration::v1 as reg;

use super::generate::NotPushable;
use super::pods;
use crate::rules::{self, REPLICATED_KINDS, Rules};

/// The variable holding the replicas the rule judges.
const REPLICAS: &str = "portcullisReplicas";

/// The variables and validations that check `rules` as the webhook does.
pub fn as_cel(rules: &Rules) -> Result<(Vec<reg::Variable>, Vec<reg::Validation>), NotPushable> {
    let (mut variables, mut validations) = (Vec::new(), Vec::new());
    for (field, required) in [("labels", &rules.required_labels), ("annotations", &rules.required_annotations)] {
        let singular = &field[..field.len() - 1];
        for (key, pattern) in required {
            let present = format!("has(object.metadata.{field}) && {} in object.metadata.{field}", lit(key));
            validations.push(validation(&present, Static(format!("{singular} {key:?} is required"))));
            if !pattern.as_str().is_empty() {
                let value = format!("object.metadata.{field}[{}]", lit(key));
                let full = format!("^(?:{})$", pattern.as_str());
                let message = format!(
                    "{} + {} + {}",
                    lit(&format!("{singular} {key:?} is ")),
                    quoted(&value),
                    lit(&format!(", which does not match {:?}", pattern.as_str()))
                );
                validations
                    .push(validation(&format!("!({present}) || {value}.matches({})", lit(&full)), Dynamic(message)));
            }
        }
    }
    if let Some(bounds) = rules.replicas {
        let kinds = REPLICATED_KINDS.iter().map(|k| lit(k)).collect::<Vec<_>>().join(", ");
        variables.push(reg::Variable {
            name: REPLICAS.into(),
            expression: format!(
                "request.kind.kind == 'Scale' ? (has(object.spec.replicas) ? object.spec.replicas : 0) : \
                 request.kind.kind in [{kinds}] ? (has(object.spec.replicas) ? object.spec.replicas : 1) : -1"
            ),
        });
        // -1: not a kind the rule judges (the API server refuses a
        // conditional that mixes int and null).
        let judged = format!("variables.{REPLICAS} == -1");
        let shown = format!("string(variables.{REPLICAS})");
        if let Some(min) = bounds.min {
            validations.push(validation(
                &format!("{judged} || variables.{REPLICAS} >= {min}"),
                Dynamic(format!("'spec.replicas is ' + {shown} + ', below the minimum of {min}'")),
            ));
        }
        if let Some(max) = bounds.max {
            validations.push(validation(
                &format!("{judged} || variables.{REPLICAS} <= {max}"),
                Dynamic(format!("'spec.replicas is ' + {shown} + ', above the maximum of {max}'")),
            ));
        }
    }
    if let Some(services) = &rules.services {
        let service = "request.kind.kind != 'Service'";
        if !services.forbidden_types.is_empty() {
            let forbidden = services.forbidden_types.iter().map(|t| lit(t)).collect::<Vec<_>>().join(", ");
            let kind = "(has(object.spec.type) ? object.spec.type : 'ClusterIP')";
            validations.push(validation(
                &format!("{service} || !({kind} in [{forbidden}])"),
                Dynamic(format!("'spec.type ' + {kind} + ' is not allowed'")),
            ));
        }
        if services.forbid_external_ips {
            validations.push(validation(
                &format!("{service} || !has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0"),
                Static("spec.externalIPs is not allowed".into()),
            ));
        }
    }
    let (pod_variables, pod_validations) = pods::as_cel(rules);
    variables.extend(pod_variables);
    validations.extend(pod_validations);
    Ok((variables, validations))
}

/// A validation's message: fixed, or a CEL expression.
pub(super) enum Message {
    Static(String),
    Dynamic(String),
}
pub(super) use Message::{Dynamic, Static};

pub(super) fn validation(expression: &str, message: Message) -> reg::Validation {
    let (message, message_expression) = match message {
        Static(m) => (Some(m), None),
        Dynamic(e) => (None, Some(e)),
    };
    reg::Validation { expression: expression.into(), message, message_expression, reason: None }
}

/// CEL for the string `expression` in double quotes, escaped as the
/// webhook's messages escape it ([`rules::quoted`], by [`rules::ESCAPES`]).
pub(super) fn quoted(expression: &str) -> String {
    let escaped = rules::ESCAPES
        .iter()
        .fold(format!("({expression})"), |e, (c, by)| format!("{e}.replace({}, {})", lit(&c.to_string()), lit(by)));
    format!("'\"' + {escaped} + '\"'")
}

/// `s` as a CEL string literal.
pub(super) fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Other control characters as escapes, never raw in the source.
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
