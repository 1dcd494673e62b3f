//! Native policies and bindings that the API server refuses are refused
//! by `check` in the API server's words. Each case is created in the real
//! API server (server-side dry run) and given to `portcullis-validator
//! check`: the field errors must be the same, in the same order, one for
//! one; and a valid pair, taken by both, is taken by `check` too. No case
//! has two entries of a selector's `matchLabels` wrong in different words:
//! the API server checks them in Go's random map order.

use portcullis_e2e::{check_policies, cluster};

/// A policy with `spec` as its spec (flow YAML, one line per field).
fn policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    )
}

/// A Deny binding of the policy `name`, as the next document.
fn binding(name: &str) -> String {
    format!(
        "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: {name}}}\nspec: {{policyName: {name}, validationActions: [Deny]}}\n"
    )
}

const RULES: &str = "  matchConstraints:\n    resourceRules:\n    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], \
                     resources: [deployments]}\n";
const VALIDATIONS: &str = "  validations:\n  - {expression: 'object.spec.replicas <= 5'}\n";

/// Each case: what it shows, and the one object's YAML.
fn cases() -> Vec<(&'static str, String)> {
    let long_name = format!("{}.example.com", "a".repeat(250));
    vec![
        (
            "a message with a line break",
            policy(
                "line-break.example.com",
                &format!("{RULES}  validations:\n  - {{expression: 'object.spec.replicas <= 5', message: \"at most\\nfive\"}}\n"),
            ),
        ),
        (
            "messages of spaces only",
            policy(
                "spaces.example.com",
                &format!("{RULES}  validations:\n  - {{expression: 'true', message: '  ', messageExpression: '  '}}\n"),
            ),
        ),
        (
            "rules without groups, versions, resources or a known operation",
            policy(
                "rules.example.com",
                &format!(
                    "  matchConstraints:\n    resourceRules:\n    - {{apiGroups: [], apiVersions: ['*', v1], operations: [PATCH], \
                     resources: []}}\n{VALIDATIONS}"
                ),
            ),
        ),
        (
            "match conditions and variables badly named",
            policy(
                "names.example.com",
                &format!(
                    "{RULES}  matchConditions:\n  - {{name: 'not a name', expression: 'true'}}\n  - {{name: a/b/c, expression: 'true'}}\n  \
                     - {{name: example.com/x, expression: 'true'}}\n  - {{name: example.com/x, expression: 'true'}}\n  \
                     - {{name: -x, expression: 'true'}}\n  variables:\n  - {{name: in, expression: '1'}}\n  - {{name: 2x, expression: '1'}}\n{VALIDATIONS}"
                ),
            ),
        ),
        ("no matchConstraints", policy("unmatched.example.com", VALIDATIONS)),
        (
            "a reason, a failure policy, a scope and a match policy the API server does not know, '*' beside an operation",
            policy(
                "unknown-values.example.com",
                "  failurePolicy: Sometimes\n  matchConstraints:\n    matchPolicy: Loose\n    resourceRules:\n    \
                     - {apiGroups: [apps], apiVersions: [v1], operations: ['*', CREATE], resources: [deployments], scope: Everywhere}\n  \
                     validations:\n  - {expression: 'true', reason: Unauthorized}\n",
            ),
        ),
        (
            "audit annotations keyed badly and twice, one without a value",
            policy(
                "annotations.example.com",
                &format!(
                    "{RULES}  auditAnnotations:\n  - {{key: a-, valueExpression: \"'x'\"}}\n  - {{key: k, valueExpression: \"'x'\"}}\n  \
                     - {{key: k, valueExpression: '  '}}\n"
                ),
            ),
        ),
        ("neither validations nor audit annotations", policy("empty.example.com", RULES)),
        (
            "wildcard resources beside others, resource names that are not path segments or twice",
            policy(
                "resources.example.com",
                &format!(
                    "  matchConstraints:\n    resourceRules:\n    - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE], \
                     resources: ['*/*', pods]}}\n    - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE], \
                     resources: ['*', pods, 'pods/*', pods/log, '*/status', deployments/status]}}\n    \
                     - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods], resourceNames: [a/b, '..', x, x]}}\n\
                     {VALIDATIONS}"
                ),
            ),
        ),
        (
            "no resourceRules",
            policy("no-rules.example.com", &format!("  matchConstraints: {{namespaceSelector: {{}}}}\n{VALIDATIONS}")),
        ),
        ("a name that is not a DNS subdomain", policy("Not_A_Name", &format!("{RULES}{VALIDATIONS}"))),
        ("a name over 253 characters", policy(&long_name, &format!("{RULES}{VALIDATIONS}"))),
        (
            "a binding with name and selector, no parameterNotFoundAction, an action twice",
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {name: bad-binding.example.com}\nspec:\n  policyName: Some_Policy\n  validationActions: [Deny, Deny]\n  \
             paramRef: {name: lim/its, selector: {matchLabels: {a: b}}}\n"
                .to_owned(),
        ),
        (
            "a binding with Deny, Warn and an unknown action, Deny twice",
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {name: actions.example.com}\nspec:\n  policyName: p\n  validationActions: [Deny, Warn, Block, Deny]\n"
                .to_owned(),
        ),
        (
            "selectors with a bad label key and value, an unknown operator, In without values, Exists with values",
            policy(
                "selectors.example.com",
                &format!(
                    "  matchConstraints:\n    namespaceSelector: {{matchLabels: {{-team: a_}}, matchExpressions: \
                     [{{key: a/b/c, operator: Gt, values: ['x y']}}, {{key: k, operator: In}}]}}\n    \
                     objectSelector: {{matchExpressions: [{{key: '', operator: Exists, values: [v]}}, \
                     {{key: k, operator: '<In>'}}]}}\n    resourceRules:\n    - {{apiGroups: [apps], apiVersions: [v1], \
                     operations: [PATCH], resources: [deployments]}}\n{VALIDATIONS}"
                ),
            ),
        ),
        (
            "the same error twice in matchLabels, said once; values Go quotes with escapes",
            policy(
                "label-values.example.com",
                &format!(
                    "  matchConstraints:\n    namespaceSelector: {{matchLabels: {{a: -x, b: -x}}}}\n    \
                     objectSelector: {{matchExpressions: [{{key: k, operator: In, values: [\"a\\u00a0b\", \
                     \"c\\u200bd\\ufeff\", \"e\\u2028\\U000E0001\"]}}]}}\n    resourceRules:\n    \
                     - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}\n{VALIDATIONS}"
                ),
            ),
        ),
        (
            "a paramKind with a bad group, version and kind",
            policy(
                "param-kind.example.com",
                &format!("  paramKind: {{apiVersion: Example.com/V1, kind: 1Config_Map}}\n{RULES}{VALIDATIONS}"),
            ),
        ),
        (
            "a paramKind with two slashes and no kind",
            policy("param-kind-slashes.example.com", &format!("  paramKind: {{apiVersion: a/b/v1}}\n{RULES}{VALIDATIONS}")),
        ),
        (
            "a paramKind with a group and no version, a kind too long",
            policy(
                "param-kind-no-version.example.com",
                &format!("  paramKind: {{apiVersion: example.com/, kind: {}}}\n{RULES}{VALIDATIONS}", "K".repeat(64)),
            ),
        ),
        (
            "a paramKind whose version is too long and no label",
            policy(
                "param-kind-long-version.example.com",
                &format!("  paramKind: {{apiVersion: 'x/{}-', kind: Limits}}\n{RULES}{VALIDATIONS}", "v".repeat(63)),
            ),
        ),
        (
            "a binding's selectors: matchResources' and paramRef's beside a name",
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {name: selectors-binding.example.com}\nspec:\n  policyName: p\n  validationActions: [Deny]\n  \
             paramRef: {name: limits, selector: {matchExpressions: [{key: k, operator: Exists, values: [v]}]}, \
             parameterNotFoundAction: Deny}\n  matchResources:\n    namespaceSelector: {matchLabels: {example.com/: x}}\n    \
             objectSelector: {matchExpressions: [{key: k, operator: NotIn, values: []}]}\n"
                .to_owned(),
        ),
        (
            "a binding with neither name nor selector, an unknown action on no params",
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {name: empty-ref.example.com}\nspec:\n  policyName: p\n  validationActions: [Warn]\n  \
             paramRef: {parameterNotFoundAction: Ignore}\n"
                .to_owned(),
        ),
    ]
}

