//! `mutate`: the webhook's answer for a manifest, without a cluster, by the
//! same decision code the server runs; with `--policy`, native
//! MutatingAdmissionPolicies run first, as the API server runs them before
//! its webhooks, and those with `reinvocationPolicy: IfNeeded` once more
//! when something after them changed the object.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding};
use portcullis_admission::native_match::ManifestNamespaces;
use portcullis_admission::{Decision, Request, Verdict, decode, encode, manifest};
use portcullis_known::params::FileParams;
use portcullis_server::watch;
use serde::Deserialize as _;
use serde_json::Value;

use crate::apply::{BUILTIN, Schemas};
use crate::cli::{Mutate, Output};
use crate::config::CelBounds;
use crate::native::run::{Context, run_round};
use crate::native::{self, NativeMutation};
use crate::serve::parse;
use crate::webhook::Injector;

/// Runs `mutate`, printing one result per input document.
pub fn run(args: &Mutate) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.config.paths.is_empty() || !args.policies.is_empty(),
        "--config FILE|DIR or --policy FILE|DIR is required: the configuration or the MutatingAdmissionPolicies to mutate with"
    );
    let mut objects = Vec::new();
    for file in &args.params {
        let input = portcullis_process::input::read(file).context("reading --params")?;
        objects.extend(manifest::documents(&input).with_context(|| file.display().to_string())?);
    }
    let (natives, documents) = read_policies(args)?;
    // The `Namespace` documents of both feed the selectors and `namespaceObject`.
    let namespaces = Arc::new(ManifestNamespaces::from_documents(documents.iter().chain(&objects)));
    let params = Arc::new(FileParams::new(objects));
    let injector = if args.config.paths.is_empty() {
        None
    } else {
        let contents = watch::read_all(&args.config.paths).context("reading the injector configuration")?;
        let config = parse(&contents).context("the injector configuration is invalid")?;
        let injector = Injector::bounded(config, CelBounds::from_args(&args.cel), None);
        Some(injector.knowing(namespaces.clone(), params.clone()))
    };
    let schemas = read_schemas(&args.schemas)?;
    let input = portcullis_process::input::read(&args.file).context("reading the input")?;
    let mut out = std::io::stdout().lock();
    let mut first = true;
    for document in manifest::documents(&input)? {
        let review = manifest::as_review(document)?;
        let req = decode(&serde_json::to_vec(&review)?).context("input is not a usable AdmissionReview")?;
        let context = Context {
            namespaces: &*namespaces,
            schemas: schemas.as_ref().unwrap_or(&BUILTIN),
            limits: args.cel.limits(),
            deadline: Instant::now() + args.cel.cel_timeout,
            params: &*params,
        };
        let decision = decide(&natives, injector.as_ref(), context, &req);
        for warning in &decision.warnings {
            eprintln!("Warning: {warning}");
        }
        match args.output {
            Output::Review => {
                let (response, _) = decision.respond(&req);
                let response: Value = serde_json::from_slice(&encode(response))?;
                writeln!(out, "{}", serde_json::to_string_pretty(&response)?)?;
            }
            Output::Object => {
                if let Verdict::Deny { message, .. } = &decision.verdict {
                    anyhow::bail!("denied: {message}");
                }
                let mut object = req.object.unwrap_or(Value::Null);
                if let Verdict::Patch(patch) = &decision.verdict {
                    patch.apply_to(&mut object).context("the injector's own patch does not apply")?;
                }
                if !first {
                    writeln!(out, "---")?;
                }
                write!(out, "{}", serde_yaml::to_string(&object)?)?;
            }
        }
        first = false;
    }
    Ok(())
}

