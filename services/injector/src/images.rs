//! Image references and the rewrite rules that send pulls to a mirror.

use portcullis_admission::image::parse;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One rewrite rule: images whose normalised name starts with prefix (at a
/// path boundary) get prefix replaced by replacement. Tag and digest are
/// kept as they are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewriteRule {
    /// A normalised name prefix: docker.io/, docker.io/library/nginx,
    /// quay.io/prometheus, registry.local:5000/.
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^[^@\s]+$"))]
    pub prefix: String,
    /// What replaces the prefix: mirror.example.com/hub/.
    #[schemars(length(min = 1, max = 512), regex(pattern = r"^[^@\s]+$"))]
    pub replacement: String,
}

/// A rewrite rule that could never match or would make invalid images.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("imageRewrites: {prefix:?} -> {replacement:?}: {problem}")]
pub struct RewriteError {
    /// The rule's prefix.
    pub prefix: String,
    /// Its replacement.
    pub replacement: String,
    /// What is wrong.
    pub problem: &'static str,
}

impl RewriteRule {
    /// Refuses rules that could never match or would make invalid images.
    pub fn check(&self) -> Result<(), RewriteError> {
        let error =
            |problem| RewriteError { prefix: self.prefix.clone(), replacement: self.replacement.clone(), problem };
        if self.prefix.trim().is_empty() || self.replacement.trim().is_empty() {
            return Err(error("prefix and replacement must not be empty"));
        }
        if self.prefix.contains(['@', ' ']) || self.replacement.contains(['@', ' ']) {
            return Err(error("a prefix names a repository, without spaces, tag or digest"));
        }
        Ok(())
    }

    fn apply(&self, name: &str) -> Option<String> {
        let rest = name.strip_prefix(self.prefix.as_str())?;
        let at_boundary = self.prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/');
        at_boundary.then(|| [self.replacement.as_str(), rest].concat())
    }
}

/// The image `rules` rewrite `image` to, by the first rule that matches, or
/// `None` when no rule matches or the rewrite changes nothing.
pub fn rewrite(image: &str, rules: &[RewriteRule]) -> Option<String> {
    let parsed = parse(image)?;
    let renamed = rules.iter().find_map(|rule| rule.apply(&parsed.name))?;
    let rewritten = [renamed.as_str(), parsed.suffix].concat();
    (rewritten != image).then_some(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn rules() -> Vec<RewriteRule> {
        let rule = |p: &str, r: &str| RewriteRule { prefix: p.into(), replacement: r.into() };
        vec![
            rule("docker.io/library/busybox", "mirror.example.com/special/busybox"),
            rule("docker.io/", "mirror.example.com/hub/"),
            rule("quay.io", "mirror.example.com:8443/quay"),
        ]
    }

    #[rstest]
    #[case::short_name("nginx", Some("mirror.example.com/hub/library/nginx"))]
    #[case::tag_kept("nginx:1.25", Some("mirror.example.com/hub/library/nginx:1.25"))]
    #[case::digest_kept("nginx@sha256:0123", Some("mirror.example.com/hub/library/nginx@sha256:0123"))]
    #[case::first_rule_wins("busybox:1.36", Some("mirror.example.com/special/busybox:1.36"))]
    #[case::boundary("quay.io/prom/x:v1", Some("mirror.example.com:8443/quay/prom/x:v1"))]
    #[case::not_a_boundary("quay.iox/prom/x:v1", None)]
    #[case::registry_port_untouched("registry.local:5000/app:v1", None)]
    #[case::already_mirrored("mirror.example.com/hub/library/nginx", None)]
    fn rewrites_by_the_first_matching_rule(#[case] image: &str, #[case] expected: Option<&str>) {
        assert_eq!(rewrite(image, &rules()).as_deref(), expected);
    }
}