/// The API server's field errors for `yaml`, as its 422 message lists
/// them (`[a, b]` for several); `None` when it takes it.
fn api_server(yaml: &str) -> Option<String> {
    let out = cluster().kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], yaml);
    if out.status.success() {
        return None;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (_, errors) = stderr.split_once(" is invalid: ").unwrap_or_else(|| panic!("not a 422: {stderr}"));
    // kubectl lists several errors one a line, each after "* ".
    let causes: Vec<&str> = errors.split("\n* ").map(str::trim).filter(|c| !c.is_empty()).collect();
    Some(if causes.len() == 1 { causes[0].to_owned() } else { format!("[{}]", causes.join(", ")) })
}

/// `check`'s field errors for `yaml`, as its error says them; `None` when
/// it takes it.
fn check(yaml: &str) -> Option<String> {
    let stderr = check_error(yaml)?;
    let (_, errors) = stderr.split_once(" is invalid: ").unwrap_or_else(|| panic!("not refused as invalid: {stderr}"));
    Some(errors.lines().next().unwrap_or_default().trim().to_owned())
}

#[test]
fn check_refuses_what_the_api_server_refuses_in_its_words() {
    let mut differences = Vec::new();
    for (what, yaml) in cases() {
        let theirs = api_server(&yaml).unwrap_or_else(|| panic!("the API server takes {what}"));
        let ours = check(&yaml);
        if ours.as_deref() != Some(theirs.as_str()) {
            differences.push(format!("{what}:\n  API server: {theirs}\n  check:      {ours:?}"));
        }
    }
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
}

