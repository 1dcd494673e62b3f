//! Kubernetes mode: callers authenticated with TokenReview, requests turned
//! into CertificateSigningRequests that the cert-manager approves and waits
//! on, and (for its own signer name) the signer that signs approved CSRs
//! with a CA kept in a Secret.

use portcullis_admission::names::{IDENTITY_ANNOTATION, TRACEPARENT_ANNOTATION};
use portcullis_telemetry::error_chain;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::authority::Authority;
use crate::ca::LocalCa;
use crate::checks::Approved;

/// What can go wrong talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// An API call failed.
    #[error("{what}")]
    Api {
        /// Which call.
        what: &'static str,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The CSR was denied, or its signer marked it failed.
    #[error("CertificateSigningRequest {name} was refused: {reason}")]
    Refused {
        /// The CSR object's name.
        name: String,
        /// The condition, its reason and message.
        reason: String,
    },
    /// Waiting for the CSR's result failed.
    #[error("watching CertificateSigningRequest {name}")]
    Watch {
        /// The CSR object's name.
        name: String,
        /// Why.
        #[source]
        source: kube::runtime::wait::Error,
    },
    /// The CSR was not signed in time, or the result is unusable.
    #[error("CertificateSigningRequest {name}: {reason}")]
    Csr {
        /// The CSR object's name.
        name: String,
        /// What happened.
        reason: String,
    },
}

fn api_err(what: &'static str) -> impl FnOnce(kube::Error) -> KubeError {
    move |source| KubeError::Api { what, source }
}

/// The identity (`namespace/serviceaccount`) of a ServiceAccount token
/// issued for `audience`, or `None` when the API server does not vouch for it.
pub async fn review_token(client: &kube::Client, token: &str, audience: &str) -> Result<Option<String>, KubeError> {
    let review = TokenReview {
        spec: TokenReviewSpec { token: token.to_owned(), audiences: Some(vec![audience.to_owned()]) },
        ..TokenReview::default()
    };
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .instrument(tracing::info_span!("TokenReview", otel.kind = "client"))
        .await
        .map_err(api_err("TokenReview"))?;
    let Some(status) = reviewed.status else { return Ok(None) };
    let audience_ok = status.audiences.unwrap_or_default().iter().any(|a| a == audience);
    if status.authenticated != Some(true) || !audience_ok {
        return Ok(None);
    }
    let username = status.user.and_then(|u| u.username).unwrap_or_default();
    Ok(username.strip_prefix("system:serviceaccount:").map(|rest| rest.replacen(':', "/", 1)))
}

/// Creates a CSR for `csr_pem`, approves it, waits for the certificate
/// (up to `timeout`), deletes the CSR and returns the certificate PEM.
pub async fn issue_through_csr(
    client: &kube::Client,
    signer_name: &str,
    csr_pem: &str,
    approved: &Approved,
    identity: &str,
    timeout: Duration,
) -> Result<String, KubeError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let rsa = approved.params.key_usages.contains(&rcgen::KeyUsagePurpose::KeyEncipherment);
    let mut usages = vec!["digital signature".to_owned(), "server auth".to_owned()];
    if rsa {
        usages.insert(1, "key encipherment".to_owned());
    }
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("portcullis-".into()),
            annotations: Some(annotations(identity)),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem.as_bytes().to_vec()),
            signer_name: signer_name.to_owned(),
            usages: Some(usages),
            expiration_seconds: i32::try_from(approved.lifetime.as_secs()).ok(),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let created = api
        .create(&PostParams::default(), &csr)
        .instrument(tracing::info_span!("create CertificateSigningRequest", otel.kind = "client"))
        .await
        .map_err(api_err("create CertificateSigningRequest"))?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let result = approve_and_wait(&api, &name, identity, timeout)
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

/// A Denied or Failed condition: the CSR will never get a certificate.
fn refusal(condition: &k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition) -> bool {
    condition.type_ == "Denied" || condition.type_ == "Failed"
}

