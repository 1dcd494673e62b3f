//! Decoding and encoding `AdmissionReview` bodies.

use std::sync::Arc;

use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, TypeMeta};
use serde_json::{Value, json};

use crate::parts::Parts;

/// The admission API versions the API server may send.
const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// An operation as the API server names it (`CREATE`, ...): in requests,
/// in policies' `operations`, in CEL's `request.operation` and in metric
/// labels.
pub fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// Why a body is not an `AdmissionReview` a webhook can answer.
///
/// Each variant's message is safe to return to the caller: it names what is
/// wrong with the input, never an internal detail.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The body is not JSON, or not shaped like an `AdmissionReview`.
    #[error("body is not a valid AdmissionReview")]
    Json(#[source] serde_json::Error),
    /// The body is not UTF-8, so it cannot be JSON (RFC 8259 §8.1).
    #[error("body is not a valid AdmissionReview: it is not UTF-8")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The review names an `apiVersion`/`kind` this webhook does not speak.
    #[error(
        "unsupported review type {api_version:?}/{kind:?}: expected kind AdmissionReview, apiVersion admission.k8s.io/v1 or v1beta1"
    )]
    UnsupportedType {
        /// The `apiVersion` the body declared.
        api_version: String,
        /// The `kind` the body declared.
        kind: String,
    },
    /// The review has no `request` field.
    #[error("AdmissionReview has no request")]
    MissingRequest,
    /// The request has an empty `uid`, so no response could be matched to it.
    #[error("AdmissionReview request has no uid")]
    MissingUid,
    /// `request.object` or `request.oldObject` is not a JSON object.
    #[error("request.{0} is not an object")]
    NotAnObject(&'static str),
    /// The embedded object's own `kind` or `apiVersion` contradicts the
    /// request's `kind`.
    #[error("object is a {found}, but the request declares {declared}")]
    KindMismatch {
        /// `group/version, Kind=...` as the request declares it.
        declared: String,
        /// What the object itself says it is.
        found: String,
    },
}

/// A decoded admission request: the typed request envelope plus its objects
/// as plain JSON, ready for a decision function that diffs what it changes.
#[derive(Debug)]
pub struct Request {
    /// The request as the API server sent it, with the review's
    /// `apiVersion` kept for the response. Its `object` and `oldObject` are
    /// moved out into [`Request::object`] and [`Request::old_object`].
    pub inner: AdmissionRequest<DynamicObject>,
    /// `request.object` (`None` for DELETE and CONNECT).
    pub object: Option<Value>,
    /// `request.oldObject` (UPDATE and DELETE).
    pub old_object: Option<Value>,
    /// The parts of the objects that were built: all of them ([`decode`]),
    /// or those a decision reads ([`decode_parts`]). A decision runs only
    /// on a request read with parts that cover what it reads.
    pub parts: Arc<Parts>,
}

impl Request {
    /// The request's `uid`.
    pub fn uid(&self) -> &str {
        &self.inner.uid
    }

    /// The kind the request declares, e.g. `Pod`.
    pub fn kind(&self) -> &GroupVersionKind {
        &self.inner.kind
    }
}

/// Decodes and checks an `AdmissionReview` body (v1 or v1beta1) in one
/// pass: the envelope is typed as it is read, and the objects, which are
/// most of the body, become JSON without an intermediate copy. The body's
/// UTF-8 is checked once, whole, rather than string by string as the
/// parser would (a tenth of the decoding).
pub fn decode(body: &[u8]) -> Result<Request, DecodeError> {
    decode_parts(body, &Parts::whole())
}

