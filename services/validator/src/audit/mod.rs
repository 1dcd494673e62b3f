//! `audit`: the policies judged against the objects that already exist,
//! with the same evaluation as admission, the results written as
//! OpenReports `Report`s (one per namespace) and a `ClusterReport`.
//!
//! One replica audits at a time (a Lease); the others stand by. Each pass
//! lists every resource a policy selects, page by page, then watches it, so
//! a change is judged again at once; a new policy set or the periodic
//! interval starts a new pass. Only results are kept in memory, never the
//! objects ([`results`]); reports are written in place ([`report`]).

pub mod metrics;
pub mod report;
pub mod results;
pub mod scan;

use std::sync::Arc;

use anyhow::Context as _;
use portcullis_cel::workers::Workers;
use portcullis_lease::Election;
use portcullis_process::exit::{Hinted, KUBECONFIG_HINT};
use portcullis_server::run::reload_config;
use portcullis_server::{Metrics, admin, shutdown_signal, watch};
use tokio::net::TcpListener;

use crate::cli::Audit;
use crate::cluster::{Catalogs, Reader};
use crate::native::watched::WatchedNatives;
use crate::policy::PolicySet;
use crate::serve::{Natives, parse, settings};
use metrics::AuditMetrics;
use portcullis_known::namespaces::WatchedNamespaces;
use portcullis_known::params::WatchedParams;
use portcullis_resources::{Swap, follow};
use scan::Auditor;

/// Audits until SIGTERM/SIGINT, while this replica holds the Lease.
pub async fn run(args: Audit) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let client =
        kube::Client::try_default().await.context(Hinted::new("connecting to the Kubernetes API", KUBECONFIG_HINT))?;
    let namespaces = WatchedNamespaces::start(client.clone(), shutdown.clone());
    let params = WatchedParams::new(client.clone(), shutdown.clone());
    let audit_metrics = Arc::new(AuditMetrics::default());
    let metrics = Arc::new(Metrics::new(|registry| audit_metrics.register(registry)));
    let (updates, policies) = tokio::sync::watch::channel(Arc::new(PolicySet::default()));
    let watched = params.clone();
    let update = move |p: PolicySet| {
        watched.watch(p.param_kinds());
        updates.send_replace(Arc::new(p));
    };
    match (args.policy.paths.is_empty(), args.watch_resources) {
        (false, false) => {
            let paths = args.policy.paths.clone();
            let initial = watch::read_all(&paths).context("reading the policies")?;
            let exceptions = args.policy.exception_namespaces();
            let first = parse(&initial, args.policy.cel_cost_limit, &exceptions, Natives::Judged)
                .context("the policies are invalid")?;
            let cost_limit = args.policy.cel_cost_limit;
            let parse = move |contents: &watch::Contents| parse(contents, cost_limit, &exceptions, Natives::Judged);
            update(first);
            reload_config(paths, args.reload.interval, initial, metrics.clone(), shutdown.clone(), parse, update);
        }
        (true, true) => {
            let catalogs = Catalogs::watch(&client, &args.policy, &shutdown);
            let natives = args
                .native_policies
                .then(|| WatchedNatives::start(&client, args.policy.cel_cost_limit, catalogs.changed(), &shutdown));
            let swap_catalogs = catalogs.clone();
            let swap: Swap = Box::new(move || {
                match &natives {
                    None => update(swap_catalogs.set(None, Reader::Audit).0),
                    Some(natives) if natives.is_synced() => {
                        update(swap_catalogs.set(None, Reader::Audit).0.with_natives(natives.compile()))
                    }
                    Some(_) => {} // not all listed yet: the next change swaps
                }
                Vec::new()
            });
            tokio::spawn(follow(catalogs.kinds(), catalogs.changed(), swap, shutdown.clone()));
        }
        (false, true) => anyhow::bail!("--policy and --watch-resources are exclusive: give one of them"),
        (true, false) => anyhow::bail!("no policies: give --policy FILE|DIR or --watch-resources"),
    }
    let auditor = Auditor {
        client: client.clone(),
        policies,
        settings: Arc::new(settings(&args.policy)),
        namespaces: Arc::new(namespaces.clone()),
        params: params.clone(),
        workers: Arc::new(Workers::new(1).context("starting the evaluation thread")?),
        metrics: audit_metrics,
        interval: args.audit_interval,
        report_delay: args.report_delay,
        max_results: args.max_results,
    };
    let namespace = args.policy.portcullis_namespace.clone();
    let election = Election::new(namespace, args.lease.clone(), args.pod_name.clone(), "the audit");
    // No pass before the namespaces are known: a policy with a
    // namespaceSelector or reading namespaceObject would report errors.
    let known = namespaces.clone();
    tokio::spawn(election.run(client, shutdown.clone(), move |leading| {
        let (auditor, known) = (auditor.clone(), known.clone());
        async move {
            tokio::select! {
                () = known.wait_until_ready() => auditor.run(leading).await,
                () = leading.cancelled() => {}
            }
        }
    }));

    let listener = TcpListener::bind(args.admin.admin_listen)
        .await
        .with_context(|| format!("binding {}", args.admin.admin_listen))?;
    tracing::info!(admin = %listener.local_addr()?, "auditing; /healthz, /readyz and /metrics over HTTP");
    let ready: admin::ReadyCheck = Arc::new(move || namespaces.is_ready() && params.is_ready());
    admin::serve(listener, admin::router(ready, metrics), shutdown).await.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
}
