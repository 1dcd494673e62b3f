//! `mutate`: the webhook's answer for a manifest, without a cluster, by the
//! same decision code the server runs.

use std::io::Read as _;

use anyhow::Context as _;
use portcullis_admission::{decode, encode};
use portcullis_server::watch;
use portcullis_server::webhook::Webhook as _;
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::cli::{Mutate, Output};
use crate::serve::parse;
use crate::webhook::Injector;

/// Runs `mutate`, printing one result per input document.
pub fn run(args: &Mutate) -> anyhow::Result<()> {
    let contents = watch::read_all(&args.config.paths).context("reading the injector configuration")?;
    let injector = Injector::new(parse(&contents).context("the injector configuration is invalid")?);
    let input = if args.file.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).context("reading standard input")?;
        buf
    } else {
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?
    };
    let mut first = true;
    for document in documents(&input)? {
        let review = as_review(document)?;
        let req = decode(&serde_json::to_vec(&review)?).context("input is not a usable AdmissionReview")?;
        let decision = injector.decide(&req);
        for warning in &decision.warnings {
            eprintln!("Warning: {warning}");
        }
        match args.output {
            Output::Review => {
                let (response, _) = decision.respond(&req);
                let response: Value = serde_json::from_slice(&encode(response))?;
                println!("{}", serde_json::to_string_pretty(&response)?);
            }
            Output::Object => {
                let object = decision.mutated.or(req.object).unwrap_or(Value::Null);
                if !first {
                    println!("---");
                }
                print!("{}", serde_yaml::to_string(&object)?);
            }
        }
        first = false;
    }
    Ok(())
}

/// The non-empty documents of a YAML or JSON stream, as JSON.
fn documents(input: &[u8]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_slice(input).enumerate() {
        let value = Value::deserialize(doc).with_context(|| format!("document {} is not YAML or JSON", i + 1))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    anyhow::ensure!(!out.is_empty(), "the input has no documents");
    Ok(out)
}

/// An AdmissionReview as is; any other object wrapped in a CREATE review.
fn as_review(document: Value) -> anyhow::Result<Value> {
    if document["kind"] == "AdmissionReview" {
        return Ok(document);
    }
    let api_version = document["apiVersion"].as_str().context("the object has no apiVersion")?;
    let kind = document["kind"].as_str().context("the object has no kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = format!("{}s", kind.to_lowercase());
    let namespace = document.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
    let name = document.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    Ok(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000000",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "namespace": namespace,
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "portcullis-injector mutate"},
            "object": document,
            "oldObject": null,
            "dryRun": true,
        }
    }))
}
