//! The parts of a policy and binding that select objects: `paramKind`,
//! label selectors (as apimachinery's `ValidateLabelSelector`) and
//! `paramRef`, checked as the API server checks them.

use k8s_openapi::api::admissionregistration::v1::{ParamKind, ParamRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::Errors;
use super::formats::{dns_1035_label, dns_subdomain, label_value, path_segment};
use super::go::json as go_json;

impl Errors {
    /// `paramKind`: a group version (the group a DNS subdomain, the
    /// version a DNS label) and a kind that is a DNS label but for case.
    pub(super) fn param_kind(&mut self, kind: &ParamKind) {
        let field = "spec.paramKind.apiVersion";
        match kind.api_version.as_deref().unwrap_or_default() {
            "" => self.required(field, ""),
            api_version => match group_version(api_version) {
                None => self.invalid(field, api_version, &format!("unexpected GroupVersion string: {api_version}")),
                Some((group, version)) => {
                    let problems = dns_subdomain(group, "characters");
                    if !group.is_empty() && !problems.is_empty() {
                        self.invalid(field, group, &problems.join(","));
                    }
                    let problems = dns_1035_label(version);
                    if version.is_empty() {
                        self.invalid(field, api_version, "version must be specified");
                    } else if !problems.is_empty() {
                        self.invalid(field, version, &problems.join(","));
                    }
                }
            },
        }
        let field = "spec.paramKind.kind";
        match kind.kind.as_deref().unwrap_or_default() {
            "" => self.required(field, ""),
            kind => {
                let problems = dns_1035_label(&go_lower(kind));
                if !problems.is_empty() {
                    let detail = format!("may have mixed case, but should otherwise match: {}", problems.join(","));
                    self.invalid(field, kind, &detail);
                }
            }
        }
    }

    /// A label selector, as apimachinery's `ValidateLabelSelector` checks
    /// it with no options: the API server takes no invalid value here.
    pub(super) fn label_selector(&mut self, at: &str, selector: &LabelSelector) {
        // Every entry is reported at `matchLabels`, not at its key.
        let labels = format!("{at}.matchLabels");
        for (key, value) in selector.match_labels.iter().flatten() {
            self.qualified_name(&labels, key);
            for problem in label_value(value) {
                self.invalid(&labels, value, &problem);
            }
        }
        for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
            let at = format!("{at}.matchExpressions[{i}]");
            let values = requirement.values.as_deref().unwrap_or_default();
            match requirement.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    self.required(&format!("{at}.values"), "must be specified when `operator` is 'In' or 'NotIn'");
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => self.push(
                    &format!("{at}.values"),
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_owned(),
                ),
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                // A named type: printed as JSON.
                operator => self.push(
                    &format!("{at}.operator"),
                    format!("Invalid value: {}: not a valid selector operator", go_json(operator)),
                ),
            }
            self.qualified_name(&format!("{at}.key"), &requirement.key);
            for (j, value) in values.iter().enumerate() {
                for problem in label_value(value) {
                    self.invalid(&format!("{at}.values[{j}]"), value, &problem);
                }
            }
        }
    }

    /// `paramRef`: a name or a selector, not both, and what to do when
    /// no parameter object is found.
    pub(super) fn param_ref(&mut self, param_ref: &ParamRef) {
        let at = "spec.paramRef";
        let name = param_ref.name.as_deref().unwrap_or_default();
        for problem in path_segment(name) {
            self.invalid(&format!("{at}.name"), name, &problem);
        }
        let exclusive = "Forbidden: name and selector are mutually exclusive";
        if !name.is_empty() && param_ref.selector.is_some() {
            self.push(&format!("{at}.name"), exclusive.to_owned());
        }
        if let Some(selector) = &param_ref.selector {
            self.label_selector(&format!("{at}.selector"), selector);
            if !name.is_empty() {
                self.push(&format!("{at}.selector"), exclusive.to_owned());
            }
        }
        if name.is_empty() && param_ref.selector.is_none() {
            self.required(at, "one of name or selector must be specified");
        }
        match param_ref.parameter_not_found_action.as_deref().unwrap_or_default() {
            "" => self.required(&format!("{at}.parameterNotFoundAction"), ""),
            action => self.unsupported(&format!("{at}.parameterNotFoundAction"), action, &["Deny", "Allow"]),
        }
    }
}

/// `apiVersion` as its group and version (`v1` has no group, `/` neither);
/// `None` with more than one `/`.
fn group_version(api_version: &str) -> Option<(&str, &str)> {
    match api_version.split_once('/') {
        _ if api_version == "/" => Some(("", "")),
        None => Some(("", api_version)),
        Some((_, version)) if version.contains('/') => None,
        Some(parts) => Some(parts),
    }
}

/// `value` lower-cased as Go's `strings.ToLower` does it: as Rust's
/// `to_lowercase`, but for U+0130 (`İ`), which Go maps to a plain `i` and
/// Rust to `i` with a combining dot.
fn go_lower(value: &str) -> String {
    value.chars().map(|c| if c == '\u{130}' { 'i' } else { c }).collect::<String>().to_lowercase()
}

#[cfg(test)]
mod tests {
    #[test]
    fn lower_case_is_gos_for_the_dotted_capital_i() {
        // Go's strings.ToLower("İ") is "i"; Rust's "İ".to_lowercase() is "i\u{307}".
        assert_eq!(super::go_lower("İnfoKİND"), "infokind");
        assert_eq!(super::go_lower("ΣConfig"), "σconfig");
    }
}
