//! Command line: `serve` runs the webhook, `mutate` shows offline what it
//! would do to a manifest, `crds` prints the CustomResourceDefinitions.

use std::path::PathBuf;

use portcullis_cel::args::CelArgs;
use portcullis_server::args::ProbeArgs;
use portcullis_server::args::ReloadArgs;
use portcullis_server::{ResourceArgs, ServeArgs};
use portcullis_telemetry::LogArgs;

/// Portcullis injector: a mutating admission webhook that injects sidecars,
/// rewrites images and sets defaults on Pods.
#[derive(Debug, clap::Parser)]
#[command(name = "portcullis-injector", version)]
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
    /// Print what the webhook would answer for a manifest or AdmissionReview.
    Mutate(Mutate),
    /// Print the CustomResourceDefinitions of InjectionTemplate and
    /// InjectorConfig (YAML, for `kubectl apply -f -`).
    Crds,
}

/// Where the configuration comes from.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// InjectorConfig file, or directory of `*.yaml`/`*.yml`/`*.json` files
    /// (a mounted ConfigMap). Repeat or comma-separate for several.
    /// `serve` in a cluster takes `--watch-resources` instead.
    #[arg(long = "config", env = "PORTCULLIS_CONFIG", value_delimiter = ',')]
    pub paths: Vec<PathBuf>,
}

/// `serve` flags.
#[derive(Debug, clap::Args)]
pub struct Serve {
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub config: ConfigArgs,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub reload: ReloadArgs,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub resources: ResourceArgs,
    /// Keep Namespaces in memory (list/watch), for the CEL mutations'
    /// `namespaceSelector` and `namespaceObject`, and, with `--config`,
    /// the parameter objects their `paramKind` names. Uses the in-cluster
    /// service account or KUBECONFIG, when there is one. Without it, an
    /// entry that needs a namespace follows its failure policy, and with
    /// `--config` those with a `paramKind` find no parameter objects
    /// (their `parameterNotFoundAction` decides).
    #[arg(long, env = "PORTCULLIS_WATCH_NAMESPACES", default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_namespaces: bool,
    /// The namespace Portcullis runs in: where this replica's
    /// `WebhookReplica` report and the status Lease live.
    #[arg(long, env = "PORTCULLIS_NAMESPACE", default_value = portcullis_admission::names::DEFAULT_NAMESPACE)]
    pub portcullis_namespace: String,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub cel: CelArgs,
    /// Threads that run the CEL mutations, started once: the most requests
    /// mutated by CEL at once (more wait their turn, their deadline
    /// running). Requests are decided on the async runtime only while the
    /// configuration has no CEL mutation.
    #[arg(long, env = "PORTCULLIS_EVALUATION_THREADS", default_value_t = portcullis_cel::workers::DEFAULT_THREADS)]
    pub evaluation_threads: usize,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeArgs,
}

/// `mutate` flags.
#[derive(Debug, clap::Args)]
pub struct Mutate {
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub config: ConfigArgs,
    /// Native MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding
    /// YAML (admissionregistration.k8s.io/v1, or the `List` that `kubectl
    /// get -o yaml` writes), with the Namespace objects their
    /// `namespaceSelector`s and `namespaceObject` read: file or directory, repeat or
    /// comma-separate. They run before the injector's own configuration,
    /// as the API server runs its MAPs before its webhooks.
    #[arg(long = "policy", env = "PORTCULLIS_MUTATING_POLICY", value_delimiter = ',')]
    pub policies: Vec<PathBuf>,
    /// The parameter objects that the MAPs' `paramKind` with their bindings'
    /// `paramRef`, and the configuration's CEL mutations' `paramKind` and
    /// `paramRef`, select (any kinds, e.g. ConfigMaps; YAML or JSON
    /// manifests, several documents each): repeat for several files.
    #[arg(long = "params")]
    pub params: Vec<PathBuf>,
    /// Schemas of kinds other than the built-in ones, for the MAPs' apply
    /// configurations: a CustomResourceDefinition manifest (or a `List` of
    /// them), or the API server's OpenAPI v3 document for a group version
    /// (`kubectl get --raw /openapi/v3/apis/GROUP/VERSION`): repeat for
    /// several files.
    #[arg(long = "schema")]
    pub schemas: Vec<PathBuf>,
    /// Manifest (YAML or JSON, one or more documents) or AdmissionReview
    /// JSON; `-` reads standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    /// `review`: the AdmissionReview response (JSON); `object`: the mutated
    /// object (YAML).
    #[arg(short, long, value_enum, default_value = "review")]
    pub output: Output,
    #[clap(flatten)]
    #[allow(missing_docs)]
    pub cel: CelArgs,
}

/// Output of `mutate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The AdmissionReview response, as the API server would receive it.
    Review,
    /// The object after the patch, as it would be stored.
    Object,
}
