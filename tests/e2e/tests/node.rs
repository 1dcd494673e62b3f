//! Portcullis where its users run it: the images built by a real Docker
//! daemon (`scripts/images`), loaded into a real node (containerd, runc,
//! kubelet, kube-proxy, CoreDNS) and `deploy/overlays/dev` applied with
//! kubectl, then its policies once the CRDs are Established, as the
//! install docs say; every policy and injector configuration becomes
//! Ready. The three services run as pods; the API server reaches the
//! webhooks through their Services; the webhooks get their certificates
//! from the in-cluster cert-manager over gRPC through its Service.
//!
//! One test, in phases, because every phase needs the same running
//! deployment and the fault phases would disturb any test beside them.
//! A second `up --node` runs beside the first phases: it must refuse,
//! and leave this node running.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use portcullis_e2e::{
    Cluster, cluster_with_node, decode_base64 as decode, err, eventually, jaeger_traces_at, ok, repo,
};
use serde_json::Value;

const NS: &str = "portcullis-system";
const APPS: &str = "shop";
const PAUSE: &str = "localhost/portcullis/pause:dev";

fn phase(what: &str) {
    eprintln!(
        "[node test {:?}] {what}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("a clock after 1970")
    );
}

fn json(cluster: &Cluster, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&ok(cluster.kubectl(&args))).expect("JSON of the expected shape")
}

fn pods(cluster: &Cluster, namespace: &str, selector: &str) -> Vec<Value> {
    json(cluster, &["get", "pods", "-n", namespace, "-l", selector])["items"].as_array().cloned().unwrap_or_default()
}

fn is_ready(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn name(object: &Value) -> String {
    object["metadata"]["name"].as_str().expect("a string field").to_owned()
}

/// The host PID of a container, from the node's containerd.
fn container_pid(cluster: &Cluster, container_id: &str) -> u32 {
    let socket = Path::new(cluster.var("PORTCULLIS_CP_DIR")).join("node/containerd.sock");
    let out = ok(Command::new("ctr")
        .args(["-a", socket.to_str().expect("a UTF-8 path"), "-n", "k8s.io", "tasks", "ls"])
        .output()
        .expect("running a command"));
    let id = container_id.trim_start_matches("containerd://");
    let line = out.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("no task {id} in:\n{out}"));
    line.split_whitespace().nth(1).expect("the expected format").parse().expect("a number")
}

/// Creates pods `<prefix>-N` in `APPS` until stopped; each result is
/// whether the create succeeded and the pod came back injected. No webhook
/// call may fail meanwhile.
struct Creates {
    prefix: &'static str,
    failed_calls_before: usize,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<Vec<(String, Result<bool, String>)>>,
}

impl Creates {
    fn start(cluster: &'static Cluster, prefix: &'static str) -> Self {
        let failed_calls_before = failed_webhook_calls(cluster).len();
        let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let (flag, count) = (stop.clone(), done.clone());
        let handle = std::thread::spawn(move || {
            let mut results = Vec::new();
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                n += 1;
                let name = format!("{prefix}-{n}");
                let out = cluster.kubectl(&["run", &name, "-n", APPS, "--image", PAUSE, "-o", "json"]);
                let result = if out.status.success() {
                    let pod: Value = serde_json::from_slice(&out.stdout).expect("JSON of the expected shape");
                    Ok(pod["metadata"]["annotations"]["portcullis.dev/status"].is_string())
                } else {
                    Err(String::from_utf8_lossy(&out.stderr).into_owned())
                };
                results.push((name, result));
                count.fetch_add(1, Ordering::Relaxed);
            }
            results
        });
        Self { prefix, failed_calls_before, stop, done, handle }
    }

    /// Waits until `more` creates have been answered after this call.
    async fn wait_for(&self, more: usize) {
        let target = self.done.load(Ordering::Relaxed) + more;
        eventually(&format!("{target} {} creates answered", self.prefix), Duration::from_secs(120), || {
            (self.done.load(Ordering::Relaxed) >= target).then_some(())
        })
        .await;
    }

    /// Stops, and checks that every create succeeded and was injected, and
    /// that the API server called every webhook without a failure.
    fn stop(self, cluster: &Cluster) {
        let prefix = self.prefix;
        self.stop.store(true, Ordering::Relaxed);
        let results = self.handle.join().expect("the thread did not panic");
        let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
        let bare: Vec<_> = results.iter().filter(|(_, r)| matches!(r, Ok(false))).map(|(n, _)| n).collect();
        let calls: Vec<_> = failed_webhook_calls(cluster).into_iter().skip(self.failed_calls_before).collect();
        assert!(failed.is_empty(), "{} of {} creates failed: {failed:?}\n{calls:#?}", failed.len(), results.len());
        assert!(bare.is_empty(), "pods admitted without their sidecar: {bare:?}\n{calls:#?}");
        assert!(calls.is_empty(), "webhook calls failed (and were ignored) during the creates: {calls:#?}");
        let selector = format!("run in ({})", results.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(","));
        ok(cluster.kubectl(&["delete", "pods", "-n", APPS, "-l", &selector, "--wait=false"]));
        eprintln!(
            "[node test] {prefix}: {} pods created, all injected, no create or webhook call failed",
            results.len()
        );
    }
}

