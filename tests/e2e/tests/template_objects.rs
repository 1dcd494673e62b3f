//! The injector's templates and configuration as API objects, against a
//! real kube-apiserver: `kubectl apply` a template, `kubectl wait` for
//! Ready, and the next pod gets that version of it; two configurations
//! that contradict each other refuse only the later one. Its own control
//! plane: its injector is the only replica reporting.

use portcullis_e2e::webhook::{Kind, Webhook, namespace};
use portcullis_e2e::{cluster, ok, unique};
use serde_json::Value;

fn apply(yaml: &str) {
    ok(cluster().kubectl_stdin(&["apply", "-f", "-"], yaml));
}

fn wait_ready(what: &str) {
    ok(cluster().kubectl(&["wait", "--for=condition=Ready", what, "--timeout=60s"]));
}

fn template(name: &str, image: &str) -> String {
    format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: InjectionTemplate\nmetadata: {{name: {name}}}\n\
         spec:\n  containers: [{{name: proxy, image: '{image}'}}]\n"
    )
}

fn config(name: &str, body: &str) -> String {
    format!("apiVersion: portcullis.dev/v1alpha1\nkind: InjectorConfig\nmetadata: {{name: {name}}}\nspec:\n{body}")
}

/// What the API server would store for a new pod in `ns`.
fn dry_run(ns: &str) -> Value {
    let pod =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: web, image: 'nginx:1.27'}]}\n";
    let out = ok(cluster().kubectl_stdin(&["create", "-n", ns, "--dry-run=server", "-o", "json", "-f", "-"], pod));
    serde_json::from_str(&out).expect("a Pod")
}

fn proxy_image(pod: &Value) -> Option<&str> {
    pod["spec"]["containers"].as_array()?.iter().find(|c| c["name"] == "proxy")?["image"].as_str()
}

#[tokio::test]
async fn templates_are_objects_in_force_once_ready() {
    cluster().install_kinds();
    let client = cluster().client().await;
    let injector = Webhook::start_watching(Kind::Injector, &[]).await;
    let ns = unique("templates");
    namespace(&client, &ns, &[("portcullis.dev/inject", "enabled"), ("e2e.portcullis.dev/case", &ns)]).await;
    let _registered = injector.registration(&ns, "Fail").apply(&client).await;

    // A template and the configuration that makes it the default.
    apply(&template("proxy", "proxy:1"));
    apply(&config("a-defaults", "  defaultTemplates: [proxy]\n  defaults: {imagePullPolicy: IfNotPresent}\n"));
    wait_ready("injectiontemplate/proxy");
    wait_ready("injectorconfig/a-defaults");
    assert_eq!(proxy_image(&dry_run(&ns)), Some("proxy:1"));

    // Changed with kubectl apply: once Ready, the next pod has the change.
    for version in ["proxy:2", "proxy:3"] {
        apply(&template("proxy", version));
        wait_ready("injectiontemplate/proxy");
        assert_eq!(proxy_image(&dry_run(&ns)), Some(version));
    }

    // A configuration that contradicts the first is refused alone.
    apply(&config("b-defaults", "  defaults: {imagePullPolicy: Always}\n"));
    let reason = portcullis_e2e::eventually("the conflict is reported", std::time::Duration::from_secs(30), || {
        let out = cluster().kubectl(&[
            "get",
            "injectorconfig",
            "b-defaults",
            "-o",
            "jsonpath={.status.conditions[0].reason}",
        ]);
        let reason = String::from_utf8_lossy(&out.stdout).into_owned();
        (!reason.is_empty() && reason != "Pending").then_some(reason)
    })
    .await;
    assert_eq!(reason, "Conflict");
    let pod = dry_run(&ns);
    assert_eq!(proxy_image(&pod), Some("proxy:3"), "the rest stays in force");
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    let listed = ok(cluster().kubectl(&["get", "portcullis"]));
    assert!(listed.contains("injectiontemplate.portcullis.dev/proxy"), "{listed}");

    // Deleted: no longer injected.
    ok(cluster().kubectl(&["delete", "injectorconfig", "a-defaults"]));
    portcullis_e2e::eventually("the template is no longer a default", std::time::Duration::from_secs(10), || {
        proxy_image(&dry_run(&ns)).is_none().then_some(())
    })
    .await;
}