/// Publishes the CA certificates to trust (never a key) as `ca.crt` in
/// ConfigMap `namespace/name`, creating or updating it.
pub async fn publish_ca(client: &kube::Client, namespace: &str, name: &str, ca_pem: &str) -> Result<(), KubeError> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let desired = BTreeMap::from([("ca.crt".to_owned(), ca_pem.to_owned())]);
    match maps.get_opt(name).await.map_err(api_err("read the CA ConfigMap"))? {
        Some(existing) if existing.data.as_ref() == Some(&desired) => Ok(()),
        Some(_) => {
            let patch = json!({"data": {"ca.crt": ca_pem}});
            maps.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err("update the CA ConfigMap"))?;
            Ok(())
        }
        None => {
            let map = ConfigMap {
                metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
                data: Some(desired),
                ..ConfigMap::default()
            };
            match maps.create(&PostParams::default(), &map).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(e) => Err(api_err("create the CA ConfigMap")(e)),
            }
        }
    }
}

/// Signs every approved, unsigned CSR of `signer_name` with the active CA
/// of `authority`, for at most `max_seconds`, until `shutdown`. Only
/// server-auth leaf certificates are signed; anything else is marked Failed
/// with the reason.
pub async fn run_signer(
    client: kube::Client,
    signer_name: String,
    authority: watch::Receiver<Arc<Authority>>,
    max_seconds: u64,
    shutdown: CancellationToken,
) {
    let api: Api<CertificateSigningRequest> = Api::all(client);
    // Only this signer's CSRs: the API server filters on spec.signerName.
    let only_ours = watcher::Config::default().fields(&format!("spec.signerName={signer_name}"));
    let stream = watcher(api.clone(), only_ours).default_backoff().applied_objects();
    let mut stream = std::pin::pin!(stream);
    loop {
        let csr = tokio::select! {
            item = stream.next() => match item {
                Some(Ok(csr)) => csr,
                Some(Err(err)) => {
                    tracing::warn!(error = %error_chain(&err), "watching CertificateSigningRequests failed; retrying");
                    continue;
                }
                None => return,
            },
            _ = shutdown.cancelled() => return,
        };
        let status = csr.status.clone().unwrap_or_default();
        let conditions = status.conditions.unwrap_or_default();
        let approved = conditions.iter().any(|c| c.type_ == "Approved" && c.status == "True");
        let finished = conditions.iter().any(refusal);
        if !approved || finished || status.certificate.is_some_and(|c| !c.0.is_empty()) {
            continue;
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let span =
            tracing::info_span!("sign", csr = %name, trace_id = tracing::field::Empty, span_id = tracing::field::Empty);
        if let Some(parent) = csr.metadata.annotations.as_ref().and_then(|a| a.get(TRACEPARENT_ANNOTATION)) {
            let mut headers = http::HeaderMap::new();
            if let Ok(value) = parent.parse() {
                headers.insert("traceparent", value);
            }
            portcullis_telemetry::continue_trace(&span, &headers);
        }
        let ca = authority.borrow().active.clone();
        sign_one(&api, &ca, &csr, &name, max_seconds).instrument(span).await;
    }
}

/// Signs (or refuses) one approved CSR and writes the result to its status.
async fn sign_one(
    api: &Api<CertificateSigningRequest>,
    ca: &LocalCa,
    csr: &CertificateSigningRequest,
    name: &str,
    max_seconds: u64,
) {
    let patch = match ca.sign_csr(&csr.spec.request.0, csr.spec.expiration_seconds, max_seconds) {
        Ok(pem) => json!({"status": {"certificate": base64(pem.as_bytes())}}),
        Err(refusal) => {
            let reason = error_chain(&refusal);
            tracing::warn!(csr = %name, %reason, "refusing to sign");
            json!({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "PortcullisRefused", "message": reason}]}})
        }
    };
    let written = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .instrument(tracing::info_span!("write CertificateSigningRequest status", otel.kind = "client"))
        .await;
    match written {
        Ok(_) => tracing::info!(csr = %name, "signed"),
        Err(err) => tracing::warn!(csr = %name, error = %error_chain(&err), "could not write the signed certificate"),
    }
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Keeps ConfigMap `namespace/name` holding the CA bundle of `authorities`
/// (republished at each change, and checked every minute), until `shutdown`.
pub async fn keep_published(
    client: kube::Client,
    namespace: String,
    name: String,
    mut authorities: watch::Receiver<Arc<Authority>>,
    shutdown: CancellationToken,
) {
    loop {
        let bundle = authorities.borrow_and_update().bundle_pem();
        if let Err(err) = publish_ca(&client, &namespace, &name, &bundle).await {
            tracing::warn!(error = %error_chain(&err), configmap = %name, "could not publish the CA bundle; retrying");
        }
        tokio::select! {
            changed = authorities.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
