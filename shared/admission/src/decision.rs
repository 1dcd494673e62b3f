//! What a decision function returns, and how it becomes a response.

use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use crate::Request;

/// The outcome of a decision function: allow (possibly with a mutated
/// object and warnings) or deny with a message.
///
/// Decision functions build this from plain data; [`Decision::respond`]
/// turns it into the `AdmissionResponse` so that no decision code touches
/// the wire format.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Decision {
    /// The object as it should be stored, when the decision mutated it.
    pub mutated: Option<Value>,
    /// Messages for the user, returned as `AdmissionResponse.warnings`
    /// (kubectl prints them as `Warning: ...`).
    pub warnings: Vec<String>,
    /// `Some((code, message))` denies the request.
    pub denied: Option<(u16, String)>,
    /// Names of the templates, rules or policies that applied, for the
    /// trace and the logs.
    pub applied: Vec<String>,
    /// `AdmissionResponse.auditAnnotations`: `(key, value)` pairs the API
    /// server records in its audit event as `<webhook name>/<key>` (so a key
    /// has no `/`).
    pub audit_annotations: Vec<(String, String)>,
}

impl Decision {
    /// Allows the request unchanged.
    pub fn allow() -> Self {
        Self::default()
    }

    /// Denies the request with HTTP-style `code` (403 for a policy refusal)
    /// and a message kubectl shows the user.
    pub fn deny(code: u16, message: impl Into<String>) -> Self {
        Self { denied: Some((code, message.into())), ..Self::default() }
    }

    /// Builds the response for `req`, computing the patch from the request's
    /// object to [`Decision::mutated`]. Returns the response and the number
    /// of patch operations.
    pub fn respond(self, req: &Request) -> (AdmissionResponse, usize) {
        let mut response = AdmissionResponse::from(&req.inner);
        if !self.warnings.is_empty() {
            response.warnings = Some(self.warnings);
        }
        response.audit_annotations.extend(self.audit_annotations);
        if let Some((code, message)) = self.denied {
            let mut response = response.deny(message);
            response.result.code = code;
            return (response, 0);
        }
        let patch = match (&req.object, &self.mutated) {
            (Some(original), Some(mutated)) => patch_between(original, mutated),
            _ => None,
        };
        let Some(patch) = patch else {
            return (response, 0);
        };
        let operations = patch.0.len();
        match response.clone().with_patch(patch) {
            Ok(patched) => (patched, operations),
            // A patch of plain JSON always serializes; if it ever did not,
            // denying is the only answer that cannot store a wrong object.
            Err(err) => (response.deny(format!("internal error encoding the patch: {err}")), 0),
        }
    }
}

/// The RFC 6902 patch that turns `original` into `mutated`, or `None` when
/// they are equal. Computed by diff, so keys with `/` or `~` are escaped and
/// existing maps are never replaced wholesale.
pub fn patch_between(original: &Value, mutated: &Value) -> Option<json_patch::Patch> {
    let patch = json_patch::diff(original, mutated);
    (!patch.0.is_empty()).then_some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_escapes_pointer_keys_and_keeps_existing_annotations() {
        let original = json!({"metadata": {"annotations": {"a/b~c": "1"}}});
        let mutated = json!({"metadata": {"annotations": {"a/b~c": "2", "portcullis.dev/status": "{}"}}});
        let patch = serde_json::to_value(patch_between(&original, &mutated)).unwrap_or_default();
        let paths: Vec<&str> = patch.as_array().into_iter().flatten().filter_map(|op| op["path"].as_str()).collect();
        assert!(paths.contains(&"/metadata/annotations/a~1b~0c"), "{patch}");
        assert!(paths.contains(&"/metadata/annotations/portcullis.dev~1status"), "{patch}");
        assert!(!paths.contains(&"/metadata/annotations"), "{patch}");
    }

    #[test]
    fn equal_objects_have_no_patch() {
        let v = json!({"spec": {"containers": [{"name": "a"}]}});
        assert!(patch_between(&v, &v.clone()).is_none());
    }
}
