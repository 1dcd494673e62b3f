//! deploy/components/monitoring as an operator relies on it: the alert
//! rules pass `promtool check rules` and our `promtool test rules` unit
//! tests; a real Prometheus loads them, scrapes the running injector,
//! validator, cert-manager and audit, and every metric that a rule or a
//! dashboard panel queries is among what it scraped (a query naming a metric
//! that no service exports fails here).

use std::collections::BTreeSet;
use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use portcullis_e2e::cert_manager::Setup;
use portcullis_e2e::webhook::{Kind, Webhook};
use portcullis_e2e::{Process, cluster, eventually, metric, ok, render_with_component, repo, unique};
use portcullis_test_support::http;
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

fn component(file: &str) -> PathBuf {
    repo().join("deploy/components/monitoring").join(file)
}

/// A Prometheus tool built by `scripts/build-control-plane.sh prometheus`.
fn tool(name: &str) -> PathBuf {
    let path = Path::new(cluster().var("PORTCULLIS_CP_BIN")).join(name);
    assert!(path.exists(), "{} is missing: run scripts/build-control-plane.sh prometheus", path.display());
    path
}

/// The PrometheusRule's `.spec`: a Prometheus rule file.
fn rule_file(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(component("prometheusrule.yaml")).expect("reading a file of the repository");
    let rule: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML of the expected shape");
    let path = dir.join("portcullis.rules.yml");
    std::fs::write(&path, serde_yaml::to_string(&rule["spec"]).expect("writing test files"))
        .expect("writing test files");
    path
}

fn run(command: &mut Command) -> String {
    let out = command.output().expect("running a command");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = tempfile::tempdir().unwrap();
    let rules = rule_file(dir.path());
    let checked = run(Command::new(tool("promtool")).args(["check", "rules"]).arg(&rules));
    assert!(checked.contains("SUCCESS: 9 rules found"), "{checked}");
    std::fs::copy(component("tests/alerts.test.yaml"), dir.path().join("alerts.test.yaml")).unwrap();
    let tested =
        run(Command::new(tool("promtool")).current_dir(dir.path()).args(["test", "rules", "alerts.test.yaml"]));
    assert!(tested.contains("SUCCESS"), "{tested}");

    // The component renders in an overlay: PodMonitor, PrometheusRule and
    // the dashboard ConfigMap for Grafana's sidecar.
    let rendered = render_with_component("prod", "monitoring");
    for wanted in ["kind: PodMonitor", "kind: PrometheusRule", "grafana_dashboard: \"1\"", "dashboard.json: |"] {
        assert!(rendered.contains(wanted), "the monitoring component renders {wanted}");
    }
}

/// Every `portcullis_*` metric name in a PromQL expression.
fn metric_names(expr: &str, into: &mut BTreeSet<String>) {
    let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
    into.extend(words.filter(|w| w.starts_with("portcullis_")).map(str::to_owned));
}

/// Every metric the rules and the dashboard query.
fn queried_metrics() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let rules: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(component("prometheusrule.yaml")).expect("reading a file of the repository"),
    )
    .expect("reading a file of the repository");
    for group in rules["spec"]["groups"].as_sequence().expect("a list field") {
        for rule in group["rules"].as_sequence().expect("a list field") {
            metric_names(rule["expr"].as_str().expect("a string field"), &mut names);
        }
    }
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(component("dashboard.json")).expect("reading a file of the repository"),
    )
    .expect("reading a file of the repository");
    for panel in dashboard["panels"].as_array().expect("a list field") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            metric_names(target["expr"].as_str().expect("a string field"), &mut names);
        }
    }
    names
}

/// A Prometheus on a port it picks; returns it with its address, read from
/// its "Listening on" log line.
fn prometheus(config: &Path, dir: &Path) -> (Process, SocketAddr) {
    let mut child = Command::new(tool("prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .args(["--web.listen-address=127.0.0.1:0", "--log.level=info"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running a command");
    let stderr = child.stderr.take().expect("the stream is piped");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("msg=\"Listening on\"")
                && let Some(addr) = line.split("address=").nth(1).and_then(|a| a.split_whitespace().next())
                && let Ok(addr) = addr.parse::<SocketAddr>()
            {
                let _ = sender.send(addr);
            }
            if line.contains("level=ERROR") {
                eprintln!("prometheus: {line}");
            }
        }
    });
    let addr = receiver.recv_timeout(MINUTE).expect("Prometheus did not say where it listens");
    (Process::from_child(child), addr)
}

fn get(url: &str) -> Value {
    http::get_ok(url).and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default()
}

