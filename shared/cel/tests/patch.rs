//! The patched interpreter is the one in use (third_party/cel,
//! PORTCULLIS.md): these fail when a `cel` without the patch's meter, or
//! with a meter the interpreter no longer charges, is built instead.

use std::time::{Duration, Instant};

use portcullis_admission::manifest::as_review;
use portcullis_cel::budget::{Limit, Limits};
use portcullis_cel::reads::DataReads;
use portcullis_cel::{Bindings, Exceeded, Value, compile, evaluate};
use serde_json::json;

fn bindings() -> Bindings {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let review = as_review(object).expect("a review");
    let req = portcullis_admission::decode(&serde_json::to_vec(&review).expect("json")).expect("decodes");
    Bindings::of(&req, None, &DataReads::everything())
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// A thousand passes of a loop body.
const LOOPS: &str =
    "[0,1,2,3,4,5,6,7,8,9].all(a, [0,1,2,3,4,5,6,7,8,9].all(b, [0,1,2,3,4,5,6,7,8,9].all(c, a + b + c >= 0)))";

#[test]
fn a_loop_is_stopped_by_the_per_call_limit_with_the_budget_error() {
    let expression = compile(LOOPS, u64::MAX).expect("compiles");
    let limits = Limits { per_call: 500, per_policy: 1_000_000 };
    let stopped = evaluate(&bindings(), None, limits, far(), |scope| scope.execute(&expression));
    let Err(exceeded) = stopped else { panic!("ran to the end past its limit: {stopped:?}") };
    assert_eq!(exceeded, Exceeded { limit: Limit::PerCall, limits, expression: LOOPS.to_owned() });
    assert!(exceeded.to_string().contains("spent more than 500 units (--cel-per-call-limit)"), "{exceeded}");
}

#[test]
fn the_same_loop_within_its_budget_runs_to_its_answer() {
    let expression = compile(LOOPS, u64::MAX).expect("compiles");
    let ran = evaluate(&bindings(), None, Limits::default(), far(), |scope| scope.execute(&expression));
    assert!(matches!(ran, Ok(Ok(Value::Bool(true)))), "{ran:?}");
}

#[test]
fn the_expressions_of_one_evaluation_share_its_budget() {
    let expression = compile(LOOPS, u64::MAX).expect("compiles");
    let limits = Limits { per_call: 1_000_000, per_policy: 6_000 };
    let stopped = evaluate(&bindings(), None, limits, far(), |scope| {
        (0..10).map(|_| scope.execute(&expression)).filter(Result::is_ok).count()
    });
    assert_eq!(stopped.map_err(|e| e.limit), Err(Limit::Policy));
}

#[test]
fn a_passed_deadline_stops_the_first_expression() {
    let expression = compile("object.metadata.name == 'c'", u64::MAX).expect("compiles");
    let stopped = evaluate(&bindings(), None, Limits::default(), Instant::now(), |scope| scope.execute(&expression));
    assert_eq!(stopped.map_err(|e| e.limit).err(), Some(Limit::Deadline));
}

#[test]
fn variables_see_the_ones_before_them() {
    let variables = [("first", "object.data.a"), ("second", "variables.first + '2'")];
    let ran = run(&variables, &["variables.second == '12'"], Limits::default());
    assert!(matches!(ran.as_deref(), Ok([Ok(Value::Bool(true))])), "{ran:?}");
}

/// Each of `expressions` evaluated, in order, in one evaluation with
/// `variables` (name, source) declared, under `limits`: its value or its
/// error's message.
fn run(
    variables: &[(&str, &str)],
    expressions: &[&str],
    limits: Limits,
) -> Result<Vec<Result<Value, String>>, Exceeded> {
    let compiled = |source: &str| compile(source, u64::MAX).expect("compiles");
    let declared: Vec<_> = variables.iter().map(|(name, source)| (*name, compiled(source))).collect();
    let expressions: Vec<_> = expressions.iter().map(|source| compiled(source)).collect();
    evaluate(&bindings(), None, limits, far(), |scope| {
        scope.with_variables(declared.iter().map(|(name, e)| (*name, e)), |scope| {
            expressions.iter().map(|e| scope.execute(e).map_err(|e| e.to_string())).collect()
        })
    })
}

#[test]
fn a_variable_is_evaluated_only_when_read_and_fails_only_what_reads_it() {
    // As the API server binds them: lazily, so a variable that fails (here
    // a missing key) fails the expressions that come to read it, and no
    // other; `b` reads `a`, so it fails with `a`'s error.
    let variables = [("a", "object.data.missing"), ("b", "variables.a + '!'"), ("ok", "object.data.a")];
    let unread = "variables.ok == '1'";
    let guarded = "variables.ok == '2' && variables.a == 'x'";
    let read = "variables.ok == '1' && variables.b == 'x'";
    let ran = run(&variables, &[unread, guarded, read], Limits::default()).expect("within the limits");
    assert!(matches!(ran[0], Ok(Value::Bool(true))), "{ran:?}");
    assert!(matches!(ran[1], Ok(Value::Bool(false))), "{ran:?}");
    assert!(ran[2].as_ref().is_err_and(|e| e.contains("variables.a") && e.contains("missing")), "{ran:?}");
}

#[test]
fn a_variable_costs_once_however_often_it_is_read_and_nothing_when_it_is_not() {
    // `loops` costs about 13,000 units: a per-call limit of 500 would stop
    // it were it evaluated, and a policy budget of 20,000 would stop a
    // second evaluation.
    let variables = [("loops", LOOPS), ("name", "object.metadata.name")];
    let unread = Limits { per_call: 500, per_policy: 1_000_000 };
    let ran = run(&variables, &["variables.name == 'c'", "object.data.a == '1'"], unread);
    assert!(matches!(ran.as_deref(), Ok([Ok(Value::Bool(true)), Ok(Value::Bool(true))])), "{ran:?}");
    let once = Limits { per_call: 1_000_000, per_policy: 20_000 };
    let reads = ["variables.loops", "variables.loops && variables.name == 'c'", "!variables.loops || true"];
    let ran = run(&variables, &reads, once).expect("one evaluation of loops is within the budget");
    assert!(ran.iter().all(|r| matches!(r, Ok(Value::Bool(true)))), "{ran:?}");
}

#[test]
fn a_variable_may_not_read_a_later_one() {
    // A variable naming one declared after it fails whatever was evaluated
    // first (the API server does not compile it).
    let variables = [("early", "variables.late + 1"), ("late", "1")];
    let ran = run(&variables, &["variables.late == 1", "variables.early == 2"], Limits::default())
        .expect("within the limits");
    assert!(matches!(ran[0], Ok(Value::Bool(true))), "{ran:?}");
    assert!(ran[1].as_ref().is_err_and(|e| e.contains("not declared before it")), "{ran:?}");
}

/// An even number of `!` or `-` cancels out, as cel-go's parser has it
/// (`!!x` is `x`); upstream's parser negated once all the same, so
/// `!!true` was `false` and `--1` was `-1`.
#[test]
fn negations_cancel_in_pairs_as_in_the_api_server() {
    let cases = [
        ("!!true", true),
        ("!!!true", false),
        ("!!false == false", true),
        ("!(!true)", true),
        ("--1 == 1", true),
        ("---1 == -1", true),
        ("-(-1) == 1", true),
    ];
    for (source, value) in cases {
        let program = cel::Program::compile(source).expect("compiles");
        assert_eq!(program.execute(&cel::Context::default()), Ok(cel::Value::Bool(value)), "{source}");
    }
}
