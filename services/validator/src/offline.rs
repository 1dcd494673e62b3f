//! `check`: every finding for every object in the given manifests, by the
//! same evaluation the server runs. Exit status 1 when anything would be
//! denied.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use portcullis_admission::{decode, manifest};
use portcullis_cel::workers::Workers;
use portcullis_server::watch;
use serde_json::Value;

use crate::cli::Check;
use crate::evaluate::NamespaceLabels;
use crate::native;
use crate::params::FileParams;
use crate::policy::Action;
use crate::serve::{Natives, parse, settings};
use crate::webhook::Validator;

/// Namespaces declared in the manifests themselves, for `namespaceSelector`.
#[derive(Debug, Default)]
struct ManifestNamespaces(BTreeMap<String, BTreeMap<String, String>>);

impl NamespaceLabels for ManifestNamespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.0.get(name).cloned()
    }
}

/// Runs `check`; `Ok(false)` when something would be denied.
pub fn run(args: &Check) -> anyhow::Result<bool> {
    anyhow::ensure!(!args.policy.paths.is_empty(), "--policy FILE|DIR is required: the policies to check against");
    let contents = watch::read_all(&args.policy.paths).context("reading the policies")?;
    let policies = parse(&contents, args.policy.cel_cost_limit, &args.policy.exception_namespaces(), Natives::Judged)
        .context("the policies are invalid")?;
    let mut objects = Vec::new();
    for file in &args.files {
        let input = portcullis_process::input::read(file).context("reading the input")?;
        let documents = manifest::documents(&input).with_context(|| file.display().to_string())?;
        objects.extend(documents);
    }
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = objects
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .filter_map(|o| {
            let name = o.pointer("/metadata/name")?.as_str()?.to_owned();
            let labels = serde_json::from_value(o.pointer("/metadata/labels").cloned().unwrap_or(Value::Null)).ok();
            Some((name, labels.unwrap_or_default()))
        })
        .collect();
    let mut params = Vec::new();
    for file in &args.params {
        let input = portcullis_process::input::read(file).context("reading the parameter objects")?;
        params.extend(manifest::documents(&input).with_context(|| file.display().to_string())?);
    }
    // Evaluated here, on this thread: the workers serve the webhook only.
    let workers = Workers::new(1)?;
    let validator = Validator::new(policies, settings(&args.policy), Arc::new(ManifestNamespaces(namespaces)), workers)
        .with_params(Arc::new(FileParams::new(params)));
    let mut out = std::io::stdout().lock();
    let mut all_allowed = true;
    for object in objects {
        let review = manifest::as_review(object)?;
        let req = decode(&serde_json::to_vec(&review)?).context("input is not a usable AdmissionReview")?;
        let (decision, findings) = validator.review(&req, validator.deadline());
        let what = match req.inner.namespace.as_deref() {
            Some(ns) => format!("{} {ns}/{}", req.inner.kind.kind, req.inner.name),
            None => format!("{} {}", req.inner.kind.kind, req.inner.name),
        };
        let verdict = if decision.is_denied() { "DENIED" } else { "allowed" };
        writeln!(out, "{what}: {verdict}")?;
        for f in &findings {
            let label = match f.action {
                Action::Deny => "deny",
                Action::Warn => "warning",
                Action::Audit => "audit",
            };
            match &f.binding {
                Some(binding) => {
                    writeln!(out, "  {label}: {}", native::worded(&f.policy, binding, f.action, &f.message))?
                }
                None => writeln!(out, "  {label}: [{}] {}", f.policy, f.message)?,
            }
        }
        all_allowed &= !decision.is_denied();
    }
    Ok(all_allowed)
}
