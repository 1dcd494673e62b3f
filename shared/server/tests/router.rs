//! The webhook handler in process (`router(..).oneshot(..)`, no socket): what
//! a client gets back for a patch, a denial, unreadable, huge and slow
//! requests, and what each counts in the metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use base64::Engine as _;
use portcullis_admission::{Decision, Request, Verdict};
use portcullis_server::AdmissionMetrics;
use portcullis_server::metrics::RequestLabels;
use portcullis_server::webhook::{MAX_BODY_BYTES, Webhook, router};
use serde_json::{Value, json};
use tower::ServiceExt as _;

/// Denies pods named `forbidden` and labels the others `checked: "yes"`;
/// never decides when `stall` is set (a decision slower than any timeout).
struct Labeller {
    stall: bool,
}

impl Webhook for Labeller {
    async fn decision(self: Arc<Self>, req: Arc<Request>) -> Decision {
        if self.stall {
            std::future::pending::<()>().await;
        }
        let original = req.object.clone().unwrap_or_default();
        if original["metadata"]["name"] == "forbidden" {
            return Decision::deny(403, "pods named forbidden are not admitted");
        }
        let mut object = original.clone();
        object["metadata"]["labels"] = json!({"checked": "yes"});
        Decision { verdict: Verdict::changes(&original, &object), ..Decision::default() }
    }

    fn kind_label(&self, _: &Request) -> &'static str {
        "Pod"
    }
}

fn app(stall: bool, metrics: &Arc<AdmissionMetrics>) -> axum::Router {
    router("/mutate", Arc::new(Labeller { stall }), metrics.clone(), None, Duration::from_millis(200))
}

fn review(api_version: &str, name: &str) -> String {
    json!({
        "apiVersion": format!("admission.k8s.io/{api_version}"),
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}
            }
        }
    })
    .to_string()
}

async fn post(app: axum::Router, body: impl Into<Body>) -> (StatusCode, Value) {
    let request = axum::http::Request::post("/mutate")
        .header("content-type", "application/json")
        .body(body.into())
        .expect("a valid request");
    let response = app.oneshot(request).await.expect("the router always answers");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("a complete body");
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

fn count(metrics: &AdmissionMetrics, operation: &'static str, result: &'static str) -> u64 {
    let kind = if result == "invalid" { "unknown" } else { "Pod" };
    metrics.requests.get_or_create(&RequestLabels { operation, kind, result }).get()
}

#[tokio::test]
async fn a_patch_is_a_base64_json_patch_in_the_requests_own_api_version() {
    let metrics = Arc::new(AdmissionMetrics::default());
    for version in ["v1", "v1beta1"] {
        let (status, answer) = post(app(false, &metrics), review(version, "web")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["apiVersion"], format!("admission.k8s.io/{version}"), "{answer}");
        assert_eq!(answer["kind"], "AdmissionReview");
        let response = &answer["response"];
        assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(response["allowed"], true);
        assert_eq!(response["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(response["patch"].as_str().expect("the patch is a base64 string"))
            .expect("valid base64");
        let patch: Value = serde_json::from_slice(&patch).expect("the patch is JSON");
        assert_eq!(patch, json!([{"op": "add", "path": "/metadata/labels", "value": {"checked": "yes"}}]));
    }
    assert_eq!(count(&metrics, "CREATE", "patched"), 2);
    assert_eq!(metrics.patch_operations.get(), 2);
}

#[tokio::test]
async fn a_denial_is_an_answer_with_its_code_not_an_http_error() {
    let metrics = Arc::new(AdmissionMetrics::default());
    let (status, answer) = post(app(false, &metrics), review("v1", "forbidden")).await;
    assert_eq!(status, StatusCode::OK);
    let response = &answer["response"];
    assert_eq!(response["allowed"], false, "{answer}");
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["message"], "pods named forbidden are not admitted");
    assert!(response.get("patch").is_none(), "a denial carries no patch: {answer}");
    assert_eq!(count(&metrics, "CREATE", "denied"), 1);
}

#[tokio::test]
async fn unreadable_and_oversized_bodies_get_a_clear_4xx() {
    let metrics = Arc::new(AdmissionMetrics::default());
    let (status, answer) = post(app(false, &metrics), "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(answer["error"].as_str().is_some_and(|e| !e.is_empty()), "{answer}");

    let wrong_kind = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}).to_string();
    let (status, answer) = post(app(false, &metrics), wrong_kind).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");

    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_BODY_BYTES));
    let (status, answer) = post(app(false, &metrics), huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer["error"], format!("request body larger than {MAX_BODY_BYTES} bytes"));
    assert_eq!(count(&metrics, "unknown", "invalid"), 3);
}

#[tokio::test]
async fn a_decision_slower_than_the_request_timeout_is_answered_408_and_dropped() {
    let metrics = Arc::new(AdmissionMetrics::default());
    let (status, answer) = post(app(true, &metrics), review("v1", "web")).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert_eq!(
        answer["error"], "the request was not read and answered within the request timeout (200ms)",
        "a clear answer, not an empty body"
    );
    // Nothing was counted as answered: the decision never finished.
    assert_eq!(count(&metrics, "CREATE", "patched"), 0);
}
