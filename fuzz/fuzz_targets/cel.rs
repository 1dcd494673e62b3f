//! CEL as a policy author could write it, loaded as a `ValidatorPolicy`
//! (parse, compile, cost estimate) and evaluated over arbitrary objects
//! under a small budget: never a panic, and never past the budget. The
//! budget is 20,000 units with a five-second deadline: an evaluation that
//! reaches the deadline did work the meter did not count, and one that
//! outlives it is a hang libFuzzer reports.

#![no_main]

use std::path::Path;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use portcullis_admission::decode;
use portcullis_cel::budget::{Limit, Limits};
use portcullis_fuzz::review::Envelope;
use portcullis_fuzz::{cluster, json, pod, settings};
use portcullis_validator::evaluate::evaluate;
use portcullis_validator::policy::PolicySet;
use serde_json::json;

/// Pieces of CEL: an expression is mostly a sequence of these.
const TOKENS: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "variables.v",
    "self",
    ".",
    "metadata",
    "spec",
    "containers",
    "labels",
    "annotations",
    "name",
    "image",
    "data",
    "operation",
    "userInfo",
    "all(",
    "exists(",
    "exists_one(",
    "map(",
    "filter(",
    "x",
    "y",
    ",",
    ")",
    "(",
    "[",
    "]",
    "{",
    "}",
    ":",
    "?",
    ".?",
    "size(",
    "has(",
    "matches(",
    "startsWith(",
    "endsWith(",
    "contains(",
    "split(",
    "join(",
    "lowerAscii(",
    "replace(",
    "int(",
    "uint(",
    "double(",
    "string(",
    "bytes(",
    "duration(",
    "timestamp(",
    "quantity(",
    "isQuantity(",
    "url(",
    "ip(",
    "cidr(",
    "optional.of(",
    "optional.none()",
    "orValue(",
    "hasValue()",
    "value()",
    "+",
    "-",
    "*",
    "/",
    "%",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "!",
    "in",
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "2.5",
    "1e308",
    "0u",
    "'a'",
    "'^(a+)+$'",
    "'.*'",
    "b'\\xff'",
    "'1Gi'",
    "'100m'",
    "'1h'",
    "\"\"",
    "null",
    "true",
    "false",
    "dyn(",
    "type(",
    "list",
    "map",
];

fn expression(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 4)? {
        return u.arbitrary();
    }
    let mut text = String::new();
    for _ in 0..u.int_in_range(1..=24)? {
        text.push_str(u.choose(TOKENS)?);
        if u.ratio(1, 4)? {
            text.push(' ');
        }
    }
    Ok(text)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let (Ok(validation), Ok(message), Ok(variable)) = (expression(&mut u), expression(&mut u), expression(&mut u))
    else {
        return;
    };
    let Ok(object) = (if u.ratio(1, 2).unwrap_or(false) { pod::pod(&mut u) } else { json::value(&mut u, 4) }) else {
        return;
    };
    let policy = json!({
        "apiVersion": "portcullis.dev/v1alpha1",
        "kind": "ValidatorPolicy",
        "metadata": {"name": "fuzzed"},
        "spec": {
            "match": {"resources": [{"apiGroups": [""], "resources": ["pods"]}]},
            "variables": [{"name": "v", "expression": variable}],
            "validations": [{"expression": validation, "messageExpression": message}],
        }
    });
    let document = policy.to_string();
    let Ok(set) = PolicySet::from_sources([(Path::new("fuzzed.yaml"), document.as_bytes())], 10_000_000) else {
        return;
    };
    let object = if object.is_object() { object } else { json!({"spec": object}) };
    let Ok(req) = decode(&Envelope::pod_create().body(Some(&object), None)) else { return };
    let settings = settings(Limits { per_call: 20_000, per_policy: 50_000 });
    let deadline = std::time::Instant::now() + settings.cel_deadline;
    let evaluation = evaluate(&set, &settings, cluster(), &req, deadline);
    assert!(
        !evaluation.exceeded.iter().any(|(_, limit)| *limit == Limit::Deadline),
        "{validation:?} / {message:?} / {variable:?} ran to its deadline within its budget"
    );
});
