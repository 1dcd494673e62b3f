//! The macros of cel-go's extensions that Kubernetes' CEL enables, as the
//! patched interpreter expands and evaluates them (third_party/cel,
//! PORTCULLIS.md): the two-variable comprehensions, `sortBy`, `optMap` and
//! `optFlatMap`. The API server's own verdicts on the same expressions are
//! compared in tests/e2e/tests/cel_differential.rs.

use std::error::Error;
use std::time::{Duration, Instant};

use portcullis_admission::manifest::as_review;
use portcullis_cel::budget::Limits;
use portcullis_cel::reads::DataReads;
use portcullis_cel::{Bindings, Value, compile, evaluate};
use rstest::rstest;
use serde_json::json;

/// The request's data converted as the validator converts it: only what
/// the expression reads.
fn bindings(reads: &DataReads) -> Bindings {
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
        "data": {"a": "1", "b": "22"}
    });
    let review = as_review(object).expect("a review");
    let req = portcullis_admission::decode(&serde_json::to_vec(&review).expect("json")).expect("decodes");
    Bindings::of(&req, None, reads)
}

fn run(source: &str, limits: Limits) -> Result<Value, String> {
    let expression = compile(source, u64::MAX).map_err(|e| format!("{e}: {:?}", e.source()))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reads = DataReads::default();
    reads.add(&expression);
    match evaluate(&bindings(&reads), None, limits, deadline, |scope| scope.execute(&expression)) {
        Ok(ran) => ran.map_err(|e| e.to_string()),
        Err(exceeded) => Err(exceeded.to_string()),
    }
}

#[rstest]
#[case::all_over_a_list("[10, 20].all(i, v, v == (i + 1) * 10)")]
#[case::all_over_a_map("{'a': 1, 'bb': 2}.all(k, v, k.size() == v)")]
#[case::all_false("!['a', 'b'].all(i, v, i == 0)")]
#[case::exists_over_request_data("object.data.exists(k, v, k == 'b' && v == '22')")]
#[case::exists_none("!object.data.exists(k, v, k == v)")]
#[case::exists_one("[1, 2, 1].existsOne(i, v, v == 2) && ![1, 2, 1].exists_one(i, v, v == 1)")]
#[case::transform_list("[1, 2, 3].transformList(i, v, v * i) == [0, 2, 6]")]
#[case::transform_list_filtered("[1, 2, 3].transformList(i, v, v > 1, v * i) == [2, 6]")]
#[case::transform_list_of_a_map("object.data.transformList(k, v, k + v).size() == 2")]
#[case::transform_map("{'a': 1, 'b': 2}.transformMap(k, v, v + 1) == {'a': 2, 'b': 3}")]
#[case::transform_map_filtered("{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v + 1) == {'b': 3}")]
#[case::transform_map_of_a_list("['x', 'y'].transformMap(i, v, v + string(i)) == {0: 'x0', 1: 'y1'}")]
#[case::transform_map_entry("object.data.transformMapEntry(k, v, {v: k}) == {'1': 'a', '22': 'b'}")]
#[case::transform_map_entry_filtered("object.data.transformMapEntry(k, v, k == 'a', {v: k}) == {'1': 'a'}")]
#[case::nested("{'a': [1, 2]}.all(k, v, v.all(i, x, x > i) && v.exists(i, x, x == 2 && k == 'a'))")]
#[case::sort_by("[3, 1, 2].sortBy(x, x) == [1, 2, 3] && [].sortBy(x, x) == []")]
#[case::sort_by_a_field("[{'n': 'b', 's': 2}, {'n': 'a', 's': 1}].sortBy(e, e.s).map(e, e.n) == ['a', 'b']")]
#[case::sort_by_keeps_equal_keys_in_order(
    "['b1', 'a1', 'b2', 'a2'].sortBy(s, s.startsWith('a') ? 0 : 1) == ['a1', 'a2', 'b1', 'b2']"
)]
#[case::sort_by_a_long_list("lists.range(100).sortBy(x, -x)[0] == 99 && lists.range(100).sortBy(x, -x)[99] == 0")]
#[case::sort_by_nan_keys_as_cel_go("[3.0, double('NaN'), 1.0].sortBy(x, x).size() == 3")]
#[case::all_absorbs_an_error_with_a_later_false(
    "[0, -1].all(i, v, 1 / v > 0) == false && [0, -1].all(v, 1 / v > 0) == false"
)]
#[case::exists_absorbs_an_error_with_a_later_true("[0, 1].exists(i, v, 1 / v == 1) && [0, 1].exists(v, 1 / v == 1)")]
#[case::an_error_absorbed_before_it("[-1, 0].all(v, 1 / v > 0) == false && [1, 0].exists(v, 1 / v == 1)")]
#[case::opt_map("optional.of(2).optMap(x, x * 3).orValue(0) == 6 && !optional.none().optMap(x, x).hasValue()")]
#[case::opt_map_of_request_data("object.?data.?b.optMap(v, int(v)).orValue(0) == 22")]
#[case::opt_flat_map("optional.of({'a': 1}).optFlatMap(m, m.?a).orValue(0) == 1")]
#[case::opt_flat_map_to_none("!optional.of({'a': 1}).optFlatMap(m, m.?b).hasValue()")]
fn macros_evaluate_as_in_the_api_server(#[case] source: &str) {
    assert_eq!(run(source, Limits::default()), Ok(Value::Bool(true)), "{source}");
}

