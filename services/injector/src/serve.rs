//! `serve`: the injector on the shared webhook server.

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_server::run::{reload_config, serve_webhook};
use portcullis_server::{WebhookMetrics, shutdown_signal, watch};

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
    let metrics = WebhookMetrics::new(|registry| injector.register(registry));
    let target = injector.clone();
    reload_config(paths, args.reload.interval, initial, metrics.process.clone(), shutdown.clone(), parse, move |c| {
        log_config("configuration reloaded", &c);
        target.set_config(c);
    });
    let ready = Arc::new(|| true);
    serve_webhook("injector", "/mutate", &args.serve, injector, metrics, ready, shutdown).await?;
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
