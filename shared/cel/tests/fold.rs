//! Folding: an expression that names no variable is evaluated once, at
//! load, to the value it has on every request; anything else is left to
//! run per request.

use std::time::{Duration, Instant};

use portcullis_cel::budget::Limits;
use portcullis_cel::{Environment, LoadBounds, Value, compile_in, fold};

fn folded(source: &str) -> Option<Value> {
    fold(&compile_in(Environment::Mutation, source, LoadBounds::ApiServer).expect("compiles")).map(|c| c.value)
}

#[test]
fn an_expression_without_variables_folds_to_its_value() {
    assert_eq!(folded("1 + 2"), Some(Value::Int(3)));
    let object = folded(r#"Object{metadata: Object.metadata{labels: {"team": "unassigned"}}}"#);
    let json = portcullis_cel::json::to_json(&object.expect("folds")).expect("converts");
    assert_eq!(json, serde_json::json!({"metadata": {"labels": {"team": "unassigned"}}}));
}

#[test]
fn what_names_a_variable_or_fails_is_left_to_each_request() {
    for source in [
        "object.metadata.name",
        "params.data.x",
        "variables.x + 1",
        // A comprehension's own variable counts: folding stays simple.
        "[1, 2].map(x, x * 2)",
        // It fails: it fails on each request, under its failure policy.
        "1 / 0",
    ] {
        assert_eq!(folded(source), None, "{source}");
    }
}

#[test]
fn a_request_uses_the_value_only_where_evaluating_would_succeed() {
    let source = r#"Object{metadata: Object.metadata{labels: {"team": "unassigned"}}}"#;
    let constant = fold(&compile_in(Environment::Mutation, source, LoadBounds::ApiServer).unwrap()).expect("folds");
    assert!(constant.cost > 0, "folding counts what it spends");
    let far = Instant::now() + Duration::from_secs(60);
    let within = Limits { per_call: constant.cost, per_policy: constant.cost };
    assert!(constant.usable(within, far));
    // Lower limits (`--cel-per-call-limit`, `--cel-policy-budget`): the
    // request evaluates it and is stopped as it would be without folding.
    assert!(!constant.usable(Limits { per_call: constant.cost - 1, ..within }, far));
    assert!(!constant.usable(Limits { per_policy: constant.cost - 1, ..within }, far));
    // A request past its deadline (`--cel-timeout`) likewise.
    assert!(!constant.usable(within, Instant::now() - Duration::from_millis(1)));
}
