//! The Pod Security Standards through the real API server (`pss.rs`):
//!
//! - **the floor**: pod creates (dry-run, `--api-concurrency` clients) with
//!   no pod admission, with Kubernetes' built-in `PodSecurity` admission at
//!   `restricted`, with the 17 checks as hand-written
//!   ValidatingAdmissionPolicies, pushed down by `portcullis-validator vap`,
//!   and by the validator's webhook; each one's added cost per create
//!   against the baseline, in interleaved rounds;
//! - **the scale**: real pod creates at 100, 200 and 500 concurrent
//!   clients (`--pss-clients`), as Kyverno's scaling page measures its 17
//!   policies, with the webhook at 1 and 3 replicas beside the built-in
//!   admission and the pushed-down set: latency (mean, p99, max),
//!   creates/s, and the webhook replicas' CPU and memory.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};

use crate::load::{Summary, measure};
use crate::pss::{self, SHARD_LABEL};
use crate::report::Spread;
use crate::run::{Args, Contender, Files, Server, progress};

/// How the namespace's pods are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Enforcement {
    /// Nothing judges pods (PodSecurity admission at `privileged`).
    Baseline,
    /// The built-in PodSecurity admission at `restricted`, latest.
    PodSecurity,
    /// The checks as hand-written ValidatingAdmissionPolicies.
    Vap,
    /// The checks as ValidatorPolicies, pushed down (`portcullis-validator vap`).
    PushedDown,
    /// The checks as ValidatorPolicies, by the validator's webhook on this
    /// many replicas.
    Webhook(usize),
}

impl Enforcement {
    fn name(self) -> String {
        match self {
            Self::Baseline => "no pod admission (baseline)".to_owned(),
            Self::PodSecurity => "PodSecurity admission, restricted (built in)".to_owned(),
            Self::Vap => "17 checks as hand-written ValidatingAdmissionPolicies".to_owned(),
            Self::PushedDown => "17 ValidatorPolicies pushed down (portcullis-validator vap)".to_owned(),
            Self::Webhook(1) => "17 ValidatorPolicies by portcullis-validator, 1 replica".to_owned(),
            Self::Webhook(n) => format!("17 ValidatorPolicies by portcullis-validator, {n} replicas"),
        }
    }

    /// Its namespace (and `e2e.portcullis.dev/case` label).
    fn case(self) -> String {
        match self {
            Self::Baseline => "pss-baseline".to_owned(),
            Self::PodSecurity => "pss-podsecurity".to_owned(),
            Self::Vap => "pss-vap".to_owned(),
            Self::PushedDown => "pss-pushed".to_owned(),
            Self::Webhook(n) => format!("pss-webhook-{n}"),
        }
    }

    fn replicas(self) -> usize {
        match self {
            Self::Webhook(n) => n,
            _ => 0,
        }
    }
}

const FLOOR: [Enforcement; 5] = [
    Enforcement::Baseline,
    Enforcement::PodSecurity,
    Enforcement::Vap,
    Enforcement::PushedDown,
    Enforcement::Webhook(1),
];

const SCALE: [Enforcement; 5] = [
    Enforcement::Baseline,
    Enforcement::PodSecurity,
    Enforcement::PushedDown,
    Enforcement::Webhook(1),
    Enforcement::Webhook(3),
];

/// Webhook replicas started (the 1-replica setup uses the first).
const REPLICAS: usize = 3;

/// One measurement of one setup.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Measured {
    /// The creates, as the clients saw them.
    pub summary: Summary,
    /// The webhook replicas' CPU over the measurement, millicores (all
    /// replicas together), if the setup has a webhook.
    pub webhook_millicores: Option<f64>,
    /// Their CPU per create they judged (every create of the measurement,
    /// the clients' untimed first ones included), µs.
    pub webhook_cpu_us: Option<f64>,
    /// The largest resident memory of the replicas together, sampled every
    /// 50 ms, MiB.
    pub webhook_rss_mib: Option<f64>,
}

/// One setup at one number of clients, a measurement per round.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Point {
    pub enforcement: Enforcement,
    pub name: String,
    pub clients: usize,
    pub rounds: Vec<Measured>,
}

