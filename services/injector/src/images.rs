//! Image references and the rewrite rules that send pulls to a mirror.

use serde::Deserialize;

/// One rewrite rule: images whose normalised name starts with `prefix` (at
/// a path boundary) get `prefix` replaced by `replacement`. Tag and digest
/// are kept as they are.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewriteRule {
    /// A normalised name prefix: `docker.io/`, `docker.io/library/nginx`,
    /// `quay.io/prometheus`, `registry.local:5000/`.
    pub prefix: String,
    /// What replaces the prefix: `mirror.example.com/hub/`.
    pub replacement: String,
}

impl RewriteRule {
    /// Refuses rules that could never match or would make invalid images.
    pub fn check(&self) -> Result<(), String> {
        if self.prefix.trim().is_empty() || self.replacement.trim().is_empty() {
            return Err(format!(
                "imageRewrites: prefix and replacement must not be empty (prefix {:?}, replacement {:?})",
                self.prefix, self.replacement
            ));
        }
        if self.prefix.contains(['@', ' ']) || self.replacement.contains(['@', ' ']) {
            return Err(format!(
                "imageRewrites: {:?} -> {:?}: a prefix names a repository, without spaces, tag or digest",
                self.prefix, self.replacement
            ));
        }
        Ok(())
    }

    fn apply(&self, name: &str) -> Option<String> {
        let rest = name.strip_prefix(self.prefix.as_str())?;
        let at_boundary = self.prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/');
        at_boundary.then(|| format!("{}{rest}", self.replacement))
    }
}

/// An image reference split into its normalised repository name
/// (`docker.io/library/nginx`) and its tag/digest suffix (`:1.25`,
/// `@sha256:...`, `:1.25@sha256:...`, or empty), borrowed from the input.
#[derive(Debug, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// Registry and path, with Docker Hub short names expanded.
    pub name: String,
    /// `:tag`, `@digest`, both, or nothing.
    pub suffix: &'a str,
}

/// Parses `image` the way the container runtime does: a first path
/// component with a `.` or `:`, or `localhost`, is a registry; otherwise the
/// registry is Docker Hub and single names live in `library/`.
pub fn parse(image: &str) -> Option<ImageRef<'_>> {
    if image.is_empty() || image.contains(char::is_whitespace) {
        return None;
    }
    let digest_at = image.find('@').unwrap_or(image.len());
    let (before_digest, _) = image.split_at(digest_at);
    let last_slash = before_digest.rfind('/').map_or(0, |i| i + 1);
    let tag_at = before_digest[last_slash..].find(':').map_or(digest_at, |i| last_slash + i);
    let (repository, suffix) = image.split_at(tag_at);
    if repository.is_empty() || repository.ends_with('/') {
        return None;
    }
    let name = match repository.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            if first == "index.docker.io" {
                format!("docker.io/{rest}")
            } else {
                repository.to_owned()
            }
        }
        Some(_) => format!("docker.io/{repository}"),
        None => format!("docker.io/library/{repository}"),
    };
    let name = match name.strip_prefix("docker.io/") {
        Some(path) if !path.contains('/') => format!("docker.io/library/{path}"),
        _ => name,
    };
    Some(ImageRef { name, suffix })
}

/// The image `rules` rewrite `image` to, by the first rule that matches, or
/// `None` when no rule matches or the rewrite changes nothing.
pub fn rewrite(image: &str, rules: &[RewriteRule]) -> Option<String> {
    let parsed = parse(image)?;
    let renamed = rules.iter().find_map(|rule| rule.apply(&parsed.name))?;
    let rewritten = format!("{renamed}{}", parsed.suffix);
    (rewritten != image).then_some(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("nginx", "docker.io/library/nginx", "")]
    #[case("nginx:1.25", "docker.io/library/nginx", ":1.25")]
    #[case("library/nginx", "docker.io/library/nginx", "")]
    #[case("docker.io/nginx", "docker.io/library/nginx", "")]
    #[case("index.docker.io/bitnami/redis:7", "docker.io/bitnami/redis", ":7")]
    #[case("bitnami/redis:7.2", "docker.io/bitnami/redis", ":7.2")]
    #[case("registry.local:5000/team/app:v1", "registry.local:5000/team/app", ":v1")]
    #[case("registry.local:5000/app", "registry.local:5000/app", "")]
    #[case("localhost/app:dev", "localhost/app", ":dev")]
    #[case("quay.io/prometheus/node-exporter@sha256:abc", "quay.io/prometheus/node-exporter", "@sha256:abc")]
    #[case("nginx:1.25@sha256:abc", "docker.io/library/nginx", ":1.25@sha256:abc")]
    fn parses_like_the_runtime(#[case] image: &str, #[case] name: &str, #[case] suffix: &str) {
        assert_eq!(parse(image), Some(ImageRef { name: name.to_owned(), suffix }));
    }

    #[rstest]
    #[case("")]
    #[case("has space")]
    #[case(":tag")]
    #[case("registry.local/")]
    fn refuses_what_is_not_an_image(#[case] image: &str) {
        assert_eq!(parse(image), None);
    }

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
