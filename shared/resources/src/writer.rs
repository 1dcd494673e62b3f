//! The one writer of the objects' status: run by the replica that holds
//! the webhook's status Lease. It watches the replicas' reports, tells live
//! ones from gone ones by when it saw them change (on its own clock, never
//! comparing another machine's), and writes each object's status by
//! server-side apply when what it should say changed; a refusal is also an
//! Event on the object (`kubectl describe`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter as EventReporter};
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::catalog::{Key, ObjectState, WatchedKind};
use crate::replica::{HEARTBEAT, Held, Identity, WEBHOOK_LABEL, WebhookReplica};
use crate::status::ResourceStatus;
use crate::verdict::{self, READY, View};
use crate::{API_VERSION, GROUP, VERSION};

/// A report unchanged for this long belongs to a replica that is gone.
const GONE_AFTER: Duration = Duration::from_secs(3 * HEARTBEAT.as_secs());
/// Status writes in flight at once.
const CONCURRENT_WRITES: usize = 8;

/// One replica's entries, by kind, namespace and name.
type HeldBy<'a> = HashMap<(&'a str, Option<&'a str>, &'a str), &'a Held>;

struct Seen {
    version: Option<String>,
    at: Instant,
    report: WebhookReplica,
}

/// Writes the status of every object of `kinds` until `leading` is
/// cancelled.
pub(crate) async fn run(
    client: kube::Client,
    identity: Identity,
    kinds: Vec<Arc<dyn WatchedKind>>,
    leading: CancellationToken,
) {
    let reports: Api<WebhookReplica> = Api::namespaced(client.clone(), &identity.namespace);
    let selector = format!("{WEBHOOK_LABEL}={}", identity.webhook);
    let mut events = watcher(reports, watcher::Config::default().labels(&selector)).default_backoff().boxed();
    let recorder = Recorder::new(
        client.clone(),
        EventReporter { controller: identity.manager(), instance: Some(identity.name.clone()) },
    );
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut written: HashMap<(&'static str, Key), ResourceStatus> = HashMap::new();
    let mut tick = tokio::time::interval(HEARTBEAT / 2);
    loop {
        tokio::select! {
            () = leading.cancelled() => return,
            _ = tick.tick() => {}
            event = events.next() => match event {
                None => return,
                Some(Err(err)) => tracing::warn!(error = %err, "watching the replica reports failed; retrying"),
                Some(Ok(Event::Init)) => {}
                Some(Ok(Event::Apply(report) | Event::InitApply(report))) => note(&mut seen, report),
                Some(Ok(Event::Delete(report))) => { seen.remove(&report.metadata.name.clone().unwrap_or_default()); }
                Some(Ok(Event::InitDone)) => {}
            },
        }
        let now = Instant::now();
        seen.retain(|name, s| {
            let live = now.duration_since(s.at) < GONE_AFTER;
            if !live {
                tracing::warn!(replica = %name, "a replica's report has not changed for {GONE_AFTER:?}: counted as gone");
            }
            live
        });
        reconcile(&client, &identity, &kinds, &seen, &mut written, &recorder).await;
    }
}

fn note(seen: &mut BTreeMap<String, Seen>, report: WebhookReplica) {
    let name = report.metadata.name.clone().unwrap_or_default();
    let version = report.metadata.resource_version.clone();
    match seen.get_mut(&name) {
        Some(s) if s.version == version => {}
        _ => {
            seen.insert(name, Seen { version, at: Instant::now(), report });
        }
    }
}

async fn reconcile(
    client: &kube::Client,
    identity: &Identity,
    kinds: &[Arc<dyn WatchedKind>],
    seen: &BTreeMap<String, Seen>,
    written: &mut HashMap<(&'static str, Key), ResourceStatus>,
    recorder: &Recorder,
) {
    let ready: Vec<(&str, HeldBy<'_>)> = seen
        .iter()
        .filter(|(_, s)| s.report.spec.ready)
        .map(|(name, s)| {
            let held =
                s.report.spec.objects.iter().map(|h| ((h.kind.as_str(), h.namespace.as_deref(), h.name.as_str()), h));
            (name.as_str(), held.collect())
        })
        .collect();
    let now = Timestamp::now();
    let mut writes = Vec::new();
    let mut kept = HashMap::new();
    for kind in kinds {
        for object in kind.objects() {
            let views: Vec<View<'_>> = ready
                .iter()
                .map(|(replica, held)| View {
                    replica,
                    held: held
                        .get(&(kind.kind(), object.key.namespace.as_deref(), object.key.name.as_str()))
                        .copied()
                        .filter(|h| h.uid == object.uid),
                })
                .collect();
            let desired = verdict::desired(&object, &views, now);
            let id = (kind.kind(), object.key.clone());
            let current = written.get(&id).or(object.status.as_ref());
            if current.is_none_or(|c| !verdict::same(c, &desired)) {
                writes.push((kind.clone(), object, desired.clone()));
            }
            kept.insert(id, desired);
        }
    }
    *written = kept;
    let manager = identity.manager();
    stream::iter(writes)
        .for_each_concurrent(CONCURRENT_WRITES, |(kind, object, desired)| {
            let (client, manager) = (client.clone(), manager.clone());
            async move { write(&client, &manager, kind.as_ref(), &object, &desired, recorder).await }
        })
        .await;
}

async fn write(
    client: &kube::Client,
    manager: &str,
    kind: &dyn WatchedKind,
    object: &ObjectState,
    desired: &ResourceStatus,
    recorder: &Recorder,
) {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind.kind()), kind.plural());
    let api: Api<DynamicObject> = match &object.key.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let patch = json!({ "apiVersion": API_VERSION, "kind": kind.kind(), "status": desired });
    let params = PatchParams::apply(manager).force();
    if let Err(err) = api.patch_status(&object.key.name, &params, &Patch::Apply(&patch)).await {
        tracing::warn!(kind = kind.kind(), object = %object.key, error = %err, "writing the status failed; retried on the next pass");
        return;
    }
    let (Some(new), previous) = (desired.conditions.first(), object.status.as_ref().and_then(|s| s.conditions.first()))
    else {
        return;
    };
    tracing::info!(kind = kind.kind(), object = %object.key, ready = %new.status, reason = %new.reason, "status written");
    let refused = new.type_ == READY && new.status == "False" && new.reason != "Pending";
    if refused && previous.is_none_or(|p| p.reason != new.reason || p.message != new.message) {
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: new.reason.clone(),
            note: Some(new.message.chars().take(1000).collect()),
            action: "Load".into(),
            secondary: None,
        };
        let reference = ObjectReference {
            api_version: Some(API_VERSION.into()),
            kind: Some(kind.kind().into()),
            name: Some(object.key.name.clone()),
            namespace: object.key.namespace.clone(),
            uid: Some(object.uid.clone()),
            ..ObjectReference::default()
        };
        if let Err(err) = recorder.publish(&event, &reference).await {
            tracing::warn!(kind = kind.kind(), object = %object.key, error = %err, "could not record the refusal as an Event");
        }
    }
}