/// The API server's log lines about webhook calls that failed: under
/// `failurePolicy: Ignore` (the dev overlay) the admission goes on without
/// the webhook, and only this log says so.
fn failed_webhook_calls(cluster: &Cluster) -> Vec<String> {
    let log = Path::new(cluster.var("PORTCULLIS_CP_DIR")).join("logs/kube-apiserver.log");
    let text = std::fs::read_to_string(&log).unwrap_or_else(|err| panic!("reading {}: {err}", log.display()));
    text.lines().filter(|l| l.contains("Failed calling webhook")).map(str::to_owned).collect()
}

async fn in_jaeger(jaeger_ip: &str, service: &str, operation: &str) {
    let (base, query) =
        (format!("http://{jaeger_ip}:16686"), format!("service={service}&operation={operation}&lookback=1h&limit=5"));
    eventually(&format!("{service} {operation} traces in the in-cluster Jaeger"), Duration::from_secs(60), || {
        (!jaeger_traces_at(&base, &query).is_empty()).then_some(())
    })
    .await;
}

/// `control-plane.sh up DIR --node` for a second directory while this node
/// runs, as a second `scripts/dev up --node` does. It finds the bridge held
/// and waits (60 s) for a node being taken down before it gives up; the
/// next phases run meanwhile. Its own watchdog stops anything it would
/// wrongly start.
fn second_up() -> tokio::task::JoinHandle<std::process::Output> {
    let dir = std::env::temp_dir().join(format!("portcullis-e2e-second-{}", std::process::id()));
    let owner = std::process::id().to_string();
    tokio::task::spawn_blocking(move || {
        Command::new(repo().join("scripts/control-plane.sh"))
            .args(["up", dir.to_str().expect("a UTF-8 path"), "--owner", &owner, "--node"])
            .output()
            .expect("running scripts/control-plane.sh")
    })
}