/// The MAPs (with their bindings) of `--policy`, and all its documents
/// (the others are `Namespace`s).
fn read_policies(args: &Mutate) -> anyhow::Result<(Vec<NativeMutation>, Vec<Value>)> {
    let contents = watch::read_all(&args.policies).context("reading the MutatingAdmissionPolicies")?;
    let mut documents = Vec::new();
    for (path, bytes) in &contents {
        // A `List` (`kubectl get -o yaml`) contributes its items.
        documents.extend(manifest::documents(bytes).with_context(|| path.display().to_string())?);
    }
    let (mut policies, mut bindings) = (Vec::new(), Vec::new());
    for document in &documents {
        let what = || format!("{} {}", document["kind"], document.pointer("/metadata/name").unwrap_or(&Value::Null));
        match document["kind"].as_str() {
            Some("MutatingAdmissionPolicy") => {
                policies.push(MutatingAdmissionPolicy::deserialize(document).with_context(what)?)
            }
            Some("MutatingAdmissionPolicyBinding") => {
                bindings.push(MutatingAdmissionPolicyBinding::deserialize(document).with_context(what)?)
            }
            Some("Namespace") => {}
            _ => anyhow::bail!("--policy takes MutatingAdmissionPolicy, its bindings and Namespaces, not {}", what()),
        }
    }
    let (natives, errors) = native::assemble(&policies, &bindings);
    if let Some(first) = errors.into_iter().next() {
        return Err(anyhow::Error::new(first).context("a MutatingAdmissionPolicy is invalid"));
    }
    Ok((natives, documents))
}

/// The built-in schemas with those of `--schema`, if any is given.
fn read_schemas(files: &[PathBuf]) -> anyhow::Result<Option<Schemas>> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut raw = portcullis_cel::schemas::Schemas::builtin();
    for file in files {
        let input = portcullis_process::input::read(file).context("reading --schema")?;
        raw.add_file(&input).map_err(anyhow::Error::msg).with_context(|| format!("--schema {}", file.display()))?;
    }
    Ok(Some(Schemas::of(&raw).context("--schema")?))
}

/// The MAPs, then the injector, then once more the MAPs that asked for it
/// and were followed by a change; one decision for the whole.
fn decide(natives: &[NativeMutation], injector: Option<&Injector>, context: Context<'_>, req: &Request) -> Decision {
    let Some(original) = req.object.as_ref() else {
        return injector.map_or_else(Decision::allow, |i| i.decide(req));
    };
    let mut round = match run_round(natives, None, context, req, original.clone()) {
        Ok(round) => round,
        Err(denied) => return Decision::deny(403, denied.to_string()),
    };
    let mut warnings = std::mem::take(&mut round.warnings);
    let mut applied = std::mem::take(&mut round.applied);
    let mut object = round.object;
    if let Some(injector) = injector {
        let after_maps = Request { object: Some(object.clone()), ..clone_request(req) };
        let decision = injector.decide(&after_maps);
        warnings.extend(decision.warnings);
        applied.extend(decision.applied);
        match decision.verdict {
            Verdict::Deny { .. } => {
                return Decision { verdict: decision.verdict, warnings, applied, ..Decision::default() };
            }
            Verdict::Patch(patch) => {
                if let Err(e) = patch.apply_to(&mut object) {
                    return Decision::deny(500, format!("the injector's patch does not apply: {e}"));
                }
                round.reinvoke.clone_from(&round.reinvocable);
            }
            Verdict::Allow => {}
        }
    }
    if !round.reinvoke.is_empty() {
        match run_round(natives, Some(&round.reinvoke), context, req, object) {
            Ok(again) => {
                warnings.extend(again.warnings);
                object = again.object;
            }
            Err(denied) => return Decision::deny(403, denied.to_string()),
        }
    }
    Decision { verdict: Verdict::changes(original, &object), warnings, applied, ..Decision::default() }
}

fn clone_request(req: &Request) -> Request {
    Request {
        inner: req.inner.clone(),
        object: req.object.clone(),
        old_object: req.old_object.clone(),
        parts: Arc::clone(&req.parts),
    }
}
