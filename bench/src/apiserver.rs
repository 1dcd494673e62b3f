//! Pod creates through the real kube-apiserver (`scripts/control-plane.sh`,
//! span export to its Jaeger on), one namespace per setup so that every
//! setup's webhooks and policies are registered once and rounds can be
//! interleaved: server dry-run creates, then real ones.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use portcullis_e2e::webhook::{Kind, Registration, namespace};

use crate::fixtures;
use crate::load::measure;
use crate::report::{Level, Row};
use crate::run::{Args, Contender, Files, Server, progress};

/// One way the API server is set up for pods.
struct Setup {
    /// Its name in the report.
    name: &'static str,
    /// Its namespace's `e2e.portcullis.dev/case` label (and name suffix).
    case: &'static str,
    /// The mutating webhook, if any.
    injector: Option<Server>,
    /// Whether the Portcullis validator is registered.
    validator: bool,
    /// Whether the pod policies are in force as ValidatingAdmissionPolicy.
    admission_policy: bool,
    /// Whether the CEL mutation is in force as a MutatingAdmissionPolicy.
    map: bool,
    /// Whether the pod policies are in force as the ValidatingAdmissionPolicy
    /// that `portcullis-validator vap` makes of the `ValidatorPolicy`.
    pushed: bool,
}

impl Setup {
    /// The label whose presence on a dry-run pod shows that its mutation is
    /// in force, if it has one.
    fn mutation_label(&self) -> Option<&'static str> {
        match self.injector {
            _ if self.map => Some(fixtures::CEL_LABEL),
            Some(Server::InjectorCel) => Some(fixtures::CEL_LABEL),
            Some(_) => Some("portcullis.dev/injected"),
            None => None,
        }
    }
}

const SETUPS: [Setup; 11] = [
    Setup {
        name: "no webhook (baseline)",
        case: "baseline",
        injector: None,
        validator: false,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "portcullis-validator",
        case: "validator",
        injector: None,
        validator: true,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "ValidatingAdmissionPolicy (in-process)",
        case: "vap",
        injector: None,
        validator: false,
        admission_policy: true,
        map: false,
        pushed: false,
    },
    Setup {
        name: "the same policies pushed down (portcullis-validator vap)",
        case: "pushed",
        injector: None,
        validator: false,
        admission_policy: false,
        map: false,
        pushed: true,
    },
    Setup {
        name: "portcullis-injector",
        case: "injector",
        injector: Some(Server::Injector),
        validator: false,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "controller-runtime injector (Go)",
        case: "peer",
        injector: Some(Server::Peer),
        validator: false,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "floor: precomputed patch",
        case: "floor",
        injector: Some(Server::Floor),
        validator: false,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "portcullis-injector + portcullis-validator",
        case: "both",
        injector: Some(Server::Injector),
        validator: true,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "controller-runtime injector + portcullis-validator",
        case: "peer-validator",
        injector: Some(Server::Peer),
        validator: true,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "portcullis-injector: one CEL mutation",
        case: "injector-cel",
        injector: Some(Server::InjectorCel),
        validator: false,
        admission_policy: false,
        map: false,
        pushed: false,
    },
    Setup {
        name: "MutatingAdmissionPolicy (in-process): the same mutation",
        case: "map",
        injector: None,
        validator: false,
        admission_policy: false,
        map: true,
        pushed: false,
    },
];

