//! One Jaeger trace from the API server into the injector's decision.

use std::collections::HashMap;
use std::time::Duration;

use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, eventually, jaeger_traces, ok, repo, spans_of, unique};
use serde_json::Value;

/// Jaeger's traces of `service` whose spans carry tag `key=value`.
fn traces(service: &str, key: &str, value: &str) -> Vec<Value> {
    jaeger_traces(&format!("service={service}&lookback=1h&limit=20&tags=%7B%22{key}%22%3A%22{value}%22%7D"))
}

fn tags(span: &Value) -> HashMap<String, Value> {
    span["tags"]
        .as_array()
        .expect("a list field")
        .iter()
        .map(|t| (t["key"].as_str().expect("a string field").to_owned(), t["value"].clone()))
        .collect()
}

/// The trace of the first span named `admission` from `service` whose
/// `name` tag is `object`, once it holds the API server's spans too.
async fn admission_trace(service: &str, object: &str) -> (Value, HashMap<String, String>) {
    // Spans arrive one batch at a time: wait for the webhook's admission span
    // and the API server's webhook call, HTTP request included.
    let trace = eventually("the whole trace reaches Jaeger", Duration::from_secs(30), || {
        traces(service, "object_name", object).into_iter().find(|t| {
            let spans = spans_of(t);
            spans.iter().any(|(s, o)| s == service && o == "admission")
                && spans.iter().any(|(s, o)| s == "apiserver" && o.starts_with("Call "))
                && spans.iter().any(|(s, o)| s == "apiserver" && o == "HTTP POST")
        })
    })
    .await;
    let processes = trace["processes"]
        .as_object()
        .expect("a JSON object")
        .iter()
        .map(|(id, p)| (id.clone(), p["serviceName"].as_str().expect("a string field").to_owned()))
        .collect();
    (trace, processes)
}

#[tokio::test]
async fn a_validator_denial_is_traced_under_the_api_servers_webhook_call() {
    let client = cluster().client().await;
    let validator = Webhook::start(Kind::Validator, &repo().join("deploy/base/policies/validator.yaml")).await;
    let ns = unique("traced-deny");
    namespace(&client, &ns, &[("e2e.portcullis.dev/case", &ns)]).await;
    let registration = validator.registration(&ns, "Fail");
    let _registered = registration.apply(&client).await;
    let name = unique("web");
    eventually("the validator denies", Duration::from_secs(30), || {
        let out = cluster().kubectl(&["create", "deployment", &name, "--image=nginx:1.27", "--replicas=1", "-n", &ns]);
        String::from_utf8_lossy(&out.stderr).contains("denied the request").then_some(())
    })
    .await;
    let (trace, processes) = admission_trace("portcullis-validator", &name).await;
    let spans = trace["spans"].as_array().unwrap();
    let by_id: HashMap<&str, &Value> = spans.iter().map(|s| (s["spanID"].as_str().unwrap(), s)).collect();
    let admission = spans
        .iter()
        .find(|s| {
            s["operationName"] == "admission" && processes[s["processID"].as_str().unwrap()] == "portcullis-validator"
        })
        .unwrap();
    let parent = by_id[admission["references"][0]["spanID"].as_str().unwrap()];
    let grandparent = by_id[parent["references"][0]["spanID"].as_str().unwrap()];
    assert_eq!(grandparent["operationName"], "Call validating webhook");
    let tags = tags(admission);
    assert_eq!(tags["allowed"], false);
    assert_eq!(tags["kind"], "Deployment");
    assert_eq!(tags["namespace"], ns.as_str());
    // Each violation is an event on the admission span.
    let events: Vec<String> = admission["logs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|log| log["fields"].as_array().unwrap().iter())
        .filter(|f| f["key"] == "detail")
        .filter_map(|f| f["value"].as_str().map(str::to_owned))
        .collect();
    assert!(events.iter().any(|e| e.contains("below the minimum of 2")), "{events:?}");
}

#[tokio::test]
async fn kubectl_run_is_one_trace_from_the_api_server_into_the_injector() {
    let client = cluster().client().await;
    let injector = Webhook::start(Kind::Injector, &repo().join("deploy/base/policies/injector.yaml")).await;
    let ns = unique("traced");
    namespace(&client, &ns, &[("portcullis.dev/inject", "enabled"), ("e2e.portcullis.dev/case", &ns)]).await;
    let registration = injector.registration(&ns, "Fail");
    let _registered = registration.apply(&client).await;
    eventually("the webhook is in use", Duration::from_secs(30), || {
        let out = cluster().kubectl(&["run", "probe", "--image=nginx", "-n", &ns, "--dry-run=server", "-o", "json"]);
        String::from_utf8_lossy(&out.stdout).contains("portcullis.dev/status").then_some(())
    })
    .await;
    let pod = unique("demo");
    ok(cluster().kubectl(&["run", &pod, "--image=nginx", "-n", &ns]));
    let stored = ok(cluster().kubectl(&["get", "pod", &pod, "-n", &ns, "-o", "jsonpath={.metadata.annotations}"]));
    assert!(stored.contains("portcullis.dev/status"), "{stored}");

    let (trace, processes) = admission_trace("portcullis-injector", &pod).await;
    let spans = trace["spans"].as_array().unwrap();
    let by_id: HashMap<&str, &Value> = spans.iter().map(|s| (s["spanID"].as_str().unwrap(), s)).collect();
    let admission = spans
        .iter()
        .find(|s| {
            s["operationName"] == "admission" && processes[s["processID"].as_str().unwrap()] == "portcullis-injector"
        })
        .expect("the injector's admission span is in the API server's trace");

    // Parent chain: admission <- apiserver HTTP POST <- apiserver "Call mutating webhook".
    let parent_id = admission["references"][0]["spanID"].as_str().unwrap();
    assert_eq!(admission["references"][0]["refType"], "CHILD_OF");
    let parent = by_id[parent_id];
    assert_eq!(processes[parent["processID"].as_str().unwrap()], "apiserver");
    let grandparent = by_id[parent["references"][0]["spanID"].as_str().unwrap()];
    assert_eq!(grandparent["operationName"], "Call mutating webhook");
    assert_eq!(processes[grandparent["processID"].as_str().unwrap()], "apiserver");

    let tags = tags(admission);
    assert_eq!(tags["operation"], "CREATE");
    assert_eq!(tags["kind"], "Pod");
    assert_eq!(tags["namespace"], ns.as_str());
    assert_eq!(tags["object_name"], pod.as_str());
    assert_eq!(tags["dry_run"], false);
    assert_eq!(tags["allowed"], true);
    assert_eq!(tags["applied"], "proxy");
    let operations = &tags["patch_operations"];
    let operations = operations.as_i64().or_else(|| operations.as_str().and_then(|s| s.parse().ok()));
    assert!(operations.unwrap_or_default() > 0, "{tags:?}");
    assert!(tags["uid"].as_str().is_some_and(|u| !u.is_empty()));
}
