//! Reading `portcullis.dev/v1alpha1` configuration documents: every YAML
//! (or JSON) document of every file, checked for `apiVersion` and `kind`,
//! with errors that name the file and the document.

use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::names::API_VERSION;

/// Why a configuration document was refused.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The document does not parse as the expected kind.
    #[error("{file}: document {doc}")]
    Parse {
        /// The file.
        file: String,
        /// 1-based index of the document in the file.
        doc: usize,
        /// What the parser said (field names included).
        #[source]
        source: serde_yaml::Error,
    },
    /// The document parses but is not valid.
    #[error("{file}: document {doc}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based index of the document in the file.
        doc: usize,
        /// What is wrong: the service's own typed error, or a message.
        #[source]
        reason: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Where a document came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: String,
    /// 1-based index of the document in the file.
    pub doc: usize,
}

impl Origin {
    /// An [`DocumentError::Invalid`] at this origin.
    pub fn invalid(&self, reason: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DocumentError {
        DocumentError::Invalid { file: self.file.clone(), doc: self.doc, reason: reason.into() }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.file, self.doc)
    }
}

/// A Portcullis configuration document: `apiVersion` and `kind` (checked by
/// [`parse`]), `metadata`, and the kind's `spec`. Unknown top-level fields
/// are refused, so a typo is an error rather than a silently ignored
/// setting.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Document<S> {
    #[allow(dead_code)] // checked by `parse` before the document is read
    api_version: String,
    #[allow(dead_code)] // checked by `parse` before the document is read
    kind: String,
    /// `metadata`; only `name` and `namespace` are read.
    #[serde(default)]
    pub metadata: Metadata,
    /// The kind's content.
    pub spec: S,
}

/// The part of `metadata` Portcullis reads.
#[derive(Debug, Default, Deserialize)]
pub struct Metadata {
    /// `metadata.name`.
    #[serde(default)]
    pub name: String,
    /// `metadata.namespace`, for the kinds that live in one.
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

/// Parses every non-empty document of every `(path, bytes)` source as a
/// `kind` document of [`API_VERSION`] with a `spec` of type `S`. Empty
/// documents are skipped; a document of another kind or version is an
/// error.
pub fn parse<'a, S: DeserializeOwned>(
    sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
    kind: &str,
) -> Result<Vec<(Origin, Document<S>)>, DocumentError> {
    parse_kinds(sources, &[kind])?.into_iter().map(|raw| Ok((raw.origin.clone(), raw.into_document()?))).collect()
}

/// A document of one of the kinds [`parse_kinds`] was asked for, read but
/// not yet typed.
#[derive(Debug)]
pub struct RawDocument {
    /// Where it came from.
    pub origin: Origin,
    /// Its `kind`.
    pub kind: String,
    value: serde_yaml::Value,
}

impl RawDocument {
    /// The whole document as a `T` (a Kubernetes object type).
    pub fn into_object<T: DeserializeOwned>(self) -> Result<T, DocumentError> {
        let Origin { file, doc } = self.origin;
        serde_yaml::from_value(self.value).map_err(|source| DocumentError::Parse { file, doc, source })
    }

    /// The document as a `Document<S>`.
    pub fn into_document<S: DeserializeOwned>(self) -> Result<Document<S>, DocumentError> {
        let Origin { file, doc } = self.origin;
        serde_yaml::from_value(self.value).map_err(|source| DocumentError::Parse { file, doc, source })
    }
}

/// Reads every non-empty document of every source, each of [`API_VERSION`]
/// and one of `kinds` (a file may mix them); any other is an error.
pub fn parse_kinds<'a>(
    sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
    kinds: &[&str],
) -> Result<Vec<RawDocument>, DocumentError> {
    let typed: Vec<(&str, &str)> = kinds.iter().map(|kind| (API_VERSION, *kind)).collect();
    parse_typed(sources, &typed)
}

/// Reads every non-empty document of every source, each of one of the
/// `(apiVersion, kind)` pairs of `types` (a file may mix them, and a `v1`
/// `List` holds several); any other is an error.
pub fn parse_typed<'a>(
    sources: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
    types: &[(&str, &str)],
) -> Result<Vec<RawDocument>, DocumentError> {
    let mut out = Vec::new();
    for (path, bytes) in sources {
        let file = path.display().to_string();
        for (index, raw) in serde_yaml::Deserializer::from_slice(bytes).enumerate() {
            let origin = Origin { file: file.clone(), doc: index + 1 };
            let parse_error = |source| DocumentError::Parse { file: file.clone(), doc: index + 1, source };
            let value = serde_yaml::Value::deserialize(raw).map_err(parse_error)?;
            if value.is_null() {
                continue;
            }
            let meta: TypeMeta = serde_yaml::from_value(value.clone()).map_err(parse_error)?;
            if meta.api_version == "v1" && meta.kind == "List" {
                // As `kubectl get -o yaml` writes several objects.
                let items = match value.get("items") {
                    Some(serde_yaml::Value::Sequence(items)) => items.clone(),
                    _ => Vec::new(),
                };
                for item in items {
                    let meta: TypeMeta = serde_yaml::from_value(item.clone()).map_err(parse_error)?;
                    out.push(typed(types, origin.clone(), meta, item)?);
                }
                continue;
            }
            out.push(typed(types, origin, meta, value)?);
        }
    }
    Ok(out)
}

/// The document, if it is one of `types`.
fn typed(
    types: &[(&str, &str)],
    origin: Origin,
    meta: TypeMeta,
    value: serde_yaml::Value,
) -> Result<RawDocument, DocumentError> {
    if !types.iter().any(|(v, k)| meta.api_version == *v && meta.kind == *k) {
        return Err(origin.invalid(format!(
            "expected {}, found {:?} {:?}",
            expected(types),
            meta.api_version,
            meta.kind
        )));
    }
    Ok(RawDocument { origin, kind: meta.kind, value })
}

/// `apiVersion portcullis.dev/v1alpha1 and kind A or B`, with every
/// version's kinds.
fn expected(types: &[(&str, &str)]) -> String {
    let mut versions: Vec<(&str, Vec<&str>)> = Vec::new();
    for (version, kind) in types {
        match versions.iter_mut().find(|(v, _)| v == version) {
            Some((_, kinds)) => kinds.push(kind),
            None => versions.push((version, vec![kind])),
        }
    }
    versions
        .iter()
        .map(|(version, kinds)| format!("apiVersion {version} and kind {}", kinds.join(" or ")))
        .collect::<Vec<_>>()
        .join(", or ")
}
