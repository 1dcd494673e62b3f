//! What a decision function returns, and how it becomes a response.

use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use crate::{Request, patch};

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
            (Verdict::Patch(mutated), Some(original)) => patch::diff(original, &mutated),
            (Verdict::Patch(_) | Verdict::Allow, _) => None,
        };
        let Some(patch) = patch else {
            return (response, 0);
        };
        let operations = patch.operations();
        // `encode` writes the patch type of a response with a patch.
        response.patch = Some(patch.into_bytes());
        (response, operations)
    }
}
