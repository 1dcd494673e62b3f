//! `serve`: the gRPC API over TLS, the gRPC health service and the admin
//! port, until SIGTERM/SIGINT; in Kubernetes mode also the leader's work
//! (signer, caBundle controller, CA rotation, the published CA bundle).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use portcullis_certs_client::certified_key;
use portcullis_lease::Election;
use portcullis_process::exit::{Hinted, KUBECONFIG_HINT};
use portcullis_proto::certs::v1::TrustBundle;
use portcullis_proto::certs::v1::certificates_server::CertificatesServer;
use portcullis_server::tls::{CertResolver, server_config};
use portcullis_server::{Metrics, admin, shutdown_signal, watch as files};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::authority::{Authority, RotationPolicy};
use crate::cli::{Mode, Serve};
use crate::config::Config;
use crate::grpc::CertificatesService;
use crate::issuer::{Issuer, Lifetimes, LocalSigner, TokenFiles};
use crate::kubernetes::csr::CsrSigner;
use crate::kubernetes::token_review::TokenReviewer;
use crate::metrics::IssueMetrics;
use crate::store::Store;
use crate::{keeper, kubernetes};

/// Lifetime of the cert-manager's own serving certificate.
const OWN_CERTIFICATE_DAYS: i64 = 30;

/// Runs the cert-manager until SIGTERM/SIGINT.
pub async fn run(args: Serve) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let contents = files::read_all(std::slice::from_ref(&args.config)).context("reading the configuration")?;
    let config = Config::from_sources(contents.iter().map(|(p, b)| (p.as_path(), b.as_slice())))
        .context("the configuration is invalid")?;
    let policy = RotationPolicy {
        ca_lifetime: args.ca_lifetime,
        overlap: args.ca_overlap,
        max_leaf_lifetime: Duration::from_secs(config.max_lifetime_seconds),
    };
    policy.check()?;
    anyhow::ensure!(!args.ca_check_interval.is_zero(), "--ca-check-interval must be more than 0");
    let client = match args.mode {
        Mode::Kubernetes => Some(
            kube::Client::try_default()
                .await
                .context(Hinted::new("connecting to the Kubernetes API", KUBECONFIG_HINT))?,
        ),
        Mode::Standalone => None,
    };
    let store = match &client {
        Some(client) => Store::Secret {
            api: Box::new(kube::Api::namespaced(client.clone(), &args.namespace)),
            name: args.ca_secret.clone(),
        },
        None => Store::Dir(args.ca_dir.clone().context("--ca-dir is required in standalone mode")?),
    };
    let authority = keeper::load_or_create(&store, &policy).await.context("the CA")?;
    let authorities = Arc::new(watch::Sender::new(Arc::new(authority)));
    let bundle = trust_bundle(&args, &authorities, shutdown.clone())?;

    let issuer = match &client {
        None => Issuer::new(
            config.clone(),
            Box::new(TokenFiles::new(config.clone())),
            Box::new(LocalSigner::new(authorities.subscribe())),
        ),
        Some(client) => Issuer::new(
            config.clone(),
            Box::new(TokenReviewer::new(client.clone(), args.token_audience.clone())),
            Box::new(CsrSigner::new(client.clone(), args.signer_name.clone(), args.csr_timeout)),
        ),
    };
    let interval = args.ca_check_interval;
    match &client {
        None => {
            tokio::spawn(keeper::run(store, policy, interval, true, authorities.clone(), shutdown.clone()));
        }
        Some(client) => {
            // Every replica follows the stored CAs and serves gRPC; one (the
            // Lease holder) rotates, signs, publishes and keeps caBundles.
            tokio::spawn(keeper::run(store.clone(), policy, interval, false, authorities.clone(), shutdown.clone()));
            let work = LeaderWork {
                client: client.clone(),
                store,
                policy,
                interval,
                authorities: authorities.clone(),
                bundle: bundle.clone(),
                own_signer: (args.signer_name == portcullis_admission::names::OWN_SIGNER)
                    .then(|| args.signer_name.clone()),
                lifetimes: config.lifetimes(),
                namespace: args.namespace.clone(),
                configmap: args.ca_configmap.clone(),
            };
            let election = Election::new(
                args.namespace.clone(),
                args.lease.clone(),
                args.pod_name.clone(),
                "the signer and the caBundle controller",
            );
            tokio::spawn(election.run(client.clone(), shutdown.clone(), move |leading| work.clone().run(leading)));
        }
    }

    let issue_metrics = Arc::new(IssueMetrics::default());
    let metrics = Arc::new(Metrics::new(|registry| issue_metrics.register(registry)));
    let resolver = Arc::new(CertResolver::with_expiry_gauge(metrics.serving_certificate_expiry.clone()));
    let own = OwnCertificate {
        names: args.serving_names.clone(),
        publish: args.publish_ca.clone(),
        resolver: resolver.clone(),
        metrics: issue_metrics.clone(),
    };
    own.renew(&authorities.borrow()).context("the cert-manager's own certificate")?;
    tokio::spawn(own.follow(authorities.subscribe(), shutdown.clone()));

    let service = CertificatesServer::new(CertificatesService::new(issuer, bundle, issue_metrics));
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<CertificatesServer<CertificatesService>>().await;

    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let admin_listener =
        TcpListener::bind(args.admin_listen).await.with_context(|| format!("binding {}", args.admin_listen))?;
    tracing::info!(grpc = %listener.local_addr()?, admin = %admin_listener.local_addr()?, "serving the certificate API");
    let connections =
        portcullis_server::serve::tls_connections(listener, server_config(resolver, b"h2"), shutdown.clone());
    let grpc = Server::builder()
        .add_service(health_service)
        .add_service(service)
        .serve_with_incoming_shutdown(connections, shutdown.clone().cancelled_owned());
    let admin_app = admin::router(Arc::new(|| true), metrics);
    let (grpc, admin) = tokio::join!(grpc, admin::serve(admin_listener, admin_app, shutdown));
    grpc.context("gRPC server")?;
    admin.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
}

