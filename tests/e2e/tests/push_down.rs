//! Policies pushed down to the API server (`spec.enforcement`), against a
//! real kube-apiserver with its garbage collector: the generated
//! ValidatingAdmissionPolicy and binding appear, owned by the policy; the
//! API server itself denies, the webhook no longer judges the policy, and
//! the policy's status and `kubectl get` say so; moved back and forth under
//! continuous creates (by its spec, and by an exception that comes to name
//! it without a new generation of the policy), no create that breaks the
//! policy is ever admitted; a policy that cannot go says why; deleted, its
//! pair goes with it.
//!
//! One test, run in order: every validator in a cluster reports to the
//! same status writer and push-down controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, config_map_review, eventually, ok, unique};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

fn apply(yaml: &str) {
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], yaml));
}

/// `kubectl get` with a jsonpath; empty when absent.
fn get(what: &str, path: &str) -> String {
    let out = cluster().kubectl(&["get", what, "-o", &format!("jsonpath={path}"), "--ignore-not-found"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A ConfigMap policy for the case's namespaces (no data key `forbidden`),
/// with `enforcement` and more spec lines.
fn policy(name: &str, case: &str, enforcement: &str, extra: &str) -> String {
    format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: ValidatorPolicy\nmetadata: {{name: {name}}}\nspec:\n\
         \x20 enforcement: {enforcement}\n  match:\n\
         \x20   resources: [{{apiGroups: [''], apiVersions: [v1], resources: [configmaps]}}]\n\
         \x20   namespaceSelector: {{matchLabels: {{e2e.portcullis.dev/case: {case}}}}}\n  validations:\n\
         \x20   - expression: \"!has(object.data) || !('forbidden' in object.data)\"\n      message: no forbidden key\n{extra}"
    )
}

fn breaking(namespace: &str, name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": {"forbidden": "x"}
    }))
    .expect("a ConfigMap")
}

/// The error a create of a breaking ConfigMap meets.
async fn denial(client: &kube::Client, namespace: &str) -> String {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api.create(&PostParams { dry_run: true, ..Default::default() }, &breaking(namespace, &unique("cm"))).await {
        Ok(_) => panic!("a breaking ConfigMap was admitted"),
        Err(err) => err.to_string(),
    }
}

/// What `replica` itself answers for a breaking ConfigMap.
async fn webhook_allows(replica: &Webhook, namespace: &str) -> bool {
    let object = serde_json::to_value(breaking(namespace, "direct")).expect("json");
    let answer = replica.client().post(replica.url()).json(&config_map_review(object)).send().await.expect("answers");
    let answer: Value = answer.json().await.expect("an AdmissionReview");
    answer["response"]["allowed"].as_bool().expect("response.allowed")
}