/// [`decode`], building of `request.object` and `request.oldObject` only
/// the `parts` named: for a decision that reads few of an object's fields.
/// The rest of the body is still checked as JSON. The objects' `kind` and
/// `apiVersion` are checked against the request's kind only if `parts`
/// keeps them.
pub fn decode_parts(body: &[u8], parts: &Arc<Parts>) -> Result<Request, DecodeError> {
    let text = std::str::from_utf8(body).map_err(DecodeError::NotUtf8)?;
    let review = crate::wire::read(text, parts).map_err(DecodeError::Json)?;
    let (api_version, kind) = (review.api_version, review.kind);
    if kind != "AdmissionReview" || !API_VERSIONS.contains(&api_version.as_str()) {
        return Err(DecodeError::UnsupportedType { api_version, kind });
    }
    let wire = review.request.ok_or(DecodeError::MissingRequest)?;
    if wire.uid.is_empty() {
        return Err(DecodeError::MissingUid);
    }
    let (object, old_object) = (wire.object, wire.old_object);
    for (field, value) in [("object", &object), ("oldObject", &old_object)] {
        if let Some(value) = value {
            check_kind(&wire.kind, field, value)?;
        }
    }
    let inner = AdmissionRequest {
        types: TypeMeta { api_version, kind },
        uid: wire.uid,
        kind: wire.kind,
        resource: wire.resource,
        sub_resource: wire.sub_resource,
        request_kind: wire.request_kind,
        request_resource: wire.request_resource,
        request_sub_resource: wire.request_sub_resource,
        name: wire.name,
        namespace: wire.namespace,
        operation: wire.operation,
        user_info: wire.user_info,
        object: None,
        old_object: None,
        dry_run: wire.dry_run,
        options: wire.options,
    };
    Ok(Request { inner, object, old_object, parts: Arc::clone(parts) })
}

/// An object that already exists in the cluster, presented as the API server
/// would present its creation (CREATE, dry run, by `username`): how an
/// audit judges stored objects with the same code as admission. The object
/// is moved in, not copied or re-encoded.
pub fn existing(
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    object: Value,
    username: &str,
) -> Result<Request, DecodeError> {
    let meta = |field: &str| object.pointer(field).and_then(Value::as_str).unwrap_or_default();
    let (name, namespace, uid) = (meta("/metadata/name"), meta("/metadata/namespace"), meta("/metadata/uid"));
    let envelope = json!({
        "uid": if uid.is_empty() { "00000000-0000-0000-0000-000000000000" } else { uid },
        "kind": kind,
        "resource": resource,
        "name": name,
        "namespace": (!namespace.is_empty()).then_some(namespace),
        "operation": "CREATE",
        "userInfo": {"username": username},
        "dryRun": true,
    });
    let mut inner: AdmissionRequest<DynamicObject> = serde_json::from_value(envelope).map_err(DecodeError::Json)?;
    inner.types.api_version = "admission.k8s.io/v1".into();
    inner.types.kind = "AdmissionReview".into();
    check_kind(&inner.kind, "object", &object)?;
    Ok(Request { inner, object: Some(object), old_object: None, parts: Parts::whole() })
}

/// Refuses an object that is not a JSON object, or whose `kind`/`apiVersion`,
/// where it states them, are not the ones the request declares. The API
/// server never sends such a review; a hand-made or corrupted one must not
/// be mutated as something it is not.
fn check_kind(declared: &GroupVersionKind, field: &'static str, object: &Value) -> Result<(), DecodeError> {
    if !object.is_object() {
        return Err(DecodeError::NotAnObject(field));
    }
    let stated = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
    let (kind, api_version) = (stated("kind"), stated("apiVersion"));
    let declared_api_version = if declared.group.is_empty() {
        declared.version.clone()
    } else {
        format!("{}/{}", declared.group, declared.version)
    };
    let kind_ok = kind.is_empty() || kind == declared.kind;
    let version_ok = api_version.is_empty() || api_version == declared_api_version;
    if kind_ok && version_ok {
        return Ok(());
    }
    Err(DecodeError::KindMismatch {
        declared: format!("{declared_api_version} {}", declared.kind),
        found: format!("{api_version} {kind}"),
    })
}

