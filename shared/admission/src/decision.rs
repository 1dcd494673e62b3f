//! What a decision function returns, and how it becomes a response.

use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use crate::{JsonPatch, Request, patch};

/// What a decision does with the request: exactly one of three, so that a
/// denied request can never also carry a patch.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Verdict {
    /// Admit the request as it is.
    #[default]
    Allow,
    /// Admit the request with this patch applied to its object: the
    /// decision computes it (with [`crate::patch::diff`] of what it
    /// changed), so that the response needs neither a copy of the whole
    /// object nor a diff of it.
    Patch(JsonPatch),
    /// Refuse the request.
    Deny {
        /// HTTP-style status code (403 for a policy refusal).
        code: u16,
        /// The message kubectl shows the user.
        message: String,
    },
}

impl Verdict {
    /// [`Verdict::Patch`] with the patch that turns `before` into `after`,
    /// or [`Verdict::Allow`] when they are equal. `before` is the request's
    /// object or any part of it that keeps the object's paths (what a
    /// decision copied out to edit).
    pub fn changes(before: &Value, after: &Value) -> Self {
        patch::diff(before, after).map_or(Self::Allow, Self::Patch)
    }
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

    /// Builds the response for `req`. Returns the response and the number
    /// of patch operations.
    pub fn respond(self, req: &Request) -> (AdmissionResponse, usize) {
        let mut response = AdmissionResponse::from(&req.inner);
        if !self.warnings.is_empty() {
            response.warnings = Some(self.warnings);
        }
        response.audit_annotations.extend(self.audit_annotations);
        let patch = match self.verdict {
            Verdict::Deny { code, message } => {
                let mut response = response.deny(message);
                response.result.code = code;
                return (response, 0);
            }
            Verdict::Allow => return (response, 0),
            Verdict::Patch(patch) => patch,
        };
        let operations = patch.operations();
        // `encode` writes the patch type of a response with a patch.
        response.patch = Some(patch.into_bytes());
        (response, operations)
    }
}
