//! The injector as a webhook: the current configuration (swapped on
//! reload), its decision function and its own metrics. A configuration
//! with CEL mutations is decided on the evaluation threads, never on the
//! async runtime; one without is decided in place, as before.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use portcullis_admission::native_match::{KnownNamespaces, ManifestNamespaces};
use portcullis_admission::parts::Parts;
use portcullis_admission::{Decision, DecodeError, Request};
use portcullis_cel::workers::Workers;
use portcullis_known::Cluster;
use portcullis_known::namespaces::wait_for_namespace;
use portcullis_known::params::{NoParams, ParamSource};
use portcullis_server::webhook::Webhook;
use portcullis_telemetry::error_chain;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::{CelBounds, Config};
use crate::mutate::{PodChange, mutate_by};
use crate::native::own::CompiledMutation;
use crate::pod;

/// Label of `portcullis_injector_injections_total`: template names come
/// from the configuration, so the set is bounded.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TemplateLabels {
    template: String,
}

/// Labels of `portcullis_injector_cel_mutations_total`: mutation names
/// come from the configuration, so the set is bounded.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CelLabels {
    mutation: String,
    result: &'static str,
}

/// A configuration in force, with the parts of a pod its decision reads
/// and changes, which requests are read with: swapped together.
#[derive(Debug)]
struct InForce {
    config: Arc<Config>,
    parts: Arc<Parts>,
    /// Whether a CEL mutation reads the namespaces (a `namespaceSelector`
    /// or `namespaceObject`): a pod's creation, which they run on, then
    /// waits for its namespace to reach the watch.
    reads_namespaces: bool,
}

impl InForce {
    fn new(config: Config) -> Self {
        let reads_namespaces = config.mutations.iter().any(CompiledMutation::needs_namespaces);
        Self { parts: pod::parts_for(&config), config: Arc::new(config), reads_namespaces }
    }
}

impl Default for InForce {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

/// The mutating webhook.
pub struct Injector {
    in_force: ArcSwap<InForce>,
    injections: Family<TemplateLabels, Counter>,
    images_rewritten: Counter,
    cel_mutations: Family<CelLabels, Counter>,
    /// How much CEL one request may run.
    cel: CelBounds,
    /// Where CEL mutations run; `None`: on the caller's thread (offline).
    workers: Option<Arc<Workers>>,
    /// The namespaces CEL mutations' `namespaceSelector` and
    /// `namespaceObject` read.
    namespaces: Arc<dyn KnownNamespaces>,
    /// Where CEL mutations find their parameter objects.
    params: Arc<dyn ParamSource>,
}

impl std::fmt::Debug for Injector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injector").field("in_force", &self.in_force).field("cel", &self.cel).finish_non_exhaustive()
    }
}

impl Injector {
    /// An injector running `config`, knowing no namespace and no parameter
    /// object.
    pub fn new(config: Config) -> Self {
        Self::bounded(config, CelBounds::default(), None)
    }

    /// An injector whose CEL mutations run within `cel`, on `workers`
    /// (`serve`) or on the caller's thread (`None`: offline).
    pub fn bounded(config: Config, cel: CelBounds, workers: Option<Workers>) -> Self {
        Self {
            in_force: ArcSwap::from_pointee(InForce::new(config)),
            injections: Family::default(),
            images_rewritten: Counter::default(),
            cel_mutations: Family::default(),
            cel,
            workers: workers.map(Arc::new),
            namespaces: Arc::new(ManifestNamespaces::EMPTY),
            params: Arc::new(NoParams),
        }
    }

    /// Reads the cluster's namespaces from `namespaces` and the CEL
    /// mutations' parameter objects from `params` (none of either by
    /// default).
    pub fn knowing(mut self, namespaces: Arc<dyn KnownNamespaces>, params: Arc<dyn ParamSource>) -> Self {
        self.namespaces = namespaces;
        self.params = params;
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.in_force.load().config)
    }

    /// Puts `config` in force for the next request.
    pub fn set_config(&self, config: Config) {
        self.in_force.store(Arc::new(InForce::new(config)));
    }

    /// Registers the injector's own metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("injector_injections", "Pods injected, by template", self.injections.clone());
        registry.register("injector_image_rewrites", "Container images rewritten", self.images_rewritten.clone());
        registry.register(
            "injector_cel_mutations",
            "CEL mutations run on pods, by mutation and result (applied, skipped, ignored, failed)",
            self.cel_mutations.clone(),
        );
    }
}

impl Injector {
    /// The decision on `req` with the configuration in force, on the
    /// calling thread; CEL mutations (if any) time out from now.
    pub fn decide(&self, req: &Request) -> Decision {
        self.decide_with(req, PodChange::of(req), &self.config(), None)
    }

    /// The decision on `req`, which does `change` to a pod, with `config`,
    /// CEL timing out from `arrival`.
    fn decide_with(&self, req: &Request, change: PodChange, config: &Config, arrival: Option<Instant>) -> Decision {
        let cluster = Cluster { namespaces: &*self.namespaces, params: &*self.params };
        let outcome = mutate_by(req, change, config, self.cel, cluster, arrival);
        for template in &outcome.decision.applied {
            self.injections.get_or_create(&TemplateLabels { template: template.clone() }).inc();
        }
        self.images_rewritten.inc_by(outcome.images_rewritten as u64);
        for (mutation, result) in outcome.cel {
            self.cel_mutations.get_or_create(&CelLabels { mutation, result: result.as_str() }).inc();
        }
        outcome.decision
    }
}

impl Webhook for Injector {
    fn decode(&self, body: &[u8]) -> Result<Request, DecodeError> {
        pod::decode(body, &self.in_force.load().parts)
    }

    fn decision(self: Arc<Self>, req: Arc<Request>) -> impl Future<Output = Decision> + Send + 'static {
        // One configuration for the whole decision; with CEL mutations, on
        // the workers, their timeout counted from the request's arrival
        // (time in the queue included) or, when it waited for its
        // namespace, from the end of that wait.
        let in_force = self.in_force.load();
        let (config, reads_namespaces) = (in_force.config.clone(), in_force.reads_namespaces);
        let change = PodChange::of(&req);
        async move {
            if reads_namespaces && change == PodChange::Create {
                wait_for_namespace(&*self.namespaces, &req).await;
            }
            let cel = (!config.mutations.is_empty()).then(Instant::now).zip(self.workers.clone());
            let Some((arrival, workers)) = cel else { return self.decide_with(&req, change, &config, None) };
            // The future runs in the request's span; the job continues it.
            let span = tracing::Span::current();
            let job = move || span.in_scope(|| self.decide_with(&req, change, &config, Some(arrival)));
            workers.run(job).await.unwrap_or_else(|err| {
                tracing::error!(error = %error_chain(&err), "the CEL mutations failed");
                Decision::deny(500, "the injector failed to evaluate the request; see its log")
            })
        }
    }

    fn kind_label(&self, req: &Request) -> &'static str {
        if req.kind().kind == "Pod" { "Pod" } else { "other" }
    }
}
