//! Running a webhook service: the HTTPS listener with its webhook route and
//! the admin listener, until shutdown; and the configuration reload loop.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use portcullis_telemetry::error_chain;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, ReadyCheck};
use crate::args::ServeArgs;
use crate::capture::Capture;
use crate::certificates::resolver_from_args;
use crate::metrics::{Metrics, WebhookMetrics};
use crate::serve::{Limits, serve_tls};
use crate::tls::{TlsError, server_config};
use crate::watch::{self, Contents};
use crate::webhook::{self, Webhook};

/// Why a webhook service could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No serving certificate.
    #[error("serving certificate")]
    Tls(#[from] TlsError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The admin server failed.
    #[error("admin server")]
    Admin(#[source] std::io::Error),
    /// `--capture-dir` cannot be created.
    #[error("capture directory")]
    Capture(#[source] std::io::Error),
}

/// Serves `webhook` at `POST path` over HTTPS and the admin endpoints over
/// HTTP until `shutdown`. Ready when a certificate is in hand and `ready`
/// says so.
pub async fn serve_webhook<W: Webhook>(
    service: &'static str,
    path: &'static str,
    args: &ServeArgs,
    webhook: Arc<W>,
    metrics: WebhookMetrics,
    ready: ReadyCheck,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let resolver =
        resolver_from_args(&args.tls, service, metrics.process.serving_certificate_expiry.clone(), shutdown.clone())?;
    let bind = |addr| async move { TcpListener::bind(addr).await.map_err(|source| RunError::Bind { addr, source }) };
    let listener = bind(args.listen).await?;
    let admin_listener = bind(args.admin.admin_listen).await?;
    tracing::info!(
        webhook = %listener.local_addr().map_err(|source| RunError::Bind { addr: args.listen, source })?,
        admin = %admin_listener.local_addr().map_err(|source| RunError::Bind { addr: args.admin.admin_listen, source })?,
        "serving POST {path} over HTTPS; /healthz, /readyz and /metrics over HTTP"
    );
    let capture = Capture::start(&args.capture).map_err(RunError::Capture)?;
    let app = webhook::router(path, webhook, metrics.admission, capture, args.request_timeout);
    // Not ready once shutdown starts; the admin listener (probes, metrics)
    // stays up until the webhook listener has drained and closed.
    let (cert_ready, stopping) = (resolver.clone(), shutdown.clone());
    let admin_app =
        admin::router(Arc::new(move || cert_ready.is_ready() && ready() && !stopping.is_cancelled()), metrics.process);
    let limits = Limits {
        request_timeout: args.request_timeout,
        drain: args.shutdown_drain,
        shutdown_grace: args.shutdown_grace,
    };
    let stopped = CancellationToken::new();
    let (_, admin_result) = tokio::join!(
        async {
            serve_tls(listener, app, server_config(resolver, b"http/1.1"), limits, shutdown).await;
            stopped.cancel();
        },
        admin::serve(admin_listener, admin_app, stopped.clone()),
    );
    admin_result.map_err(RunError::Admin)?;
    tracing::info!("stopped");
    Ok(())
}

/// Re-reads `paths` every `interval`; new contents that `parse` accepts are
/// handed to `apply`, others are refused with an error line and the last
/// good configuration stays. Reloads are counted in `metrics`.
pub fn reload_config<T, E>(
    paths: Vec<PathBuf>,
    interval: Duration,
    initial: Contents,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    parse: impl Fn(&Contents) -> Result<T, E> + Send + 'static,
    apply: impl Fn(T) + Send + 'static,
) where
    E: std::error::Error,
{
    watch::spawn_poll("configuration", paths, interval, initial, shutdown, move |contents| match parse(contents) {
        Ok(config) => {
            apply(config);
            metrics.config_reloaded(true);
        }
        Err(err) => {
            tracing::error!(error = %error_chain(&err), "new configuration refused; the previous one stays in force");
            metrics.config_reloaded(false);
        }
    });
}
