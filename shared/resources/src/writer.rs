//! The one writer of the objects' status: run by the replica that holds
//! the webhook's status Lease. It watches the replicas' reports, tells live
//! ones from gone ones by when it saw them change (on its own clock, never
//! comparing another machine's), and writes each object's status by
//! server-side apply when what it should say changed; a refusal is also an
//! Event on the object (`kubectl describe`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
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
use crate::verdict::{self, PENDING, READY, View};
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
    let mut written = Written::new();
    // Nothing is judged before every report has been listed once: a
    // writer that has seen one replica of two must not call it all.
    let mut listed = false;
    let mut tick = tokio::time::interval_at(Instant::now() + HEARTBEAT / 2, HEARTBEAT / 2);
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
                Some(Ok(Event::InitDone)) => listed = true,
            },
        }
        if !listed {
            continue;
        }
        let now = Instant::now();
        seen.retain(|name, s| {
            let live = now.duration_since(s.at) < GONE_AFTER;
            if !live {
                tracing::warn!(replica = %name, "a replica's report has not changed for {GONE_AFTER:?}: counted as gone");
            }
            live
        });
        // Leadership can end in the middle of a pass: its writes stop there.
        tokio::select! {
            () = leading.cancelled() => return,
            () = reconcile(&client, &identity, &kinds, &seen, &mut written, &recorder) => {}
        }
    }
}

/// What this writer wrote and the watch may not show yet, by object (with
/// its uid: a re-created object is another one); dropped once the watch
/// shows it, so a status changed by anyone else is written again.
type Written = HashMap<Id, (String, ResourceStatus)>;

/// An object: its kind and key.
type Id = (&'static str, Key);

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
    written: &mut Written,
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
    let mut pending = Written::new();
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
            let id: Id = (kind.kind(), object.key.clone());
            if object.status.as_ref().is_some_and(|c| verdict::same(c, &desired)) {
                continue;
            }
            match written.remove(&id) {
                Some((uid, w)) if uid == object.uid && verdict::same(&w, &desired) => {
                    pending.insert(id, (uid, w));
                }
                _ => writes.push((id, kind.clone(), object, desired)),
            }
        }
    }
    let manager = identity.manager();
    // A few at a time, each write owning what it needs.
    let mut done = Vec::with_capacity(writes.len());
    for batch in writes.chunks(CONCURRENT_WRITES) {
        let mut started = Vec::with_capacity(batch.len());
        for (id, kind, object, desired) in batch {
            started.push(write_one(
                client.clone(),
                manager.clone(),
                recorder.clone(),
                id.clone(),
                kind.clone(),
                object.clone(),
                desired.clone(),
            ));
        }
        done.extend(futures::future::join_all(started).await);
    }
    pending.extend(done.into_iter().flatten());
    *written = pending;
}

/// [`write`]s one status; what was written, for [`Written`].
async fn write_one(
    client: kube::Client,
    manager: String,
    recorder: Recorder,
    id: Id,
    kind: Arc<dyn WatchedKind>,
    object: ObjectState,
    desired: ResourceStatus,
) -> Option<(Id, (String, ResourceStatus))> {
    let ok = write(&client, &manager, kind.as_ref(), &object, &desired, &recorder).await;
    ok.then_some((id, (object.uid, desired)))
}

async fn write(
    client: &kube::Client,
    manager: &str,
    kind: &dyn WatchedKind,
    object: &ObjectState,
    desired: &ResourceStatus,
    recorder: &Recorder,
) -> bool {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind.kind()), kind.plural());
    let api: Api<DynamicObject> = match &object.key.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    // The uid makes the write fail on an object re-created under the same
    // name, which this status does not describe.
    let patch = json!({
        "apiVersion": API_VERSION,
        "kind": kind.kind(),
        "metadata": {"name": object.key.name, "uid": object.uid},
        "status": desired,
    });
    let params = PatchParams::apply(manager).force();
    if let Err(err) = api.patch_status(&object.key.name, &params, &Patch::Apply(&patch)).await {
        tracing::warn!(kind = kind.kind(), object = %object.key, error = %err, "writing the status failed; retried on the next pass");
        return false;
    }
    let (Some(new), previous) = (desired.conditions.first(), object.status.as_ref().and_then(|s| s.conditions.first()))
    else {
        return true;
    };
    tracing::info!(kind = kind.kind(), object = %object.key, ready = %new.status, reason = %new.reason, "status written");
    let refused = new.type_ == READY && new.status == "False" && new.reason != PENDING;
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
    true
}
