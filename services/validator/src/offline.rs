//! `check`: every finding for every object in the given manifests, by the
//! same evaluation the server runs. Exit status 1 when anything would be
//! denied. `vap`: the native policies that make the API server enforce
//! the given policies itself.

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use portcullis_admission::native_match::ManifestNamespaces;
use portcullis_admission::{decode, manifest};
use portcullis_cel::workers::Workers;
use portcullis_server::watch;

use crate::cli::{Check, Vap};
use crate::exception::ExceptionNamespaces;
use crate::native::{self, generate};
use crate::policy::{self, Action};
use crate::serve::{Natives, parse, settings};
use crate::webhook::Validator;
use portcullis_known::params::FileParams;

/// Runs `check`; `Ok(false)` when something would be denied.
pub fn run(args: &Check) -> anyhow::Result<bool> {
    anyhow::ensure!(!args.policy.paths.is_empty(), "--policy FILE|DIR is required: the policies to check against");
    let contents = watch::read_all(&args.policy.paths).context("reading the policies")?;
    let policies = parse(&contents, args.policy.cel_cost_limit, &args.policy.exception_namespaces(), Natives::Judged)
        .context("the policies are invalid")?;
    // `check` installs no log subscriber: what a native policy is taken
    // with (a cost estimate over Portcullis' limit, what the API server's
    // type checking would report) is said on standard error.
    let schemas = read_schemas(&args.schemas)?;
    let type_checked = native::typecheck::warnings(&policies.native_sources, &schemas);
    for warning in policies.warnings.iter().chain(&type_checked) {
        eprintln!("warning: {warning}");
    }
    let mut objects = Vec::new();
    for file in &args.files {
        let input = portcullis_process::input::read(file).context("reading the input")?;
        let documents = manifest::documents(&input).with_context(|| file.display().to_string())?;
        objects.extend(documents);
    }
    let namespaces = ManifestNamespaces::from_documents(&objects);
    let mut params = Vec::new();
    for file in &args.params {
        let input = portcullis_process::input::read(file).context("reading the parameter objects")?;
        params.extend(manifest::documents(&input).with_context(|| file.display().to_string())?);
    }
    // Evaluated here, on this thread: the workers serve the webhook only.
    let workers = Workers::new(1)?;
    let validator = Validator::new(policies, settings(&args.policy), Arc::new(namespaces), workers)
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

/// The built-in kinds' schemas with those of `--schema`.
fn read_schemas(files: &[std::path::PathBuf]) -> anyhow::Result<portcullis_cel::schemas::Schemas> {
    let mut schemas = portcullis_cel::schemas::Schemas::builtin();
    for file in files {
        let input = portcullis_process::input::read(file).context("reading --schema")?;
        schemas.add_file(&input).map_err(anyhow::Error::msg).with_context(|| format!("--schema {}", file.display()))?;
    }
    Ok(schemas)
}

/// Runs `vap`; `Ok(false)` when a policy cannot be pushed down.
pub fn vap(args: &Vap) -> anyhow::Result<bool> {
    let contents = watch::read_all(&args.paths).context("reading the policies")?;
    // Every policy must be valid before it is translated.
    let system = policy::system_namespaces(&args.portcullis_namespace);
    let set = parse(&contents, portcullis_cel::cost::DEFAULT_LIMIT, &ExceptionNamespaces::Any, Natives::Judged)
        .context("the policies are invalid")?;
    let sources = contents.iter().map(|(path, bytes)| (path.as_path(), bytes.as_slice()));
    let mut out = std::io::stdout().lock();
    let mut all = true;
    for (name, namespace, spec) in policy::specs(sources)? {
        let id = policy::identity(&name, namespace.as_deref());
        // The API server knows nothing of PolicyExceptions.
        let generated = match set.exceptions.iter().find(|e| e.names(&id)) {
            Some(exception) => Err(generate::NotPushable {
                field: format!("PolicyException {}", exception.name),
                why: "it exempts objects from the policy, and the API server does not know exceptions",
            }),
            None => generate::generate(&name, namespace.as_deref(), &spec, &system),
        };
        match generated {
            Ok(pair) => {
                writeln!(out, "---\n{}", serde_yaml::to_string(&pair.policy)?.trim_end())?;
                writeln!(out, "---\n{}", serde_yaml::to_string(&pair.binding)?.trim_end())?;
            }
            Err(why) => {
                all = false;
                eprintln!("policy {id}: not pushed down: {why}");
            }
        }
    }
    Ok(all)
}