#[tokio::test]
async fn prometheus_scrapes_every_metric_the_rules_and_the_dashboard_query() {
    let cluster = cluster();
    // The cert-manager with an injector that takes its certificate from it.
    let clients = "    - identity: portcullis-system/webhook\n      dnsNames: [webhook.portcullis-system.svc]\n      ipAddresses: [127.0.0.1]\n";
    let setup = Setup::new(cluster, clients);
    let cert_manager = setup.start(cluster, "cert-manager-0", &[]).await;
    let injector = setup.injector(cluster, &cert_manager, &[]).await;
    // A request the cert-manager refuses: a name the client may not have.
    let refused = portcullis_certs_client::Settings::new(
        cert_manager.url(),
        setup.path("ca.crt"),
        setup.path("token"),
        &["kubernetes.default.svc"],
    );
    assert!(portcullis_certs_client::issue(&refused).await.is_err());

    // The validator, with a per-call CEL limit so low that every CEL
    // expression is stopped (the budget series exists), and the audit over
    // a namespace with a Deployment that breaks the shipped policies.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("validator.yaml");
    std::fs::copy(repo().join("deploy/base/policies/validator.yaml"), &policy).unwrap();
    let validator = Webhook::start_with(Kind::Validator, &policy, &["--cel-per-call-limit", "1"]).await;
    let ns = unique("monitoring");
    ok(cluster.kubectl(&["create", "namespace", &ns]));
    ok(cluster.kubectl(&["create", "deployment", "web", "-n", &ns, "--image", "nginx", "--replicas", "1"]));
    portcullis_e2e::audit::install_reports();
    let audit_policy = dir.path().join("audit.yaml");
    std::fs::copy(&policy, &audit_policy).unwrap();
    let (_audit, audit_admin) = portcullis_e2e::audit::start(&audit_policy, "audit-0", &unique("lease"), &[]);

    // Traffic: an injection and a denial.
    let ca = reqwest::Certificate::from_pem(&std::fs::read(setup.path("ca.crt")).unwrap()).unwrap();
    let to_injector =
        reqwest::Client::builder().tls_built_in_root_certs(false).add_root_certificate(ca).build().unwrap();
    let pod = std::fs::read_to_string(repo().join("services/injector/tests/data/pod-v1.json")).unwrap();
    let url = format!("https://127.0.0.1:{}/mutate", injector.addr.port());
    let answer: Value = to_injector.post(&url).body(pod).send().await.unwrap().json().await.unwrap();
    assert!(answer["response"]["patch"].is_string(), "the pod was injected: {answer}");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
    });
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "5a1e0c2e-0000-4000-8000-000000000001",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": "shop", "name": "web", "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": deployment,
        }
    });
    let answer: Value =
        validator.client().post(validator.url()).json(&review).send().await.unwrap().json().await.unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");

    // The audit finds the Deployment; then a broken policy file is refused.
    eventually("the audit's first pass", MINUTE, || {
        (metric(audit_admin, "portcullis_validator_audit_passes_total") >= 1.0).then_some(())
    })
    .await;
    std::fs::write(&audit_policy, "kind: [not a policy").unwrap();
    eventually("the refused reload counted", MINUTE, || {
        let refused = r#"portcullis_config_reloads_total{result="failure"}"#;
        (metric(audit_admin, refused) >= 1.0).then_some(())
    })
    .await;

    // A real Prometheus scrapes all four, with the rules loaded.
    let rules = rule_file(dir.path());
    let targets = [
        ("portcullis-injector", injector.admin),
        ("portcullis-validator", validator.admin),
        ("portcullis-cert-manager", cert_manager.admin),
        ("portcullis-validator-audit", audit_admin),
    ];
    let mut config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [{}]\nscrape_configs:\n",
        rules.display()
    );
    for (job, admin) in targets {
        config.push_str(&format!("  - {{job_name: {job}, static_configs: [{{targets: ['{admin}']}}]}}\n"));
    }
    let config_file = dir.path().join("prometheus.yml");
    std::fs::write(&config_file, config).unwrap();
    let (_prometheus, addr) = prometheus(&config_file, dir.path());
    let api = format!("http://{addr}/api/v1");
    eventually("every target up", MINUTE, || {
        let body = get(&format!("{api}/targets"));
        let active = body["data"]["activeTargets"].as_array()?.clone();
        (active.len() == targets.len() && active.iter().all(|t| t["health"] == "up")).then_some(())
    })
    .await;
    let rules = get(&format!("{api}/rules"));
    let groups = rules["data"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "{rules}");
    for rule in groups.iter().flat_map(|g| g["rules"].as_array().unwrap()) {
        assert_eq!(rule["health"], "ok", "{rule}");
    }

    let wanted = queried_metrics();
    assert!(wanted.len() >= 15, "the rules and the dashboard query {wanted:?}");
    // A few scrapes for every series to arrive; then whatever is missing is
    // a query of a metric that no service exports.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let missing = loop {
        let body = get(&format!("{api}/label/__name__/values"));
        let scraped: BTreeSet<String> =
            body["data"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(str::to_owned)).collect();
        let missing: Vec<String> = wanted.iter().filter(|name| !scraped.contains(*name)).cloned().collect();
        if missing.is_empty() || std::time::Instant::now() > deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(missing.is_empty(), "queried by the rules or the dashboard, exported by no service: {missing:?}");
}