/// Both parts' points.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PodSecurityReport {
    /// Dry-run creates at `--api-concurrency` clients.
    pub floor: Vec<Point>,
    /// Real creates at each of `--pss-clients`.
    pub scale: Vec<Point>,
}

/// Starts the replicas, sets every namespace up, measures both parts.
pub(crate) async fn run(args: &Args, files: &Files) -> anyhow::Result<PodSecurityReport> {
    progress("pod security: starting the control plane (scripts/control-plane.sh)");
    let cluster = tokio::task::spawn_blocking(portcullis_e2e::cluster).await?;
    let client = cluster.client().await;
    let replicas: Vec<Contender> = (0..REPLICAS)
        .map(|_| Server::ValidatorPss.start(args, files, None, Some(cluster)))
        .collect::<anyhow::Result<_>>()?;
    let mut all: Vec<Enforcement> = FLOOR.to_vec();
    all.extend(SCALE.iter().filter(|e| !FLOOR.contains(e)));
    for enforcement in &all {
        prepare(cluster, &client, *enforcement, args, files, &replicas)
            .await
            .with_context(|| format!("setting up {:?}", enforcement.name()))?;
    }
    let mut floor: Vec<Point> = FLOOR.iter().map(|e| point(*e, args.api_concurrency)).collect();
    let mut scale: Vec<Point> =
        args.pss_clients.iter().flat_map(|&c| SCALE.iter().map(move |e| point(*e, c))).collect();
    for round in 1..=args.rounds {
        for point in &mut floor {
            progress(&format!("pod security floor, round {round}/{}: {}", args.rounds, point.name));
            point.rounds.push(measure_point(args, &client, point, &replicas, true).await?);
        }
        for point in &mut scale {
            progress(&format!(
                "pod security at scale, round {round}/{}: {} clients, {}",
                args.rounds, point.clients, point.name
            ));
            point.rounds.push(measure_point(args, &client, point, &replicas, false).await?);
        }
    }
    Ok(PodSecurityReport { floor, scale })
}

fn point(enforcement: Enforcement, clients: usize) -> Point {
    Point { enforcement, name: enforcement.name(), clients, rounds: Vec::new() }
}

/// `point.clients` clients creating the restricted pod (worker `w` labelled
/// for replica `w % 3`) for `--pss-seconds`, the replicas' CPU and memory
/// measured around it; real creates are deleted afterwards.
async fn measure_point(
    args: &Args,
    client: &kube::Client,
    point: &Point,
    replicas: &[Contender],
    dry_run: bool,
) -> anyhow::Result<Measured> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &point.enforcement.case());
    let pods: Vec<Pod> = (0..REPLICAS)
        .map(|shard| serde_json::from_value(pss::pod(args.containers, shard)))
        .collect::<Result<_, _>>()?;
    let watched = &replicas[..point.enforcement.replicas()];
    let cpu_before: Option<Duration> = watched.iter().map(Contender::cpu_time).sum();
    let (stop, sampler) = sample_memory(watched.iter().map(Contender::pid).collect());
    let params = PostParams { dry_run, ..PostParams::default() };
    let seconds = Duration::from_secs_f64(args.pss_seconds);
    let started = Instant::now();
    let summary = {
        let api = api.clone();
        measure(point.clients, seconds, move |worker| {
            let (api, pod, params) = (api.clone(), pods[worker % REPLICAS].clone(), params.clone());
            async move { api.create(&params, &pod).await.is_ok() }
        })
        .await
    };
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let rss = sampler.await.unwrap_or(0);
    let cpu_after: Option<Duration> = watched.iter().map(Contender::cpu_time).sum();
    if !dry_run {
        api.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    }
    let cpu = match (watched.is_empty(), cpu_before, cpu_after) {
        (false, Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    Ok(Measured {
        summary,
        webhook_millicores: cpu.map(|cpu| cpu.as_secs_f64() * 1000.0 / elapsed.as_secs_f64()),
        webhook_cpu_us: cpu
            .map(|cpu| cpu.as_secs_f64() * 1e6 / summary.calls.unwrap_or(summary.requests).max(1) as f64),
        webhook_rss_mib: (!watched.is_empty()).then(|| rss as f64 / 1024.0),
    })
}

/// Samples the resident memory of `pids` together every 50 ms until told
/// to stop; answers the largest sum, KiB.
fn sample_memory(pids: Vec<u32>) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<u64>) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = tokio::spawn(async move {
        let mut largest = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                _ = &mut stopped => return largest,
                _ = tick.tick() => largest = largest.max(pids.iter().filter_map(|&pid| rss_kib(pid)).sum()),
            }
        }
    });
    (stop, sampler)
}

