//! Optional values (`object.?spec`, `optional.of(x)`, `[?x]`, `m[?k]`,
//! `optMap`) as the API server types them: each case was compiled as a
//! ValidatingAdmissionPolicy's validation by `k8s.io/apiserver` v0.36.3
//! (cel-go v0.26.0), and its words are kept beside it. `check` must never
//! refuse what the API server takes, must refuse in the same words where
//! both refuse, and says nothing yet of the few listed below.

mod support;

use support::assert_said;

#[test]
fn optionals_are_typed_as_the_api_server_types_them() {
    let cases: &[(&str, Option<&str>)] = &[
        (
            "object.?spec.?replicas > 3",
            Some("ERROR: <input>:1:24: found no matching overload for '_>_' applied to '(optional_type(dyn), int)'"),
        ),
        ("object.?spec.?replicas.orValue(1) > 3", None),
        (
            "object.?spec.replicas > 3",
            Some("ERROR: <input>:1:23: found no matching overload for '_>_' applied to '(optional_type(dyn), int)'"),
        ),
        (
            "object.?spec.replicas == 3",
            Some("ERROR: <input>:1:23: found no matching overload for '_==_' applied to '(optional_type(dyn), int)'"),
        ),
        (
            "object.?metadata.?labels.?app == 'x'",
            Some(
                "ERROR: <input>:1:31: found no matching overload for '_==_' applied to '(optional_type(dyn), string)'",
            ),
        ),
        ("object.?metadata.?labels.?app.orValue('') == 'x'", None),
        ("object.?metadata.?labels.?app == optional.of('x')", None),
        ("object.?metadata.?labels.?app == optional.none()", None),
        ("object.?metadata.?labels.?app == null", None),
        ("object.?spec.?paused", Some("must evaluate to bool but got optional_type(dyn)")),
        ("object.?spec.?paused.orValue(false)", Some("must evaluate to bool but got dyn")),
        ("object.?spec.?paused.value()", Some("must evaluate to bool but got dyn")),
        ("object.?spec.?paused.hasValue()", None),
        ("object.?spec.?paused.orValue(false) == true", None),
        (
            "optional.of(1) == 1",
            Some("ERROR: <input>:1:16: found no matching overload for '_==_' applied to '(optional_type(int), int)'"),
        ),
        ("optional.of(1) == optional.of(1)", None),
        (
            "optional.of(1) == optional.of('a')",
            Some(
                "ERROR: <input>:1:16: found no matching overload for '_==_' applied to '(optional_type(int), optional_type(string))'",
            ),
        ),
        (
            "optional.of(1).orValue('a') == 1",
            Some(
                "ERROR: <input>:1:23: found no matching overload for 'orValue' applied to 'optional_type(int).(string)'",
            ),
        ),
        ("optional.of(1).orValue(1) == 1", None),
        (
            "optional.of(1).value() + 'a' == 'b'",
            Some("ERROR: <input>:1:24: found no matching overload for '_+_' applied to '(int, string)'"),
        ),
        ("optional.of(1).value() + 1 == 2", None),
        ("optional.of('a').value().startsWith('a')", None),
        (
            "optional.of(1).value().startsWith('a')",
            Some("ERROR: <input>:1:34: found no matching overload for 'startsWith' applied to 'int.(string)'"),
        ),
        (
            "optional.none() == 1",
            Some("ERROR: <input>:1:17: found no matching overload for '_==_' applied to '(optional_type(dyn), int)'"),
        ),
        ("optional.none() == optional.of(1)", None),
        ("optional.none().orValue(true)", None),
        ("optional.none().orValue(1) == 1", None),
        ("optional.none().value() == 1", None),
        ("optional.none().hasValue()", None),
        ("optional.of(1).hasValue()", None),
        ("optional.of(1).or(optional.of(2)).value() == 2", None),
        (
            "optional.of(1).or(optional.of('a')).hasValue()",
            Some(
                "ERROR: <input>:1:18: found no matching overload for 'or' applied to 'optional_type(int).(optional_type(string))'",
            ),
        ),
        ("optional.of(1).or(optional.none()).value() == 1", None),
        (
            "optional.of(1).or(1).hasValue()",
            Some("ERROR: <input>:1:18: found no matching overload for 'or' applied to 'optional_type(int).(int)'"),
        ),
        ("optional.ofNonZeroValue('').hasValue()", None),
        (
            "optional.ofNonZeroValue(1).value() == 'a'",
            Some("ERROR: <input>:1:36: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        ("[?optional.of(1), ?optional.of(2)] == [1, 2]", None),
        (
            "[?optional.of(1), ?optional.of('a')] == [1]",
            Some("ERROR: <input>:1:31: expected type 'int' but found 'string'"),
        ),
        ("[?optional.of(1), 2] == [1, 2]", None),
        ("[?optional.of(1), 'a'] == [1]", Some("ERROR: <input>:1:19: expected type 'int' but found 'string'")),
        ("[?optional.none(), 1] == [1]", None),
        ("[?optional.none(), ?optional.of('a')] == ['a']", None),
        ("[optional.none(), optional.of(1)].size() == 2", None),
        (
            "[optional.of(1), optional.of('a')].size() == 2",
            Some("ERROR: <input>:1:29: expected type 'optional_type(int)' but found 'optional_type(string)'"),
        ),
        ("[optional.of(1), optional.none()][0].value() == 1", None),
        ("[optional.none(), optional.of(true)][0].value()", None),
        ("[[], [true]][0][0]", None),
        ("[[], [1]][0][0] == 1", None),
        (
            "[[], [1]][0][0] == 'a'",
            Some("ERROR: <input>:1:17: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        ("[?1] == [1]", Some("ERROR: <input>:1:3: expected type 'optional_type(int)' but found 'int'")),
        ("[?'a'] == ['a']", Some("ERROR: <input>:1:3: expected type 'optional_type(string)' but found 'string'")),
        ("{?'a': optional.of(1)} == {'a': 1}", None),
        ("{?'a': optional.of(1), 'b': 'c'} == {}", Some("ERROR: <input>:1:29: expected type 'int' but found 'string'")),
        ("{?'a': 1} == {}", Some("ERROR: <input>:1:8: expected type 'optional_type(int)' but found 'int'")),
        ("{'a': optional.of(1)}.a.value() == 1", None),
        ("object.?spec.?containers[0]", Some("must evaluate to bool but got dyn")),
        ("object.?spec.?containers[0].hasValue()", None),
        ("object.?spec.?containers[0] == 1", None),
        (
            "object.?spec.?containers['a'] == 1",
            Some("ERROR: <input>:1:31: found no matching overload for '_==_' applied to '(optional_type(dyn), int)'"),
        ),
        ("object.?spec.?containers['a'].hasValue()", None),
        ("object.?spec.?containers[0].image == 'a'", None),
        ("object.?spec.?containers[?0].hasValue()", None),
        ("object.?spec.?containers[?'a'].hasValue()", None),
        ("object.?spec.?containers[?0] == 1", None),
        (
            "object.?spec[?'a'] == 1",
            Some("ERROR: <input>:1:20: found no matching overload for '_==_' applied to '(optional_type(dyn), int)'"),
        ),
        ("object[?'spec'] == 1", None),
        ("object[?'spec'].hasValue()", None),
        ("object[?0].hasValue()", None),
        ("[1, 2][?0] == optional.of(1)", None),
        (
            "[1, 2][?0] == 1",
            Some("ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(optional_type(int), int)'"),
        ),
        (
            "[1, 2][?0].value() == 'a'",
            Some("ERROR: <input>:1:20: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        (
            "[1, 2][?'a'].hasValue()",
            Some("ERROR: <input>:1:7: found no matching overload for '_[?_]' applied to '(list(int), string)'"),
        ),
        ("{'a': 1}[?'a'].value() == 1", None),
        (
            "{'a': 1}[?'a'] == 1",
            Some("ERROR: <input>:1:16: found no matching overload for '_==_' applied to '(optional_type(int), int)'"),
        ),
        (
            "{'a': 1}[?1].hasValue()",
            Some("ERROR: <input>:1:9: found no matching overload for '_[?_]' applied to '(map(string, int), int)'"),
        ),
        (
            "{'a': [1]}.?a.value()[0] == 'a'",
            Some("ERROR: <input>:1:26: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        ("{'a': [1]}.?a[0].value() == 1", None),
        (
            "{'a': [1]}.?a[0] == 1",
            Some("ERROR: <input>:1:18: found no matching overload for '_==_' applied to '(optional_type(int), int)'"),
        ),
        (
            "{'a': [1]}.?a['x'] == 1",
            Some(
                "ERROR: <input>:1:14: found no matching overload for '_[_]' applied to '(optional_type(list(int)), string)'",
            ),
        ),
        ("{'a': {'b': 1}}.?a.?b.value() == 1", None),
        (
            "{'a': {'b': 1}}.?a.b.value() == 'x'",
            Some("ERROR: <input>:1:30: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        (
            "{'a': {'b': 1}}.?a.b == 1",
            Some("ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(optional_type(int), int)'"),
        ),
        (
            "size(object.?spec) == 1",
            Some("ERROR: <input>:1:5: found no matching overload for 'size' applied to '(optional_type(dyn))'"),
        ),
        (
            "object.?spec.size() == 1",
            Some("ERROR: <input>:1:18: found no matching overload for 'size' applied to 'optional_type(dyn).()'"),
        ),
        (
            "string(object.?spec) == 'a'",
            Some("ERROR: <input>:1:7: found no matching overload for 'string' applied to '(optional_type(dyn))'"),
        ),
        ("dyn(object.?spec) == 1", None),
        (
            "object.?spec.all(x, x == 1)",
            Some(
                "ERROR: <input>:1:7: expression of type 'optional_type(dyn)' cannot be range of a comprehension (must be list, map, or dynamic)",
            ),
        ),
        (
            "object.?spec in [1]",
            Some(
                "ERROR: <input>:1:14: found no matching overload for '@in' applied to '(optional_type(dyn), list(int))'",
            ),
        ),
        (
            "object.?spec + 1 == 1",
            Some("ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(optional_type(dyn), int)'"),
        ),
        (
            "!object.?spec",
            Some("ERROR: <input>:1:1: found no matching overload for '!_' applied to '(optional_type(dyn))'"),
        ),
        ("object.?spec && true", Some("ERROR: <input>:1:7: expected type 'bool' but found 'optional_type(dyn)'")),
        (
            "object.?spec ? true : false",
            Some(
                "ERROR: <input>:1:14: found no matching overload for '_?_:_' applied to '(optional_type(dyn), bool, bool)'",
            ),
        ),
        ("true ? object.?spec : optional.none()", Some("must evaluate to bool but got optional_type(dyn)")),
        ("(true ? object.?spec : optional.none()).hasValue()", None),
        (
            "(true ? object.?spec : 1) == 1",
            Some(
                "ERROR: <input>:1:7: found no matching overload for '_?_:_' applied to '(bool, optional_type(dyn), int)'",
            ),
        ),
        (
            "(true ? optional.of(1) : optional.of('a')).hasValue()",
            Some(
                "ERROR: <input>:1:7: found no matching overload for '_?_:_' applied to '(bool, optional_type(int), optional_type(string))'",
            ),
        ),
        ("request.?userInfo.?username.orValue('') == 'a'", None),
        (
            "request.?userInfo.?username == 'a'",
            Some(
                "ERROR: <input>:1:29: found no matching overload for '_==_' applied to '(optional_type(string), string)'",
            ),
        ),
        ("request.?userInfo.?nope.hasValue()", Some("ERROR: <input>:1:18: undefined field 'nope'")),
        ("request.?userInfo.?groups.orValue([]).size() > 0", None),
        (
            "request.?userInfo.username == 'a'",
            Some(
                "ERROR: <input>:1:28: found no matching overload for '_==_' applied to '(optional_type(string), string)'",
            ),
        ),
        ("request.?userInfo.username.value() == 'a'", None),
        (
            "request.?userInfo.username.value() == 1",
            Some("ERROR: <input>:1:36: found no matching overload for '_==_' applied to '(string, int)'"),
        ),
        ("namespaceObject.?metadata.?labels.?env.orValue('') == 'prod'", None),
        (
            "namespaceObject.?metadata.?labels.?env == 'prod'",
            Some(
                "ERROR: <input>:1:40: found no matching overload for '_==_' applied to '(optional_type(string), string)'",
            ),
        ),
        ("namespaceObject.?metadata.?labels['env'].hasValue()", None),
        (
            "namespaceObject.?metadata.?labels['env'] == 'prod'",
            Some(
                "ERROR: <input>:1:42: found no matching overload for '_==_' applied to '(optional_type(string), string)'",
            ),
        ),
        (
            "namespaceObject.metadata.?labels.?env.value() == 1",
            Some("ERROR: <input>:1:47: found no matching overload for '_==_' applied to '(string, int)'"),
        ),
        ("namespaceObject.?metadata.?generation.orValue(0) > 1", None),
        (
            "namespaceObject.?metadata.?generation.orValue('') > 1",
            Some(
                "ERROR: <input>:1:46: found no matching overload for 'orValue' applied to 'optional_type(int).(string)'",
            ),
        ),
        (
            "'%d'.format([?optional.of(1)]) == '1'",
            Some(
                "ERROR: <input>:1:26: error during formatting: decimal clause can only be used on integers, was given optional_type",
            ),
        ),
        (
            "'%d'.format([optional.of(1)]) == '1'",
            Some(
                "ERROR: <input>:1:25: error during formatting: decimal clause can only be used on integers, was given optional_type",
            ),
        ),
        (
            "'%s'.format([optional.of(1)]) == '1'",
            Some(
                "ERROR: <input>:1:25: error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given optional_type",
            ),
        ),
        (
            "'%s'.format([?optional.of(1)]) == '1'",
            Some(
                "ERROR: <input>:1:26: error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given optional_type",
            ),
        ),
        (
            "'%d'.format([?optional.of('a')]) == '1'",
            Some(
                "ERROR: <input>:1:26: error during formatting: decimal clause can only be used on integers, was given optional_type",
            ),
        ),
        ("[1].first() == optional.of(1)", None),
        (
            "[1].first().value() == 'a'",
            Some("ERROR: <input>:1:21: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        ("[1].last().orValue(0) == 1", None),
        ("[].first().hasValue()", None),
        ("object.x.first().hasValue()", None),
        ("optional.unwrap([optional.of(1)]) == [1]", None),
        (
            "optional.unwrap([optional.of(1)]) == ['a']",
            Some("ERROR: <input>:1:35: found no matching overload for '_==_' applied to '(list(int), list(string))'"),
        ),
        ("[optional.of(1)].unwrapOpt() == [1]", None),
        (
            "[optional.of(1)].unwrapOpt()[0] == 'a'",
            Some("ERROR: <input>:1:33: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        (
            "optional.unwrap([1]) == [1]",
            Some("ERROR: <input>:1:16: found no matching overload for 'optional.unwrap' applied to '(list(int))'"),
        ),
        ("format.named('dns1123Label').hasValue()", None),
        ("format.named('dns1123Label').value().validate('a').hasValue()", None),
        (
            "format.dns1123Label().validate('a') == []",
            Some(
                "ERROR: <input>:1:37: found no matching overload for '_==_' applied to '(optional_type(list(string)), list(dyn))'",
            ),
        ),
        ("format.dns1123Label().validate('a').orValue([]).size() == 0", None),
        ("object.?spec.optMap(s, s.replicas).orValue(0) > 1", None),
        (
            "object.?spec.optMap(s, 1).value() == 'a'",
            Some("ERROR: <input>:1:35: found no matching overload for '_==_' applied to '(int, string)'"),
        ),
        ("optional.of(1).optMap(x, x + 1).value() == 2", None),
        (
            "optional.of(1).optMap(x, x + 'a').hasValue()",
            Some("ERROR: <input>:1:28: found no matching overload for '_+_' applied to '(int, string)'"),
        ),
        ("optional.of(1).optFlatMap(x, optional.of(x)).value() == 1", None),
        (
            "optional.of(1).optFlatMap(x, x).hasValue()",
            Some(
                "ERROR: <input>:1:26: found no matching overload for '_?_:_' applied to '(bool, int, optional_type(dyn))'",
            ),
        ),
        ("object.x.value() == 1", None),
        ("[object.x.value(), 1].size() == 1", None),
        ("[object.x.slice(0, 1), [1]].size() == 1", None),
        ("object.?x.orValue(1) + 'a' == 'b'", None),
        ("optional.of(1).orValue(object.x) + 'a' == 'b'", None),
        ("optional.of(object.x).orValue(1) + 'a' == 'b'", None),
        ("object.?spec.?x.orValue(1) == 1 && object.?spec.?x.orValue('a') == 'a'", None),
        ("optional.of(1) != optional.none()", None),
        ("optional.of(null).hasValue()", None),
        ("optional.of(null) == null", None),
        ("null == object.?x", None),
        ("object.?spec.?containers.orValue([]).all(c, c.image != '')", None),
        ("object.?spec.?containers.orValue([]).exists(c, c.?image.orValue('') == 'a')", None),
        (
            "object.?spec.?containers.orValue([]).exists(c, c.?image == 'a')",
            Some(
                "ERROR: <input>:1:57: found no matching overload for '_==_' applied to '(optional_type(dyn), string)'",
            ),
        ),
        ("[?object.?x] == []", None),
        ("[?object.?x, 1] == [1]", Some("ERROR: <input>:1:14: expected type 'dyn' but found 'int'")),
        ("[?object.?x, ?optional.of(1)].size() == 1", Some("ERROR: <input>:1:26: expected type 'dyn' but found 'int'")),
        ("{?'k': object.?x} == {}", None),
        ("'a' + object.?x.orValue('') == 'a'", None),
        ("object.?x.orValue('') + 1 == 1", None),
        // A type parameter bound first keeps its type where a later
        // argument is of another kind that is assignable to it (`null`).
        ("optional.of(duration('1s')).orValue(null) + duration('1s') == duration('2s')", None),
        ("optional.of(request.userInfo).orValue(null).username == 'a'", None),
        (
            "optional.of(request.userInfo).orValue(null).username == 1",
            Some("ERROR: <input>:1:54: found no matching overload for '_==_' applied to '(string, int)'"),
        ),
        // Found by a second read (false refusals, now mended): a
        // receiver whose type `check` does not know, or that stands for
        // a type variable, would bind the optional's type parameter
        // there, and the argument after it does not decide the result.
        ("([object.a] + [1]).first().orValue('a') == 1", None),
        ("([1] + [object.a]).first().orValue('a') == 1", None),
        ("([object.a] + [1]).last().or(optional.of(1)).value() == 'a'", None),
        ("(true ? {'a': object.a} : {'a': 1}).?a.orValue('a') == 1", None),
        ("(true ? {'a': object.a} : {'a': 1})[?'a'].orValue('a') == 1", None),
        ("(true ? [][0] : object.?a).orValue('a') == 1", None),
        ("(true ? object.?a : [][0]).orValue('a') == 1", None),
        ("[[][0], object.?a][0].orValue('a') == 1", None),
        ("[object.?a, [][0]][1].orValue('a') == 1", None),
        ("(true ? optional.none().value() : object.?a).orValue('a') == 1", None),
        ("(true ? object.items.first().value() : object.?a).orValue('a') == 1", None),
        ("(true ? {} : {'a': object.a}).?a.orValue('a') == 1", None),
        ("[{}, {'a': object.a}][0][?'a'].orValue('a') == 1", None),
        ("([] + [object.a]).first().orValue('a') == 1", None),
        ("([object.a] + []).first().orValue('a') == 1", None),
        ("[object.a].map(x, optional.of(x))[0].orValue('a') == 1", None),
        ("[1].map(x, optional.of(object.a))[0].orValue('a') == 1", None),
        ("[1].map(x, object.?a)[0].orValue('a') == 1", None),
        ("object.items.map(x, x.?a)[0].orValue('a') == 1", None),
        ("object.items.map(x, x.?a).first().value().orValue('a') == 1", None),
        ("([object.a] + [1]).reverse().first().orValue('a') == 1", None),
        ("([object.a] + [1]).distinct().first().orValue('a') == 1", None),
        ("(true ? optional.of(1) : optional.of(object.a)).orValue('a') == 1", None),
        // A map literal's values of several types (in a format call,
        // where they may differ) are joined there, not made `dyn`.
        ("'%s'.format([{'a': object.?a, 'b': optional.of(1)}.a.orValue('a') == 1]) == ''", None),
    ];
    // What the API server says and `check` does not say yet: a type
    // variable bound after it was met (`optional.none()` beside an
    // optional of a type, an empty list beside a list of ints), which
    // `check` follows as `dyn`.
    let not_yet =
        ["[[], [1]][0][0] == 'a'", "true ? object.?spec : optional.none()", "object.?spec.optMap(s, 1).value() == 'a'"];
    assert_said(cases, &not_yet);
}