/// Dry-run creates of breaking ConfigMaps, one after another, until
/// stopped: how many were made, and how many were admitted.
struct Load {
    stop: Arc<AtomicBool>,
    made: Arc<AtomicU64>,
    admitted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(client: &kube::Client, namespace: &str) -> Self {
        let (stop, made, admitted) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let (s, m, a, ns) = (Arc::clone(&stop), made.clone(), admitted.clone(), namespace.to_owned());
        let task = tokio::spawn(async move {
            let params = PostParams { dry_run: true, ..Default::default() };
            while !s.load(Ordering::Relaxed) {
                let result = api.create(&params, &breaking(&ns, &unique("load"))).await;
                m.fetch_add(1, Ordering::Relaxed);
                if result.is_ok() {
                    a.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Self { stop, made, admitted, task }
    }

    async fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the load ran");
        (self.made.load(Ordering::Relaxed), self.admitted.load(Ordering::Relaxed))
    }
}

#[tokio::test]
async fn policies_are_pushed_down_and_back_with_no_gap() {
    cluster().install_kinds();
    let client = cluster().client().await;
    let case = unique("pushdown");
    namespace(&client, &case, &[("e2e.portcullis.dev/case", &case)]).await;
    let first = Webhook::start_watching(Kind::Validator, &[]).await;
    let second = Webhook::start_watching(Kind::Validator, &[]).await;
    let _registered = first.registration(&case, "Fail").apply(&client).await;
    let name = format!("{case}-keys");
    let vap = format!("portcullis.{name}");
    let what = format!("validatorpolicy/{name}");

    // Enforced by the webhook first, as by default.
    apply(&policy(&name, &case, "Webhook", ""));
    ok(cluster().kubectl(&["wait", "--for=condition=Ready", &what, "--timeout=60s"]));
    eventually("the status names the webhook", WAIT, || {
        (get(&what, "{.status.enforcedBy.reason}") == "WebhookChosen").then_some(())
    })
    .await;
    let message = denial(&client, &case).await;
    assert!(message.contains("validate.portcullis.dev") && message.contains("no forbidden key"), "{message}");

    // Pushed down under load: the pair appears, owned by the policy; the
    // API server denies; the webhook leaves the policy alone.
    let load = Load::start(&client, &case);
    apply(&policy(&name, &case, "Auto", ""));
    eventually("pushed down", WAIT, || (get(&what, "{.status.enforcedBy.path}") == "APIServer").then_some(())).await;
    let generation = get(&what, "{.metadata.generation}");
    assert_eq!(get(&what, "{.status.enforcedBy.observedGeneration}"), generation);
    assert_eq!(get(&format!("validatingadmissionpolicy/{vap}"), "{.metadata.ownerReferences[0].name}"), name);
    assert_eq!(get(&format!("validatingadmissionpolicybinding/{vap}"), "{.spec.policyName}"), vap);
    let message = denial(&client, &case).await;
    assert!(
        message.contains(&format!("ValidatingAdmissionPolicy '{vap}' with binding '{vap}' denied request")),
        "the API server itself denies: {message}"
    );
    for replica in [&first, &second] {
        let deadline = std::time::Instant::now() + WAIT;
        while !webhook_allows(replica, &case).await {
            assert!(std::time::Instant::now() < deadline, "a replica still judges a pushed-down policy");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let columns = ok(cluster().kubectl(&["get", "validatorpolicy", &name]));
    assert!(columns.contains("ENFORCED-BY") && columns.contains("APIServer"), "{columns}");

    // Back to the webhook, still under load: the pair goes once both
    // replicas judge the new generation.
    apply(&policy(&name, &case, "Webhook", ""));
    eventually("back to the webhook", WAIT, || {
        (get(&what, "{.status.enforcedBy.path}") == "Webhook"
            && get(&format!("validatingadmissionpolicy/{vap}"), "{.metadata.name}").is_empty())
        .then_some(())
    })
    .await;
    assert!(
        !webhook_allows(&first, &case).await && !webhook_allows(&second, &case).await,
        "the webhook judges it again"
    );
    // The API server drops the deleted pair from its snapshot soon after;
    // until then both deny, with the same message.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let message = denial(&client, &case).await;
        if message.contains("validate.portcullis.dev") {
            break;
        }
        assert!(message.contains("no forbidden key"), "{message}");
        assert!(std::time::Instant::now() < deadline, "the API server still enforces the deleted pair: {message}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Pushed down again (InProcess), then kept from the API server with no
    // new generation, still under load: an exception comes to name it (the
    // API server knows no exceptions). The replicas take it back before
    // the pair goes; the status says why, with a Warning Event.
    apply(&policy(&name, &case, "InProcess", ""));
    eventually("pushed down again", WAIT, || (get(&what, "{.status.enforcedBy.path}") == "APIServer").then_some(()))
        .await;
    let generation = get(&what, "{.metadata.generation}");
    apply(&format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: PolicyException\nmetadata: {{name: legacy, namespace: {case}}}\n\
         spec: {{policies: [{name}], names: ['legacy-*'], reason: migrating}}\n"
    ));
    let message = eventually("not pushable", WAIT, || {
        (get(&what, "{.status.enforcedBy.reason}") == "NotPushable").then(|| get(&what, "{.status.enforcedBy.message}"))
    })
    .await;
    assert!(message.contains(&format!("PolicyException {case}/legacy")), "{message}");
    assert_eq!(get(&what, "{.status.enforcedBy.path}"), "Webhook");
    assert_eq!(get(&what, "{.metadata.generation}"), generation, "the policy itself did not change");
    eventually("the pair goes", WAIT, || {
        get(&format!("validatingadmissionpolicy/{vap}"), "{.metadata.name}").is_empty().then_some(())
    })
    .await;
    let described = eventually("a Warning Event", WAIT, || {
        let out = ok(cluster().kubectl(&["describe", "validatorpolicy", &name]));
        out.contains("NotPushable").then_some(out)
    })
    .await;
    assert!(described.contains("Warning"), "{described}");
    let (made, admitted) = load.finish().await;
    println!("{made} breaking creates during the moves, {admitted} admitted");
    assert!(made > 20, "the load ran through the moves ({made} creates)");
    assert_eq!(admitted, 0, "{admitted} of {made} breaking creates were admitted during the moves");
    ok(cluster().kubectl(&["delete", "policyexception", "legacy", "-n", &case]));

    // Pushed down again, then deleted: the garbage collector takes the pair.
    apply(&policy(&name, &case, "Auto", ""));
    eventually("pushed down again", WAIT, || (get(&what, "{.status.enforcedBy.path}") == "APIServer").then_some(()))
        .await;
    ok(cluster().kubectl(&["delete", &what]));
    eventually("the pair goes with its policy", WAIT, || {
        (get(&format!("validatingadmissionpolicy/{vap}"), "{.metadata.name}").is_empty()
            && get(&format!("validatingadmissionpolicybinding/{vap}"), "{.metadata.name}").is_empty())
        .then_some(())
    })
    .await;
}
