//! The hand-over of `ValidatorPolicy` objects to the API server (ADR 0009):
//! for a policy with `spec.enforcement: InProcess` or `Auto` that can be
//! pushed down ([`crate::native::generate`]), one replica (the holder of
//! the push-down Lease) applies the generated ValidatingAdmissionPolicy
//! and binding, owned by the policy (the garbage collector deletes them
//! with it), proves that the API server enforces them ([`probe`]), and only
//! then says so in `status.enforcedBy`; every replica's webhook then leaves
//! that generation of the policy to the API server
//! ([`crate::cluster::Reader`]). Going back (the policy edited into
//! something that cannot be pushed down, or `enforcement: Webhook`) is the
//! reverse: the new generation is the webhook's at once (the status no
//! longer names it), and the pair is deleted once every replica enforces
//! it (`Ready` for that generation). So no request is judged by neither.
//!
//! A kube-runtime `Controller` of the policies, owning the pairs (a pair
//! edited by hand is put back), reconciling a policy again when an
//! exception naming it changes (an exception keeps its policy in the
//! webhook: the API server knows no exceptions).

mod probe;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1 as reg;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource as _, ResourceExt as _};
use portcullis_admission::names::MANAGED_BY;
use portcullis_resources::replica::WEBHOOK_LABEL;
use portcullis_resources::{EnforcedBy, Path, WebhookReplica};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::native::generate::{self, Generated, NotPushable};
use crate::policy::Enforcement;
use crate::resources::{PolicyException, ValidatorPolicy};

/// The field manager of the pairs, the probe and `status.enforcedBy`.
pub(crate) const MANAGER: &str = "portcullis-validator-pushdown";
/// While replicas catch up with a generation going back to the webhook.
const WAIT_FOR_REPLICAS: Duration = Duration::from_secs(2);
/// After a failed reconcile.
const RETRY: Duration = Duration::from_secs(5);
/// How often a policy kept with the webhook by something outside it (an
/// exception, a refusal) is looked at again.
const RECHECK: Duration = Duration::from_secs(60);

/// Why a reconcile failed (retried after [`RETRY`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("the API server refused or failed a call")]
    Kube(#[from] kube::Error),
    /// The probe was not denied in time.
    #[error("the API server did not enforce the probe within {0:?}")]
    NotLoaded(Duration),
}

/// What the reconciles share.
struct Context {
    policies: Api<ValidatorPolicy>,
    vaps: Api<reg::ValidatingAdmissionPolicy>,
    bindings: Api<reg::ValidatingAdmissionPolicyBinding>,
    exceptions: Api<PolicyException>,
    replicas: Api<WebhookReplica>,
    probe: probe::Probe,
    recorder: Recorder,
    system_namespaces: Vec<String>,
    cost_limit: u64,
}

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Portcullis namespace (the probe's).
    pub namespace: String,
    /// The namespaces policies leave out unless they include them.
    pub system_namespaces: Vec<String>,
    /// The load-time CEL cost limit: a generation the webhook refuses is
    /// not pushed down either.
    pub cost_limit: u64,
    /// This replica's name, for Events.
    pub instance: Option<String>,
}

/// Runs the controller until `leading` is cancelled.
pub async fn run(client: kube::Client, settings: Settings, leading: CancellationToken) {
    let policies: Api<ValidatorPolicy> = Api::all(client.clone());
    let managed = watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}"));
    let context = Arc::new(Context {
        policies: policies.clone(),
        vaps: Api::all(client.clone()),
        bindings: Api::all(client.clone()),
        exceptions: Api::all(client.clone()),
        replicas: Api::namespaced(client.clone(), &settings.namespace),
        probe: probe::Probe::new(&client, &settings.namespace),
        recorder: Recorder::new(client.clone(), Reporter { controller: MANAGER.into(), instance: settings.instance }),
        system_namespaces: settings.system_namespaces,
        cost_limit: settings.cost_limit,
    });
    tracing::info!("pushing policies down to the API server where they ask for it");
    Controller::new(policies, watcher::Config::default())
        .owns(Api::<reg::ValidatingAdmissionPolicy>::all(client.clone()), managed.clone())
        .owns(Api::<reg::ValidatingAdmissionPolicyBinding>::all(client.clone()), managed)
        .watches(Api::<PolicyException>::all(client), watcher::Config::default(), |exception| {
            // Cluster policies are named by their bare name.
            let named = exception.spec.0.policies.into_iter().filter(|p| !p.contains('/'));
            named.map(|p| ObjectRef::new(&p)).collect::<Vec<_>>()
        })
        .graceful_shutdown_on(async move { leading.cancelled().await })
        .run(reconcile, |_, _, _| Action::requeue(RETRY), context)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::warn!(error = %portcullis_telemetry::error_chain(&err), "pushing a policy down failed; retried");
            }
        })
        .await;
}

