//! `serve`: the gRPC API over TLS, the gRPC health service and the admin
//! port, until SIGTERM/SIGINT.

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_proto::certs::v1::TrustBundle;
use portcullis_proto::certs::v1::certificates_server::CertificatesServer;
use portcullis_server::{Metrics, admin, shutdown_signal, watch as files};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::{Identity, Server, ServerTlsConfig};

use crate::ca::LocalCa;
use crate::cli::{Mode, Serve};
use crate::config::Config;
use crate::grpc::{Backend, CertificatesService, IssueMetrics};
use crate::kubernetes;

/// Runs the cert-manager until SIGTERM/SIGINT.
pub async fn run(args: Serve) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let contents = files::read_all(std::slice::from_ref(&args.config)).context("reading the configuration")?;
    let config = Config::from_sources(contents.iter().map(|(p, b)| (p.as_path(), b.as_slice())))
        .context("the configuration is invalid")?;
    let (ca, backend, trust) = match args.mode {
        Mode::Standalone => {
            let dir = args.ca_dir.as_deref().context("--ca-dir is required in standalone mode")?;
            let ca = Arc::new(LocalCa::load_or_create(dir).context("the CA")?);
            let trust = ca.bundle_pem().to_owned();
            (ca.clone(), Backend::Standalone { ca }, trust)
        }
        Mode::Kubernetes => {
            let client = kube::Client::try_default().await.context("connecting to the Kubernetes API")?;
            let ca = Arc::new(
                kubernetes::ca_from_secret(&client, &args.namespace, &args.ca_secret).await.context("the CA Secret")?,
            );
            kubernetes::publish_ca(&client, &args.namespace, &args.ca_configmap, ca.bundle_pem())
                .await
                .context("publishing the CA certificate")?;
            let trust = if args.signer_name == kubernetes::OWN_SIGNER {
                ca.bundle_pem().to_owned()
            } else {
                let file = args
                    .trust_bundle_file
                    .as_ref()
                    .context("--trust-bundle-file is required with another --signer-name")?;
                std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
            };
            let backend = Backend::Kubernetes {
                client,
                audience: args.token_audience.clone(),
                signer_name: args.signer_name.clone(),
                timeout: args.csr_timeout,
            };
            (ca, backend, trust)
        }
    };
    if let Some(path) = &args.publish_ca {
        std::fs::write(path, ca.bundle_pem()).with_context(|| format!("publishing the CA to {}", path.display()))?;
    }
    let (_bundle_updates, bundle) = watch::channel(TrustBundle { ca_bundle_pem: trust, generation: 1 });
    if let Backend::Kubernetes { client, signer_name, .. } = &backend {
        // One replica (the Lease holder) signs and keeps caBundles; every
        // replica serves gRPC.
        let (client, bundle, ca) = (client.clone(), bundle.clone(), ca.clone());
        let own_signer = (signer_name == kubernetes::OWN_SIGNER).then(|| signer_name.clone());
        let identity = args.pod_name.clone().unwrap_or_else(|| format!("cert-manager-{}", std::process::id()));
        tokio::spawn(crate::leader::run(
            client.clone(),
            args.namespace.clone(),
            args.lease.clone(),
            identity,
            shutdown.clone(),
            move |leading| {
                let (client, bundle, ca, own_signer) = (client.clone(), bundle.clone(), ca.clone(), own_signer.clone());
                async move {
                    if let Some(signer) = own_signer {
                        tokio::spawn(kubernetes::run_signer(client.clone(), signer, ca, leading.clone()));
                    }
                    crate::ca_bundle::run(client, bundle, leading).await;
                }
            },
        ));
    }
    let (cert, key) = ca.own_certificate(&args.serving_names, 365).context("the cert-manager's own certificate")?;

    let issue_metrics = Arc::new(IssueMetrics::default());
    let metrics = Arc::new(Metrics::new(|registry| issue_metrics.register(registry)));
    issue_metrics.ca_expiry.set(ca.not_after().unwrap_or_default());
    metrics.serving_certificate_expiry.set(crate::ca::not_after(&cert).unwrap_or_default());
    let service = CertificatesServer::new(CertificatesService::new(config, backend, bundle, issue_metrics));
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<CertificatesServer<CertificatesService>>().await;

    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let admin_listener =
        TcpListener::bind(args.admin_listen).await.with_context(|| format!("binding {}", args.admin_listen))?;
    tracing::info!(grpc = %listener.local_addr()?, admin = %admin_listener.local_addr()?, "serving the certificate API");
    let grpc = Server::builder()
        .tls_config(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
        .context("TLS configuration")?
        .add_service(health_service)
        .add_service(service)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown.clone().cancelled_owned(),
        );
    let admin_app = admin::router(Arc::new(|| true), metrics);
    let (grpc, admin) = tokio::join!(grpc, admin::serve(admin_listener, admin_app, shutdown));
    grpc.context("gRPC server")?;
    admin.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
}
