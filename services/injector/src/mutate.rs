//! The injector's decision: a pure function from an admission request and
//! the configuration to a [`Decision`] holding the mutated pod.
//!
//! A CREATE is mutated in one documented order, into one patch: the
//! previous pass's injections are taken out, the templates injected, the
//! CEL mutations run (on the pod as the templates left it, so they can
//! change an injected sidecar), then images rewritten (those of containers
//! the mutations added too) and defaults applied, and the status annotation
//! written last.

use std::time::Instant;

use portcullis_admission::native_match::ManifestNamespaces;
use portcullis_admission::parts::Parts;
use portcullis_admission::{Decision, Operation, Request, Verdict, json};
use portcullis_known::Cluster;
use portcullis_known::params::NoParams;
use serde_json::Value;

use crate::config::{CelBounds, Config, Defaults};
use portcullis_admission::names::{INJECT_ANNOTATION, STATUS_ANNOTATION, TEMPLATES_ANNOTATION};

use crate::apply::BUILTIN;
use crate::native::own::CompiledMutation;
use crate::native::run::{Context, Outcome as Ran};
use crate::status::{Rewrite, Status};
use crate::{images, inject, pod};

/// No namespace and no parameter object known (tests, fuzzing).
const NOTHING_KNOWN: Cluster<'static> = Cluster { namespaces: &ManifestNamespaces::EMPTY, params: &NoParams };

/// The decision and what it counts for metrics.
#[derive(Debug, Default)]
pub struct Outcome {
    /// What to answer.
    pub decision: Decision,
    /// Images rewritten by this pass (not those rewritten earlier).
    pub images_rewritten: usize,
    /// What each CEL mutation did, by name, in order.
    pub cel: Vec<(String, CelResult)>,
}

/// The CEL mutations' bounds, when the request arrived (`None`: when they
/// start), what they read of the cluster, and what each did.
struct Cel<'a> {
    bounds: CelBounds,
    arrival: Option<Instant>,
    cluster: Cluster<'a>,
    ran: Vec<(String, CelResult)>,
}

/// What one CEL mutation did to a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CelResult {
    /// It ran (its changes may be none).
    Applied,
    /// A match condition was false.
    Skipped,
    /// It failed under `failurePolicy: Ignore`.
    Ignored,
    /// It failed under `failurePolicy: Fail`: the pod is denied.
    Failed,
    /// It was not run: the request was read (in parts) before it was in
    /// force.
    NotInForce,
}

impl CelResult {
    /// The value of the metric's `result` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Skipped => "skipped",
            Self::Ignored => "ignored",
            Self::Failed => "failed",
            Self::NotInForce => "not_in_force",
        }
    }
}

/// Decides on any request: pod CREATEs are mutated; pod UPDATEs keep
/// images on their mirrors (a `kubectl apply` of the original manifest sets
/// them back); ephemeral containers added to a pod get their images
/// rewritten; everything else is allowed unchanged (other kinds, other
/// operations, dry-run or not alike). CEL mutations run within the
/// default bounds, knowing no namespace and no parameter object.
pub fn mutate(req: &Request, config: &Config) -> Outcome {
    mutate_by(req, PodChange::of(req), config, CelBounds::default(), NOTHING_KNOWN, None)
}

/// [`mutate`], the CEL mutations within `bounds`, reading `cluster`'s
/// namespaces and parameter objects, their timeout counted from `arrival`
/// (`None`: from when they start).
///
/// Only a pod's creation gets templates, CEL mutations and defaults; a
/// pod's update has only its images rewritten. `change` is what `req` does
/// ([`PodChange::of`]), classified once by the caller (the webhook also
/// decides by it whether to wait for a new pod's namespace).
pub(crate) fn mutate_by(
    req: &Request,
    change: PodChange,
    config: &Config,
    bounds: CelBounds,
    cluster: Cluster<'_>,
    arrival: Option<Instant>,
) -> Outcome {
    let Some(object) = req.object.as_ref() else { return Outcome::default() };
    match change {
        PodChange::Create => mutate_pod(req, object, config, Cel { bounds, arrival, cluster, ran: Vec::new() }),
        PodChange::Update => rewrite_only(object, &["containers", "initContainers"], config, Report::Status),
        PodChange::EphemeralContainers => rewrite_only(object, &["ephemeralContainers"], config, Report::Warnings),
        PodChange::Other => Outcome::default(),
    }
}

