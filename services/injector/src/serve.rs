//! `serve`: wiring the injector into the shared webhook server.

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_server::serve::{Limits, serve_tls};
use portcullis_server::tls::{error_chain, resolver_from_args, server_config};
use portcullis_server::{Metrics, admin, shutdown_signal, watch, webhook};
use tokio::net::TcpListener;

use crate::cli::Serve;
use crate::config::Config;
use crate::webhook::Injector;

/// Runs the webhook until SIGTERM/SIGINT.
pub async fn run(args: Serve) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let paths = args.config.paths.clone();
    let initial = watch::read_all(&paths).context("reading the injector configuration")?;
    let config = parse(&initial).context("the injector configuration is invalid")?;
    log_config("configuration loaded", &config);
    let injector = Arc::new(Injector::new(config));
    let metrics = Arc::new(Metrics::new(|registry| injector.register(registry)));

    let (target, reload_metrics) = (injector.clone(), metrics.clone());
    watch::spawn_poll("injector config", paths, args.config_reload_interval, initial, shutdown.clone(), move |c| {
        match parse(c) {
            Ok(config) => {
                log_config("configuration reloaded", &config);
                target.set_config(config);
                reload_metrics.config_reloaded(true);
            }
            Err(err) => {
                tracing::error!(error = %error_chain(&err), "new configuration refused; the previous one stays in force");
                reload_metrics.config_reloaded(false);
            }
        }
    });

    let serve = &args.serve;
    let resolver = resolver_from_args(&serve.tls, "injector", shutdown.clone())?;
    let listener = TcpListener::bind(serve.listen).await.with_context(|| format!("binding {}", serve.listen))?;
    let admin_listener = TcpListener::bind(serve.admin.admin_listen)
        .await
        .with_context(|| format!("binding {}", serve.admin.admin_listen))?;
    tracing::info!(
        webhook = %listener.local_addr()?, admin = %admin_listener.local_addr()?,
        "serving POST /mutate over HTTPS; /healthz, /readyz and /metrics over HTTP"
    );
    let app = webhook::router("/mutate", injector, metrics.clone(), serve.request_timeout);
    let ready_resolver = resolver.clone();
    let admin_app = admin::router(Arc::new(move || ready_resolver.is_ready()), metrics);
    let limits = Limits { request_timeout: serve.request_timeout, shutdown_grace: serve.shutdown_grace };
    let (_, admin_result) = tokio::join!(
        serve_tls(listener, app, server_config(resolver), limits, shutdown.clone()),
        admin::serve(admin_listener, admin_app, shutdown),
    );
    admin_result.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
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
        "{message}"
    );
}
