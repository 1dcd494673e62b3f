//! `serve`: the validator on the shared webhook server.

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_cel::workers::Workers;
use portcullis_process::exit::{Hinted, KUBECONFIG_HINT};
use portcullis_resources::{Identity, Loader, ResourceMetrics, Swap};
use portcullis_server::admin::{ReadyCheck, ready_once};
use portcullis_server::run::{reload_config, serve_webhook};
use portcullis_server::{WebhookMetrics, shutdown_signal, watch};

use crate::cli::{PolicyArgs, Serve};
use crate::cluster::{Catalogs, Reader};
use crate::evaluate::{KnownNamespaces, Settings};
use crate::exception::ExceptionNamespaces;
use crate::policy::{PolicyError, PolicySet};
use crate::webhook::{NoNamespaces, Validator};
use portcullis_known::namespaces::WatchedNamespaces;
use portcullis_known::params::WatchedParams;

/// Where the policies come from.
enum Source {
    /// Files, hot-reloaded (standalone, compose).
    Files(Vec<std::path::PathBuf>),
    /// The cluster's resources, watched.
    Cluster,
}

impl Source {
    fn of(args: &Serve) -> anyhow::Result<Self> {
        match (args.policy.paths.is_empty(), args.resources.watch_resources) {
            (false, false) => Ok(Self::Files(args.policy.paths.clone())),
            (true, true) => Ok(Self::Cluster),
            (false, true) => anyhow::bail!(
                "--policy and --watch-resources are exclusive: in a cluster the ValidatorPolicy, \
                 NamespacedValidatorPolicy and PolicyException resources are the policies (files are for \
                 the standalone mode and `check`); give one of them"
            ),
            (true, false) => anyhow::bail!(
                "no policies: give --policy FILE|DIR (files) or --watch-resources (the cluster's resources)"
            ),
        }
    }
}