/// What a request does to a pod, which decides what the injector does
/// with it ([`mutate_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodChange {
    /// A pod's creation: the only request that gets templates, CEL
    /// mutations (and so anything that reads namespaces) and defaults.
    Create,
    /// A pod's update: its images are kept on their mirrors.
    Update,
    /// Ephemeral containers added (the `ephemeralcontainers` subresource).
    EphemeralContainers,
    /// Anything else: another kind, operation or subresource.
    Other,
}

impl PodChange {
    /// What `req` does to a pod.
    pub(crate) fn of(req: &Request) -> Self {
        let kind = req.kind();
        if !(kind.group.is_empty() && kind.version == "v1" && kind.kind == "Pod") {
            return Self::Other;
        }
        match (&req.inner.operation, req.inner.sub_resource.as_deref()) {
            (Operation::Create, None) => Self::Create,
            (Operation::Update, None) => Self::Update,
            (Operation::Update, Some("ephemeralcontainers")) => Self::EphemeralContainers,
            _ => Self::Other,
        }
    }
}

/// Injects the pod's templates, runs the CEL mutations, rewrites its images
/// and applies defaults. Running it again on its own output changes nothing
/// (the CEL mutations must be idempotent, as a MutatingAdmissionPolicy's
/// must). `original` is `req`'s pod as [`pod::decode`] reads it (the parts
/// [`pod::parts_for`] the configuration names, or whole): the patch is the
/// same. A CEL mutation that fails under `failurePolicy: Fail`
/// denies the pod.
fn mutate_pod(req: &Request, original: &Value, config: &Config, mut cel: Cel<'_>) -> Outcome {
    let (previous, mut warnings) = match start(original) {
        Ok(start) => start,
        Err(outcome) => return *outcome,
    };
    let mut mutated = original.clone();
    match inject_all(&mut mutated, req, original, config, &previous, &mut warnings, &mut cel) {
        Ok((status, images_rewritten)) => Outcome {
            decision: Decision {
                verdict: Verdict::changes(original, &mutated),
                warnings,
                applied: status.templates,
                ..Decision::default()
            },
            images_rewritten,
            cel: cel.ran,
        },
        Err(message) => {
            let mut decision = Decision::deny(403, message);
            decision.warnings = warnings;
            Outcome { decision, images_rewritten: 0, cel: cel.ran }
        }
    }
}

/// The pod [`mutate_pod`]'s patch makes of the whole `original`, made
/// without a patch: the same mutation on a copy of the whole pod. The
/// reference the tests and the fuzz target hold the patch from the pod's
/// parts ([`pod::parts_for`]) to; `None` when the pod is left alone or
/// denied. No namespace and no parameter object are known.
pub fn mutated_whole(req: &Request, original: &Value, config: &Config) -> Option<Value> {
    let (previous, mut warnings) = start(original).ok()?;
    let mut pod = original.clone();
    let mut cel = Cel { bounds: CelBounds::default(), arrival: None, cluster: NOTHING_KNOWN, ran: Vec::new() };
    inject_all(&mut pod, req, original, config, &previous, &mut warnings, &mut cel).ok()?;
    Some(pod)
}

/// What the mutation of a CREATE starts from: the previous pass's status
/// and the warnings so far; or, for a pod left alone, the outcome.
fn start(original: &Value) -> Result<(Status, Vec<String>), Box<Outcome>> {
    if leave_alone(original) {
        return Err(Box::default());
    }
    if original.get("spec").is_none_or(|s| !s.is_object()) {
        return Err(Box::new(unchanged("the pod has no spec".into())));
    }
    // The API server never sends such a pod; the injector does not repair
    // what it would have to overwrite (annotations that are a list).
    if let Some(problem) = pod::unusable(original) {
        return Err(Box::new(unchanged(problem)));
    }
    let mut warnings = Vec::new();
    let previous = match Status::of(original) {
        Some(Ok(status)) => status,
        Some(Err(_)) => {
            warnings.push(format!("portcullis: {STATUS_ANNOTATION} is not readable; treated as empty"));
            Status::default()
        }
        None => Status::default(),
    };
    Ok((previous, warnings))
}

