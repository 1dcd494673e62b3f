//! The `status` every Portcullis object carries, and why an object was
//! refused.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `status` of a policy, exception or template: written by the leader only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// The generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: whether the object's current generation is in force in
    /// every live replica of the webhook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation every live replica enforces, when they all enforce
    /// the same one (after a refused change: the last good one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced_generation: Option<i64>,
    /// How many live replicas enforce the current generation, of how many
    /// (`2/2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<String>,
    /// Which path enforces the object, for kinds that can be enforced by
    /// the API server itself (a pushed-down `ValidatorPolicy`). Written by
    /// the push-down controller, never by the status writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced_by: Option<EnforcedBy>,
}

impl ResourceStatus {
    /// Whether the API server enforces `generation` of the object, so that
    /// the webhook may leave that generation out of its set.
    pub fn delegates(&self, generation: i64) -> bool {
        self.enforced_by.as_ref().is_some_and(|e| e.path == Path::ApiServer && e.observed_generation == generation)
    }
}

/// Which path enforces an object's generation, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnforcedBy {
    /// `Webhook` or `APIServer`.
    pub path: Path,
    /// The generation this describes.
    pub observed_generation: i64,
    /// A CamelCase reason: `PushedDown`, `WebhookChosen`, `NotPushable`,
    /// `Invalid`.
    pub reason: String,
    /// What enforces it (the generated ValidatingAdmissionPolicy), or why
    /// the webhook does.
    pub message: String,
}

/// Who enforces an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Path {
    /// The webhook's replicas.
    Webhook,
    /// The API server itself, in-process.
    #[serde(rename = "APIServer")]
    ApiServer,
}

/// Why one object was not loaded: a `Ready=False` reason and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// A CamelCase reason (`CompileError`, `CostOverLimit`, `Invalid`, ...).
    pub reason: String,
    /// What is wrong and where, as `check` prints it.
    pub message: String,
}

impl Refusal {
    /// A refusal for `reason` with `message`.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { reason: reason.into(), message: message.into() }
    }
}
