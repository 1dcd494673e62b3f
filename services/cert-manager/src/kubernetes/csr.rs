//! The CSR request flow, the [`Signer`] of Kubernetes mode: a grant becomes
//! a CertificateSigningRequest (the caller's PKCS#10 request, the grant's
//! usages and lifetime), which the cert-manager approves, waits on until
//! its signer writes the certificate, and deletes.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use portcullis_admission::names::{IDENTITY_ANNOTATION, TRACEPARENT_ANNOTATION};
use portcullis_telemetry::error_chain;
use serde_json::json;
use tracing::Instrument as _;

use super::{KubeError, api_err, refusal};
use crate::issuer::{Grant, SignError, Signer};

/// Signs grants through CertificateSigningRequests of one signer name.
#[derive(Clone)]
pub struct CsrSigner {
    client: kube::Client,
    signer_name: String,
    timeout: Duration,
}

impl std::fmt::Debug for CsrSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrSigner").field("signer_name", &self.signer_name).finish_non_exhaustive()
    }
}

impl CsrSigner {
    /// CSRs for `signer_name`, each waited on for up to `timeout`.
    pub fn new(client: kube::Client, signer_name: String, timeout: Duration) -> Self {
        Self { client, signer_name, timeout }
    }

    /// Creates the CSR of `grant`, approves it, waits for the certificate,
    /// deletes the CSR and returns the certificate PEM.
    pub async fn issue(&self, grant: &Grant) -> Result<String, KubeError> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let created = api
            .create(&PostParams::default(), &request_object(grant, &self.signer_name))
            .instrument(tracing::info_span!("create CertificateSigningRequest", otel.kind = "client"))
            .await
            .map_err(api_err("create CertificateSigningRequest"))?;
        let name = created.metadata.name.clone().unwrap_or_default();
        let result = approve_and_wait(&api, &name, &grant.identity, self.timeout)
            .instrument(tracing::info_span!("approve and wait", csr = %name))
            .await;
        // Finished or not, the object has served its purpose.
        let deleted = api
            .delete(&name, &DeleteParams::default())
            .instrument(tracing::info_span!("delete CertificateSigningRequest", otel.kind = "client"))
            .await;
        if let Err(err) = deleted {
            tracing::warn!(csr = %name, error = %error_chain(&err), "could not delete a finished CertificateSigningRequest");
        }
        result
    }
}

impl Signer for CsrSigner {
    fn sign<'a>(&'a self, grant: &'a Grant) -> BoxFuture<'a, Result<String, SignError>> {
        Box::pin(async move {
            self.issue(grant).await.map_err(|err| match err {
                // The signer's verdict: asking again will not change it.
                KubeError::Refused { .. } => SignError::Refused(err.to_string()),
                err => SignError::Unavailable(err.into()),
            })
        })
    }
}

/// The CertificateSigningRequest of `grant` for `signer_name`: the caller's
/// request, the granted usages and lifetime, and who asked.
pub fn request_object(grant: &Grant, signer_name: &str) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("portcullis-".into()),
            annotations: Some(annotations(&grant.identity)),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(grant.csr_pem.as_bytes().to_vec()),
            signer_name: signer_name.to_owned(),
            usages: Some(grant.usages.iter().map(|u| u.kubernetes_name().to_owned()).collect()),
            expiration_seconds: i32::try_from(grant.lifetime.as_secs()).ok(),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    }
}

/// The CSR's annotations: who asked, and the trace context, so that the
/// signer's span (possibly in another replica) joins the caller's trace.
fn annotations(identity: &str) -> BTreeMap<String, String> {
    let mut headers = http::HeaderMap::new();
    portcullis_telemetry::inject_context(&mut headers);
    let mut out = BTreeMap::from([(IDENTITY_ANNOTATION.to_owned(), identity.to_owned())]);
    if let Some(parent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
        out.insert(TRACEPARENT_ANNOTATION.to_owned(), parent.to_owned());
    }
    out
}

async fn approve_and_wait(
    api: &Api<CertificateSigningRequest>,
    name: &str,
    identity: &str,
    timeout: Duration,
) -> Result<String, KubeError> {
    let approval = json!({"status": {"conditions": [{
        "type": "Approved", "status": "True", "reason": "PortcullisApproved",
        "message": format!("checked and approved by the Portcullis cert-manager for {identity}"),
    }]}});
    api.patch_subresource("approval", name, &PatchParams::default(), &Patch::Merge(&approval))
        .await
        .map_err(api_err("approve CertificateSigningRequest"))?;
    // Watched, not polled: done when the certificate is written or the
    // CSR is denied or failed (or deleted by someone else).
    let finished = |csr: Option<&CertificateSigningRequest>| {
        csr.is_none_or(|csr| {
            let status = csr.status.as_ref();
            status.and_then(|s| s.certificate.as_ref()).is_some_and(|c| !c.0.is_empty())
                || status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| c.iter().any(refusal))
        })
    };
    let waited = tokio::time::timeout(timeout, kube::runtime::wait::await_condition(api.clone(), name, finished)).await;
    let csr = match waited {
        Err(_) => {
            return Err(KubeError::Csr {
                name: name.to_owned(),
                reason: format!("approved, but no certificate after {} s (is its signer running?)", timeout.as_secs()),
            });
        }
        Ok(Err(source)) => return Err(KubeError::Watch { name: name.to_owned(), source }),
        Ok(Ok(None)) => return Err(KubeError::Csr { name: name.to_owned(), reason: "it was deleted".into() }),
        Ok(Ok(Some(csr))) => csr,
    };
    let status = csr.status.unwrap_or_default();
    if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
        return String::from_utf8(cert.0)
            .map_err(|_| KubeError::Csr { name: name.to_owned(), reason: "the certificate is not PEM".into() });
    }
    let conditions = status.conditions.unwrap_or_default();
    let reason = conditions
        .iter()
        .find(|c| refusal(c))
        .map(|c| {
            format!("{} ({}): {}", c.type_, c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
        })
        .unwrap_or_default();
    Err(KubeError::Refused { name: name.to_owned(), reason })
}