/// The whole mutation of a CREATE, done on `pod`: a copy of the original
/// pod, whole or the parts [`pod::parts_for`] names, with the same result on
/// those parts. Reads the pod's choices (templates, host network) from
/// `original`. Returns what it recorded in the status annotation and the
/// count of images rewritten, or why a CEL mutation denies the pod.
fn inject_all(
    pod: &mut Value,
    req: &Request,
    original: &Value,
    config: &Config,
    previous: &Status,
    warnings: &mut Vec<String>,
    cel: &mut Cel<'_>,
) -> Result<(Status, usize), String> {
    let host_network = json::at(original, &["spec", "hostNetwork"]).and_then(Value::as_bool) == Some(true);
    let templates = selected_templates(original, config, warnings);
    let mut status = Status::default();
    let spec = pod::object_mut(pod).entry("spec").or_insert(Value::Null);
    inject::remove(spec, previous);
    for template in templates.into_iter().filter(|t| !(t.skip_host_network && host_network)) {
        inject::apply(spec, template, &mut status, warnings);
    }
    run_cel(pod, req, config, warnings, cel)?;
    let spec = pod::object_mut(pod).entry("spec").or_insert(Value::Null);
    let images_rewritten = rewrite_images(spec, &pod::CONTAINER_LISTS, config, previous, &mut status);
    apply_defaults(pod, &config.defaults, &req.parts);
    write_status(pod, &status);
    Ok((status, images_rewritten))
}

/// Runs the CEL mutations in order on `pod`, within the configuration's
/// bounds, then once more those with `reinvocationPolicy: IfNeeded` that a
/// later one's change asks for. One that fails under `Fail` ends the
/// mutation with its message;
/// under `Ignore` it leaves the pod as it was and warns. They run only on
/// a pod read with the parts they read and change: a request read without
/// them arrived before the configuration that holds them was in force
/// ([`pod::parts_for`]).
fn run_cel(
    pod: &mut Value,
    req: &Request,
    config: &Config,
    warnings: &mut Vec<String>,
    cel: &mut Cel<'_>,
) -> Result<(), String> {
    if config.mutations.is_empty() {
        return Ok(());
    }
    if !config.mutations.iter().all(|m| req.parts.covers(&m.pod_parts)) {
        tracing::info!(
            "request read before the CEL mutations were in force (without their parts): decided without them"
        );
        cel.ran.extend(config.mutations.iter().map(|m| (m.spec.name.clone(), CelResult::NotInForce)));
        return Ok(());
    }
    let context = Context {
        namespaces: cel.cluster.namespaces,
        schemas: &BUILTIN,
        limits: cel.bounds.limits,
        deadline: cel.arrival.unwrap_or_else(Instant::now) + cel.bounds.timeout,
        params: cel.cluster.params,
    };
    // As the API server orders MAPs: a change asks every entry with
    // `reinvocationPolicy: IfNeeded` that ran before it to run once more.
    let (mut reinvocable, mut again) = (Vec::new(), Vec::new());
    for (i, mutation) in config.mutations.iter().enumerate() {
        let Some(changed) = run_one(mutation, context, req, pod, warnings, cel)? else { continue };
        if changed {
            again.clone_from(&reinvocable);
        }
        if mutation.compiled.reinvoke {
            reinvocable.push(i);
        }
    }
    for i in again {
        run_one(&config.mutations[i], context, req, pod, warnings, cel)?;
    }
    Ok(())
}

/// Runs one CEL mutation on `pod` and records what it did: `Some` when it
/// applied, holding whether it changed the pod; or why it denies the pod.
fn run_one(
    mutation: &CompiledMutation,
    context: Context<'_>,
    req: &Request,
    pod: &mut Value,
    warnings: &mut Vec<String>,
    cel: &mut Cel<'_>,
) -> Result<Option<bool>, String> {
    let name = &mutation.spec.name;
    // A pod the rest of the mutation cannot work on is the mutation's
    // failure, under its failure policy.
    let ran = mutation.compiled.run(context, req, pod, |pod| match pod::unusable_in(pod, mutation.spec_may_change) {
        None => Ok(()),
        Some(why) => Err(format!("it left the pod unusable: {why}")),
    });
    let (result, outcome) = match ran {
        Ok(Ran::Applied(changed)) => (CelResult::Applied, Some(changed)),
        Ok(Ran::NotApplied) => (CelResult::Skipped, None),
        Ok(Ran::Ignored(why)) => {
            tracing::info!(mutation = %name, %why, "CEL mutation ignored (failurePolicy: Ignore)");
            warnings.push(format!("portcullis: mutation {name:?} was ignored (failurePolicy: Ignore): {why}"));
            (CelResult::Ignored, None)
        }
        Err(denied) => {
            tracing::info!(mutation = %name, why = %denied.message, "CEL mutation failed: the pod is denied");
            cel.ran.push((name.clone(), CelResult::Failed));
            return Err(format!("portcullis: mutation {name:?} failed: {}", denied.message));
        }
    };
    cel.ran.push((name.clone(), result));
    Ok(outcome)
}