/// `VmRSS` of process `pid`, KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// Sets `enforcement`'s namespace up and waits until the API server
/// applies it: the restricted pod is admitted, a privileged one is denied
/// (on every replica's shard) wherever the profile is enforced.
async fn prepare(
    cluster: &portcullis_e2e::Cluster,
    client: &kube::Client,
    enforcement: Enforcement,
    args: &Args,
    files: &Files,
    replicas: &[Contender],
) -> anyhow::Result<()> {
    let case = enforcement.case();
    let mut labels = vec![("e2e.portcullis.dev/case", case.as_str())];
    if enforcement == Enforcement::PodSecurity {
        labels.extend([
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("pod-security.kubernetes.io/enforce-version", "latest"),
        ]);
    }
    portcullis_e2e::webhook::namespace(client, &case, &labels).await;
    let apply = |yaml: &str| portcullis_e2e::ok(cluster.kubectl_stdin(&["apply", "-f", "-"], yaml));
    match enforcement {
        Enforcement::Baseline | Enforcement::PodSecurity => {}
        Enforcement::Vap => {
            for object in pss::admission_policies(&case) {
                apply(&object.to_string());
            }
        }
        Enforcement::PushedDown => {
            apply(&crate::fixtures::vap(&args.bin_dir, &files.path("pss-pushed"))?);
        }
        Enforcement::Webhook(n) => {
            apply(&registration(&case, &replicas[..n], &files.ca).to_string());
        }
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), &case);
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let compliant: Pod = serde_json::from_value(pss::pod(args.containers, 0))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Err(err) = api.create(&dry_run, &compliant).await {
            anyhow::bail!("the restricted pod was refused in {case}: {err}");
        }
        let mut answers = Vec::new();
        for shard in 0..REPLICAS {
            let mut privileged = pss::privileged_pod(args.containers);
            privileged["metadata"]["labels"][SHARD_LABEL] = json!(shard.to_string());
            answers.push(api.create(&dry_run, &serde_json::from_value(privileged)?).await.err());
        }
        if answers.iter().all(|answer| answer.is_some() == (enforcement != Enforcement::Baseline)) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the API server did not apply {case} within 60 s: a privileged pod on each shard was answered {answers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A ValidatingWebhookConfiguration for `case`'s pods: one webhook per
/// replica, each judging the pods labelled for it (with one replica, all).
fn registration(case: &str, replicas: &[Contender], ca: &str) -> Value {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let webhooks: Vec<Value> = replicas
        .iter()
        .enumerate()
        .map(|(i, replica)| {
            let mut webhook = json!({
                "name": format!("r{i}.{case}.bench.portcullis.dev"),
                "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": 10, "matchPolicy": "Equivalent",
                "clientConfig": {"url": replica.url, "caBundle": ca_bundle},
                "namespaceSelector": {"matchLabels": {"e2e.portcullis.dev/case": case}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"], "scope": "Namespaced"}],
            });
            if replicas.len() > 1 {
                webhook["objectSelector"] = json!({"matchLabels": {SHARD_LABEL: i.to_string()}});
            }
            webhook
        })
        .collect();
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": format!("bench-{case}")}, "webhooks": webhooks,
    })
}

impl Point {
    fn spread(&self, f: impl Fn(&Measured) -> Option<f64>) -> Option<Spread> {
        let values: Option<Vec<f64>> = self.rounds.iter().map(f).collect();
        values.filter(|v| !v.is_empty()).map(Spread::of)
    }