/// Encodes a response as an `AdmissionReview` of the request's
/// `apiVersion`, in the wire format the API documents: `response.patch` is
/// the base64 of the JSON Patch (kube-core's type would send its bytes as a
/// JSON array of numbers, four times the size and unreadable).
pub fn encode(response: AdmissionResponse) -> Vec<u8> {
    let patch = response.patch.as_deref();
    let mut out = Vec::with_capacity(256 + patch.map_or(0, |p| p.len() / 3 * 4 + 4));
    out.extend_from_slice(br#"{"apiVersion":"#);
    write_json(&mut out, &response.types.api_version);
    out.extend_from_slice(br#","kind":"AdmissionReview","response":{"uid":"#);
    write_json(&mut out, &response.uid);
    out.extend_from_slice(if response.allowed { br#","allowed":true"# } else { br#","allowed":false"# });
    out.extend_from_slice(br#","status":"#);
    write_json(&mut out, &response.result);
    if let Some(patch) = patch {
        // Base64 needs no JSON escaping: written as is, not scanned again.
        out.extend_from_slice(br#","patch":""#);
        base64_simd::STANDARD.encode_append(patch, &mut out);
        out.extend_from_slice(br#"","patchType":"JSONPatch""#);
    }
    if !response.audit_annotations.is_empty() {
        out.extend_from_slice(br#","auditAnnotations":"#);
        write_json(&mut out, &response.audit_annotations);
    }
    if let Some(warnings) = &response.warnings {
        out.extend_from_slice(br#","warnings":"#);
        write_json(&mut out, warnings);
    }
    out.extend_from_slice(b"}}");
    out
}

/// Appends `value` as JSON. Strings, string maps and kube's `Status`
/// always serialize; writing into a `Vec` cannot fail.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    let _ = serde_json::to_writer(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    fn operation_names_are_the_api_servers(
        #[values(Operation::Create, Operation::Update, Operation::Delete, Operation::Connect)] operation: Operation,
    ) {
        let sent = serde_json::to_value(&operation).unwrap_or_default();
        assert_eq!(sent, operation_name(&operation));
    }

    fn review(api_version: &str, request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": api_version, "kind": "AdmissionReview", "request": request
        }))
        .unwrap_or_default()
    }

    fn pod_request(object: Value) -> Value {
        json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "demo", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": null
        })
    }

    #[rstest]
    #[case("admission.k8s.io/v1")]
    #[case("admission.k8s.io/v1beta1")]
    fn decodes_both_versions_and_answers_in_kind(#[case] api_version: &str) {
        let body =
            review(api_version, pod_request(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})));
        let req = decode(&body).expect("valid review");
        assert_eq!(req.uid(), "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(req.object.as_ref().and_then(|o| o["metadata"]["name"].as_str()), Some("p"));
        let out: Value = serde_json::from_slice(&encode(AdmissionResponse::from(&req.inner))).expect("json");
        assert_eq!(out["apiVersion"], api_version);
        assert_eq!(out["kind"], "AdmissionReview");
        assert_eq!(out["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(out["response"]["allowed"], true);
    }

    #[test]
    fn the_patch_goes_out_as_base64_of_the_json_patch() {
        let body = review(
            "admission.k8s.io/v1",
            pod_request(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})),
        );
        let req = decode(&body).expect("valid review");
        let patch = json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]);
        let response = AdmissionResponse::from(&req.inner)
            .with_patch(serde_json::from_value(patch.clone()).expect("patch"))
            .expect("patch serializes");
        let out: Value = serde_json::from_slice(&encode(response)).expect("json");
        let text = out["response"]["patch"].as_str().expect("patch is a string");
        let decoded = base64_simd::STANDARD.decode_to_vec(text).expect("base64");
        assert_eq!(serde_json::from_slice::<Value>(&decoded).expect("json patch"), patch);
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    }

    #[rstest]
    #[case::not_json(b"{not json".to_vec(), "not a valid AdmissionReview")]
    #[case::empty(Vec::new(), "not a valid AdmissionReview")]
    #[case::not_utf8(b"{\"kind\": \"\xff\"}".to_vec(), "not a valid AdmissionReview: it is not UTF-8")]
    #[case::wrong_kind(
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Pod"})).unwrap_or_default(),
        "unsupported review type"
    )]
    #[case::no_request(
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).unwrap_or_default(),
        "has no request"
    )]
    #[case::empty_uid(
        review("admission.k8s.io/v1", {
            let mut r = pod_request(json!({"metadata": {}}));
            r["uid"] = json!("");
            r
        }),
        "has no uid"
    )]
    #[case::kind_mismatch(
        review("admission.k8s.io/v1", pod_request(json!({"apiVersion": "v1", "kind": "Service", "metadata": {}}))),
        "object is a v1 Service, but the request declares v1 Pod"
    )]
    #[case::object_not_an_object(review("admission.k8s.io/v1", pod_request(json!("a pod"))), "request.object is not an object")]
    #[case::old_object_of_another_kind(
        review("admission.k8s.io/v1", {
            let mut r = pod_request(json!({"metadata": {}}));
            r["oldObject"] = json!({"apiVersion": "v1", "kind": "Secret"});
            r
        }),
        "object is a v1 Secret, but the request declares v1 Pod"
    )]
    fn refuses_bad_input_with_a_clear_message(#[case] body: Vec<u8>, #[case] expected: &str) {
        let err = decode(&body).expect_err("must be refused");
        assert!(err.to_string().contains(expected), "{err}");
    }

    #[test]
    fn delete_has_only_the_old_object() {
        let mut request = pod_request(Value::Null);
        request["operation"] = json!("DELETE");
        request["oldObject"] = json!({"metadata": {"name": "p"}});
        let req = decode(&review("admission.k8s.io/v1", request)).expect("valid");
        assert!(req.object.is_none());
        assert_eq!(req.old_object.as_ref().and_then(|o| o["metadata"]["name"].as_str()), Some("p"));
    }

    #[test]
    fn the_envelope_reads_as_a_derived_one_would() {
        // Unknown fields are ignored, optional ones may be null, a field
        // given twice is refused, a missing required one is named.
        let mut request = pod_request(json!({"metadata": {"name": "p"}}));
        request["somethingNew"] = json!({"x": [1]});
        request["subResource"] = Value::Null;
        let req = decode(&review("admission.k8s.io/v1", request.clone())).expect("valid");
        assert_eq!(req.inner.sub_resource, None);
        assert_eq!(req.inner.name, "", "absent: empty");
        assert_eq!(req.inner.user_info.username.as_deref(), Some("alice"));

        let text = String::from_utf8(review("admission.k8s.io/v1", request.clone())).unwrap_or_default();
        let twice = text.replacen(r#""uid":"#, r#""uid":"a","uid":"#, 1);
        let err = decode(twice.as_bytes()).expect_err("a field twice");
        assert!(format!("{:?}", err).contains("duplicate field `uid`"), "{err:?}");

        if let Some(fields) = request.as_object_mut() {
            fields.remove("operation");
        }
        let err = decode(&review("admission.k8s.io/v1", request)).expect_err("no operation");
        assert!(format!("{:?}", err).contains("missing field `operation`"), "{err:?}");
    }

    #[test]
    fn the_objects_are_built_with_the_parts_asked_for() {
        let mut request = pod_request(json!({"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": 1}}));
        request["oldObject"] = json!({"metadata": {"name": "q"}, "spec": {}});
        let parts = Arc::new(Parts::fields([("metadata", Parts::fields([("name", Parts::All)]))]));
        let req = decode_parts(&review("admission.k8s.io/v1", request), &parts).expect("valid");
        assert_eq!(req.object, Some(json!({"metadata": {"name": "p"}})));
        assert_eq!(req.old_object, Some(json!({"metadata": {"name": "q"}})));
        assert!(Arc::ptr_eq(&req.parts, &parts));
    }
}
