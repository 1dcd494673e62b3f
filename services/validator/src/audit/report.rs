//! OpenReports (`openreports.io/v1alpha1`): one `Report` per namespace and
//! one `ClusterReport` for cluster-scoped objects, each named
//! [`REPORT_NAME`] and written in place by server-side apply, so the number
//! of report objects grows with namespaces, never with objects or requests.

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::results::Results;

/// The name of every report the audit writes.
pub const REPORT_NAME: &str = "portcullis-validator";
/// The `source` of the reports and the server-side apply field manager.
pub const SOURCE: &str = portcullis_admission::names::MANAGED_BY;
/// The `source` of a result of a native ValidatingAdmissionPolicy (its
/// binding in `properties.binding`), as other engines report them.
pub const NATIVE_SOURCE: &str = "ValidatingAdmissionPolicy";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "openreports.io".into(),
        version: "v1alpha1".into(),
        api_version: "openreports.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The report of `namespace` (`""`: the ClusterReport), at most `max`
/// results, worst first; the summary counts every result.
pub fn build(results: &Results, namespace: &str, max: usize, now: Timestamp) -> Value {
    let (summary, shown) = results.report(namespace, max);
    let timestamp = json!({"seconds": now.as_second(), "nanos": now.subsec_nanosecond()});
    let items: Vec<Value> = shown
        .into_iter()
        .map(|(id, entry, outcome)| {
            let mut subject = json!({
                "apiVersion": &*entry.api_version,
                "kind": &*entry.kind,
                "name": id.name,
                "uid": entry.uid,
            });
            if !namespace.is_empty() {
                subject["namespace"] = json!(namespace);
            }
            let mut properties = json!({"action": outcome.action.as_str()});
            let source = match &outcome.binding {
                Some(binding) => {
                    properties["binding"] = json!(binding);
                    NATIVE_SOURCE
                }
                None => SOURCE,
            };
            let mut result = json!({
                "source": source,
                "policy": outcome.policy,
                "result": outcome.status,
                "scored": true,
                "timestamp": timestamp,
                "resources": [subject],
                "properties": properties,
            });
            if !outcome.message.is_empty() {
                result["message"] = json!(outcome.message);
            }
            result
        })
        .collect();
    let (kind, mut metadata) = if namespace.is_empty() {
        ("ClusterReport", json!({"name": REPORT_NAME}))
    } else {
        ("Report", json!({"name": REPORT_NAME, "namespace": namespace}))
    };
    metadata["labels"] = json!({"app.kubernetes.io/managed-by": SOURCE});
    json!({
        "apiVersion": "openreports.io/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "source": SOURCE,
        "configuration": {"limits": {"maxResults": max}},
        "summary": summary,
        "results": items,
    })
}

/// Writes `report` (from [`build`]) by server-side apply.
pub async fn write(client: &kube::Client, namespace: &str, report: &Value) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = if namespace.is_empty() {
        Api::all_with(client.clone(), &resource("ClusterReport", "clusterreports"))
    } else {
        Api::namespaced_with(client.clone(), namespace, &resource("Report", "reports"))
    };
    api.patch(REPORT_NAME, &PatchParams::apply(SOURCE).force(), &Patch::Apply(report)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::audit::results::{Entry, ObjectId, Outcome, Status};
    use crate::policy::Action;

    #[test]
    fn a_report_names_the_object_the_policy_and_the_message() {
        let mut results = Results::default();
        let outcome = |status, message: &str| Outcome {
            policy: "team-label".into(),
            action: Action::Deny,
            status,
            message: message.into(),
            binding: None,
        };
        for (name, status, message) in [("bad", Status::Fail, "no team label"), ("good", Status::Pass, "")] {
            let entry = Entry {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                uid: format!("uid-{name}"),
                stamp: 1,
                outcomes: vec![outcome(status, message)],
            };
            results.put("demo", ObjectId { resource: Arc::from("v1/configmaps"), name: name.into() }, entry);
        }
        let report = build(&results, "demo", 1, Timestamp::UNIX_EPOCH);
        assert_eq!(report["kind"], "Report");
        assert_eq!(report["metadata"]["namespace"], "demo");
        assert_eq!(report["summary"], json!({"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}));
        let results = report["results"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 1, "capped at one result");
        assert_eq!(results[0]["result"], "fail");
        assert_eq!(results[0]["message"], "no team label");
        assert_eq!(results[0]["resources"][0]["name"], "bad");
        assert_eq!(results[0]["resources"][0]["namespace"], "demo");
        assert_eq!(build(&Results::default(), "", 10, Timestamp::UNIX_EPOCH)["kind"], "ClusterReport");
    }
}
