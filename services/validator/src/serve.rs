//! `serve`: the validator on the shared webhook server.

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_cel::budget::Limits;
use portcullis_cel::workers::Workers;
use portcullis_process::exit::{Hinted, KUBECONFIG_HINT};
use portcullis_server::admin::ReadyCheck;
use portcullis_server::run::{reload_config, serve_webhook};
use portcullis_server::{WebhookMetrics, shutdown_signal, watch};

use crate::cli::{PolicyArgs, Serve};
use crate::evaluate::{NamespaceLabels, Settings};
use crate::exception::ExceptionNamespaces;
use crate::namespaces::WatchedNamespaces;
use crate::params::WatchedParams;
use crate::policy::{PolicyError, PolicySet, SYSTEM_NAMESPACES};
use crate::webhook::{NoNamespaces, Validator};

/// Runs the webhook until SIGTERM/SIGINT.
pub async fn run(args: Serve) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let paths = args.policy.paths.clone();
    let initial = watch::read_all(&paths).context("reading the policies")?;
    let exception_namespaces = args.policy.exception_namespaces();
    let policies =
        parse(&initial, args.policy.cel_cost_limit, &exception_namespaces).context("the policies are invalid")?;
    log_policies("policies loaded", &policies);
    // Namespaces and parameter objects are watched when the API is in use;
    // without it no namespace labels and no parameter objects are known.
    let client = if args.watch_namespaces {
        let client = kube::Client::try_default().await.context(Hinted::new(
            "connecting to the Kubernetes API to watch Namespaces",
            format!(
                "--watch-namespaces=false serves without it (policies with a namespaceSelector then follow their \
                 failure policy, and those with a paramKind find no parameter objects: their \
                 parameterNotFoundAction decides); else {KUBECONFIG_HINT}"
            ),
        ))?;
        Some(client)
    } else {
        None
    };
    let (namespaces, params, ready): (Arc<dyn NamespaceLabels>, Option<Arc<WatchedParams>>, ReadyCheck) = match client {
        Some(client) => {
            let watched = WatchedNamespaces::start(client.clone(), shutdown.clone());
            let params = WatchedParams::new(client, shutdown.clone());
            params.watch(policies.param_kinds());
            let (ready_namespaces, ready_params) = (watched.clone(), params.clone());
            (Arc::new(watched), Some(params), Arc::new(move || ready_namespaces.is_ready() && ready_params.is_ready()))
        }
        None => (Arc::new(NoNamespaces), None, Arc::new(|| true)),
    };
    let workers = Workers::new(args.evaluation_threads).context("starting the evaluation threads")?;
    let mut validator = Validator::new(policies, settings(&args.policy), namespaces, workers);
    if let Some(params) = &params {
        validator = validator.with_params(params.clone());
    }
    let validator = Arc::new(validator);
    let metrics = WebhookMetrics::new(|registry| validator.register(registry));
    let target = validator.clone();
    let cost_limit = args.policy.cel_cost_limit;
    let parse = move |contents: &watch::Contents| parse(contents, cost_limit, &exception_namespaces);
    reload_config(paths, args.reload.interval, initial, metrics.process.clone(), shutdown.clone(), parse, move |p| {
        log_policies("policies reloaded", &p);
        if let Some(params) = &params {
            params.watch(p.param_kinds());
        }
        target.set_policies(p);
    });
    serve_webhook("validator", "/validate", &args.serve, validator, metrics, ready, shutdown).await?;
    Ok(())
}

/// The evaluation settings from the command line.
pub fn settings(args: &PolicyArgs) -> Settings {
    let mut system_namespaces: Vec<String> = SYSTEM_NAMESPACES.iter().map(|s| (*s).to_owned()).collect();
    system_namespaces.push(args.portcullis_namespace.clone());
    Settings {
        system_namespaces,
        cel_deadline: args.cel_timeout,
        cel_limits: Limits { per_call: args.cel_per_call_limit, per_policy: args.cel_policy_budget },
    }
}

/// Parses every file's documents into one policy set, refusing CEL whose
/// estimated cost exceeds `cost_limit` and exceptions in namespaces
/// `exception_namespaces` does not allow.
pub fn parse(
    contents: &watch::Contents,
    cost_limit: u64,
    exception_namespaces: &ExceptionNamespaces,
) -> Result<PolicySet, PolicyError> {
    let sources = contents.iter().map(|(path, bytes)| (path.as_path(), bytes.as_slice()));
    PolicySet::from_sources_in(sources, cost_limit, exception_namespaces)
}

fn log_policies(message: &str, set: &PolicySet) {
    let names: Vec<&str> = set.policies.iter().map(|p| p.name.as_str()).collect();
    tracing::info!(policies = ?names, "{message}");
}
