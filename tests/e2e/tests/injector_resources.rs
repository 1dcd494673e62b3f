//! The injector's CustomResourceDefinitions in a real kube-apiserver: they
//! install, today's shipped configuration applies unchanged, malformed
//! templates are refused with the field, and `kubectl explain` and `kubectl
//! get` show what a user needs.

use std::sync::OnceLock;
use std::time::Duration;

use portcullis_e2e::cleanup::Cleanup;
use portcullis_e2e::{cluster, err, eventually, ok, repo, unique};
use serde_json::{Value, json};

const CRDS: [&str; 2] = ["injectiontemplates.portcullis.dev", "injectorconfigs.portcullis.dev"];

/// Installs the shipped CRDs once, as a user would (left installed: other
/// tests of this control plane may use them; two `kubectl apply`s of one
/// new object at once would race to create it).
fn install_crds() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let file = repo().join("deploy/base/crds/injector.yaml");
        ok(cluster().kubectl(&["apply", "-f", file.to_str().expect("a UTF-8 path")]));
        for crd in CRDS {
            ok(cluster().kubectl(&["wait", "--for=condition=Established", "--timeout=60s", &format!("crd/{crd}")]));
        }
    });
}

fn template(name: &str, spec: &Value) -> String {
    let object = json!({
        "apiVersion": "portcullis.dev/v1alpha1",
        "kind": "InjectionTemplate",
        "metadata": {"name": name},
        "spec": spec,
    });
    object.to_string()
}

#[test]
fn the_shipped_configuration_applies_and_malformed_templates_are_refused_with_the_field() {
    install_crds();

    // Today's shipped file, unchanged.
    let shipped = repo().join("deploy/base/policies/injector.yaml");
    let _configs = [Cleanup::of("injectorconfig", "sidecars"), Cleanup::of("injectorconfig", "mirrors-and-defaults")];
    ok(cluster().kubectl(&["apply", "-f", shipped.to_str().expect("a UTF-8 path")]));
    let stored: Value =
        serde_json::from_str(&ok(cluster().kubectl(&["get", "injectorconfig", "sidecars", "-o", "json"]))).unwrap();
    assert_eq!(stored["spec"]["templates"][0]["initContainers"][0]["restartPolicy"], "Always");
    assert_eq!(stored["spec"]["defaultTemplates"], json!(["proxy"]));

    // A template: what was applied is what is stored, nothing pruned.
    let name = unique("tpl");
    let spec = json!({
        "initContainers": [{
            "name": "proxy", "image": "envoyproxy/envoy:v1.31.0", "restartPolicy": "Always",
            "ports": [{"containerPort": 15001, "name": "proxy"}],
            "resources": {"requests": {"cpu": "10m", "memory": 32}},
        }],
        "volumes": [{"name": "certs", "emptyDir": {"medium": "Memory"}}],
        "volumeMounts": [{"name": "certs", "mountPath": "/etc/certs", "readOnly": true}],
        "imagePullSecrets": ["mirror"],
        "skipHostNetwork": true,
    });
    let _template = Cleanup::apply("injectiontemplate", &name, &template(&name, &spec));
    let stored: Value = serde_json::from_str(&ok(cluster().kubectl(&["get", "itpl", &name, "-o", "json"]))).unwrap();
    assert_eq!(stored["spec"], spec);

    // Malformed ones: refused by the API server, naming the field.
    for (spec, expected) in [
        (json!({"containers": [{"image": "x"}]}), "spec.containers[0].name: Required value"),
        (
            json!({"containers": [{"name": "c"}]}),
            "spec.containers[0].image: Required value: an injected container needs an image",
        ),
        (json!({"initContainers": [{"name": "c", "image": ""}]}), "spec.initContainers[0].image: Required value"),
        (json!({"volumeMounts": [{"name": "m"}]}), "spec.volumeMounts[0].mountPath: Required value"),
        (
            json!({"containers": [{"name": "c", "image": "x"}, {"name": "c", "image": "y"}]}),
            "spec.containers[1]: Duplicate value",
        ),
    ] {
        let bad = unique("bad");
        let said = err(cluster().kubectl_stdin(&["apply", "-f", "-"], &template(&bad, &spec)));
        assert!(said.contains(expected), "{spec}: {said}");
    }
    let config = json!({
        "apiVersion": "portcullis.dev/v1alpha1", "kind": "InjectorConfig", "metadata": {"name": unique("bad")},
        "spec": {"defaults": {"imagePullPolicy": "Sometimes"}, "imageRewrites": [{"prefix": "a@b", "replacement": "m/"}]},
    });
    let said = err(cluster().kubectl_stdin(&["apply", "-f", "-"], &config.to_string()));
    assert!(said.contains("spec.defaults.imagePullPolicy: Unsupported value: \"Sometimes\""), "{said}");
    assert!(said.contains("spec.imageRewrites[0].prefix: Invalid value"), "{said}");
}

#[tokio::test]
async fn kubectl_explains_the_fields_and_lists_them_with_their_state() {
    install_crds();
    // The API server publishes a new CRD's OpenAPI a moment after it is
    // Established.
    let explain = |field: &str| {
        let out = cluster().kubectl(&["explain", field]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let explained = eventually("the OpenAPI is published", Duration::from_secs(30), || {
        explain("injectiontemplate.spec.containers")
    })
    .await;
    assert!(explained.contains("Containers appended to the pod's spec.containers"), "{explained}");
    assert!(explained.contains("image\t<string>") || explained.contains("image <string>"), "{explained}");
    let explained = eventually("the OpenAPI is published", Duration::from_secs(30), || {
        explain("injectorconfig.spec.defaults.imagePullPolicy")
    })
    .await;
    assert!(explained.contains("Always") && explained.contains("IfNotPresent"), "{explained}");

    let name = unique("listed");
    let _template = Cleanup::apply("injectiontemplate", &name, &template(&name, &json!({})));
    let listed = ok(cluster().kubectl(&["get", "portcullis"]));
    assert!(listed.contains(&format!("injectiontemplate.portcullis.dev/{name}")), "{listed}");
    let header = ok(cluster().kubectl(&["get", "itpl", &name]));
    let header = header.lines().next().unwrap_or_default().split_whitespace().collect::<Vec<_>>();
    assert_eq!(header, ["NAME", "READY", "REPLICAS", "REASON", "AGE"]);
}
