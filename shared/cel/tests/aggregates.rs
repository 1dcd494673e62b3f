//! List and map literals whose items are not all of one type, which
//! kube-apiserver 1.36 refuses when it compiles a policy (cel-go's
//! homogeneous aggregate literal validator, which Kubernetes' environment
//! turns on; literals anywhere in a `format` call's arguments are exempt).
//! Each case was compiled as the API server compiles a
//! ValidatingAdmissionPolicy's validation (`k8s.io/apiserver` v0.36.3,
//! cel-go v0.26.0), and its words are kept beside it. `check` must never
//! refuse what the API server takes, and must refuse in the same words
//! where both refuse.

mod support;

use support::assert_said;

#[test]
fn literals_of_mixed_items_are_refused_as_the_api_server_refuses_them() {
    let cases: &[(&str, Option<&str>)] = &[
        (
            "object.metadata.name in ['a', params.name]",
            Some("ERROR: <input>:1:37: expected type 'string' but found 'dyn'"),
        ),
        ("object.metadata.name in ['a', 'b']", None),
        ("object.spec.replicas in [1, 2, 3]", None),
        ("object.spec.replicas in [1, 2.0]", Some("ERROR: <input>:1:29: expected type 'int' but found 'double'")),
        ("[object.metadata.name, object.metadata.namespace].all(n, n != '')", None),
        ("'%s/%s'.format([object.metadata.namespace, 1]) != ''", None),
        ("'%s'.format([[1, 'a']]) == ''", None),
        ("[[], [1]] == []", None),
        ("[[1], []] == []", None),
        (
            "{'a': 1, 2: 'x', 'c': true} == {}",
            Some(
                "ERROR: <input>:1:10: expected type 'string' but found 'int' / ERROR: <input>:1:13: expected type 'int' but found 'string' / ERROR: <input>:1:23: expected type 'int' but found 'bool'",
            ),
        ),
        (
            "{'app': 'web', 'tier': object.metadata.name} == {}",
            Some("ERROR: <input>:1:39: expected type 'string' but found 'dyn'"),
        ),
        ("[request.name, 'a'].exists(n, n == 'x')", None),
        ("['a', request.userInfo.username, 'b'].exists(n, n == 'x')", None),
        (
            "[1, 'a'].exists(n, n == 1) && [true, 2u] == []",
            Some(
                "ERROR: <input>:1:5: expected type 'int' but found 'string' / ERROR: <input>:1:38: expected type 'bool' but found 'uint'",
            ),
        ),
        ("[1, null] == []", Some("ERROR: <input>:1:5: expected type 'int' but found 'null'")),
        (
            "[[1, 'a'], [1]] == []",
            Some(
                "ERROR: <input>:1:6: expected type 'int' but found 'string' / ERROR: <input>:1:12: expected type 'list(dyn)' but found 'list(int)'",
            ),
        ),
        ("[[object.x], ['a']] == []", Some("ERROR: <input>:1:14: expected type 'list(dyn)' but found 'list(string)'")),
        ("[object.x, 1].size() == 2", Some("ERROR: <input>:1:12: expected type 'dyn' but found 'int'")),
        (
            "['a', request.userInfo.groups] == []",
            Some("ERROR: <input>:1:23: expected type 'string' but found 'list(string)'"),
        ),
        (
            "[duration('1s'), timestamp('2020-01-01T00:00:00Z')] == []",
            Some("ERROR: <input>:1:27: expected type 'duration' but found 'timestamp'"),
        ),
        ("[?optional.of(1), 'a'] == []", Some("ERROR: <input>:1:19: expected type 'int' but found 'string'")),
        (
            "[request.userInfo, 1] == []",
            Some("ERROR: <input>:1:20: expected type 'kubernetes.UserInfo' but found 'int'"),
        ),
        ("size({'a': [object.x][0], 'b': 1}) == 2", Some("ERROR: <input>:1:32: expected type 'dyn' but found 'int'")),
        // A negative literal is where its sign is.
        ("[1, -2.0] == []", Some("ERROR: <input>:1:5: expected type 'int' but found 'double'")),
        // `null` joined with what it stands for is the second of the two.
        (
            "[[null, request.userInfo], ['a']] == []",
            Some(
                "ERROR: <input>:1:16: expected type 'null' but found 'kubernetes.UserInfo' / ERROR: <input>:1:28: expected type 'list(kubernetes.UserInfo)' but found 'list(string)'",
            ),
        ),
        (
            "[[null, duration('1s')], ['a']] == []",
            Some(
                "ERROR: <input>:1:17: expected type 'null' but found 'duration' / ERROR: <input>:1:26: expected type 'list(duration)' but found 'list(string)'",
            ),
        ),
        (
            "[[request.userInfo, null], ['a']] == []",
            Some(
                "ERROR: <input>:1:21: expected type 'kubernetes.UserInfo' but found 'null' / ERROR: <input>:1:28: expected type 'list(null)' but found 'list(string)'",
            ),
        ),
        (
            "[[null, 1], ['a']] == []",
            Some(
                "ERROR: <input>:1:9: expected type 'null' but found 'int' / ERROR: <input>:1:13: expected type 'list(dyn)' but found 'list(string)'",
            ),
        ),
        (
            "[[null], [quantity('1')]] == [[1]]",
            Some(
                "ERROR: <input>:1:27: found no matching overload for '_==_' applied to '(list(list(kubernetes.Quantity)), list(list(int)))'",
            ),
        ),
        (
            "[null, null] == [1]",
            Some("ERROR: <input>:1:14: found no matching overload for '_==_' applied to '(list(null), list(int))'"),
        ),
        // A loop's variable over an empty list is a type variable there,
        // bound by the literal it is in.
        ("[].map(x, [x, ['a']]).size() == 0", None),
        ("[[]].all(l, [l, [1]].size() == 2)", None),
        ("{}.all(k, [k, 1].size() == 2)", None),
        ("[1].map(x, [x, 'a']).size() == 0", Some("ERROR: <input>:1:16: expected type 'int' but found 'string'")),
    ];
    assert_said(cases, &[]);
}