/// Allows a pod the injector cannot work on unchanged, saying why.
fn unchanged(why: String) -> Outcome {
    let mut decision = Decision::allow();
    decision.warnings.push(format!("portcullis: {why}; the pod is left unchanged"));
    Outcome { decision, images_rewritten: 0, cel: Vec::new() }
}

/// Mirror pods and pods that opted out are never changed.
fn leave_alone(pod: &Value) -> bool {
    pod::annotation(pod, pod::MIRROR_ANNOTATION).is_some() || pod::annotation(pod, INJECT_ANNOTATION) == Some("false")
}

fn selected_templates<'c>(
    pod: &Value,
    config: &'c Config,
    warnings: &mut Vec<String>,
) -> Vec<&'c crate::config::Template> {
    let names: Vec<&str> = match pod::annotation(pod, TEMPLATES_ANNOTATION) {
        Some(list) => list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect(),
        None => config.default_templates.iter().map(String::as_str).collect(),
    };
    names
        .into_iter()
        .filter_map(|name| {
            let found = config.template(name);
            if found.is_none() {
                warnings.push(format!("portcullis: unknown template {name:?} in {TEMPLATES_ANNOTATION}; ignored"));
            }
            found
        })
        .collect()
}

/// Rewrites every container's image by the first matching rule. An image
/// that an earlier pass rewrote (per `previous`) is kept, and so is its
/// record, so rules are never applied to their own output.
fn rewrite_images(spec: &mut Value, lists: &[&str], config: &Config, previous: &Status, status: &mut Status) -> usize {
    let mut rewritten = 0;
    for &list in lists {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            let name = crate::config::object_name(container).to_owned();
            let Some(image) = container.get("image").and_then(Value::as_str) else {
                continue;
            };
            if let Some(earlier) = previous.images.get(&name).filter(|r| r.to == image) {
                status.images.insert(name, earlier.clone());
                continue;
            }
            if let Some(to) = images::rewrite(image, &config.image_rewrites) {
                status.images.insert(name, Rewrite { from: image.to_owned(), to: to.clone() });
                container["image"] = Value::String(to);
                rewritten += 1;
            }
        }
    }
    rewritten
}

/// Where a rewrite on UPDATE is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    /// In the status annotation (the pod itself is being updated).
    Status,
    /// As warnings: the ephemeralcontainers subresource cannot change
    /// annotations.
    Warnings,
}

/// Rewrites the images in `lists` only: all that may change on an update.
fn rewrite_only(pod: &Value, lists: &[&str], config: &Config, report: Report) -> Outcome {
    if leave_alone(pod) {
        return Outcome::default();
    }
    let previous = Status::of(pod).and_then(Result::ok).unwrap_or_default();
    if let Some(problem) = pod.get("spec").and_then(pod::unnamed_or_duplicate) {
        return unchanged(problem);
    }
    let mut mutated = pod.clone();
    let Some(spec) = mutated.get_mut("spec") else {
        return Outcome::default();
    };
    let mut status = Status::default();
    let rewritten = rewrite_images(spec, lists, config, &previous, &mut status);
    if rewritten == 0 {
        return Outcome::default();
    }
    let mut decision = Decision::allow();
    let fresh = status.images.into_iter().filter(|(name, r)| previous.images.get(name) != Some(r));
    match report {
        Report::Status => {
            let mut merged = previous.clone();
            merged.images.extend(fresh);
            write_status(&mut mutated, &merged);
        }
        Report::Warnings => {
            decision.warnings = fresh
                .map(|(name, r)| format!("portcullis: container {name:?}: image {} rewritten to {}", r.from, r.to))
                .collect();
        }
    }
    decision.verdict = Verdict::changes(pod, &mutated);
    Outcome { decision, images_rewritten: rewritten, cel: Vec::new() }
}

