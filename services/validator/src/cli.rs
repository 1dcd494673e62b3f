//! Command line: `serve` runs the webhook, `check` evaluates manifests
//! offline, as CI would before they reach a cluster.

use std::path::PathBuf;
use std::time::Duration;

use portcullis_server::args::ReloadArgs;
use portcullis_server::args::{AdminArgs, ProbeArgs};
use portcullis_server::{ResourceArgs, ServeArgs};
use portcullis_telemetry::LogArgs;

/// Portcullis validator: a validating admission webhook enforcing
/// ValidatorPolicy documents.
#[derive(Debug, clap::Parser)]
#[command(name = "portcullis-validator", version)]
pub struct Cli {
    #[command(subcommand)]
    #[allow(missing_docs)]
    pub command: Command,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub log: LogArgs,
}

/// What to run.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Exit 0 if the running service's /readyz says ready (a container
    /// healthcheck that needs no shell or curl in the image).
    Ready(ProbeArgs),
    /// Serve the webhook (HTTPS) and the admin endpoints (HTTP).
    Serve(Box<Serve>),
    /// Evaluate manifests against policies and print every finding; exit 1
    /// when anything would be denied.
    Check(Check),
    /// Judge the objects that already exist in the cluster and write the
    /// results as OpenReports (one Report per namespace, a ClusterReport).
    Audit(Box<Audit>),
    /// Print the native ValidatingAdmissionPolicy and binding that make the
    /// API server itself enforce each policy (multi-document YAML, for
    /// `kubectl apply -f -`); a policy that needs the webhook is named on
    /// standard error with the field that stands in the way (exit 1).
    Vap(Vap),
    /// Print the CustomResourceDefinitions of ValidatorPolicy,
    /// NamespacedValidatorPolicy and PolicyException (multi-document YAML,
    /// for `kubectl apply -f -`).
    Crds,
}

/// Where the policies come from, and how they are evaluated.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    /// ValidatorPolicy file, or directory of `*.yaml`/`*.yml`/`*.json` files
    /// (a mounted ConfigMap). Repeat or comma-separate for several.
    /// `serve` and `audit` in a cluster take `--watch-resources` instead.
    #[arg(long = "policy", env = "PORTCULLIS_POLICY", value_delimiter = ',')]
    pub paths: Vec<PathBuf>,
    /// The namespace Portcullis runs in: excluded like kube-system unless a
    /// policy sets `match.includeSystemNamespaces`.
    #[arg(long, env = "PORTCULLIS_NAMESPACE", default_value = portcullis_admission::names::DEFAULT_NAMESPACE)]
    pub portcullis_namespace: String,
    /// Namespaces that may hold PolicyExceptions (comma-separated); empty
    /// or `*`: any. An exception elsewhere is ignored (and its status says
    /// so).
    #[arg(long, env = "PORTCULLIS_EXCEPTION_NAMESPACES", value_delimiter = ',')]
    pub exception_namespaces: Vec<String>,
    /// Largest worst-case cost a CEL expression may spend beyond work linear
    /// in the object (nested loops over it, whole-object scans per element),
    /// estimated at load with request data at the API server's 3 MiB limit;
    /// a policy with a dearer expression is refused. The default is
    /// Kubernetes' StaticEstimatedCostLimit.
    #[arg(long, env = "PORTCULLIS_CEL_COST_LIMIT", default_value_t = portcullis_cel::cost::DEFAULT_LIMIT)]
    pub cel_cost_limit: u64,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub cel: portcullis_cel::args::CelArgs,
}

impl PolicyArgs {
    /// `--exception-namespaces` as the setting it is.
    pub fn exception_namespaces(&self) -> crate::exception::ExceptionNamespaces {
        crate::exception::ExceptionNamespaces::from_list(&self.exception_namespaces)
    }
}

