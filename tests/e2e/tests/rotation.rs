//! A CA rotation in Kubernetes mode while pods are being created through a
//! webhook that fails closed: the new CA reaches the caBundle first, the
//! webhook moves to it by itself, the old CA stays trusted until it is
//! retired, and not one create fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use portcullis_e2e::cert_manager::{NAMESPACE, Setup};
use portcullis_e2e::{cluster, decode_base64 as decode, eventually, jaeger_traces, ok};

fn count(pem: &str) -> usize {
    pem.matches("BEGIN CERTIFICATE").count()
}

#[tokio::test]
async fn pods_keep_being_admitted_through_a_ca_rotation() {
    let cluster = cluster();
    let setup = Setup::new(cluster, &format!("    - identity: {NAMESPACE}/webhook\n      ipAddresses: [127.0.0.1]\n"));
    // A short overlap so that the test sees every step; production keeps
    // the 10-minute default for the kubelet's ConfigMap refresh.
    let cert_manager = setup.start(cluster, "replica-one", &["--ca-overlap", "8s", "--ca-check-interval", "1s"]).await;
    let injector = setup.injector(cluster, &cert_manager, &[]).await;
    ok(cluster.kubectl(&["create", "namespace", "rotation"]));
    ok(cluster.kubectl(&["label", "namespace", "rotation", "e2e.portcullis.dev/case=rotation"]));
    let _registered = injector.register("portcullis-injector", "rotation");
    let secret = |key: &str| {
        let path = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
        decode(&ok(cluster.kubectl(&["get", "secret", "portcullis-webhook-ca", "-n", NAMESPACE, "-o", &path])))
    };
    let ca_bundle = || {
        let path = "jsonpath={.webhooks[0].clientConfig.caBundle}";
        let out = cluster.kubectl(&["get", "mutatingwebhookconfiguration", "portcullis-injector", "-o", path]);
        decode(&String::from_utf8_lossy(&out.stdout))
    };
    let old = secret("tls.crt");
    eventually("the caBundle is the CA", Duration::from_secs(30), || {
        (ca_bundle() == format!("{}\n", old.trim())).then_some(())
    })
    .await;
    let dry_run = || {
        let out =
            cluster.kubectl(&["run", "probe", "--image=nginx", "-n", "rotation", "--dry-run=server", "-o", "json"]);
        String::from_utf8_lossy(&out.stdout).contains("portcullis.dev/status").then_some(())
    };
    eventually("the injector admits pods", Duration::from_secs(30), dry_run).await;
    assert!(injector.serves_a_certificate_of(&old).await);

    // A loop of creates, from before the rotation until after the old CA
    // has left the bundle.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let creates = {
        let (stop, done) = (stop.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut created, mut failed) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let name = format!("p{created}-{}", failed.len());
                let out = cluster.kubectl(&["run", &name, "--image=nginx", "-n", "rotation"]);
                match out.status.success() {
                    true => created += 1,
                    false => failed.push(String::from_utf8_lossy(&out.stderr).into_owned()),
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
            (created, failed)
        })
    };
    // A few creates before the rotation starts.
    let some_more = |after: usize| {
        let done = done.clone();
        move || (done.load(Ordering::SeqCst) >= after + 3).then_some(())
    };
    eventually("creates before the rotation", Duration::from_secs(30), some_more(0)).await;

    // An operator asks for a rotation.
    ok(cluster.kubectl(&["annotate", "secret", "portcullis-webhook-ca", "-n", NAMESPACE, "portcullis.dev/rotate=now"]));
    // 1. The new CA is trusted first: in the caBundle next to the old one,
    //    while the old one still signs.
    let both = eventually("the new CA joins the caBundle", Duration::from_secs(20), || {
        let bundle = ca_bundle();
        (count(&bundle) == 2).then_some(bundle)
    })
    .await;
    assert!(both.starts_with(old.trim()), "the signing CA comes first");
    let new = both.replacen(&format!("{}\n", old.trim()), "", 1);
    assert_eq!(secret("tls.crt"), old, "the old CA signs during the overlap");
    assert!(injector.serves_a_certificate_of(&old).await, "no renewal while the old CA signs");
    eventually("the cert-manager's clients are told of the new CA too", Duration::from_secs(5), || {
        (count(&std::fs::read_to_string(setup.path("ca.crt")).unwrap()) == 2).then_some(())
    })
    .await;
    let annotations = ok(cluster.kubectl(&[
        "get",
        "secret",
        "portcullis-webhook-ca",
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.metadata.annotations}",
    ]));
    assert!(!annotations.contains("portcullis.dev/rotate"), "the request was taken: {annotations}");

    // 2. After the overlap the new CA signs, and the webhook moves to it
    //    by itself; the old CA stays in the bundle.
    eventually("the new CA signs", Duration::from_secs(30), || (secret("tls.crt").trim() == new.trim()).then_some(()))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !injector.serves_a_certificate_of(&new).await {
        assert!(std::time::Instant::now() < deadline, "the webhook did not move to the new CA");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(!injector.serves_a_certificate_of(&old).await, "the webhook's certificate is the new CA's");
    let bundle = ca_bundle();
    assert!(count(&bundle) == 2 && bundle.contains(old.trim()), "the old CA stays trusted for its certificates");
    let until: i64 = secret("previous.trusted-until").trim().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let longest = 7 * 86_400; // the config's default maxLifetimeSeconds
    assert!(until >= now + longest && until <= now + longest + 400, "kept until its last leaf expires: {until}");

    // 3. The old CA leaves the bundle once its last certificate has
    //    expired. Seven days cannot pass here: bring the recorded time
    //    forward, as the clock would.
    let past = base64_of(&(now - 1).to_string());
    let patch = format!(r#"{{"data": {{"previous.trusted-until": "{past}"}}}}"#);
    ok(cluster.kubectl(&["patch", "secret", "portcullis-webhook-ca", "-n", NAMESPACE, "-p", &patch]));
    eventually("the old CA leaves the caBundle", Duration::from_secs(30), || {
        (ca_bundle() == format!("{}\n", new.trim())).then_some(())
    })
    .await;
    // And a few after the old CA has left.
    let so_far = done.load(Ordering::SeqCst);
    eventually("creates after the old CA left", Duration::from_secs(30), some_more(so_far)).await;
    stop.store(true, Ordering::Relaxed);
    let (created, failed) = creates.join().unwrap();
    assert!(failed.is_empty(), "creates failed during the CA rotation: {failed:?}");
    assert!(created >= 20, "the loop ran through the rotation: {created} creates");
    let statuses = ok(cluster.kubectl(&[
        "get",
        "pods",
        "-n",
        "rotation",
        "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.portcullis\\.dev/status}{\"\\n\"}{end}",
    ]));
    assert_eq!(statuses.lines().filter(|l| l.contains("templates")).count(), created, "every pod was injected");
    eprintln!("CA rotation: {created} pods created through it, none failed");

    // Each step is a trace in Jaeger, saying what was done.
    let steps = eventually("the rotation steps in Jaeger", Duration::from_secs(30), || {
        let traces = jaeger_traces("service=portcullis-cert-manager&operation=rotate%20CA&lookback=1h&limit=20");
        (traces.len() >= 3).then_some(traces)
    })
    .await;
    let said: Vec<String> = steps
        .iter()
        .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
        .flat_map(|span| span["tags"].as_array().cloned().unwrap_or_default())
        .filter(|tag| tag["key"] == "step")
        .filter_map(|tag| tag["value"].as_str().map(str::to_owned))
        .collect();
    for wanted in ["made a new CA on request", "the new CA signs", "the previous CA left the trust bundle"] {
        assert!(said.iter().any(|s| s.contains(wanted)), "no step saying {wanted:?} in {said:?}");
    }
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
