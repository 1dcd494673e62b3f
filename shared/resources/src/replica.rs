//! `WebhookReplica`: what one replica of a webhook has in force, written by
//! that replica only, read by the status writer.
//!
//! A replica writes its report after every change it has swapped in (never
//! before, so a report never claims more than is enforced) and at least
//! every [`HEARTBEAT`], so that the writer can tell a live replica from a
//! gone one by watching for change on its own clock. On shutdown it
//! deletes its report; in a pod the report is owned by the pod, so the
//! garbage collector removes it when the pod goes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResource;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::catalog::ObjectState;
use crate::run::Remark;
use crate::status::Refusal;

/// How often a replica rewrites its report when nothing changes.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// The label naming the webhook a report belongs to.
pub const WEBHOOK_LABEL: &str = "portcullis.dev/webhook";

/// What one webhook replica has in force. Written by that replica, read by
/// the one that writes the objects' status.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "portcullis.dev",
    version = "v1alpha1",
    kind = "WebhookReplica",
    namespaced,
    shortname = "whr",
    printcolumn = r#"{"name":"WEBHOOK","type":"string","jsonPath":".spec.webhook"}"#,
    printcolumn = r#"{"name":"READY","type":"boolean","jsonPath":".spec.ready"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WebhookReplicaSpec {
    /// The webhook (`validator`, `injector`).
    pub webhook: String,
    /// Whether every kind has been listed once and swapped in.
    pub ready: bool,
    /// Counts the replica's writes; a report that stops changing for three
    /// heartbeats belongs to a replica that is gone.
    pub heartbeat: u64,
    /// Every object the replica knows, with what it enforces of it.
    #[serde(default)]
    pub objects: Vec<Held>,
}

/// One object as a replica holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Held {
    /// Its kind.
    pub kind: String,
    /// Its namespace, for namespaced kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// The generation the replica has seen.
    pub generation: i64,
    /// The generation it enforces (the last good one), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced: Option<i64>,
    /// Why the seen generation was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The refusal's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether the replica leaves the enforced generation to the API
    /// server (its status says the API server enforces it): the push-down
    /// controller deletes a pair only once no replica does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delegated: bool,
}

impl Held {
    /// The refusal this entry records, if any.
    pub fn refusal(&self) -> Option<Refusal> {
        self.reason.as_ref().map(|reason| Refusal::new(reason.clone(), self.message.clone().unwrap_or_default()))
    }
}

/// The report's entries: what the catalogs held (`states`, read before the
/// swap) with what the swap refused or remarked.
pub fn held(states: Vec<(&'static str, Vec<ObjectState>)>, remarks: &[Remark]) -> Vec<Held> {
    states
        .into_iter()
        .flat_map(|(kind, objects)| {
            objects.into_iter().map(move |o| {
                let remark = remarks.iter().find(|r| r.kind == kind && r.key == o.key);
                let enforced = match remark {
                    Some(r) if !r.in_force => None,
                    _ => o.enforced,
                };
                let refusal = o.refusal.or_else(|| remark.map(|r| r.refusal.clone()));
                let delegated = enforced.is_some_and(|g| o.status.as_ref().is_some_and(|s| s.delegates(g)));
                Held {
                    kind: kind.to_owned(),
                    namespace: o.key.namespace,
                    name: o.key.name,
                    uid: o.uid,
                    generation: o.generation,
                    enforced,
                    reason: refusal.as_ref().map(|r| r.reason.clone()),
                    message: refusal.map(|r| clip(r.message)),
                    delegated,
                }
            })
        })
        .collect()
}

/// The longest refusal message a report keeps per object: a report holds
/// every object, and must stay far below the API's object size limit
/// whatever the objects' authors write (the status has the whole message).
const MAX_MESSAGE: usize = 1024;

fn clip(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// Who this replica is.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The webhook (`validator`).
    pub webhook: &'static str,
    /// The replica's name: the pod's, or `<webhook>-<pid>` outside a pod.
    pub name: String,
    /// The namespace reports live in (Portcullis's).
    pub namespace: String,
    /// The pod's uid, so that the report is the pod's and goes with it.
    pub pod_uid: Option<String>,
}

impl Identity {
    /// The identity of this process.
    pub fn new(webhook: &'static str, namespace: String, pod_name: Option<String>, pod_uid: Option<String>) -> Self {
        let name = pod_name.unwrap_or_else(|| format!("{webhook}-{}", std::process::id()));
        Self { webhook, name, namespace, pod_uid }
    }

    /// The field manager of everything this replica writes.
    pub fn manager(&self) -> String {
        format!("portcullis-{}", self.webhook)
    }
}

/// Writes this replica's report.
#[derive(Debug)]
pub struct Reporter {
    api: Api<WebhookReplica>,
    identity: Identity,
    heartbeat: u64,
}

impl Reporter {
    /// A reporter for `identity`.
    pub fn new(client: kube::Client, identity: Identity) -> Self {
        Self { api: Api::namespaced(client, &identity.namespace), identity, heartbeat: 0 }
    }

    /// Writes `objects`, what the replica enforces (server-side apply, one
    /// field manager).
    pub async fn write(&mut self, objects: Vec<Held>, ready: bool) -> Result<(), kube::Error> {
        self.heartbeat += 1;
        let owner = self.identity.pod_uid.as_ref().map(|uid| OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: self.identity.name.clone(),
            uid: uid.clone(),
            ..OwnerReference::default()
        });
        let spec =
            WebhookReplicaSpec { webhook: self.identity.webhook.to_owned(), ready, heartbeat: self.heartbeat, objects };
        let mut report = WebhookReplica::new(&self.identity.name, spec);
        report.metadata = ObjectMeta {
            name: Some(self.identity.name.clone()),
            labels: Some(BTreeMap::from([(WEBHOOK_LABEL.to_owned(), self.identity.webhook.to_owned())])),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        };
        let params = PatchParams::apply(&self.identity.manager()).force();
        self.api.patch(&self.identity.name, &params, &Patch::Apply(&report)).await?;
        Ok(())
    }

    /// Deletes the report (on shutdown): this replica enforces nothing more.
    pub async fn remove(&self) {
        match self.api.delete(&self.identity.name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(replica = %self.identity.name, "replica report removed"),
            Err(err) => {
                tracing::warn!(replica = %self.identity.name, error = %err, "could not remove the replica report")
            }
        }
    }
}
