//! `mutate`: the webhook's answer for a manifest, without a cluster, by the
//! same decision code the server runs.

use std::io::Write as _;

use anyhow::Context as _;
use portcullis_admission::{Verdict, decode, encode, manifest};
use portcullis_server::watch;
use serde_json::Value;

use crate::cli::{Mutate, Output};
use crate::serve::parse;
use crate::webhook::Injector;

/// Runs `mutate`, printing one result per input document.
pub fn run(args: &Mutate) -> anyhow::Result<()> {
    anyhow::ensure!(!args.config.paths.is_empty(), "--config FILE|DIR is required: the configuration to inject with");
    let contents = watch::read_all(&args.config.paths).context("reading the injector configuration")?;
    let injector = Injector::new(parse(&contents).context("the injector configuration is invalid")?);
    let input = portcullis_process::input::read(&args.file).context("reading the input")?;
    let mut out = std::io::stdout().lock();
    let mut first = true;
    for document in manifest::documents(&input)? {
        let review = manifest::as_review(document)?;
        let req = decode(&serde_json::to_vec(&review)?).context("input is not a usable AdmissionReview")?;
        let decision = injector.decide(&req);
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
