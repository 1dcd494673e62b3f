//! In a cluster, the templates and the configuration are the
//! `portcullis.dev` resources, watched (`--watch-resources`): each object
//! compiled on its own, with the same code as files, and the configuration
//! assembled from the compiled objects after every change; of two objects
//! that contradict each other the newer one is refused
//! ([`portcullis_resources`]).

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::api::Api;
use portcullis_known::params::{KindRemark, ParamKind, WatchedParams};
use portcullis_resources::{Catalog, Key, Refusal, Remark, WatchedKind};
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

    /// The configuration in force, and what the objects' status must say:
    /// those it had to leave out, and of those it holds, what their CEL
    /// mutations' `paramKind` is waiting for: not served by the API (in
    /// force, failing by the mutation's failure policy), or not yet listed
    /// (in force, not yet reported so).
    pub fn config(&self, params: &WatchedParams) -> (Config, Vec<Remark>) {
        let templates = self.templates.in_force_by_age().into_iter().map(|(_, t)| t).collect();
        let configs: Vec<(String, Arc<ConfigPart>)> =
            self.configs.in_force_by_age().into_iter().map(|(key, part)| (key.name, part)).collect();
        let waiting: Vec<(String, Refusal, bool)> = configs
            .iter()
            .filter_map(|(name, part)| {
                let mut kinds = part.mutations.iter().filter_map(|m| m.spec.param_kind.as_ref());
                let (refusal, in_force) = kinds.find_map(|kind| param_remark(params, kind))?;
                Some((name.clone(), refusal, in_force))
            })
            .collect();
        let (config, refused) = Config::assemble(templates, configs);
        let mut remarks: Vec<Remark> = refused
            .into_iter()
            .map(|(source, refusal)| {
                let (kind, name) = match source {
                    Source::Template(name) => (TEMPLATE, name),
                    Source::Config(name) => (CONFIG, name),
                };
                Remark { kind, key: Key { namespace: None, name }, refusal, in_force: false }
            })
            .collect();
        for (name, refusal, in_force) in waiting {
            if !remarks.iter().any(|r| r.kind == CONFIG && r.key.name == name) {
                remarks.push(Remark { kind: CONFIG, key: Key { namespace: None, name }, refusal, in_force });
            }
        }
        (config, remarks)
    }
}

/// What an `InjectorConfig`'s status must say of a `paramKind` its CEL
/// mutations read, and whether it counts as in force meanwhile.
fn param_remark(params: &WatchedParams, kind: &ParamKind) -> Option<(Refusal, bool)> {
    let remark = params.remark(kind)?;
    let message = match &remark {
        KindRemark::Unknown(why) => format!(
            "paramKind {kind} of its CEL mutations is not served by the API server ({why}); pods they mutate fail \
             by their failure policy until it is"
        ),
        KindRemark::Pending => {
            format!("waiting for the objects of paramKind {kind}, which its CEL mutations read, to be listed")
        }
    };
    Some((Refusal::new(remark.reason(), message), remark.in_force()))
}
