//! `serve`: the injector on the shared webhook server.

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_admission::native_match::{KnownNamespaces, ManifestNamespaces};
use portcullis_known::namespaces::WatchedNamespaces;
use portcullis_known::params::WatchedParams;
use portcullis_process::exit::{Hinted, KUBECONFIG_HINT};
use portcullis_resources::{Identity, Loader, ResourceMetrics, Swap};
use portcullis_server::admin::ready_once;
use portcullis_server::run::{reload_config, serve_webhook};
use portcullis_server::{WebhookMetrics, shutdown_signal, watch};
use tokio_util::sync::CancellationToken;

use crate::cli::Serve;
use crate::cluster::Catalogs;
use crate::config::{CelBounds, Config};
use crate::native::own::CompiledMutation;
use crate::webhook::Injector;
use portcullis_cel::workers::Workers;

/// Runs the webhook until SIGTERM/SIGINT.
pub async fn run(args: Serve) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    match (args.config.paths.is_empty(), args.resources.watch_resources) {
        (false, false) => {}
        (true, true) => return run_watching(args, shutdown).await,
        (false, true) => anyhow::bail!(
            "--config and --watch-resources are exclusive: in a cluster the InjectionTemplate and InjectorConfig \
             resources are the configuration (files are for the standalone mode and `mutate`); give one of them"
        ),
        (true, false) => anyhow::bail!(
            "no configuration: give --config FILE|DIR (files) or --watch-resources (the cluster's resources)"
        ),
    }
    let paths = args.config.paths.clone();
    let initial = watch::read_all(&paths).context("reading the injector configuration")?;
    let config = parse(&initial).context("the injector configuration is invalid")?;
    log_config("configuration loaded", &config);
    let cluster = if args.watch_namespaces { file_mode_cluster(&config, &shutdown).await } else { None };
    let mut injector = Injector::bounded(config, CelBounds::from_args(&args.cel), Some(workers(&args)?));
    if let Some((namespaces, params)) = &cluster {
        injector = injector.knowing(Arc::new(namespaces.clone()), params.clone());
    }
    let injector = Arc::new(injector);
    let metrics = WebhookMetrics::new(|registry| injector.register(registry));
    let target = injector.clone();
    let watched = cluster.as_ref().map(|(_, params)| params.clone());
    reload_config(paths, args.reload.interval, initial, metrics.process.clone(), shutdown.clone(), parse, move |c| {
        log_config("configuration reloaded", &c);
        if let Some(params) = &watched {
            params.watch(c.param_kinds());
        }
        target.set_config(c);
    });
    // Ready once the namespaces and the CEL mutations' parameter objects
    // are first in memory (the files are the whole configuration).
    let ready = ready_once(move || cluster.as_ref().is_none_or(|(n, p)| n.is_ready() && p.is_ready()));
    serve_webhook("injector", "/mutate", &args.serve, injector, metrics, ready, shutdown).await?;
    Ok(())
}

/// With files, the namespaces (for the CEL mutations' `namespaceSelector`
/// and `namespaceObject`) and the parameter objects their `paramKind`
/// names are watched when the Kubernetes API is configured (in a cluster,
/// or a kubeconfig); without it none are known: an entry that needs a
/// namespace fails by its failure policy, and `parameterNotFoundAction`
/// decides, as in `mutate`.
async fn file_mode_cluster(
    config: &Config,
    shutdown: &CancellationToken,
) -> Option<(WatchedNamespaces, Arc<WatchedParams>)> {
    match kube::Client::try_default().await {
        Ok(client) => {
            let namespaces = WatchedNamespaces::start(client.clone(), shutdown.clone());
            let params = WatchedParams::new(client, shutdown.clone());
            params.watch(config.param_kinds());
            Some((namespaces, params))
        }
        Err(err) => {
            let needs =
                !config.param_kinds().is_empty() || config.mutations.iter().any(CompiledMutation::needs_namespaces);
            if needs {
                tracing::warn!(error = %portcullis_telemetry::error_chain(&err), "no Kubernetes API configured: \
                    CEL mutations know no namespace and no parameter object, and those that need one fail by \
                    their failure policy (or their parameterNotFoundAction decides)");
            }
            None
        }
    }
}

/// Serves the configuration the cluster's resources give, ready once they
/// are listed, in force and reported.
async fn run_watching(args: Serve, shutdown: CancellationToken) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context(Hinted::new("connecting to the Kubernetes API to watch the templates", KUBECONFIG_HINT))?;
    let namespaces = args.watch_namespaces.then(|| WatchedNamespaces::start(client.clone(), shutdown.clone()));
    let params = WatchedParams::new(client.clone(), shutdown.clone());
    let known: Arc<dyn KnownNamespaces> = match &namespaces {
        Some(watched) => Arc::new(watched.clone()),
        None => Arc::new(ManifestNamespaces::EMPTY),
    };
    let injector = Injector::bounded(Config::default(), CelBounds::from_args(&args.cel), Some(workers(&args)?));
    let injector = Arc::new(injector.knowing(known, params.clone()));
    let resource_metrics = ResourceMetrics::default();
    let metrics = WebhookMetrics::new(|registry| {
        injector.register(registry);
        resource_metrics.register(registry);
    });
    let catalogs = Catalogs::watch(&client, &shutdown);
    // A paramKind found unknown (or found after all), or first listed,
    // changes what the configurations' status says.
    params.forward_progress(catalogs.changed());
    let (target, swap_catalogs) = (injector.clone(), catalogs.clone());
    let swap: Swap = Box::new(move || {
        let (config, remarks) = swap_catalogs.config(&params);
        log_config("configuration in force", &config);
        params.watch(config.param_kinds());
        target.set_config(config);
        remarks
    });
    let identity = Identity::new(
        "injector",
        args.portcullis_namespace.clone(),
        args.resources.pod_name.clone(),
        args.resources.pod_uid.clone(),
    );
    let loader =
        Loader::start(client, identity, catalogs.kinds(), catalogs.changed(), swap, resource_metrics, shutdown.clone());
    // Ready once the objects are in force and reported, and the namespaces
    // listed (each configuration's status waits for its own paramKind).
    let in_force = loader.ready_check();
    let ready = Arc::new(move || in_force() && namespaces.as_ref().is_none_or(WatchedNamespaces::is_ready));
    let served = serve_webhook("injector", "/mutate", &args.serve, injector, metrics, ready, shutdown).await;
    loader.retire().await;
    served?;
    Ok(())
}

/// The threads CEL mutations run on.
fn workers(args: &Serve) -> anyhow::Result<Workers> {
    Workers::new(args.evaluation_threads).context("starting the evaluation threads")
}

/// Parses every file's documents into one configuration.
pub fn parse(contents: &watch::Contents) -> Result<Config, crate::config::ConfigError> {
    Config::from_sources(contents.iter().map(|(path, bytes)| (path.as_path(), bytes.as_slice())))
}

fn log_config(message: &str, config: &Config) {
    tracing::info!(
        templates = config.templates.len(),
        default_templates = ?config.default_templates,
        image_rewrites = config.image_rewrites.len(),
        cel_mutations = config.mutations.len(),
        "{message}"
    );
}
