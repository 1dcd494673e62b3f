//! Kubernetes label selector semantics (`matchLabels` and
//! `matchExpressions` with `In`, `NotIn`, `Exists`, `DoesNotExist`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A label selector, as in `metav1.LabelSelector`. The empty selector
/// matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the values are used.
    pub operator: Operator,
    /// Values for `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum Operator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// A requirement whose values do not fit its operator: `In` and `NotIn`
/// need values, `Exists` and `DoesNotExist` take none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("matchExpressions key {key:?}: {operator:?} {}", if matches!(operator, Operator::In | Operator::NotIn) { "needs values" } else { "takes no values" })]
pub struct SelectorError {
    /// The requirement's key.
    pub key: String,
    /// Its operator.
    pub operator: Operator,
}

impl LabelSelector {
    /// Refuses selectors the API server would refuse.
    pub fn check(&self) -> Result<(), SelectorError> {
        for r in &self.match_expressions {
            let takes_values = matches!(r.operator, Operator::In | Operator::NotIn);
            if takes_values == r.values.is_empty() {
                return Err(SelectorError { key: r.key.clone(), operator: r.operator });
            }
        }
        Ok(())
    }

    /// Whether `labels` satisfy the selector.
    pub fn matches<'a>(&self, labels: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| {
                let value = labels(&r.key);
                match r.operator {
                    Operator::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    Operator::NotIn => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn selector(yaml: &str) -> LabelSelector {
        serde_yaml::from_str(yaml).unwrap_or_default()
    }

    #[rstest]
    #[case("{}", &[], true)]
    #[case("{matchLabels: {team: a}}", &[("team", "a")], true)]
    #[case("{matchLabels: {team: a}}", &[("team", "b")], false)]
    #[case("{matchExpressions: [{key: env, operator: In, values: [prod, staging]}]}", &[("env", "prod")], true)]
    #[case("{matchExpressions: [{key: env, operator: In, values: [prod]}]}", &[], false)]
    #[case("{matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}", &[], true)]
    #[case("{matchExpressions: [{key: env, operator: NotIn, values: [dev]}]}", &[("env", "dev")], false)]
    #[case("{matchExpressions: [{key: env, operator: Exists}]}", &[("env", "")], true)]
    #[case("{matchExpressions: [{key: env, operator: DoesNotExist}]}", &[("env", "x")], false)]
    #[case("{matchLabels: {a: '1'}, matchExpressions: [{key: b, operator: Exists}]}", &[("a", "1")], false)]
    fn label_selector_semantics(#[case] yaml: &str, #[case] labels: &[(&str, &str)], #[case] expected: bool) {
        let s = selector(yaml);
        assert_eq!(s.matches(|k| labels.iter().find(|(lk, _)| *lk == k).map(|(_, v)| *v)), expected, "{yaml}");
    }

    #[test]
    fn refuses_what_the_api_server_refuses() {
        assert!(selector("{matchExpressions: [{key: a, operator: In}]}").check().is_err());
        assert!(selector("{matchExpressions: [{key: a, operator: Exists, values: [x]}]}").check().is_err());
    }
}