#[test]
fn an_optional_item_of_type_dyn_is_refused_where_the_api_servers_compiler_fails() {
    // kube-apiserver 1.36 answers the creation of a policy with any of
    // these with an internal error (cel-go v0.26's validator panics).
    for source in [
        "[?object.x] == []",
        "[1, ?params.x] == []",
        "size({?'a': object.x}) == 0",
        "[?dyn(1)].size() == 0",
        "[[?object.x[0]]][0] == []",
    ] {
        let said = support::refused(source).unwrap_or_default();
        assert!(said.contains("an optional item of type 'dyn' fails kube-apiserver's compiler"), "{source}: {said}");
    }
    // It takes these, and so does `check`.
    let cases = [
        ("[?object.?x] == []", None),
        ("[?optional.of(object.x)] == []", None),
        ("'%s'.format([[?object.x]]) == ''", None),
    ];
    assert_said(&cases, &[]);
}

#[test]
fn a_map_literal_of_constants_with_a_bytes_key_is_refused_where_the_api_servers_compiler_fails() {
    // kube-apiserver 1.36 answers the creation of a policy with any of
    // these with an internal error (cel-go v0.26 folds the literal into a
    // map when it plans the program, and panics hashing the key).
    for source in ["size({b'x': 1}) > 0", "size([{b'x': [1]}]) > 0", "b'x' in {b'x': 1}", "size({'a': {b'x': 1}}) > 0"]
    {
        let said = support::refused(source).unwrap_or_default();
        assert!(said.contains("a map literal with a bytes key fails kube-apiserver's compiler"), "{source}: {said}");
    }
    // It takes these (not constants: evaluating them is an error there, and
    // here), or refuses them for another reason first, and so does `check`.
    let cases = [
        ("size({b'x': object.x}) > 0", None),
        ("size({b'x': 1 + 1}) > 0", None),
        ("size({?b'x': optional.of(1)}) > 0", None),
        ("size({b'x': 1, 'a': 2}) > 0", Some("ERROR: <input>:1:16: expected type 'bytes' but found 'string'")),
    ];
    assert_said(&cases, &[]);
}