/// Applies `defaults` to `pod`, read with `parts`. A default label or
/// annotation the pod was read without (a configuration put in force
/// between reading the request and deciding on it) is left out, with a
/// log line: the pod's own value under that key was not read, and adding
/// the default would overwrite it.
fn apply_defaults(pod: &mut Value, defaults: &Defaults, parts: &Parts) {
    if let Some(policy) = defaults.image_pull_policy
        && let Some(spec) = pod.get_mut("spec")
    {
        for list in pod::CONTAINER_LISTS {
            let containers = spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten();
            for container in containers.filter_map(Value::as_object_mut) {
                container.insert("imagePullPolicy".to_owned(), Value::String(policy.as_str().to_owned()));
            }
        }
    }
    if let Some(links) = defaults.enable_service_links
        && let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("enableServiceLinks".to_owned(), Value::Bool(links));
    }
    for (field, wanted) in [("labels", &defaults.labels), ("annotations", &defaults.annotations)] {
        if wanted.is_empty() {
            continue;
        }
        let map = pod::metadata_map(pod, field);
        for (key, value) in wanted {
            if !parts.holds(&["metadata", field, key]) {
                tracing::info!(field, key, "request read before this default was in force: decided without it");
                continue;
            }
            map.entry(key.clone()).or_insert_with(|| Value::String(value.clone()));
        }
    }
}

fn write_status(pod: &mut Value, status: &Status) {
    if status.is_empty() {
        let present = pod::annotation(pod, STATUS_ANNOTATION).is_some();
        if present {
            pod::metadata_map(pod, "annotations").remove(STATUS_ANNOTATION);
        }
        return;
    }
    // A struct of strings, lists and maps always serializes.
    let text = serde_json::to_string(status).unwrap_or_default();
    pod::metadata_map(pod, "annotations").insert(STATUS_ANNOTATION.to_owned(), Value::String(text));
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::{PodChange, mutate};
    use crate::config::Config;
    use crate::pod;

    #[rstest]
    #[case::a_pods_creation("", "Pod", "pods", "CREATE", None, PodChange::Create)]
    #[case::a_pods_update("", "Pod", "pods", "UPDATE", None, PodChange::Update)]
    #[case::ephemeral_containers(
        "",
        "Pod",
        "pods",
        "UPDATE",
        Some("ephemeralcontainers"),
        PodChange::EphemeralContainers
    )]
    #[case::its_status("", "Pod", "pods", "UPDATE", Some("status"), PodChange::Other)]
    #[case::its_deletion("", "Pod", "pods", "DELETE", None, PodChange::Other)]
    #[case::a_binding("", "Binding", "pods", "CREATE", Some("binding"), PodChange::Other)]
    #[case::a_pods_subresource_created("", "Pod", "pods", "CREATE", Some("status"), PodChange::Other)]
    #[case::a_deployment("apps", "Deployment", "deployments", "CREATE", None, PodChange::Other)]
    fn what_a_request_does_to_a_pod(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] resource: &str,
        #[case] operation: &str,
        #[case] sub_resource: Option<&str>,
        #[case] change: PodChange,
    ) {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": resource}, "subResource": sub_resource,
            "operation": operation, "userInfo": {}, "object": {"metadata": {"name": "p"}}}});
        let req = portcullis_admission::decode(review.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(PodChange::of(&req), change);
    }

    /// A configuration put in force between reading a pod and deciding on
    /// it: a default label the pod was read without is left out, never
    /// written over the pod's own value, which was not read.
    #[test]
    fn a_default_the_pod_was_read_without_is_left_out() {
        let mut with_default = Config::default();
        with_default.defaults.labels.insert("team".into(), "unknown".into());
        let body = |labels: serde_json::Value| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
                "operation": "CREATE", "userInfo": {}, "object": {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": labels}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
            .to_string()
        };
        let patch = |labels, read_with: &Config| {
            let req =
                pod::decode(body(labels).as_bytes(), &pod::parts_for(read_with)).unwrap_or_else(|e| panic!("{e}"));
            match mutate(&req, &with_default).decision.verdict {
                portcullis_admission::Verdict::Patch(patch) => String::from_utf8_lossy(patch.as_bytes()).into_owned(),
                other => format!("{other:?}"),
            }
        };
        let before = Config::default();
        assert!(!patch(json!({"team": "payments"}), &before).contains("team"), "the pod's own label stays");
        assert!(!patch(json!({"team": "payments"}), &with_default).contains("team"), "read, and kept");
        assert!(!patch(json!({"app": "web"}), &before).contains("team"), "left out, for this request only");
        assert!(patch(json!({"app": "web"}), &with_default).contains("/metadata/labels/team"), "read: set");
    }
}
