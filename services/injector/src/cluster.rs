//! In a cluster, the templates and the configuration are the
//! `portcullis.dev` resources, watched (`--watch-resources`): each object
//! compiled on its own, with the same code as files, and the configuration
//! assembled from the compiled objects after every change; of two objects
//! that contradict each other the newer one is refused
//! ([`portcullis_resources`]).

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::api::Api;
use portcullis_resources::{Catalog, Key, Remark, WatchedKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::assemble::Source;
use crate::compile::{ConfigPart, compile_config, compile_template};
use crate::config::{Config, Template};
use crate::resources::{InjectionTemplate, InjectorConfig};

const TEMPLATE: &str = "InjectionTemplate";
const CONFIG: &str = "InjectorConfig";

/// The watched templates and configurations.
#[derive(Debug, Clone)]
pub struct Catalogs {
    templates: Arc<Catalog<InjectionTemplate, Template>>,
    configs: Arc<Catalog<InjectorConfig, ConfigPart>>,
    changed: Arc<Notify>,
}

impl Catalogs {
    /// Starts both watches, until `shutdown`.
    pub fn watch(client: &kube::Client, shutdown: &CancellationToken) -> Self {
        let changed = Arc::new(Notify::new());
        let templates = Catalog::new(TEMPLATE, "injectiontemplates");
        templates.watch(
            Api::all(client.clone()),
            Arc::new(|t: &InjectionTemplate| compile_template(&t.name_any(), &t.spec)),
            |t| t.status.clone(),
            changed.clone(),
            shutdown.clone(),
        );
        let configs = Catalog::new(CONFIG, "injectorconfigs");
        configs.watch(
            Api::all(client.clone()),
            Arc::new(|c: &InjectorConfig| compile_config(&c.spec)),
            |c| c.status.clone(),
            changed.clone(),
            shutdown.clone(),
        );
        Self { templates, configs, changed }
    }

    /// The kinds, for the replica report and the status writer.
    pub fn kinds(&self) -> Vec<Arc<dyn WatchedKind>> {
        vec![self.templates.clone(), self.configs.clone()]
    }

    /// Woken after every change.
    pub fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    /// The configuration in force, and the objects it had to leave out.
    pub fn config(&self) -> (Config, Vec<Remark>) {
        let templates = self.templates.in_force_by_age().into_iter().map(|(_, t)| t).collect();
        let configs = self.configs.in_force_by_age().into_iter().map(|(key, part)| (key.name, part)).collect();
        let (config, refused) = Config::assemble(templates, configs);
        let remarks = refused
            .into_iter()
            .map(|(source, refusal)| {
                let (kind, name) = match source {
                    Source::Template(name) => (TEMPLATE, name),
                    Source::Config(name) => (CONFIG, name),
                };
                Remark { kind, key: Key { namespace: None, name }, refusal, in_force: false }
            })
            .collect();
        (config, remarks)
    }
}