/// Runs every setup, dry-run then real, and returns a row per setup for each.
pub(crate) async fn run(args: &Args, files: &Files) -> anyhow::Result<Vec<(Level, Vec<Row>)>> {
    progress("through the API server: starting the control plane (scripts/control-plane.sh)");
    let cluster = tokio::task::spawn_blocking(portcullis_e2e::cluster).await?;
    let client = cluster.client().await;
    let servers = [Server::Injector, Server::InjectorCel, Server::Validator, Server::Peer, Server::Floor];
    let started =
        servers.iter().map(|s| s.start(args, files, None, Some(cluster))).collect::<anyhow::Result<Vec<_>>>()?;
    let url = |server: Server| started.iter().find(|c| c.name == server.name()).map(|c: &Contender| c.url.clone());
    for setup in &SETUPS {
        prepare(cluster, &client, setup, args, files, &url)
            .await
            .with_context(|| format!("setting up {:?}", setup.name))?;
    }
    let mut levels = Vec::new();
    for (level, dry_run) in [(Level::DryRun, true), (Level::Create, false)] {
        let mut rows: Vec<Row> = SETUPS.iter().map(|s| Row::new(s.name)).collect();
        for round in 1..=args.rounds {
            for (setup, row) in SETUPS.iter().zip(&mut rows) {
                progress(&format!("{}, round {round}/{}: {}", level.title(), args.rounds, setup.name));
                let api: Api<Pod> = Api::namespaced(client.clone(), &namespace_of(setup));
                row.rounds.push(creates(args, &api, dry_run).await?);
                if !dry_run {
                    api.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
                }
            }
        }
        levels.push((level, rows));
    }
    Ok(levels)
}

fn namespace_of(setup: &Setup) -> String {
    format!("bench-{}", setup.case)
}

/// `args.api_concurrency` clients creating the benchmark pod for
/// `args.api_seconds`.
async fn creates(args: &Args, api: &Api<Pod>, dry_run: bool) -> anyhow::Result<crate::load::Summary> {
    let pod: Pod = serde_json::from_value(fixtures::pod(args.containers))?;
    let params = PostParams { dry_run, ..PostParams::default() };
    let api = api.clone();
    Ok(measure(args.api_concurrency, Duration::from_secs_f64(args.api_seconds), move |_| {
        let (api, pod, params) = (api.clone(), pod.clone(), params.clone());
        async move { api.create(&params, &pod).await.is_ok() }
    })
    .await)
}

/// Registers what `setup` needs for its namespace and waits until the API
/// server applies it.
async fn prepare(
    cluster: &portcullis_e2e::Cluster,
    client: &kube::Client,
    setup: &Setup,
    args: &Args,
    files: &Files,
    url: &impl Fn(Server) -> Option<String>,
) -> anyhow::Result<()> {
    let ns = namespace_of(setup);
    namespace(client, &ns, &[("e2e.portcullis.dev/case", setup.case), ("portcullis.dev/inject", "enabled")]).await;
    let registration = |kind: Kind, server: Server, suffix: &str| Registration {
        kind,
        name: format!("bench-{}-{suffix}", setup.case),
        case: setup.case.to_owned(),
        url: url(server).unwrap_or_default(),
        ca_bundle: files.ca.clone(),
        failure_policy: "Fail",
    };
    if let Some(server) = setup.injector {
        registration(Kind::Injector, server, "inject").apply(client).await.keep();
    }
    if setup.validator {
        registration(Kind::Validator, Server::Validator, "validate").apply(client).await.keep();
    }
    if setup.admission_policy {
        for object in fixtures::admission_policy(setup.case) {
            portcullis_e2e::ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &object.to_string()));
        }
    }
    if setup.pushed {
        portcullis_e2e::ok(
            cluster.kubectl_stdin(&["apply", "-f", "-"], &fixtures::vap(&args.bin_dir, &files.path("pushed.json"))?),
        );
    }
    if setup.map {
        for object in fixtures::mutating_admission_policy(setup.case) {
            portcullis_e2e::ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &object.to_string()));
        }
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(fixtures::pod(args.containers))?;
    let mut denied = pod.clone();
    denied.metadata.labels.get_or_insert_default().insert(fixtures::DENY_LABEL.to_owned(), "true".to_owned());
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mutated = match api.create(&dry_run, &pod).await {
            Ok(created) => match setup.mutation_label() {
                Some(label) => created.labels().contains_key(label),
                None => !created.labels().contains_key("portcullis.dev/injected"),
            },
            Err(err) => anyhow::bail!("a dry-run pod create in {ns} failed: {err}"),
        };
        let enforced = api.create(&dry_run, &denied).await.is_err();
        if mutated && enforced == (setup.validator || setup.admission_policy || setup.pushed) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "the API server did not apply the setup within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
