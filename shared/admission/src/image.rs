//! Container image references, read the way the container runtime reads
//! them.

use std::borrow::Cow;

/// An image reference split into its normalised repository name
/// (`docker.io/library/nginx`) and its tag/digest suffix (`:1.25`,
/// `@sha256:...`, `:1.25@sha256:...`, or empty), borrowed from the input.
#[derive(Debug, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// Registry and path, with Docker Hub short names expanded (borrowed
    /// when the reference already names its registry).
    pub name: Cow<'a, str>,
    /// `:tag`, `@digest`, both, or nothing.
    pub suffix: &'a str,
}

impl ImageRef<'_> {
    /// The registry host (and port): `docker.io`, `registry.local:5000`.
    pub fn registry(&self) -> &str {
        self.name.split('/').next().unwrap_or_default()
    }

    /// The tag, if the reference has one.
    pub fn tag(&self) -> Option<&str> {
        let tag = self.suffix.strip_prefix(':')?;
        Some(tag.split('@').next().unwrap_or(tag))
    }

    /// The digest (`sha256:...`), if the reference has one.
    pub fn digest(&self) -> Option<&str> {
        self.suffix.split_once('@').map(|(_, digest)| digest)
    }
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
    let name: Cow<'_, str> = match repository.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            if first == "index.docker.io" {
                ["docker.io/", rest].concat().into()
            } else {
                repository.into()
            }
        }
        Some(_) => ["docker.io/", repository].concat().into(),
        None => ["docker.io/library/", repository].concat().into(),
    };
    let name = match name.strip_prefix("docker.io/") {
        Some(path) if !path.contains('/') => ["docker.io/library/", path].concat().into(),
        _ => name,
    };
    Some(ImageRef { name, suffix })
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
        assert_eq!(parse(image), Some(ImageRef { name: name.into(), suffix }));
    }

    #[test]
    fn parts() {
        let image = parse("registry.local:5000/team/app:v1@sha256:abc").unwrap_or_else(|| panic!("parses"));
        assert_eq!(image.registry(), "registry.local:5000");
        assert_eq!(image.tag(), Some("v1"));
        assert_eq!(image.digest(), Some("sha256:abc"));
        let image = parse("nginx").unwrap_or_else(|| panic!("parses"));
        assert_eq!((image.registry(), image.tag(), image.digest()), ("docker.io", None, None));
    }

    #[rstest]
    #[case("")]
    #[case("has space")]
    #[case(":tag")]
    #[case("registry.local/")]
    fn refuses_what_is_not_an_image(#[case] image: &str) {
        assert_eq!(parse(image), None);
    }
}
