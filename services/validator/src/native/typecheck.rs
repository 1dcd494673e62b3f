//! The API server's type checking of a ValidatingAdmissionPolicy, offline:
//! what its status controller writes in `status.typeChecking` after the
//! policy is created (`k8s.io/apiserver/.../validating.TypeChecker`). Each
//! validation's expression and message expression is checked once per
//! kind the policy's `matchConstraints` name exactly (no wildcard, no
//! subresource; at most 10 kinds, sorted by group, version and kind), with
//! `object` and `oldObject` of that kind's schema and `params` of the
//! `paramKind`'s. A finding is a warning: the policy runs as written, and
//! a field it reads that is not there is never set.
//!
//! The schemas are the built-in kinds' of the API groups
//! [`portcullis_cel::schemas::BUILTIN`] has (core, apps, batch, networking,
//! RBAC, policy, autoscaling, storage and a few more), and those `check
//! --schema` reads (a CRD, an API server's OpenAPI v3 document); a kind without one is not checked
//! (the API server would check it with its own schema). Only undefined
//! fields are found ([`portcullis_cel::typecheck`]).

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicySpec};
use portcullis_cel::refusal::{checked_variable_type, type_checked};
use portcullis_cel::schemas::Schemas;
use portcullis_cel::typecheck::{Objects, Typed, Variable};
use portcullis_cel::types::DeclType;

/// The most kinds the API server checks a policy against.
const MAX_KINDS: usize = 10;

/// One entry of `status.typeChecking.expressionWarnings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionWarning {
    /// The expression's field (`spec.validations[0].expression`).
    pub field_ref: String,
    /// What was found, kind by kind, in the API server's words.
    pub warning: String,
}

/// What the API server's type checking finds in `policy` with the kinds'
/// `schemas`, in the order of its validations.
pub fn check(policy: &ValidatingAdmissionPolicy, schemas: &Schemas) -> Vec<ExpressionWarning> {
    let Some(spec) = &policy.spec else { return Vec::new() };
    let kinds: Vec<((String, String, String), DeclType)> = kinds_to_check(spec, schemas)
        .into_iter()
        .filter_map(|(g, v, k)| Some(((g.clone(), v.clone(), k.clone()), schemas.kind(&g, &v, &k)?)))
        .collect();
    if kinds.is_empty() {
        return Vec::new();
    }
    let params = spec.param_kind.as_ref().and_then(|kind| {
        let api_version = kind.api_version.as_deref()?;
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        schemas.kind(group, version, kind.kind.as_deref()?)
    });
    // The status controller types the variables by each kind's schema,
    // in order: a scalar (`object.spec.replicas`), or a list or map of
    // them, has its type; an object is `dyn`.
    let variables: Vec<Vec<Variable>> =
        kinds.iter().map(|(_, object)| typed_variables(spec, object, params.as_ref())).collect();
    let found = |source: &str| {
        let per_kind: Vec<String> = kinds
            .iter()
            .zip(&variables)
            .filter_map(|(((group, version, kind), object), variables)| {
                let objects = Objects::Schemas { object, params: params.as_ref() };
                let typed = Typed { objects, variables: Some(variables) };
                let issues = type_checked(source, typed)?;
                Some(format!("{group}/{version}, Kind={kind}: {issues}\n"))
            })
            .collect();
        (!per_kind.is_empty()).then(|| per_kind.join("\n"))
    };
    let mut warnings = Vec::new();
    for (i, validation) in spec.validations.iter().flatten().enumerate() {
        let fields = [
            ("expression", Some(&validation.expression)),
            ("messageExpression", validation.message_expression.as_ref()),
        ];
        for (field, source) in fields {
            if let Some(warning) = source.filter(|s| !s.is_empty()).and_then(|s| found(s)) {
                warnings.push(ExpressionWarning { field_ref: format!("spec.validations[{i}].{field}"), warning });
            }
        }
    }
    warnings
}

/// [`check`]'s findings in every policy of a file, as warnings that say
/// where they are (`ValidatingAdmissionPolicy "p": spec.validations[0].expression:
/// ...`), in the order of the policies' names.
pub fn warnings(policies: &[ValidatingAdmissionPolicy], schemas: &Schemas) -> Vec<String> {
    let mut sorted: Vec<&ValidatingAdmissionPolicy> = policies.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = Vec::new();
    for policy in sorted {
        let name = policy.metadata.name.as_deref().unwrap_or_default();
        for found in check(policy, schemas) {
            out.push(format!(
                "ValidatingAdmissionPolicy {name:?}: {}: type checking (the API server's status.typeChecking; the \
                 policy runs, and a field that is not there is never set):\n{}",
                found.field_ref,
                found.warning.trim_end()
            ));
        }
    }
    out
}

/// The policy's variables as the status controller types them for the
/// kind `object` (and `params`), each seeing those before it.
fn typed_variables<'a>(
    spec: &'a ValidatingAdmissionPolicySpec,
    object: &DeclType,
    params: Option<&DeclType>,
) -> Vec<Variable<'a>> {
    let mut typed: Vec<Variable<'a>> = Vec::new();
    for variable in spec.variables.iter().flatten() {
        let seen = Typed { objects: Objects::Schemas { object, params }, variables: Some(&typed) };
        let value = checked_variable_type(&variable.expression, seen);
        typed.push(Variable { name: &variable.name, value });
    }
    typed
}

