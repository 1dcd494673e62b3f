//! Evidence, not time, that the API server enforces what was just applied.
//!
//! The API server's admission policy plugin watches ValidatingAdmissionPolicies
//! and their bindings with one informer per kind; each delivers its kind's
//! events in resourceVersion order, and the plugin judges requests with a
//! snapshot compiled from both caches. So after our pair is applied, a
//! probe pair written later (a VAP and a binding that deny a dry-run
//! ConfigMap carrying a fresh nonce, both with the nonce) that is seen
//! denying proves both informers have delivered past our pair, and the
//! snapshot that denied holds it. With several API server replicas, it
//! proves it of the replica that answered only (ADR 0009).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::admissionregistration::v1 as reg;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use portcullis_admission::names::{GENERATED_PREFIX, MANAGED_BY};

use super::{Error, MANAGER};

/// The label carrying the nonce, on the probe ConfigMap and in the pair's
/// object selectors.
const PROBE_LABEL: &str = "portcullis.dev/probe";
/// How long the API server gets to load a pair before the reconcile fails
/// (and is retried with backoff).
const LOAD_DEADLINE: Duration = Duration::from_secs(30);
/// Between two dry-run creates.
const POLL: Duration = Duration::from_millis(100);

/// The probe pair and the dry-run ConfigMap, in the Portcullis namespace.
#[derive(Debug)]
pub(crate) struct Probe {
    policies: Api<reg::ValidatingAdmissionPolicy>,
    bindings: Api<reg::ValidatingAdmissionPolicyBinding>,
    config_maps: Api<ConfigMap>,
    namespace: String,
    count: AtomicU64,
    /// One probe at a time: each bump gives the probe a new nonce, which
    /// would leave an earlier caller's ConfigMap unmatched.
    one: tokio::sync::Mutex<()>,
}

impl Probe {
    pub(crate) fn new(client: &kube::Client, namespace: &str) -> Self {
        Self {
            policies: Api::all(client.clone()),
            bindings: Api::all(client.clone()),
            config_maps: Api::namespaced(client.clone(), namespace),
            namespace: namespace.to_owned(),
            count: AtomicU64::new(0),
            one: tokio::sync::Mutex::new(()),
        }
    }

    /// The probe pair's name (one per Portcullis namespace).
    fn name(&self) -> String {
        format!("{GENERATED_PREFIX}probe.{}", self.namespace)
    }

    /// Returns once the API server enforces everything applied before this
    /// call: the probe pair with a new nonce is applied, then a dry-run
    /// ConfigMap with that nonce is created until the probe denies it.
    pub(crate) async fn loaded(&self) -> Result<(), Error> {
        let _one = self.one.lock().await;
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let nonce = format!("{:x}-{}", since_epoch.as_nanos(), self.count.fetch_add(1, Ordering::Relaxed));
        let message = format!("portcullis probe {nonce}");
        let (policy, binding) = self.pair(&nonce, &message);
        let params = PatchParams::apply(MANAGER).force();
        let name = self.name();
        self.policies.patch(&name, &params, &Patch::Apply(&policy)).await?;
        self.bindings.patch(&name, &params, &Patch::Apply(&binding)).await?;
        let probe = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{name}-{nonce}")),
                labels: Some([(PROBE_LABEL.to_owned(), nonce.clone())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let dry_run = PostParams { dry_run: true, ..PostParams::default() };
        let deadline = Instant::now() + LOAD_DEADLINE;
        loop {
            match self.config_maps.create(&dry_run, &probe).await {
                Err(kube::Error::Api(status)) if status.message.contains(&message) => return Ok(()),
                Err(err) => return Err(err.into()),
                Ok(_) if Instant::now() >= deadline => return Err(Error::NotLoaded(LOAD_DEADLINE)),
                Ok(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// A pair denying every ConfigMap of the namespace labelled with
    /// `nonce`, with `message`.
    fn pair(
        &self,
        nonce: &str,
        message: &str,
    ) -> (reg::ValidatingAdmissionPolicy, reg::ValidatingAdmissionPolicyBinding) {
        let name = self.name();
        let metadata = ObjectMeta {
            name: Some(name.clone()),
            labels: Some([("app.kubernetes.io/managed-by".to_owned(), MANAGED_BY.to_owned())].into()),
            ..ObjectMeta::default()
        };
        let labelled = LabelSelector {
            match_labels: Some([(PROBE_LABEL.to_owned(), nonce.to_owned())].into()),
            match_expressions: None,
        };
        let own_namespace = LabelSelector {
            match_labels: Some([("kubernetes.io/metadata.name".to_owned(), self.namespace.clone())].into()),
            match_expressions: None,
        };
        let policy = reg::ValidatingAdmissionPolicy {
            metadata: metadata.clone(),
            spec: Some(reg::ValidatingAdmissionPolicySpec {
                failure_policy: Some("Fail".into()),
                match_constraints: Some(reg::MatchResources {
                    resource_rules: Some(vec![reg::NamedRuleWithOperations {
                        api_groups: Some(vec![String::new()]),
                        api_versions: Some(vec!["v1".into()]),
                        resources: Some(vec!["configmaps".into()]),
                        operations: Some(vec!["CREATE".into()]),
                        ..Default::default()
                    }]),
                    namespace_selector: Some(own_namespace),
                    object_selector: Some(labelled.clone()),
                    ..Default::default()
                }),
                validations: Some(vec![reg::Validation {
                    expression: "false".into(),
                    message: Some(message.to_owned()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        };
        let binding = reg::ValidatingAdmissionPolicyBinding {
            metadata,
            spec: reg::ValidatingAdmissionPolicyBindingSpec {
                policy_name: name,
                validation_actions: vec!["Deny".into()],
                match_resources: Some(reg::MatchResources { object_selector: Some(labelled), ..Default::default() }),
                param_ref: None,
            },
        };
        (policy, binding)
    }
}