/// Keys, and the order Go 1.26's `sort.Slice` leaves their indexes in by
/// `keys[i] < keys[j]` (a Go program's output), as cel-go's `sortBy`
/// orders: equal keys beyond 12 elements, NaN keys (never less), and
/// enough equal keys to reach the heap sort's limit.
const GO_SORT_SLICE: [(&[&str], &[usize]); 4] = [
    (
        &[
            "1.0", "0.0", "1.0", "0.0", "1.0", "0.0", "1.0", "0.0", "1.0", "0.0", "1.0", "0.0", "1.0", "0.0", "1.0",
            "0.0", "1.0", "0.0", "1.0", "0.0",
        ],
        &[15, 1, 19, 3, 17, 5, 13, 7, 9, 11, 12, 8, 10, 6, 14, 0, 16, 4, 18, 2],
    ),
    (
        &[
            "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0",
            "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0",
            "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0",
            "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0", "0.0", "2.0", "4.0", "1.0", "3.0",
        ],
        &[
            40, 25, 55, 30, 20, 5, 0, 10, 15, 45, 35, 50, 58, 13, 38, 8, 48, 33, 18, 43, 53, 3, 28, 23, 31, 36, 26, 1,
            56, 51, 21, 6, 46, 11, 41, 16, 49, 24, 14, 39, 59, 34, 54, 4, 44, 9, 29, 19, 47, 7, 37, 32, 52, 17, 42, 2,
            22, 57, 27, 12,
        ],
    ),
    (
        &[
            "1.0",
            "0.0",
            "3.0",
            "double('NaN')",
            "1.0",
            "0.0",
            "3.0",
            "2.0",
            "1.0",
            "0.0",
            "3.0",
            "2.0",
            "1.0",
            "double('NaN')",
            "3.0",
            "2.0",
            "1.0",
            "0.0",
            "3.0",
            "2.0",
            "1.0",
            "0.0",
            "3.0",
            "double('NaN')",
            "1.0",
            "0.0",
            "3.0",
            "2.0",
            "1.0",
            "0.0",
            "3.0",
            "2.0",
            "1.0",
        ],
        &[
            9, 1, 29, 25, 21, 5, 17, 16, 28, 4, 32, 20, 12, 24, 8, 0, 15, 31, 27, 19, 11, 7, 14, 23, 22, 3, 26, 18, 6,
            2, 30, 13, 10,
        ],
    ),
    (
        &[
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0",
            "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0", "1.0", "1.0", "0.0",
        ],
        &[
            45, 129, 126, 3, 123, 120, 6, 117, 114, 9, 111, 108, 12, 105, 102, 15, 99, 96, 18, 93, 90, 21, 87, 84, 24,
            81, 78, 27, 75, 72, 30, 69, 66, 33, 0, 63, 36, 60, 57, 39, 54, 51, 42, 48, 64, 22, 46, 47, 43, 49, 50, 41,
            52, 53, 40, 55, 56, 38, 58, 59, 37, 61, 62, 35, 34, 65, 32, 67, 68, 31, 70, 71, 29, 73, 74, 28, 76, 77, 26,
            79, 80, 25, 82, 83, 23, 85, 86, 44, 88, 89, 20, 91, 92, 19, 94, 95, 17, 97, 98, 16, 100, 101, 14, 103, 104,
            13, 106, 107, 11, 109, 110, 10, 112, 113, 8, 115, 116, 7, 118, 119, 5, 121, 122, 4, 124, 125, 2, 127, 128,
            1,
        ],
    ),
];

#[test]
fn sort_by_leaves_equal_keys_in_go_sort_slice_order() {
    for (keys, go) in GO_SORT_SLICE {
        let items: Vec<String> = keys.iter().enumerate().map(|(i, k)| format!("{{'k': {k}, 'i': {i}}}")).collect();
        let order: Vec<String> = go.iter().map(usize::to_string).collect();
        let source = format!("[{}].sortBy(p, p.k).map(p, p.i) == [{}]", items.join(", "), order.join(", "));
        assert_eq!(run(&source, Limits::default()), Ok(Value::Bool(true)), "{keys:?}");
    }
}