/// Where one generation of a policy should be enforced.
enum Desired {
    /// By the API server, through this pair.
    ApiServer(Box<Generated>),
    /// By the webhook, for this reason and why.
    Webhook(&'static str, String),
}

async fn reconcile(policy: Arc<ValidatorPolicy>, cx: Arc<Context>) -> Result<Action, Error> {
    let name = policy.name_any();
    let generation = policy.metadata.generation.unwrap_or_default();
    if policy.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let desired = match desired(&policy, &cx).await? {
        Some(desired) => desired,
        // A generation the webhook refuses: its last good one stays in
        // force, on whichever path enforces it.
        None => return Ok(Action::await_change()),
    };
    match desired {
        Desired::ApiServer(pair) => {
            let generated = pair.policy.metadata.name.clone().unwrap_or_default();
            let changed = match apply(&cx, &policy, *pair).await {
                Ok(changed) => changed,
                // E.g. parameters the validator may not read: the API
                // server checks the writer of a pair with paramKind.
                Err(Error::Kube(kube::Error::Api(status))) if status.code == 403 => {
                    let why = format!("the API server refused the generated pair: {}", status.message);
                    return back_to_webhook(&cx, &policy, "Forbidden", why).await;
                }
                Err(err) => return Err(err),
            };
            let status = policy.status.as_ref();
            if !changed && status.is_some_and(|s| s.delegates(generation)) {
                return Ok(Action::await_change());
            }
            cx.probe.loaded().await?;
            let message = format!("ValidatingAdmissionPolicy {generated} and its binding");
            write(&cx, &policy, &enforced(Path::ApiServer, generation, "PushedDown", message)).await?;
            tracing::info!(policy = %name, generation, vap = %generated, "pushed down: the API server enforces it");
            Ok(Action::await_change())
        }
        Desired::Webhook(reason, why) => back_to_webhook(&cx, &policy, reason, why).await,
    }
}

/// Puts (or keeps) the current generation of `policy` with the webhook:
/// the status first, so that the replicas take it back; the pair only
/// once every replica enforces this generation and none leaves it to the
/// API server any longer (a policy can go back without a new generation:
/// an exception naming it, a pair the API server refuses).
async fn back_to_webhook(cx: &Context, policy: &ValidatorPolicy, reason: &str, why: String) -> Result<Action, Error> {
    let (name, generation) = (policy.name_any(), policy.metadata.generation.unwrap_or_default());
    let status = enforced(Path::Webhook, generation, reason, why.clone());
    if policy.status.as_ref().and_then(|s| s.enforced_by.as_ref()) != Some(&status) {
        write(cx, policy, &status).await?;
        if reason != "WebhookChosen" && policy.spec.0.enforcement == Enforcement::InProcess {
            warn(cx, policy, why).await;
        }
    }
    let generated = generate::generated_name(&name, None);
    let pair = cx.vaps.get_opt(&generated).await?.filter(|vap| owned_by(vap.owner_references(), policy));
    if pair.is_some() {
        if !ready_at(policy, generation) || cx.still_delegated(policy).await? {
            return Ok(Action::requeue(WAIT_FOR_REPLICAS));
        }
        let params = DeleteParams::default();
        if let Err(err) = cx.bindings.delete(&generated, &params).await
            && !is_not_found(&err)
        {
            return Err(err.into());
        }
        if let Err(err) = cx.vaps.delete(&generated, &params).await
            && !is_not_found(&err)
        {
            return Err(err.into());
        }
        tracing::info!(policy = %name, generation, vap = %generated, "back to the webhook: pair deleted");
    }
    // What keeps it here may go without touching the policy (an exception
    // edited to name another policy, a permission granted): look again.
    Ok(if reason == "WebhookChosen" { Action::await_change() } else { Action::requeue(RECHECK) })
}

impl Context {
    /// Whether a ready replica still leaves `policy` to the API server.
    async fn still_delegated(&self, policy: &ValidatorPolicy) -> Result<bool, Error> {
        let selector = format!("{WEBHOOK_LABEL}=validator");
        let reports = self.replicas.list(&ListParams::default().labels(&selector)).await?;
        let uid = policy.uid();
        Ok(reports.items.iter().filter(|r| r.spec.ready).any(|r| {
            r.spec.objects.iter().any(|h| {
                h.delegated && h.kind == "ValidatorPolicy" && h.namespace.is_none() && Some(&h.uid) == uid.as_ref()
            })
        }))
    }
}

/// Where `policy`'s current generation should be enforced, or `None` when
/// the webhook refuses that generation.
async fn desired(policy: &ValidatorPolicy, cx: &Context) -> Result<Option<Desired>, Error> {
    let name = policy.name_any();
    let spec = &policy.spec.0;
    if policy.compile(cx.cost_limit).is_err() {
        return Ok(None);
    }
    if spec.enforcement == Enforcement::Webhook {
        return Ok(Some(Desired::Webhook("WebhookChosen", "spec.enforcement is Webhook".into())));
    }
    // Any exception naming it, even one the webhook refuses: the policy
    // stays where exceptions are known.
    let exceptions = cx.exceptions.list(&Default::default()).await?;
    let exception = exceptions.items.iter().find(|e| e.spec.0.policies.contains(&name));
    let generated = match exception {
        Some(exception) => Err(NotPushable {
            field: format!("PolicyException {}/{}", exception.namespace().unwrap_or_default(), exception.name_any()),
            why: "it exempts objects from the policy, and the API server does not know exceptions",
        }),
        None => generate::generate(&name, None, spec, &cx.system_namespaces),
    };
    Ok(Some(match generated {
        Ok(pair) => Desired::ApiServer(Box::new(pair)),
        Err(why) => Desired::Webhook("NotPushable", format!("it cannot be pushed down: {why}")),
    }))
}

/// Applies the pair, owned by `policy`; whether either object changed.
async fn apply(cx: &Context, policy: &ValidatorPolicy, pair: Generated) -> Result<bool, Error> {
    let Generated { policy: mut vap, binding: mut vapb } = pair;
    let owner = owner(policy);
    vap.metadata.owner_references = Some(vec![owner.clone()]);
    vapb.metadata.owner_references = Some(vec![owner]);
    let name = vap.metadata.name.clone().unwrap_or_default();
    let params = PatchParams::apply(MANAGER).force();
    let before = (
        cx.vaps.get_opt(&name).await?.and_then(|o| o.metadata.resource_version),
        cx.bindings.get_opt(&name).await?.and_then(|o| o.metadata.resource_version),
    );
    let vap = cx.vaps.patch(&name, &params, &Patch::Apply(&vap)).await?;
    let vapb = cx.bindings.patch(&name, &params, &Patch::Apply(&vapb)).await?;
    Ok(before != (vap.metadata.resource_version, vapb.metadata.resource_version))
}

/// The policy as the controlling owner of its pair. Deletion is not
/// blocked on the pair (that would need rights on the policy's
/// finalizers).
fn owner(policy: &ValidatorPolicy) -> OwnerReference {
    OwnerReference {
        api_version: ValidatorPolicy::api_version(&()).into_owned(),
        kind: ValidatorPolicy::kind(&()).into_owned(),
        name: policy.name_any(),
        uid: policy.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

fn owned_by(owners: &[OwnerReference], policy: &ValidatorPolicy) -> bool {
    owners.iter().any(|o| Some(&o.uid) == policy.metadata.uid.as_ref())
}

/// Whether every live replica enforces `generation` (the status writer's
/// `Ready`).
fn ready_at(policy: &ValidatorPolicy, generation: i64) -> bool {
    policy.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True" && c.observed_generation == Some(generation))
    })
}

fn enforced(path: Path, generation: i64, reason: &str, message: String) -> EnforcedBy {
    EnforcedBy { path, observed_generation: generation, reason: reason.into(), message }
}

/// Writes `status.enforcedBy` alone, by server-side apply. The uid makes
/// the write fail on a policy re-created under the same name.
async fn write(cx: &Context, policy: &ValidatorPolicy, enforced_by: &EnforcedBy) -> Result<(), Error> {
    let name = policy.name_any();
    let patch = json!({
        "apiVersion": ValidatorPolicy::api_version(&()),
        "kind": ValidatorPolicy::kind(&()),
        "metadata": {"name": name, "uid": policy.uid()},
        "status": {"enforcedBy": enforced_by},
    });
    cx.policies.patch_status(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&patch)).await?;
    Ok(())
}

/// A Warning Event on a policy that asked for `InProcess` and stays with
/// the webhook.
async fn warn(cx: &Context, policy: &ValidatorPolicy, why: String) {
    let event = Event {
        type_: EventType::Warning,
        reason: "NotPushable".into(),
        note: Some(why.chars().take(1000).collect()),
        action: "PushDown".into(),
        secondary: None,
    };
    if let Err(err) = cx.recorder.publish(&event, &policy.object_ref(&())).await {
        tracing::warn!(policy = %policy.name_any(), error = %err, "could not record an Event");
    }
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}