    /// Per round, the time each create costs more than in `baseline`, µs.
    fn added_cost(&self, baseline: &Point) -> Spread {
        Spread::of(self.rounds.iter().zip(&baseline.rounds).map(|(m, b)| m.summary.added_cost_us(&b.summary)).collect())
    }

    fn failures(&self) -> u64 {
        self.rounds.iter().map(|m| m.summary.failures).sum()
    }
}

fn shown(spread: Option<Spread>) -> String {
    spread.map_or_else(|| "—".to_owned(), |s| s.to_string())
}

impl PodSecurityReport {
    fn find(points: &[Point], enforcement: Enforcement, clients: usize) -> Option<&Point> {
        points.iter().find(|p| p.enforcement == enforcement && p.clients == clients)
    }

    /// Both tables and the targets of issue #31 on stdout.
    pub(crate) fn print(&self) {
        println!("\n## pod security through the API server: the floor (dry-run creates)\n");
        println!("| setup | creates/s | p99 µs | added µs per create | failed |");
        println!("| --- | --- | --- | --- | --- |");
        let Some(baseline) = self.floor.first() else { return };
        for point in &self.floor {
            println!(
                "| {} | {} | {} | {} | {} |",
                point.name,
                shown(point.spread(|m| Some(m.summary.rate))),
                shown(point.spread(|m| Some(m.summary.p99_us))),
                point.added_cost(baseline),
                point.failures()
            );
        }
        let added = |e: Enforcement| Self::find(&self.floor, e, baseline.clients).map(|p| p.added_cost(baseline));
        if let (Some(psa), Some(webhook)) = (added(Enforcement::PodSecurity), added(Enforcement::Webhook(1))) {
            let verdict = if psa.median > 0.0 {
                let ratio = webhook.median / psa.median;
                format!("{ratio:.2}x, {}", met(ratio <= 1.2))
            } else {
                "PodSecurity's own cost is below the rounds' noise, so there is no ratio: not met".to_owned()
            };
            println!(
                "\ntarget (#31): the webhook adds at most 1.2x what PodSecurity admission adds: {webhook} µs vs {psa} µs, {verdict}"
            );
        }
        if let (Some(vap), Some(pushed)) = (added(Enforcement::Vap), added(Enforcement::PushedDown)) {
            let within = pushed.min <= vap.max && vap.min <= pushed.max;
            println!(
                "target (#31): pushed down adds what hand-written VAPs add, within the rounds' range: {} vs {}, {}",
                pushed,
                vap,
                met(within)
            );
        }
        println!("\n## pod security at scale (real creates, as Kyverno's scaling page)\n");
        println!(
            "| setup | clients | creates | creates/s | mean ms | p99 ms | max ms | failed | webhook CPU m | webhook µs/create | webhook memory MiB |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        let ms = |f: fn(&Summary) -> f64| move |m: &Measured| Some(f(&m.summary) / 1000.0);
        for point in &self.scale {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                point.name,
                point.clients,
                shown(point.spread(|m| Some(m.summary.requests as f64))),
                shown(point.spread(|m| Some(m.summary.rate))),
                shown(point.spread(ms(|s| s.mean_us))),
                shown(point.spread(ms(|s| s.p99_us))),
                shown(point.spread(ms(|s| s.max_us))),
                point.failures(),
                shown(point.spread(|m| m.webhook_millicores)),
                shown(point.spread(|m| m.webhook_cpu_us)),
                shown(point.spread(|m| m.webhook_rss_mib)),
            );
        }
    }

    /// What `--smoke` asserts: every setup was measured and nothing failed.
    pub(crate) fn check_smoke(&self) -> anyhow::Result<()> {
        for point in self.floor.iter().chain(&self.scale) {
            anyhow::ensure!(
                !point.rounds.is_empty()
                    && point.failures() == 0
                    && point.rounds.iter().all(|m| m.summary.requests > 0),
                "pod security: {} at {} clients failed or answered nothing",
                point.name,
                point.clients
            );
        }
        Ok(())
    }
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "not met" }
}