/// `serve` flags.
#[derive(Debug, clap::Args)]
pub struct Serve {
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub policy: PolicyArgs,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub reload: ReloadArgs,
    /// Watch Namespaces (list/watch) so that policies can use
    /// `namespaceSelector` and CEL's `namespaceObject`, and the objects of
    /// every `paramKind` a policy reads. Uses the in-cluster service account
    /// or KUBECONFIG. Without it, policies with a `namespaceSelector` or
    /// reading `namespaceObject` follow their failure policy and those with
    /// a `paramKind` find no parameter objects (their
    /// `parameterNotFoundAction` decides).
    #[arg(long, env = "PORTCULLIS_WATCH_NAMESPACES", default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_namespaces: bool,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub resources: ResourceArgs,
    /// Threads that evaluate requests, started once: the most requests
    /// evaluated at once (more wait their turn, their deadline running).
    /// The async runtime's own threads never evaluate.
    #[arg(long, env = "PORTCULLIS_EVALUATION_THREADS", default_value_t = portcullis_cel::workers::DEFAULT_THREADS)]
    pub evaluation_threads: usize,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeArgs,
}

/// `check` flags.
#[derive(Debug, clap::Args)]
pub struct Check {
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub policy: PolicyArgs,
    /// Manifests (multi-document YAML or JSON, or AdmissionReview JSON);
    /// `-` reads standard input. Repeat for several.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Parameter objects (`paramKind`) for the policies, as the cluster
    /// would hold them; not judged themselves. Repeat for several.
    #[arg(long = "params")]
    pub params: Vec<PathBuf>,
    /// Schemas of kinds other than the built-in ones, to type-check native
    /// ValidatingAdmissionPolicies against as the API server does
    /// (`status.typeChecking`): a CustomResourceDefinition manifest (or a
    /// `List` of them), or the API server's OpenAPI v3 document for a group
    /// version (`kubectl get --raw /openapi/v3/apis/GROUP/VERSION`): repeat
    /// for several files.
    #[arg(long = "schema")]
    pub schemas: Vec<PathBuf>,
}

/// `vap` flags.
#[derive(Debug, clap::Args)]
pub struct Vap {
    /// ValidatorPolicy files or directories, as `check` takes them.
    #[arg(long = "policy", env = "PORTCULLIS_POLICY", value_delimiter = ',', required = true)]
    pub paths: Vec<PathBuf>,
    /// The namespace Portcullis runs in: left out, with kube-system,
    /// kube-public and kube-node-lease, unless a policy sets
    /// `match.includeSystemNamespaces`, as the webhook leaves it out.
    #[arg(long, env = "PORTCULLIS_NAMESPACE", default_value = portcullis_admission::names::DEFAULT_NAMESPACE)]
    pub portcullis_namespace: String,
}

/// `audit` flags.
#[derive(Debug, clap::Args)]
pub struct Audit {
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub policy: PolicyArgs,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub reload: ReloadArgs,
    /// How often every object is listed and judged again. Between passes,
    /// watches judge each created or changed object at once.
    #[arg(long, env = "PORTCULLIS_AUDIT_INTERVAL", default_value = "10m", value_parser = humantime::parse_duration)]
    pub audit_interval: Duration,
    /// How long changes gather before the reports they touch are written.
    #[arg(long, env = "PORTCULLIS_AUDIT_REPORT_DELAY", default_value = "2s", value_parser = humantime::parse_duration)]
    pub report_delay: Duration,
    /// Most results one report holds, worst first; its summary still counts
    /// every result.
    #[arg(long, env = "PORTCULLIS_AUDIT_MAX_RESULTS", default_value_t = 1000)]
    pub max_results: usize,
    /// The Lease (in `--portcullis-namespace`) that elects the one replica
    /// that audits.
    #[arg(long, env = "PORTCULLIS_LEASE", default_value = portcullis_admission::names::AUDIT_LEASE)]
    pub lease: String,
    /// This replica's name in the Lease (the pod name).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Judge by the cluster's ValidatorPolicy, NamespacedValidatorPolicy and
    /// PolicyException resources, watched, exactly as the webhook does,
    /// instead of `--policy` files.
    #[arg(long, env = "PORTCULLIS_WATCH_RESOURCES")]
    pub watch_resources: bool,
    /// With `--watch-resources`, also judge by the cluster's native
    /// ValidatingAdmissionPolicies through their bindings (watched; the API
    /// server judges only writes, so this reports what already breaks
    /// them). With `--policy`, native policies and bindings in the files
    /// are judged.
    #[arg(long, env = "PORTCULLIS_NATIVE_POLICIES", default_value_t = true, action = clap::ArgAction::Set)]
    pub native_policies: bool,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub admin: AdminArgs,
}