fn lease_holder(cluster: &Cluster) -> String {
    ok(cluster.kubectl(&["get", "lease", "portcullis-cert-manager", "-n", NS, "-o", "jsonpath={.spec.holderIdentity}"]))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dev_overlay_runs_as_pods_on_a_real_node() {
    let cluster: &'static Cluster = cluster_with_node();
    let started = Instant::now();

    phase("the images loaded into the node, kubectl apply -k deploy/overlays/dev, every Deployment rolled out");
    let deploy = Command::new(repo().join("scripts/node.sh"))
        .args(["deploy", cluster.var("PORTCULLIS_CP_DIR")])
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    ok(deploy);
    let deployments = json(cluster, &["get", "deployments", "-n", NS]);
    let names: Vec<String> = deployments["items"].as_array().unwrap().iter().map(name).collect();
    assert_eq!(names.len(), 5, "jaeger, the three services and the audit: {names:?}");

    phase("the CRDs Established, kubectl apply -k deploy/overlays/dev/policies, every policy and configuration Ready");
    ok(cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "-l",
        "app.kubernetes.io/part-of=portcullis",
        "--timeout=60s",
    ]));
    let policies = repo().join("deploy/overlays/dev/policies");
    ok(cluster.kubectl(&["apply", "-k", policies.to_str().expect("a UTF-8 path")]));
    for kind in ["validatorpolicy", "injectorconfig"] {
        ok(cluster.kubectl(&["wait", "--for=condition=Ready", kind, "--all", "--timeout=120s"]));
    }
    let listed = ok(cluster.kubectl(&["get", "portcullis"]));
    assert!(listed.contains("replicas") && listed.contains("sidecars") && !listed.contains("False"), "{listed}");
    // Ready means in force in every replica: each webhook pod reports what
    // it enforces in its own WebhookReplica, named after it.
    let reports: Vec<String> =
        json(cluster, &["get", "webhookreplicas", "-n", NS])["items"].as_array().unwrap().iter().map(name).collect();
    for pod in pods(cluster, NS, "app.kubernetes.io/name in (portcullis-injector,portcullis-validator)") {
        assert!(reports.contains(&name(&pod)), "no WebhookReplica for {}: {reports:?}", name(&pod));
    }

    // caBundle set by the in-cluster cert-manager.
    for config in
        ["mutatingwebhookconfiguration/portcullis-injector", "validatingwebhookconfiguration/portcullis-validator"]
    {
        let bundle = eventually(&format!("caBundle of {config}"), Duration::from_secs(60), || {
            let out = cluster.kubectl(&["get", config, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}"]);
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (!text.is_empty()).then_some(text)
        })
        .await;
        assert!(decode(&bundle).contains("BEGIN CERTIFICATE"), "{config}: {bundle}");
    }
    // The Lease is held by one of the cert-manager pods.
    let cert_managers: Vec<String> =
        pods(cluster, NS, "app.kubernetes.io/name=portcullis-cert-manager").iter().map(name).collect();
    let holder = lease_holder(cluster);
    assert!(cert_managers.contains(&holder), "Lease holder {holder:?} is not one of {cert_managers:?}");

    phase("the pods run as non-root with read-only root filesystems, probes passing (checked from the node)");
    for pod in pods(cluster, NS, "app.kubernetes.io/part-of=portcullis") {
        assert!(is_ready(&pod), "{} is not Ready", name(&pod));
        let spec = &pod["spec"]["containers"][0];
        assert!(spec["readinessProbe"].is_object() && spec["livenessProbe"].is_object(), "{}: no probes", name(&pod));
        for status in pod["status"]["containerStatuses"].as_array().unwrap() {
            // Liveness probes passing: never restarted.
            assert_eq!(status["restartCount"], 0, "{}: {status}", name(&pod));
            let pid = container_pid(cluster, status["containerID"].as_str().unwrap());
            let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let uid = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap();
            assert!(uid.split_whitespace().skip(1).all(|id| id == "65532"), "{}: {uid}", name(&pod));
            let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
            let root = mounts.lines().find(|l| l.split_whitespace().nth(4) == Some("/")).unwrap();
            let options = root.split_whitespace().nth(5).unwrap();
            assert!(options.split(',').any(|o| o == "ro"), "{}: root mounted {options}", name(&pod));
        }
    }

    phase("a second `control-plane.sh up --node` started beside this node (checked after the traces)");
    let second = second_up();

    phase("a pod in an opted-in namespace gets its sidecar and runs");
    ok(cluster.kubectl(&["create", "namespace", APPS]));
    ok(cluster.kubectl(&["label", "namespace", APPS, "portcullis.dev/inject=enabled"]));
    ok(cluster.kubectl(&["run", "app", "-n", APPS, "--image", PAUSE]));
    ok(cluster.kubectl(&["wait", "--for=condition=Ready", "pod/app", "-n", APPS, "--timeout=120s"]));
    let pod = json(cluster, &["get", "pod", "app", "-n", APPS]);
    let sidecar = &pod["spec"]["initContainers"][0];
    assert_eq!(sidecar["name"], "portcullis-proxy", "{pod}");
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert!(pod["metadata"]["annotations"]["portcullis.dev/status"].is_string(), "{pod}");
    let sidecar_status = &pod["status"]["initContainerStatuses"][0];
    assert_eq!(sidecar_status["started"], true, "{sidecar_status}");
    assert!(sidecar_status["state"]["running"].is_object(), "{sidecar_status}");
    assert!(pod["status"]["containerStatuses"][0]["state"]["running"].is_object(), "{pod}");

    phase("the validator denies a bad Deployment");
    let denied = err(cluster.kubectl(&["create", "deployment", "web", "-n", APPS, "--image", PAUSE, "--replicas=1"]));
    assert!(denied.contains("denied the request"), "{denied}");
    assert!(denied.contains("spec.replicas is 1, below the minimum of 2"), "{denied}");

    phase("the audit pod reports the running pod: kubectl get reports");
    let report = eventually("a report for the apps namespace", Duration::from_secs(120), || {
        let out = cluster.kubectl(&["get", "report", "portcullis-validator", "-n", APPS, "-o", "json"]);
        let report: Value = serde_json::from_slice(&out.stdout).ok()?;
        let results = report["results"].as_array()?;
        results.iter().any(|r| r["resources"][0]["name"] == "app").then_some(report)
    })
    .await;
    let pass = report["summary"]["pass"].as_u64().unwrap_or_default();
    assert!(pass >= 1, "the pod passes the pod security and image policies: {report}");
    let listed = ok(cluster.kubectl(&["get", "reports", "-A"]));
    assert!(listed.contains(APPS) && listed.contains("PASS"), "{listed}");

    phase("traces from the webhook pods reach the in-cluster Jaeger");
    let jaeger = pods(cluster, NS, "app.kubernetes.io/name=jaeger");
    let jaeger_ip = jaeger[0]["status"]["podIP"].as_str().unwrap().to_owned();
    for service in ["portcullis-injector", "portcullis-validator"] {
        in_jaeger(&jaeger_ip, service, "admission").await;
    }

    phase("the second `up --node` refused, naming this node, which still runs");
    let out = second.await.expect("the task did not panic");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second up beside a running node succeeded:\n{said}");
    let dir = cluster.var("PORTCULLIS_CP_DIR");
    assert!(said.contains(&format!("belongs to a running node in {dir}")), "{said}");
    let bridge = std::fs::read_to_string("/sys/class/net/pcbr0/ifalias").expect("the node's bridge");
    assert_eq!(bridge.trim(), dir, "the bridge's owner");
    ok(cluster.kubectl(&["wait", "--for=condition=Ready", "node/portcullis-node", "--timeout=10s"]));
    let down: Vec<String> = pods(cluster, NS, "app.kubernetes.io/part-of=portcullis")
        .into_iter()
        .filter(|p| !is_ready(p))
        .map(|p| name(&p))
        .collect();
    assert!(down.is_empty(), "pods not Ready after the second up: {down:?}");

    phase("a webhook pod of each kind deleted while pods are being created");
    let creates = Creates::start(cluster, "during-delete");
    creates.wait_for(3).await;
    let mut deleted = Vec::new();
    for app in ["portcullis-injector", "portcullis-validator"] {
        let victim = name(&pods(cluster, NS, &format!("app.kubernetes.io/name={app}"))[0]);
        ok(cluster.kubectl(&["delete", "pod", &victim, "-n", NS, "--wait=false"]));
        deleted.push(victim);
    }
    for app in ["portcullis-injector", "portcullis-validator"] {
        eventually(&format!("{app}: two Ready pods again, the deleted one gone"), Duration::from_secs(120), || {
            let all = pods(cluster, NS, &format!("app.kubernetes.io/name={app}"));
            let ready = all.iter().filter(|p| is_ready(p)).count();
            (ready == 2 && !all.iter().any(|p| deleted.contains(&name(p)))).then_some(())
        })
        .await;
    }
    creates.wait_for(3).await;
    creates.stop(cluster);

    phase("the cert-manager leader deleted during a CA rotation");
    let secret = || json(cluster, &["get", "secret", "portcullis-webhook-ca", "-n", NS])["data"].clone();
    let old_ca = decode(secret()["tls.crt"].as_str().unwrap());
    let creates = Creates::start(cluster, "during-rotation");
    ok(cluster.kubectl(&["annotate", "secret", "portcullis-webhook-ca", "-n", NS, "portcullis.dev/rotate=now"]));
    eventually("a new CA made and trusted", Duration::from_secs(60), || secret()["next.crt"].is_string().then_some(()))
        .await;
    let leader = lease_holder(cluster);
    ok(cluster.kubectl(&["delete", "pod", &leader, "-n", NS, "--wait=false"]));
    let new_leader = eventually("another replica takes the Lease", Duration::from_secs(90), || {
        let holder = lease_holder(cluster);
        (!holder.is_empty() && holder != leader).then_some(holder)
    })
    .await;
    eprintln!("[node test] Lease: {leader} -> {new_leader}");
    eventually("the new leader finishes the rotation: the new CA signs", Duration::from_secs(180), || {
        let data = secret();
        let current = decode(data["tls.crt"].as_str()?);
        (current != old_ca && data["next.crt"].is_null() && data["previous.crt"].is_string()).then_some(())
    })
    .await;
    for app in ["portcullis-injector", "portcullis-validator"] {
        ok(cluster.kubectl(&["rollout", "status", "-n", NS, &format!("deployment/{app}"), "--timeout=60s"]));
    }
    creates.wait_for(3).await;
    creates.stop(cluster);
    // The cert-manager's first certificates may be issued before Jaeger
    // runs; each rotation step is a trace of its own.
    in_jaeger(&jaeger_ip, "portcullis-cert-manager", "rotate%20CA").await;
    phase(&format!("done in {:?}", started.elapsed()));
}
