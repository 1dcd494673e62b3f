//! Built-in rules as the CEL a pushed-down policy carries: each check a
//! validation with the webhook's message, in the webhook's order (labels,
//! annotations, replicas, Services, resources). Rules not yet expressed in
//! CEL (images, pod security) keep a policy in the webhook, and say so.

use k8s_openapi::api::admissionregistration::v1 as reg;

use super::generate::NotPushable;
use crate::pods::POD_SPECS;
use crate::rules::{REPLICATED_KINDS, Resources, Rules};

/// The variable holding the replicas the rule judges.
const REPLICAS: &str = "portcullisReplicas";

/// The variables and validations that check `rules` as the webhook does.
pub fn as_cel(rules: &Rules) -> Result<(Vec<reg::Variable>, Vec<reg::Validation>), NotPushable> {
    for (set, field) in
        [(rules.images.is_some(), "spec.rules.images"), (rules.pod_security.is_some(), "spec.rules.podSecurity")]
    {
        if set {
            return Err(NotPushable { field: field.into(), why: "this built-in rule is not expressed in CEL yet" });
        }
    }
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
                    "{} + {value} + {}",
                    lit(&format!("{singular} {key:?} is \"")),
                    lit(&format!("\", which does not match {:?}", pattern.as_str()))
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
    if let Some(resources) = &rules.resources {
        let (more_variables, validation) = resources_as_cel(resources);
        variables.extend(more_variables);
        validations.extend(validation);
    }
    Ok((variables, validations))
}

/// The variables holding the pod spec the resource rule judges, where it
/// is named in messages, and its init and regular containers in the
/// webhook's order (ephemeral containers are not judged).
const POD_SPEC: &str = "portcullisPodSpec";
const POD_PATH: &str = "portcullisPodPath";
const INIT: &str = "portcullisInitContainers";
const LACKING: &str = "portcullisLackingResources";

/// `spec.rules.resources` as one validation whose message is the webhook's
/// first finding: the first container (init containers first) lacking a
/// name, and the first name it lacks (requests, then limits, in order).
fn resources_as_cel(rule: &Resources) -> (Vec<reg::Variable>, Option<reg::Validation>) {
    let required: Vec<(&str, &str)> = [("requests", &rule.requests), ("limits", &rule.limits)]
        .into_iter()
        .flat_map(|(kind, names)| names.iter().map(move |n| (kind, n.as_str())))
        .collect();
    if required.is_empty() {
        return (Vec::new(), None);
    }
    // A kind's pod spec, or an empty map: has() guards every step, as the
    // webhook finds no spec where a step is missing.
    let mut spec = "{}".to_owned();
    let mut path = "''".to_owned();
    for (kind, shown, at) in POD_SPECS.iter().rev() {
        let mut guard = Vec::new();
        for depth in 1..=at.len() {
            guard.push(format!("has(object.{})", at[..depth].join(".")));
        }
        let condition = format!("request.kind.kind == {} && {}", lit(kind), guard.join(" && "));
        spec = format!("{condition} ? object.{} : {spec}", at.join("."));
        path = format!("request.kind.kind == {} ? {} : {path}", lit(kind), lit(shown));
    }
    let pod = format!("variables.{POD_SPEC}");
    let list = |field: &str| format!("(has({pod}.{field}) ? {pod}.{field} : [])");
    let has = |c: &str, (kind, name): (&str, &str)| {
        format!("(has({c}.resources) && has({c}.resources.{kind}) && {} in {c}.resources.{kind})", lit(name))
    };
    let lacks_any = required.iter().map(|r| format!("!{}", has("c", *r))).collect::<Vec<_>>().join(" || ");
    let variables = vec![
        reg::Variable { name: POD_SPEC.into(), expression: spec },
        reg::Variable { name: POD_PATH.into(), expression: path },
        reg::Variable { name: INIT.into(), expression: list("initContainers") },
        reg::Variable {
            name: LACKING.into(),
            expression: format!("(variables.{INIT} + {}).filter(c, {lacks_any})", list("containers")),
        },
    ];
    // The first lacking container and its place: found only for the
    // message, so that the check itself stays linear.
    let c = format!("variables.{LACKING}[0]");
    let i = format!("(variables.{INIT} + {}).indexOf({c})", list("containers"));
    let init_count = format!("size(variables.{INIT})");
    let container = format!(
        "variables.{POD_PATH} + ({i} < {init_count} ? '.initContainers[' + string({i}) : '.containers[' +          string({i} - {init_count})) + '] (' + (has({c}.name) ? {c}.name : '?') + ')'"
    );
    let mut lacked = "''".to_owned();
    for r in required.iter().rev() {
        lacked = format!("!{} ? {} : {lacked}", has(&c, *r), lit(&format!("resources.{}.{}", r.0, r.1)));
    }
    let message = format!("{container} + ': ' + ({lacked}) + ' is required'");
    (variables, Some(validation(&format!("size(variables.{LACKING}) == 0"), Dynamic(message))))
}

/// A validation's message: fixed, or a CEL expression.
enum Message {
    Static(String),
    Dynamic(String),
}
use Message::{Dynamic, Static};

fn validation(expression: &str, message: Message) -> reg::Validation {
    let (message, message_expression) = match message {
        Static(m) => (Some(m), None),
        Dynamic(e) => (None, Some(e)),
    };
    reg::Validation { expression: expression.into(), message, message_expression, reason: None }
}

/// `s` as a CEL string literal.
fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