#[rstest]
#[case::a_key_produced_twice(
    "object.data.transformMapEntry(k, v, {'same': k})",
    "insert failed: key same already exists"
)]
#[case::an_int_and_a_uint_key_are_one_key(
    "[1, 2].transformMapEntry(i, v, i == 0 ? {1: v} : {1u: v})",
    "insert failed: key 1 already exists"
)]
#[case::sort_keys_of_two_types("[1, 2].sortBy(x, x == 1 ? 'a' : 1)", "list elements must have the same type")]
#[case::sort_keys_not_comparable("[1, 2].sortBy(x, [x])", "list elements must be comparable")]
#[case::a_range_that_is_not_a_collection("'ab'.all(i, v, true)", "No such overload")]
#[case::an_error_all_never_absorbs("[0, 1].all(i, v, 1 / v > 0)", "ivision by zero")]
#[case::an_error_exists_never_absorbs("[0, 2].exists(v, 1 / v == 1)", "ivision by zero")]
#[case::an_error_in_an_element("[1, 0].map(x, 1 / x).size() == 2", "ivision by zero")]
fn bad_input_gets_an_evaluation_error(#[case] source: &str, #[case] message: &str) {
    let ran = run(source, Limits::default());
    assert!(ran.as_ref().is_err_and(|e| e.contains(message)), "{source}: {ran:?}");
}

#[rstest]
#[case::same_variable_twice("[1].all(i, i, true)", "duplicate variable name: i")]
#[case::not_a_name("[1].all(i, 1, true)", "argument must be a simple name")]
#[case::the_accumulator("[1].all(i, @result, true)", "")]
#[case::opt_map_not_a_name("optional.of(1).optMap(1, 2)", "optMap() variable name must be a simple identifier")]
#[case::sort_by_a_literal("'ab'.sortBy(x, x)", "sortBy can only be applied to a list")]
fn bad_macros_do_not_compile(#[case] source: &str, #[case] message: &str) {
    let ran = run(source, Limits::default());
    assert!(ran.as_ref().is_err_and(|e| e.contains("does not compile") && e.contains(message)), "{source}: {ran:?}");
}

#[test]
fn a_two_variable_loop_is_stopped_by_the_per_call_limit() {
    let source = "lists.range(100).all(i, a, lists.range(100).all(j, b, i + j + a + b >= 0))";
    let limits = Limits { per_call: 1_000, per_policy: 1_000_000 };
    let ran = run(source, limits);
    assert!(ran.as_ref().is_err_and(|e| e.contains("--cel-per-call-limit")), "{ran:?}");
    assert_eq!(run(source, Limits::default()), Ok(Value::Bool(true)));
}

/// `map`, `filter` and the transforms, whose accumulators grow in place
/// (third_party/cel/src/accumulate.rs), give the answers their steps as
/// written give, on lists long enough that copying the accumulator on
/// every pass took seconds. That they no longer copy is a speed, measured
/// by `examples/accumulate.rs` (docs/BENCHMARKS.md), not asserted here.
#[rstest]
#[case::map("lists.range(20000).map(x, x * 2)[19999] == 39998")]
#[case::map_filtered("lists.range(20000).map(x, x % 2 == 0, x).size() == 10000")]
#[case::filter("lists.range(20000).filter(x, x % 3 == 0)[6666] == 19998")]
#[case::transform_list("lists.range(20000).transformList(i, x, x > 19997, i + x) == [39996, 39998]")]
#[case::transform_map("lists.range(20000).transformMap(i, x, x * 3)[19999] == 59997")]
#[case::transform_map_entry("lists.range(20000).transformMapEntry(i, x, {string(x): i}).size() == 20000")]
#[case::nested("[[1, 2], [3]].map(l, l.map(x, x * 2)) == [[2, 4], [6]]")]
#[case::an_error_absorbed_as_cel_absorbs_it("[1, 0].map(x, 1 / x).size() == 2 || true")]
fn accumulators_edited_in_place_give_the_written_answers(#[case] source: &str) {
    assert_eq!(run(source, Limits::default()), Ok(Value::Bool(true)), "{source}");
}

#[test]
fn a_growing_accumulator_is_charged_per_pass() {
    let source = "lists.range(1000).map(x, x).size() == 1000";
    let ran = run(source, Limits { per_call: 1_000, per_policy: 1_000_000 });
    assert!(ran.as_ref().is_err_and(|e| e.contains("--cel-per-call-limit")), "{ran:?}");
}