/// The kinds the API server checks `spec` against (`typesToCheck`): of
/// each resource rule without a wildcard group or version, each resource
/// named without a wildcard or a subresource, as the kinds the RESTMapper
/// finds for it ([`Schemas::kinds_for`]), kinds without a schema counted
/// too; once a rule has given [`MAX_KINDS`], those found so far. Sorted by
/// group, version and kind.
fn kinds_to_check(spec: &ValidatingAdmissionPolicySpec, schemas: &Schemas) -> Vec<(String, String, String)> {
    let rules = spec.match_constraints.as_ref().and_then(|m| m.resource_rules.as_ref());
    let mut kinds = BTreeSet::new();
    for rule in rules.into_iter().flatten() {
        let names = |list: &Option<Vec<String>>| -> Option<Vec<String>> {
            let list = list.as_deref().unwrap_or_default();
            (!list.is_empty() && !list.iter().any(|g| g.contains('*'))).then(|| list.to_vec())
        };
        let (Some(mut groups), Some(mut versions)) = (names(&rule.api_groups), names(&rule.api_versions)) else {
            continue;
        };
        let mut resources: Vec<&String> = rule.resources.iter().flatten().filter(|r| !r.contains(['*', '/'])).collect();
        groups.sort();
        versions.sort();
        resources.sort();
        let mut count = 0;
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    for (g, v, kind) in schemas.kinds_for(group, version, resource) {
                        kinds.insert((g.to_owned(), v.to_owned(), kind.to_owned()));
                        count += 1;
                        if count == MAX_KINDS {
                            return kinds.into_iter().collect();
                        }
                    }
                }
            }
        }
    }
    kinds.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use portcullis_cel::schemas::BUILTIN;

    use super::*;

    fn policy(yaml: &str) -> ValidatingAdmissionPolicy {
        serde_yaml::from_str(yaml).expect("a policy")
    }

    #[test]
    fn each_kind_matched_is_checked_in_the_api_servers_words() {
        let policy = policy(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typos}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["deployments"]}
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods", "pods/status", "configmaps"]}
  validations:
  - expression: "object.spec.replicsa > 1"
  - expression: "object.metadata.name != ''"
    messageExpression: "'x' + object.metadata.nme"
"#,
        );
        // `status.typeChecking` as kube-apiserver 1.36 wrote it for this policy.
        let line = " | object.spec.replicsa > 1";
        let expected = vec![
            ExpressionWarning {
                field_ref: "spec.validations[0].expression".into(),
                warning: format!(
                    "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'spec'\n{line}\n | ......^\n\n/v1, \
                     Kind=Pod: ERROR: <input>:1:12: undefined field 'replicsa'\n{line}\n | ...........^\n\napps/v1, \
                     Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicsa'\n{line}\n | ...........^\n"
                ),
            },
            ExpressionWarning {
                field_ref: "spec.validations[1].messageExpression".into(),
                warning: ["/v1, Kind=ConfigMap", "/v1, Kind=Pod", "apps/v1, Kind=Deployment"]
                    .map(|kind| {
                        format!(
                            "{kind}: ERROR: <input>:1:22: undefined field 'nme'\n | 'x' + object.metadata.nme\n | \
                             .....................^\n"
                        )
                    })
                    .join("\n"),
            },
        ];
        assert_eq!(check(&policy, &BUILTIN), expected);
    }

    #[test]
    fn wildcards_and_unknown_kinds_are_not_checked() {
        let policy = policy(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: wide}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ["*"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["deployments"]}
    - {apiGroups: ["example.com"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["widgets"]}
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["*"]}
  validations:
  - expression: "object.spec.replicsa > 1"
"#,
        );
        assert_eq!(check(&policy, &BUILTIN), Vec::new());
    }

    #[test]
    fn rules_name_kinds_as_the_api_servers_rest_mapper_finds_them() {
        let kinds = |rules: &str| {
            let yaml = format!(
                "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: k}}\n\
                 spec:\n  matchConstraints:\n    resourceRules:\n{rules}  validations:\n  - expression: 'true'\n"
            );
            let spec = policy(&yaml).spec.expect("a spec");
            kinds_to_check(&spec, &BUILTIN).into_iter().map(|(g, v, k)| format!("{g}/{v}/{k}")).collect::<Vec<_>>()
        };
        // A subresource's kind is not a resource's: only the PDB.
        let policy_group =
            "    - {apiGroups: [policy], apiVersions: [v1], resources: [evictions, poddisruptionbudgets]}\n";
        assert_eq!(kinds(policy_group), ["policy/v1/PodDisruptionBudget"]);
        // The core group's name is empty, which the RESTMapper takes as any
        // group; a resource is found by its singular too.
        let any_group = "    - {apiGroups: [''], apiVersions: [v1], resources: [deployment, Jobs, pods]}\n";
        assert_eq!(kinds(any_group), ["/v1/Pod", "apps/v1/Deployment", "batch/v1/Job"]);
    }
}