#[test]
fn an_optional_item_must_be_an_optional_value_as_the_api_servers_checker_requires() {
    // kube-apiserver 1.36's words, compiled as a validation.
    let cases: &[(&str, Option<&str>)] = &[
        ("[?1] == []", Some("ERROR: <input>:1:3: expected type 'optional_type(int)' but found 'int'")),
        ("[?null] == []", Some("ERROR: <input>:1:3: expected type 'optional_type(null)' but found 'null'")),
        ("['a', ?'b'] == []", Some("ERROR: <input>:1:8: expected type 'optional_type(string)' but found 'string'")),
        ("size({?'a': 1}) == 0", Some("ERROR: <input>:1:13: expected type 'optional_type(int)' but found 'int'")),
        ("[?[1]] == []", Some("ERROR: <input>:1:3: expected type 'optional_type(list(int))' but found 'list(int)'")),
        (
            "[?request.userInfo] == []",
            Some(
                "ERROR: <input>:1:10: expected type 'optional_type(kubernetes.UserInfo)' but found 'kubernetes.UserInfo'",
            ),
        ),
        (
            "[?request.name, ?object.?x] == []",
            Some("ERROR: <input>:1:10: expected type 'optional_type(string)' but found 'string'"),
        ),
        ("[?1, 'a'] == []", Some("ERROR: <input>:1:3: expected type 'optional_type(int)' but found 'int'")),
        (
            "[?{'a': 1}] == []",
            Some("ERROR: <input>:1:3: expected type 'optional_type(map(string, int))' but found 'map(string, int)'"),
        ),
        (
            "[?duration('1s')] == []",
            Some("ERROR: <input>:1:11: expected type 'optional_type(duration)' but found 'duration'"),
        ),
        ("[?[]] == []", Some("ERROR: <input>:1:3: expected type 'optional_type(list(_var0))' but found 'list(_var0)'")),
        ("'%s'.format([[?1]]) == ''", Some("ERROR: <input>:1:16: expected type 'optional_type(int)' but found 'int'")),
        ("[?object.?x, ?optional.none()] == []", None),
    ];
    // Not said yet: an empty list's items' type variable.
    let not_yet = ["[?[]] == []"];
    assert_said(cases, &not_yet);
}

