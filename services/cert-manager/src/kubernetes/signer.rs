//! The signer of the cert-manager's own signer name
//! (`portcullis.dev/webhook-serving`), as a kube-runtime [`Controller`]:
//! every approved, unsigned CSR of that name gets a certificate built by
//! the one profile from a [`Grant`] of the issuer core (the key, the
//! usages, the CA flag and the lifetime checked again: whoever approved
//! it), signed through the [`Signer`] of the CA in the Secret
//! ([`LocalSigner`]), or a Failed condition saying why not. A failed
//! signature or status write is retried with backoff; up to
//! [`CONCURRENT_SIGNATURES`] CSRs are signed at once.

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use portcullis_admission::names::{IDENTITY_ANNOTATION, TRACEPARENT_ANNOTATION};
use portcullis_telemetry::error_chain;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::refusal;
use crate::backoff::Backoff;
use crate::issuer::{Grant, Lifetimes, LocalSigner, Refusal, SignError, Signer as _, check_approved};

/// How many CSRs are signed at once: a burst of webhook pods starting
/// together is served in parallel without an unbounded number of API calls.
pub const CONCURRENT_SIGNATURES: u16 = 8;

/// Why a CSR's result was not written (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The grant was not signed.
    #[error("cannot sign CertificateSigningRequest {name}")]
    Sign {
        /// The CSR object's name.
        name: String,
        /// Why.
        #[source]
        source: SignError,
    },
    /// The status write failed.
    #[error("cannot write the status of CertificateSigningRequest {name}")]
    Status {
        /// The CSR object's name.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

struct Context {
    api: Api<CertificateSigningRequest>,
    signer: LocalSigner,
    lifetimes: Lifetimes,
    backoff: Backoff,
}

/// Signs every approved, unsigned CSR of `signer_name` with `signer`
/// (the active CA), within `lifetimes`, until `shutdown`.
pub async fn run(
    client: kube::Client,
    signer_name: String,
    signer: LocalSigner,
    lifetimes: Lifetimes,
    shutdown: CancellationToken,
) {
    let api: Api<CertificateSigningRequest> = Api::all(client);
    // Only this signer's CSRs: the API server filters on spec.signerName.
    let only_ours = watcher::Config::default().fields(&format!("spec.signerName={signer_name}"));
    let context = Arc::new(Context { api: api.clone(), signer, lifetimes, backoff: Backoff::default() });
    Controller::new(api, only_ours)
        .with_config(controller::Config::default().concurrency(CONCURRENT_SIGNATURES))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, retry, context.clone())
        .for_each(|result| {
            context.backoff.settle("CSR signer", result);
            std::future::ready(())
        })
        .await;
}

/// Whether `csr` is approved and has neither a certificate nor a refusal.
pub fn pending(csr: &CertificateSigningRequest) -> bool {
    let Some(status) = &csr.status else { return false };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let approved = conditions.iter().any(|c| c.type_ == "Approved" && c.status == "True");
    let signed = status.certificate.as_ref().is_some_and(|c| !c.0.is_empty());
    approved && !signed && !conditions.iter().any(refusal)
}

/// What the signer grants `csr`: its PKCS#10 request and `spec.usages`
/// checked against the profile, its `expirationSeconds` capped, for the
/// identity that asked (the cert-manager's annotation, else the creator).
pub fn grant_of(csr: &CertificateSigningRequest, lifetimes: &Lifetimes) -> Result<Grant, Refusal> {
    let pem = std::str::from_utf8(&csr.spec.request.0).map_err(|_| Refusal::Malformed("not PEM".into()))?;
    let usages = csr.spec.usages.iter().flatten().map(String::as_str);
    let annotated = csr.metadata.annotations.as_ref().and_then(|a| a.get(IDENTITY_ANNOTATION));
    let identity = annotated.or(csr.spec.username.as_ref()).map(String::as_str).unwrap_or_default();
    check_approved(pem, usages, csr.spec.expiration_seconds, identity, lifetimes)
}

async fn reconcile(csr: Arc<CertificateSigningRequest>, context: Arc<Context>) -> Result<Action, SignerError> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    if !pending(&csr) {
        // Signed, failed or denied (by us or anyone): nothing to retry.
        context.backoff.forget(&name);
        return Ok(Action::await_change());
    }
    let span =
        tracing::info_span!("sign", csr = %name, trace_id = tracing::field::Empty, span_id = tracing::field::Empty);
    if let Some(parent) = csr.metadata.annotations.as_ref().and_then(|a| a.get(TRACEPARENT_ANNOTATION)) {
        let mut headers = http::HeaderMap::new();
        if let Ok(value) = parent.parse() {
            headers.insert("traceparent", value);
        }
        portcullis_telemetry::continue_trace(&span, &headers);
    }
    sign(&csr, &name, &context).instrument(span).await?;
    context.backoff.forget(&name);
    Ok(Action::await_change())
}

/// Signs (or refuses) one approved CSR and writes the result to its status.
async fn sign(csr: &CertificateSigningRequest, name: &str, context: &Context) -> Result<(), SignerError> {
    let (patch, refused) = match grant_of(csr, &context.lifetimes) {
        Ok(grant) => {
            let signed = context.signer.sign(&grant).await;
            let pem = signed.map_err(|source| SignerError::Sign { name: name.to_owned(), source })?;
            (json!({"status": {"certificate": base64(pem.as_bytes())}}), None)
        }
        Err(refusal) => (failed(&refusal), Some(refusal)),
    };
    context
        .api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .instrument(tracing::info_span!("write CertificateSigningRequest status", otel.kind = "client"))
        .await
        .map_err(|source| SignerError::Status { name: name.to_owned(), source })?;
    match refused {
        None => tracing::info!(csr = %name, "signed"),
        Some(refusal) => tracing::warn!(csr = %name, reason = %refusal, "refused: marked Failed"),
    }
    Ok(())
}

/// The status of a refused CSR. (The API server keeps its Approved
/// condition: a status write cannot change approval.)
fn failed(refusal: &Refusal) -> Value {
    json!({"status": {"conditions": [{
        "type": "Failed", "status": "True", "reason": "PortcullisRefused", "message": refusal.to_string(),
    }]}})
}

/// A failed signature or status write is retried after 1 s, 2 s, 4 s...
/// up to 5 min.
fn retry(csr: Arc<CertificateSigningRequest>, err: &SignerError, context: Arc<Context>) -> Action {
    let wait = context.backoff.failed(csr.metadata.name.as_deref().unwrap_or_default());
    tracing::warn!(error = %error_chain(err), retry_in_seconds = wait.as_secs(), "CSR signer");
    Action::requeue(wait)
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