/// What the Lease holder runs: the signer (for the own signer name), the CA
/// rotation, the published CA bundle and the caBundle controller.
#[derive(Clone)]
struct LeaderWork {
    client: kube::Client,
    store: Store,
    policy: RotationPolicy,
    interval: Duration,
    authorities: Arc<watch::Sender<Arc<Authority>>>,
    bundle: watch::Receiver<TrustBundle>,
    own_signer: Option<String>,
    lifetimes: Lifetimes,
    namespace: String,
    configmap: String,
}

impl LeaderWork {
    /// Runs until `leading` is cancelled (leadership lost, or shutdown).
    async fn run(self, leading: CancellationToken) {
        let Self { client, store, policy, interval, authorities, bundle, .. } = self;
        if let Some(signer) = self.own_signer {
            let signing = LocalSigner::new(authorities.subscribe());
            let lifetimes = self.lifetimes;
            tokio::spawn(kubernetes::signer::run(client.clone(), signer, signing, lifetimes, leading.clone()));
        }
        let published = authorities.subscribe();
        let (namespace, configmap) = (self.namespace, self.configmap);
        tokio::spawn(kubernetes::publish::keep_published(
            client.clone(),
            namespace,
            configmap,
            published,
            leading.clone(),
        ));
        tokio::spawn(keeper::run(store, policy, interval, true, authorities, leading.clone()));
        crate::ca_bundle::run(client, bundle, leading).await;
    }
}

/// What the webhooks' clients (the API server) must trust: the own CAs,
/// following rotations, or another signer's bundle from a file.
fn trust_bundle(
    args: &Serve,
    authorities: &Arc<watch::Sender<Arc<Authority>>>,
    shutdown: CancellationToken,
) -> anyhow::Result<watch::Receiver<TrustBundle>> {
    let foreign = if args.mode == Mode::Kubernetes && args.signer_name != portcullis_admission::names::OWN_SIGNER {
        let file =
            args.trust_bundle_file.as_ref().context("--trust-bundle-file is required with another --signer-name")?;
        Some(std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?)
    } else {
        None
    };
    let bundle_of = move |authority: &Authority| match &foreign {
        Some(pem) => TrustBundle { ca_bundle_pem: pem.clone(), generation: 1, issuer_pem: String::new() },
        None => authority.trust_bundle(),
    };
    let mut source = authorities.subscribe();
    let (sender, receiver) = watch::channel(bundle_of(&source.borrow_and_update()));
    // Follows the own CAs; with another signer's bundle, only keeps the
    // channel open (its receivers stop when it closes).
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = source.changed() => if changed.is_err() { return },
                _ = shutdown.cancelled() => return,
            }
            let bundle = bundle_of(&source.borrow_and_update());
            sender.send_if_modified(|held| {
                let changed = *held != bundle;
                if changed {
                    *held = bundle;
                }
                changed
            });
        }
    });
    Ok(receiver)
}

/// The cert-manager's own serving certificate, and the published CA
/// bundle and expiry metric that go with the current CA.
struct OwnCertificate {
    names: Vec<String>,
    publish: Option<PathBuf>,
    resolver: Arc<CertResolver>,
    metrics: Arc<IssueMetrics>,
}

impl OwnCertificate {
    /// Serves a new certificate from the active CA and publishes the bundle.
    fn renew(&self, authority: &Authority) -> anyhow::Result<()> {
        self.metrics.ca_expiry.set(authority.active.not_after().unwrap_or_default());
        let bundle = authority.bundle_pem();
        self.metrics.bundle_cas.set(i64::try_from(bundle.matches("BEGIN CERTIFICATE").count()).unwrap_or_default());
        self.metrics.bundle_generation.set(i64::try_from(authority.generation).unwrap_or(i64::MAX));
        if let Some(path) = &self.publish {
            // Whole or not at all: webhooks read it at any moment.
            let temporary = path.with_extension("new");
            std::fs::write(&temporary, &bundle)
                .and_then(|()| std::fs::rename(&temporary, path))
                .with_context(|| format!("publishing the CA bundle to {}", path.display()))?;
        }
        let (cert, key) = authority.active.own_certificate(&self.names, OWN_CERTIFICATE_DAYS)?;
        self.resolver.set(certified_key(cert.as_bytes(), key.as_bytes(), "own certificate")?);
        Ok(())
    }

    /// Renews whenever the CAs change, and when a third of the lifetime is
    /// left; retries every minute after a failure.
    async fn follow(self, mut authorities: watch::Receiver<Arc<Authority>>, shutdown: CancellationToken) {
        let mut wait = Duration::from_secs(OWN_CERTIFICATE_DAYS as u64 * 86_400 * 2 / 3);
        loop {
            tokio::select! {
                changed = authorities.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.cancelled() => return,
            }
            let authority = authorities.borrow_and_update().clone();
            wait = match self.renew(&authority) {
                Ok(()) => Duration::from_secs(OWN_CERTIFICATE_DAYS as u64 * 86_400 * 2 / 3),
                Err(err) => {
                    tracing::error!(error = format!("{err:#}"), "cannot renew the cert-manager's own certificate");
                    Duration::from_secs(60)
                }
            };
        }
    }
}