/// An empty list or map literal beside an item of another kind: its
/// items' type variable binds to nothing there, and cel-go's validator
/// names it `dyn` (`[1, []]`: `expected type 'int' but found
/// 'list(dyn)'`); beside one of its kind it binds and nothing is said
/// (`[[1], []]`). A list of such items is a `list(dyn)` to the calls
/// around it. Each case's words are kube-apiserver v0.36.3's compiler's.
#[test]
fn an_empty_literal_beside_another_kind_is_refused_as_the_api_server_refuses_it() {
    let cases: &[(&str, Option<&str>)] = &[
        ("[1, []] == [1]", Some("ERROR: <input>:1:5: expected type 'int' but found 'list(dyn)'")),
        ("[[], 1] == [1]", Some("ERROR: <input>:1:6: expected type 'list(dyn)' but found 'int'")),
        ("[1, {}] == [1]", Some("ERROR: <input>:1:5: expected type 'int' but found 'map(dyn, dyn)'")),
        ("[{}, 1] == [1]", Some("ERROR: <input>:1:6: expected type 'map(dyn, dyn)' but found 'int'")),
        ("[[1], []] == [[1]]", None),
        ("[[], [1]] == [[1]]", None),
        ("[{}, {'a': 1}] == []", None),
        ("[{'a': 1}, {}] == []", None),
        ("[{}, []] == []", Some("ERROR: <input>:1:6: expected type 'map(dyn, dyn)' but found 'list(dyn)'")),
        ("[[], {}] == []", Some("ERROR: <input>:1:6: expected type 'list(dyn)' but found 'map(dyn, dyn)'")),
        ("['a', [], 1] == []", Some("ERROR: <input>:1:7: expected type 'string' but found 'list(dyn)'")),
        ("[1, 'a', []] == []", Some("ERROR: <input>:1:5: expected type 'int' but found 'string'")),
        ("[[], [], 1] == []", Some("ERROR: <input>:1:10: expected type 'list(dyn)' but found 'int'")),
        ("[{}, {'a': 1}, 1] == []", Some("ERROR: <input>:1:16: expected type 'map(string, int)' but found 'int'")),
        ("[1, [?optional.of([])]] == []", Some("ERROR: <input>:1:5: expected type 'int' but found 'list(list(dyn))'")),
        ("[1, ?optional.of([])] == []", Some("ERROR: <input>:1:17: expected type 'int' but found 'list(dyn)'")),
        ("{'a': 1, 'b': {}} == {}", Some("ERROR: <input>:1:15: expected type 'int' but found 'map(dyn, dyn)'")),
        ("{'a': {}, 'b': 1} == {}", Some("ERROR: <input>:1:16: expected type 'map(dyn, dyn)' but found 'int'")),
        ("{'a': [], 'b': []} == {}", None),
        ("{'a': [1], 'b': []} == {}", None),
        (
            "{'a': 1, 'b': [], 'c': {}} == {}",
            Some(
                "ERROR: <input>:1:15: expected type 'int' but found 'list(dyn)' / ERROR: <input>:1:24: expected type 'int' but found 'map(dyn, dyn)'",
            ),
        ),
        (
            "{'a': 1, ?'b': optional.of([])} == {}",
            Some("ERROR: <input>:1:27: expected type 'int' but found 'list(dyn)'"),
        ),
        ("[1, [[]]] == []", Some("ERROR: <input>:1:5: expected type 'int' but found 'list(list(dyn))'")),
        ("[[1], [[]]] == []", Some("ERROR: <input>:1:7: expected type 'list(int)' but found 'list(list(dyn))'")),
        ("[[[]], [1]] == []", Some("ERROR: <input>:1:8: expected type 'list(list(dyn))' but found 'list(int)'")),
        (
            "[duration('1s'), []] == 'a'",
            Some("ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(list(dyn), string)'"),
        ),
        ("[null, {}] == []", Some("ERROR: <input>:1:8: expected type 'null' but found 'map(dyn, dyn)'")),
        ("[{}, null] == []", Some("ERROR: <input>:1:6: expected type 'map(dyn, dyn)' but found 'null'")),
        (
            "'%s'.format([1, []]) == ''",
            Some("ERROR: <input>:1:12: too many arguments supplied to string.format (expected 1, got 2)"),
        ),
        (
            "[optional.of(1), []] == []",
            Some("ERROR: <input>:1:18: expected type 'optional_type(int)' but found 'list(dyn)'"),
        ),
        ("[[1], [] + []] == []", None),
    ];
    // Not said yet: an empty literal first whose type variable a later
    // item would bind, or the second of two empty literals; an empty
    // literal inside an item (`[[]]`) or in an optional item.
    let not_yet = [
        "[{}, []] == []",
        "[[], {}] == []",
        "[[], [], 1] == []",
        "[{}, {'a': 1}, 1] == []",
        "[1, [?optional.of([])]] == []",
        "[1, ?optional.of([])] == []",
        "{'a': {}, 'b': 1} == {}",
        "{'a': 1, ?'b': optional.of([])} == {}",
        "[1, [[]]] == []",
        "[[1], [[]]] == []",
        "[[[]], [1]] == []",
    ];
    assert_said(cases, &not_yet);
}
