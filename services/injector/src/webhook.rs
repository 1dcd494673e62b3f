//! The injector as a webhook: the current configuration (swapped on
//! reload), its decision function and its own metrics.

use std::sync::Arc;

use arc_swap::ArcSwap;
use portcullis_admission::{Decision, DecodeError, Request};
use portcullis_server::webhook::Webhook;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::config::Config;
use crate::mutate::mutate;

/// Label of `portcullis_injector_injections_total`: template names come
/// from the configuration, so the set is bounded.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TemplateLabels {
    template: String,
}

/// The mutating webhook.
#[derive(Debug, Default)]
pub struct Injector {
    config: ArcSwap<Config>,
    injections: Family<TemplateLabels, Counter>,
    images_rewritten: Counter,
}

impl Injector {
    /// An injector running `config`.
    pub fn new(config: Config) -> Self {
        Self { config: ArcSwap::from_pointee(config), ..Self::default() }
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Puts `config` in force for the next request.
    pub fn set_config(&self, config: Config) {
        self.config.store(Arc::new(config));
    }

    /// Registers the injector's own metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("injector_injections", "Pods injected, by template", self.injections.clone());
        registry.register("injector_image_rewrites", "Container images rewritten", self.images_rewritten.clone());
    }
}

impl Injector {
    /// The decision on `req` with the configuration in force: pure and
    /// quick, so the webhook answers it in place.
    pub fn decide(&self, req: &Request) -> Decision {
        let outcome = mutate(req, &self.config());
        for template in &outcome.decision.applied {
            self.injections.get_or_create(&TemplateLabels { template: template.clone() }).inc();
        }
        self.images_rewritten.inc_by(outcome.images_rewritten as u64);
        outcome.decision
    }
}

impl Webhook for Injector {
    fn decode(&self, body: &[u8]) -> Result<Request, DecodeError> {
        crate::pod::decode(body)
    }

    fn decision(self: Arc<Self>, req: Arc<Request>) -> impl Future<Output = Decision> + Send + 'static {
        std::future::ready(self.decide(&req))
    }

    fn kind_label(&self, req: &Request) -> &'static str {
        if req.kind().kind == "Pod" { "Pod" } else { "other" }
    }
}