#[test]
fn a_valid_pair_is_taken_by_both() {
    let yaml = format!(
        "{}---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: valid.example.com}}\nspec:\n  policyName: valid.example.com\n  validationActions: [Deny]\n",
        policy(
            "valid.example.com",
            &format!(
                "{RULES}  matchConditions:\n  - {{name: example.com/Has-Replicas_1, expression: 'has(object.spec.replicas)'}}\n  \
                 variables:\n  - {{name: _max, expression: '5'}}\n  validations:\n  - {{expression: \"request.?userInfo.orValue(object).usrname \
                 == ''\"}}\n  - {{expression: 'object.spec.replicas <= variables._max', \
                 message: \"  at most five\\n\", reason: RequestEntityTooLarge}}\n  auditAnnotations:\n  \
                 - {{key: Replicas_2, valueExpression: 'string(object.spec.replicas)'}}\n"
            )
        )
    );
    let generated = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{generateName: gen-}}\n\
         spec:\n{RULES}  auditAnnotations: [{{key: k, valueExpression: \"'v'\"}}]\n"
    );
    // Edges of the selectors and of paramKind: a prefixed key with an
    // empty value, Exists with an empty list, no group before `/`, a kind
    // in mixed case.
    let edges = policy(
        "valid-edges.example.com",
        &format!(
            "  paramKind: {{apiVersion: /v1, kind: Limit-Range2}}\n  matchConstraints:\n    namespaceSelector: \
             {{matchLabels: {{example.com/Team_1: ''}}, matchExpressions: [{{key: a, operator: Exists, values: []}}, \
             {{key: b, operator: NotIn, values: [x, '']}}]}}\n    resourceRules:\n    - {{apiGroups: [apps], \
             apiVersions: [v1], operations: [CREATE], resources: [deployments]}}\n{VALIDATIONS}"
        ),
    );
    let yaml = format!("{yaml}---\n{generated}---\n{edges}");
    for document in yaml.split("---\n") {
        assert_eq!(api_server(document), None, "the API server takes {document}");
    }
    assert_eq!(check(&yaml), None, "check takes it");
}

/// `check`'s error output for `yaml`, or `None` when it takes it.
fn check_error(yaml: &str) -> Option<String> {
    let out = check_policies(yaml, &[]);
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Names Kubernetes' CEL does not declare: the API server's type checker
/// refuses the policy (`undeclared reference to 'x'`), and so does
/// `check`, naming the same name, even where evaluation would never reach
/// it; names it declares are taken by both, the variables of the macros of
/// cel-go's extensions (`all(i, c, ...)`, `sortBy`, `optMap`) among them.
#[test]
fn names_kubernetes_does_not_declare_are_refused_by_both() {
    let pair = |name: &str, expression: &str| {
        let spec = format!("{RULES}  validations:\n  - expression: {expression:?}\n");
        format!("{}{}", policy(name, &spec), binding(name))
    };
    let refused = [
        ("object.spec.replicas <= 4 || foo", "foo"),
        ("objet.spec.replicas <= 5", "objet"),
        ("math.greatest(1, 2) == 2", "math"),
        ("base64.encode(b'a') == 'YQ=='", "base64"),
        ("cel.bind(r, object.spec.replicas, r <= 5)", "cel"),
        ("object.spec.template.spec.containers.all(c, c.name != '') && c.image != ''", "c"),
        // A function no library declares; a macro's name with other
        // arguments (`existsOne` takes two variables).
        ("object.spec.replicas.foo() == 1", "foo"),
        ("[1, 2].existsOne(x, x == 1)", "existsOne"),
    ];
    let mut differences = Vec::new();
    for (i, (expression, name)) in refused.iter().enumerate() {
        let yaml = pair(&format!("undeclared-{i}.example.com"), expression);
        let words = format!("undeclared reference to '{name}' (in container '')");
        let theirs = api_server(yaml.split("---\n").next().unwrap_or_default());
        let ours = check_error(&yaml);
        if !theirs.as_deref().is_some_and(|t| t.contains(&words))
            || !ours.as_deref().is_some_and(|o| o.contains(&words))
        {
            differences.push(format!("{expression}:\n  API server: {theirs:?}\n  check:      {ours:?}"));
        }
    }
    let taken = [
        "optional.none().orValue(1) == lists.range(3).size() && sets.contains([1], [1])",
        "strings.quote('a') != '' && !format.dns1123Label().validate('a').hasValue()",
        "type(object.spec.replicas) == int && object.spec.template.spec.containers.all(c, c.ports.all(p, c.name != ''))",
        // The macros of cel-go's extensions, with their variables.
        "object.spec.template.spec.containers.all(i, c, c.name != '' && i >= 0)",
        "[3, 1].sortBy(x, x) == [1, 3]",
        "object.?spec.?replicas.optMap(r, r <= 5).orValue(true)",
        "object.spec.template.metadata.?labels.optFlatMap(l, l.?app).orValue('') != 'x'",
        "object.spec.template.spec.containers.transformMap(i, c, c.name).size() >= 0",
        // The functions of Kubernetes' libraries, by name (the interpreter
        // registers every one, or `check` knows it declared).
        "'a'.lowerAscii().upperAscii().trim().replace('a', 'b').split(',').join('') != '' && 'abc'.indexOf('b') == 1 \
         && 'abc'.lastIndexOf('b') == 1 && 'abc'.charAt(0) == 'a' && 'abc'.substring(1) == 'bc' && 'a %s'.format(['b']) != '' \
         && url('https://a:1/p?q=1').getPort() == '1' && url('https://a').getScheme() == 'https' && !isURL('x') \
         && url('https://a/p').getEscapedPath() == '/p' && url('https://a/?q=1').getQuery().size() == 1 \
         && url('https://a').getHostname() == url('https://a').getHost() && isQuantity('1') && quantity('1').isInteger() \
         && quantity('1').add(1).sub(1).asInteger() == 1 && quantity('1').compareTo(quantity('2')) < 0 \
         && quantity('1').asApproximateFloat() > 0.0 && quantity('1').isLessThan(quantity('2')) \
         && [1, 2].isSorted() && [1, 2].sum() == 3 && [1, 2].min() == 1 && [1, 2].max() == 2 && [1, 2].indexOf(2) == 1 \
         && [1].lastIndexOf(1) == 0 && [1].slice(0, 1) == [1] && [[1]].flatten() == [1] && [1, 1].distinct() == [1] \
         && ['b', 'a'].sort() == ['a', 'b'] && [1, 2].first().hasValue() && [1, 2].last().value() == 2 \
         && [1, 2].reverse() == [2, 1] && 'a'.find('a') == 'a' && 'a'.findAll('a').size() == 1 && isIP('1.2.3.4') \
         && ip('1.2.3.4').family() == 4 && !ip('1.2.3.4').isLoopback() && ip('1.2.3.4').isGlobalUnicast() \
         && !ip('1.2.3.4').isLinkLocalMulticast() && !ip('1.2.3.4').isLinkLocalUnicast() && !isCIDR('x') \
         && cidr('10.0.0.0/8').containsIP(ip('10.0.0.1')) && cidr('10.0.0.0/8').containsCIDR(cidr('10.1.0.0/16')) \
         && cidr('10.0.0.0/8').prefixLength() == 8 && !cidr('10.0.0.0/8').ip().isUnspecified() \
         && cidr('10.0.0.0/8').masked() == cidr('10.0.0.0/8') && isSemver('1.0.0') && semver('1.0.0').major() == 1 \
         && semver('1.0.0').minor() == semver('1.0.0').patch() && semver('1.0.0').isGreaterThan(semver('0.1.0')) \
         && duration('1h').getHours() == 1 && timestamp('2020-01-01T00:00:00Z').getFullYear() == 2020 \
         && timestamp('2020-01-01T00:00:00Z').getDayOfWeek() >= 0 && bool('true') && dyn(1) == int('1') \
         && uint(1) == 1u && double(1) == 1.0 && bytes('a') == b'a' && type(1) == int",
    ];
    for (i, expression) in taken.iter().enumerate() {
        let yaml = pair(&format!("declared-{i}.example.com"), expression);
        let theirs = api_server(yaml.split("---\n").next().unwrap_or_default());
        let ours = check_error(&yaml);
        if theirs.is_some() || ours.is_some() {
            differences.push(format!("{expression}:\n  API server: {theirs:?}\n  check:      {ours:?}"));
        }
    }
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
}

/// Expressions the API server's compiler refuses: `check` says what it
/// says, word for word, for every field at once (`compilation failed:`,
/// each error's position, the line and the caret): syntax errors, names
/// it does not declare (`params` without a `paramKind`, `authorizer` in a
/// message expression), a match condition and an audit annotation
/// compiled trimmed, a macro's misuse, fields the environment types
/// (`request.uid` is not one), and what each field must evaluate to.
#[test]
fn compile_errors_are_the_api_servers_word_for_word() {
    let every_field = format!(
        "{RULES}  matchConditions:\n  - {{name: mc, expression: '  objet.x'}}\n  variables:\n  - {{name: v, expression: \
         'bar + 1'}}\n  validations:\n  - {{expression: 'foo || baz || foo'}}\n  - {{expression: 'Object{{}} == null'}}\n  \
         - {{expression: 'true', messageExpression: 'params.x + string(authorizer)'}}\n  auditAnnotations:\n  - {{key: k, \
         valueExpression: \" 'a' + q\"}}\n"
    );
    // Fields the API server's environment types: `request`,
    // `namespaceObject` and `variables` (a variable sees those before it;
    // a match condition has none).
    let typed_fields = format!(
        "{RULES}  matchConditions:\n  - {{name: m, expression: \"variables.b == 1 && namespaceObject.spec.finalizer == []\"}}\n  \
         variables:\n  - {{name: a, expression: 'variables.b'}}\n  - {{name: b, expression: '1'}}\n  validations:\n  \
         - expression: \"request.usrInfo.username == 'a' || namespaceObject.metadata.lables.a == 'b' || variables.nope == 1 \
         || request.options.x == 1 || has(request.userInfo.foo) || size(request.uid) > 0 || request.dryRun.x\"\n  \
         auditAnnotations:\n  - {{key: k, valueExpression: 'string(request.resource.resrc)'}}\n"
    );
    // What each field must evaluate to: a validation and a match condition
    // a bool, a message a string, an audit annotation a string or null.
    let result_types = format!(
        "{RULES}  matchConditions:\n  - {{name: m1, expression: \"'x'\"}}\n  - {{name: m2, expression: object.spec.paused}}\n  \
         validations:\n  - {{expression: object.spec.paused, messageExpression: object.metadata.name}}\n  - {{expression: '1', \
         messageExpression: request.dryRun}}\n  - {{expression: request.name, messageExpression: \"'a' + object.metadata.name\"}}\n  \
         - {{expression: 'object.spec.replicas + 1', messageExpression: 'size(object.spec)'}}\n  - {{expression: 'has(object.spec) \
         ? true : object.spec.paused', messageExpression: \"object.metadata.name + 'a'\"}}\n  - {{expression: '[1].all(x, x > 0)'}}\n  \
         auditAnnotations:\n  - {{key: a, valueExpression: '1'}}\n  - {{key: b, valueExpression: 'null'}}\n  - {{key: c, \
         valueExpression: object.metadata.name}}\n  - {{key: d, valueExpression: 'object.spec.x + object.spec.y'}}\n"
    );
    // A variable's value has its expression's type (an object's is
    // `dyn`): what reads it is refused for the result and the field
    // selections that type refuses.
    let variable_types = format!(
        "{RULES}  variables:\n  - {{name: name, expression: object.metadata.name}}\n  - {{name: text, expression: \"'a'\"}}\n  \
         - {{name: big, expression: 'object.spec.replicas > 1'}}\n  - {{name: user, expression: request.userInfo}}\n  \
         - {{name: groups, expression: request.userInfo.groups}}\n  - {{name: labels, expression: namespaceObject.metadata.labels}}\n  \
         - {{name: both, expression: 'variables.text + variables.name'}}\n  validations:\n  \
         - {{expression: variables.name, messageExpression: variables.name}}\n  \
         - {{expression: variables.text, messageExpression: variables.big}}\n  \
         - {{expression: variables.groups, messageExpression: variables.both}}\n  \
         - {{expression: \"variables.user.x == 1 || variables.text.x == 1 || variables.labels.x == 'a' || variables.big.y\", \
         messageExpression: variables.labels}}\n  auditAnnotations:\n  - {{key: a, valueExpression: variables.big}}\n"
    );
    let mut specs = vec![
        ("every-field.example.com".to_owned(), every_field),
        ("variable-types.example.com".to_owned(), variable_types),
        ("typed-fields.example.com".to_owned(), typed_fields),
        ("result-types.example.com".to_owned(), result_types),
    ];
    for (i, expression) in [
        "object.",
        "object.spec.replicas <= (1",
        "1 + ",
        "'abc",
        "[1, 2",
        "object.spec.replicas ++ 1",
        "object.spec.template.spec.containers.all(i, i, true)",
        "object.spec.template.spec.containers.all(1, true)",
        "math.greatest(1, 2) == 2 && base64.encode(b'a') == ''",
        "object.spec.replicas <= 5 &&\n  objet.spec.paused",
        "foo.optMap(x, x).hasValue() && foo.size() > 0",
        // A policy without variables has no `variables`.
        "variables.x == 1",
        "object.spec.template.spec.containers.sortBy(1, 1).size() > 0",
        // Functions no library declares, and macros' names with other
        // arguments: `existsOne` takes two variables.
        "[1, 2].foo(1) == 1 || bar(object) || [1].all(true) || [1, 2].existsOne(x, x == 1)",
        // Calls no overload takes (`check` models the standard operators
        // and functions, for arguments whose types are certain).
        "'a' + 1 == 'b' || size(true) == 1 || object.x.startsWith(1) || (1 + 1) && true || !1",
        "[1] == ['a'] || 1 in {'a': 1} || request.userInfo.groups + [1] == [] || duration('1s') < 1 || 1u == 1",
        // Columns count characters; those beyond ASCII get wide dots.
        "'é日' == foo || request.usr == '😀'",
        "'é' == (1",
        "1 + é",
        "'a\tb' == foo",
    ]
    .iter()
    .enumerate()
    {
        let spec = format!("{RULES}  validations:\n  - expression: {expression:?}\n");
        specs.push((format!("syntax-{i}.example.com"), spec));
    }
    let mut differences = Vec::new();
    for (name, spec) in &specs {
        let document = policy(name, spec);
        let theirs = api_server(&document);
        let ours = check_error(&format!("{document}{}", binding(name)))
            .and_then(|e| e.split_once(" is invalid: ").map(|(_, errors)| errors.trim().to_owned()));
        if theirs.is_none() || theirs != ours {
            differences.push(format!("{name}:\n  API server: {theirs:?}\n  check:      {ours:?}"));
        }
    }
    assert!(differences.is_empty(), "{} differences:\n{}", differences.len(), differences.join("\n"));
}