/// Runs the webhook until SIGTERM/SIGINT.
pub async fn run(args: Serve) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let source = Source::of(&args)?;
    let exception_namespaces = args.policy.exception_namespaces();
    let initial = match &source {
        Source::Files(paths) => {
            let initial = watch::read_all(paths).context("reading the policies")?;
            let policies = parse(&initial, args.policy.cel_cost_limit, &exception_namespaces, Natives::Refused)
                .context("the policies are invalid")?;
            log_policies("policies loaded", &policies);
            Some((initial, policies))
        }
        Source::Cluster => None,
    };
    // Namespaces and parameter objects are watched when the API is in use;
    // without it no namespaces and no parameter objects are known.
    let client = if args.watch_namespaces || matches!(source, Source::Cluster) {
        let client = kube::Client::try_default().await.context(Hinted::new(
            "connecting to the Kubernetes API to watch Namespaces (and, with --watch-resources, the policies)",
            format!(
                "--watch-namespaces=false with --policy serves without it (policies with a namespaceSelector or \
                 reading namespaceObject then follow their failure policy, and those with a paramKind find no \
                 parameter objects: their parameterNotFoundAction decides); else {KUBECONFIG_HINT}"
            ),
        ))?;
        Some(client)
    } else {
        None
    };
    let first = initial.as_ref().map(|(_, p)| p.param_kinds()).unwrap_or_default();
    let (namespaces, params, namespaces_ready): (Arc<dyn KnownNamespaces>, Option<Arc<WatchedParams>>, ReadyCheck) =
        match &client {
            Some(client) if args.watch_namespaces => {
                let watched = WatchedNamespaces::start(client.clone(), shutdown.clone());
                let params = WatchedParams::new(client.clone(), shutdown.clone());
                params.watch(first);
                let ready_namespaces = watched.clone();
                (Arc::new(watched), Some(params), Arc::new(move || ready_namespaces.is_ready()))
            }
            _ => (Arc::new(NoNamespaces), None, Arc::new(|| true)),
        };
    let workers = Workers::new(args.evaluation_threads).context("starting the evaluation threads")?;
    let (initial, policies) = match initial {
        Some((contents, policies)) => (Some(contents), policies),
        None => (None, PolicySet::default()),
    };
    let mut validator = Validator::new(policies, settings(&args.policy), namespaces, workers);
    if let Some(params) = &params {
        validator = validator.with_params(params.clone());
    }
    let validator = Arc::new(validator);
    let resource_metrics = ResourceMetrics::default();
    let metrics = WebhookMetrics::new(|registry| {
        validator.register(registry);
        resource_metrics.register(registry);
    });
    let target = validator.clone();
    let mut retire = None;
    let ready = match (source, initial, client) {
        // With files, the replica waits for every paramKind's objects (they
        // are the files' whole set); with resources, each policy's status
        // waits for its own, and one policy's paramKind (a namespace's,
        // perhaps) cannot hold the whole webhook unready.
        (Source::Files(paths), Some(initial), _) => {
            let params_ready = params.clone();
            // Waited for once: a paramKind a reload adds fails by the
            // failure policy until listed, on every replica still serving.
            let ready = ready_once(move || namespaces_ready() && params_ready.as_ref().is_none_or(|p| p.is_ready()));
            let cost_limit = args.policy.cel_cost_limit;
            let parse =
                move |contents: &watch::Contents| parse(contents, cost_limit, &exception_namespaces, Natives::Refused);
            let reload = args.reload.interval;
            reload_config(paths, reload, initial, metrics.process.clone(), shutdown.clone(), parse, move |p| {
                log_policies("policies reloaded", &p);
                if let Some(params) = &params {
                    params.watch(p.param_kinds());
                }
                target.set_policies(p);
            });
            ready
        }
        (_, _, Some(client)) => {
            let catalogs = Catalogs::watch(&client, &args.policy, &shutdown);
            if let Some(params) = &params {
                // A paramKind found unknown (or found after all), or first
                // listed, changes what the policies' status says.
                params.forward_progress(catalogs.changed());
            }
            let swap_catalogs = catalogs.clone();
            let swap: Swap = Box::new(move || {
                let (set, remarks) = swap_catalogs.set(params.as_deref(), Reader::Webhook);
                log_policies("policies in force", &set);
                if let Some(params) = &params {
                    params.watch(set.param_kinds());
                }
                target.set_policies(set);
                remarks
            });
            let identity = Identity::new(
                "validator",
                args.policy.portcullis_namespace.clone(),
                args.resources.pod_name.clone(),
                args.resources.pod_uid.clone(),
            );
            let pushdown = portcullis_lease::Election::new(
                args.policy.portcullis_namespace.clone(),
                "portcullis-validator-pushdown".into(),
                args.resources.pod_name.clone(),
                "pushing policies down to the API server",
            );
            let settings = crate::pushdown::Settings {
                namespace: args.policy.portcullis_namespace.clone(),
                system_namespaces: crate::policy::system_namespaces(&args.policy.portcullis_namespace),
                cost_limit: args.policy.cel_cost_limit,
                instance: args.resources.pod_name.clone(),
            };
            let pushdown_client = client.clone();
            tokio::spawn(pushdown.run(client.clone(), shutdown.clone(), move |leading| {
                crate::pushdown::run(pushdown_client.clone(), settings.clone(), leading)
            }));
            let loader = Loader::start(
                client,
                identity,
                catalogs.kinds(),
                catalogs.changed(),
                swap,
                resource_metrics,
                shutdown.clone(),
            );
            let loaded = loader.ready_check();
            let ready: ReadyCheck = Arc::new(move || loaded() && namespaces_ready());
            retire = Some(loader);
            ready
        }
        _ => anyhow::bail!("watching the resources needs the Kubernetes API"),
    };
    let served = serve_webhook("validator", "/validate", &args.serve, validator, metrics, ready, shutdown).await;
    if let Some(loader) = retire {
        loader.retire().await;
    }
    served?;
    Ok(())
}

/// The evaluation settings from the command line.
pub fn settings(args: &PolicyArgs) -> Settings {
    Settings {
        system_namespaces: crate::policy::system_namespaces(&args.portcullis_namespace),
        cel_deadline: args.cel.cel_timeout,
        cel_limits: args.cel.limits(),
    }
}

/// Parses every file's documents into one policy set, refusing CEL whose
/// estimated cost exceeds `cost_limit` and exceptions in namespaces
/// `exception_namespaces` does not allow. Native ValidatingAdmissionPolicies
/// are taken where `natives` says they may be judged.
pub fn parse(
    contents: &watch::Contents,
    cost_limit: u64,
    exception_namespaces: &ExceptionNamespaces,
    natives: Natives,
) -> Result<PolicySet, PolicyError> {
    let sources = contents.iter().map(|(path, bytes)| (path.as_path(), bytes.as_slice()));
    let set = PolicySet::from_sources_in(sources, cost_limit, exception_namespaces)?;
    if natives == Natives::Refused && set.has_native() {
        return Err(PolicyError::NativeInWebhook);
    }
    set.warnings.iter().for_each(|warning| tracing::warn!(%warning, "native policy taken with a warning"));
    Ok(set)
}

/// Whether files may hold native ValidatingAdmissionPolicies and bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Natives {
    /// `check` and `audit`: judged as the API server judges them.
    Judged,
    /// The webhook: the API server enforces them itself.
    Refused,
}

fn log_policies(message: &str, set: &PolicySet) {
    let names: Vec<&str> = set.policies.iter().map(|p| p.name.as_str()).collect();
    tracing::info!(policies = ?names, "{message}");
}
