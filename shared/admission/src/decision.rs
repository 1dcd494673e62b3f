//! What a decision function returns, and how it becomes a response.

use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use crate::Request;

/// What a decision does with the request: exactly one of three, so that a
/// denied request can never also carry a patch.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Verdict {
    /// Admit the request as it is.
    #[default]
    Allow,
    /// Admit the request with its object replaced by this one; the response
    /// carries the patch from the request's object to it (none when equal).
    Patch(Value),
    /// Refuse the request.
    Deny {
        /// HTTP-style status code (403 for a policy refusal).
        code: u16,
        /// The message kubectl shows the user.
        message: String,
    },
}

/// The outcome of a decision function: its [`Verdict`], and what goes with
/// any verdict (warnings, audit annotations, what applied).
///
/// Decision functions build this from plain data; [`Decision::respond`]
/// turns it into the `AdmissionResponse` so that no decision code touches
/// the wire format.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Decision {
    /// Allow, patch or deny.
    pub verdict: Verdict,
    /// Messages for the user, returned as `AdmissionResponse.warnings`
    /// (kubectl prints them as `Warning: ...`).
    pub warnings: Vec<String>,
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
        Self { verdict: Verdict::Deny { code, message: message.into() }, ..Self::default() }
    }

    /// Whether the request is refused.
    pub fn is_denied(&self) -> bool {
        matches!(self.verdict, Verdict::Deny { .. })
    }

    /// Builds the response for `req`, computing the patch from the request's
    /// object to a [`Verdict::Patch`] object. Returns the response and the
    /// number of patch operations.
    pub fn respond(self, req: &Request) -> (AdmissionResponse, usize) {
        let mut response = AdmissionResponse::from(&req.inner);
        if !self.warnings.is_empty() {
            response.warnings = Some(self.warnings);
        }
        response.audit_annotations.extend(self.audit_annotations);
        let patch = match (self.verdict, &req.object) {
            (Verdict::Deny { code, message }, _) => {
                let mut response = response.deny(message);
                response.result.code = code;
                return (response, 0);
            }
            (Verdict::Patch(mutated), Some(original)) => patch_between(original, &mutated),
            (Verdict::Patch(_) | Verdict::Allow, _) => None,
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
