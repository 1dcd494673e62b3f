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
