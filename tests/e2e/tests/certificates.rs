//! A webhook that takes its serving certificate from the cert-manager, in
//! each mode, called by the real API server with that certificate.
//! Standalone: not ready until the certificate arrives, serving it to
//! clients that trust only the cert-manager's CA (the API server among
//! them), and serving on when the cert-manager goes away.

use std::process::{Command, Stdio};
use std::time::Duration;

use portcullis_e2e::cert_manager::register_injector;
use portcullis_e2e::{Process, binaries, cluster, eventually, jaeger_traces, repo, spans_of};
use portcullis_test_support::http;

#[tokio::test]
async fn the_injector_serves_a_certificate_from_the_cert_manager() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "injector-token").unwrap();
    std::fs::write(
        dir.path().join("cert-manager.yaml"),
        format!(
            "apiVersion: portcullis.dev/v1alpha1\nkind: CertManagerConfig\nspec:\n  clients:\n    - identity: injector\n      tokenFile: {}\n      dnsNames: [localhost]\n      ipAddresses: [127.0.0.1]\n",
            dir.path().join("token").display()
        ),
    )
    .unwrap();
    let jaeger = cluster().var("PORTCULLIS_JAEGER_OTLP").to_owned();
    // The first start binds port 0; a restart takes the ports it had, since
    // the webhook was given its URL.
    let cert_manager = |listen: &str, admin: &str| {
        let mut command = Command::new(binaries().join("portcullis-cert-manager"));
        command
            .arg("serve")
            .arg("--config")
            .arg(dir.path().join("cert-manager.yaml"))
            .arg("--ca-dir")
            .arg(dir.path().join("ca"))
            .arg("--publish-ca")
            .arg(dir.path().join("ca.crt"))
            .args(["--listen", listen, "--admin-listen", admin])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &jaeger)
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .stderr(Stdio::null());
        Process::spawn_reporting(command, &["grpc", "admin"], false)
    };
    // The CA exists before the webhook needs to trust the cert-manager.
    let (first, addrs) = cert_manager("127.0.0.1:0", "127.0.0.1:0");
    let (cm_addr, cm_admin) = (addrs[0].to_string(), addrs[1].to_string());
    eventually("the CA is made", Duration::from_secs(10), || dir.path().join("ca.crt").exists().then_some(())).await;
    drop(first);

    let mut injector = Command::new(binaries().join("portcullis-injector"));
    injector
        .arg("serve")
        .arg("--config")
        .arg(repo().join("deploy/base/policies/injector.yaml"))
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--cert-manager-url", &format!("https://{cm_addr}")])
        .arg("--cert-manager-ca-file")
        .arg(dir.path().join("ca.crt"))
        .arg("--cert-manager-token-file")
        .arg(dir.path().join("token"))
        .args(["--cert-names", "localhost,127.0.0.1"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &jaeger)
        .env("OTEL_SERVICE_NAME", "portcullis-injector")
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .stderr(Stdio::null());
    let (injector_process, addrs) = Process::spawn_reporting(injector, &["webhook", "admin"], false);
    let (hook, admin) = (addrs[0], addrs[1]);
    let ready = || http::get(&format!("http://{admin}/readyz")).map(|answer| answer.status);
    let status = eventually("the admin port answers", Duration::from_secs(10), ready).await;
    assert_eq!(status, 503, "not ready without a certificate");

    let (cm, _) = cert_manager(&cm_addr, &cm_admin);
    eventually("ready once the certificate arrives", Duration::from_secs(20), || ready().filter(|s| *s == 200)).await;
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("ca.crt")).unwrap()).unwrap();
    let client = reqwest::Client::builder().tls_built_in_root_certs(false).add_root_certificate(ca).build().unwrap();
    let body = std::fs::read(repo().join("services/injector/tests/data/pod-v1.json")).unwrap();
    let response =
        client.post(format!("https://127.0.0.1:{}/mutate", hook.port())).body(body.clone()).send().await.unwrap();
    assert_eq!(response.status(), 200);

    // The API server's own client, trusting only the standalone CA, calls
    // the webhook with the standalone mode's certificate.
    let cluster = cluster();
    let case = "standalone-certificate";
    let _namespace = portcullis_e2e::cleanup::Cleanup::of("namespace", case);
    portcullis_e2e::ok(cluster.kubectl(&["create", "namespace", case]));
    portcullis_e2e::ok(cluster.kubectl(&["label", "namespace", case, &format!("e2e.portcullis.dev/case={case}")]));
    let ca_pem = std::fs::read_to_string(dir.path().join("ca.crt")).unwrap();
    let _registered = register_injector("portcullis-injector-standalone", case, hook, Some(&ca_pem));
    let injected = || {
        let out = cluster.kubectl(&["run", "probe", "--image=nginx", "-n", case, "--dry-run=server", "-o", "json"]);
        String::from_utf8_lossy(&out.stdout).contains("portcullis.dev/status").then_some(())
    };
    eventually("the API server calls the webhook over the standalone certificate", Duration::from_secs(30), injected)
        .await;

    // The issuance is one trace: the injector's client span, the
    // cert-manager's `issue` span under it.
    let trace = eventually("the issuance trace reaches Jaeger", Duration::from_secs(30), || {
        // This test's caller only: the Kubernetes-mode test shares the Jaeger.
        jaeger_traces(
            "service=portcullis-cert-manager&operation=issue&lookback=1h&limit=20&tags=%7B%22identity%22%3A%22injector%22%7D",
        )
        .into_iter()
        .find(|t| spans_of(t).iter().any(|(service, _)| service == "portcullis-injector"))
    })
    .await;
    let spans = trace["spans"].as_array().unwrap();
    let client = spans.iter().find(|s| s["operationName"] == "request certificate").unwrap();
    let server = spans.iter().find(|s| s["operationName"] == "issue").unwrap();
    assert_eq!(server["references"][0]["spanID"], client["spanID"], "the cert-manager continues the webhook's trace");
    let identity = server["tags"].as_array().unwrap().iter().find(|t| t["key"] == "identity").unwrap();
    assert_eq!(identity["value"], "injector");

    // The cert-manager goes away and a renewal falls due (SIGHUP forces
    // it): the renewal fails, and the webhook keeps serving its certificate
    // and stays ready.
    drop(cm);
    let hangup = |process: &Process| {
        assert!(Command::new("kill").args(["-HUP", &process.id().to_string()]).status().unwrap().success());
    };
    let mark = injector_process.log_mark();
    hangup(&injector_process);
    // Evidence that the renewal was tried and failed while serving on.
    let failed = injector_process.wait_for_log_since(mark, "certificate request failed", Duration::from_secs(30));
    assert!(failed.contains("serving_previous=true"), "{failed}");
    let fresh = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("ca.crt")).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    let response = fresh.post(format!("https://127.0.0.1:{}/mutate", hook.port())).body(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(ready(), Some(200));

    // Back again: the webhook's retries (with backoff) get the renewal.
    let _back = cert_manager(&cm_addr, &cm_admin);
    let issued = || (http::metric(cm_admin.parse().ok()?, "portcullis_certs_issued_total")? >= 1.0).then_some(());
    eventually("the failed renewal is retried once the cert-manager is back", Duration::from_secs(40), issued).await;
}

/// Kubernetes mode: the webhook's ServiceAccount token checked with
/// TokenReview, the request turned into a real CertificateSigningRequest
/// of the own signer, approved, signed by the cert-manager's signer with
/// the CA it keeps in a Secret, and cleaned up.
#[tokio::test]
async fn kubernetes_mode_issues_through_a_real_certificate_signing_request() {
    use portcullis_certs_client::{IssueError, Settings, issue};
    use portcullis_e2e::cert_manager::{NAMESPACE, Setup};
    use portcullis_e2e::ok;

    let cluster = cluster();
    // The cert-manager runs as its ServiceAccount with exactly the RBAC
    // that deploy/ grants it, not as cluster-admin.
    let ns = NAMESPACE.to_owned();
    let setup = Setup::new(
        cluster,
        &format!("    - identity: {ns}/webhook\n      dnsNames: [webhook.{ns}.svc]\n      ipAddresses: [127.0.0.1]\n"),
    );
    let wrong = ok(cluster.kubectl(&["create", "token", "webhook", "-n", &ns, "--audience", "somebody-else"]));
    std::fs::write(setup.path("wrong-token"), wrong.trim()).unwrap();
    let primary = setup.start(cluster, "replica-one", &[]).await;
    let args = |token_file: &str, names: &[&str]| {
        Settings::new(primary.url(), setup.path("ca.crt"), setup.path(token_file), names)
    };

    let issued = issue(&args("token", &[&format!("webhook.{ns}.svc"), "127.0.0.1"])).await.unwrap();
    let secret_ca =
        ok(cluster.kubectl(&["get", "secret", "portcullis-webhook-ca", "-n", &ns, "-o", "jsonpath={.data.tls\\.crt}"]));
    use base64::Engine as _;
    let secret_ca =
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(secret_ca.trim()).unwrap()).unwrap();
    assert_eq!(issued.ca_bundle_pem, secret_ca, "the trust bundle is the CA kept in the Secret");
    let published = ok(cluster.kubectl(&[
        "get",
        "configmap",
        "portcullis-webhook-ca-bundle",
        "-n",
        &ns,
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]));
    assert_eq!(published.trim(), secret_ca.trim(), "the CA certificate, not its key, is published for the webhooks");
    assert!(
        !ok(cluster.kubectl(&[
            "get",
            "secret",
            "portcullis-webhook-ca",
            "-n",
            &ns,
            "-o",
            "jsonpath={.data.tls\\.key}"
        ]))
        .is_empty()
    );
    // One trace: the issue span, the TokenReview, the CSR's creation,
    // approval and deletion, and the signer's signature (joined through the
    // CSR's trace-context annotation).
    let wanted = [
        "issue",
        "TokenReview",
        "create CertificateSigningRequest",
        "approve and wait",
        "sign",
        "write CertificateSigningRequest status",
        "delete CertificateSigningRequest",
    ];
    // Spans arrive one batch at a time: wait for the whole trace.
    eventually("the whole issuance trace in Jaeger", Duration::from_secs(30), || {
        jaeger_traces("service=portcullis-cert-manager&operation=issue&lookback=1h&limit=20")
            .iter()
            .map(spans_of)
            .find(|spans| wanted.iter().all(|w| spans.iter().any(|(_, op)| op == w)))
    })
    .await;

    // A webhook in front: one trace from the injector's certificate request
    // through the cert-manager into the Kubernetes API calls and the signer.
    let injector = setup.injector(cluster, &primary, &[]).await;
    let wanted = [
        ("portcullis-injector", "request certificate"),
        ("portcullis-cert-manager", "issue"),
        ("portcullis-cert-manager", "TokenReview"),
        ("portcullis-cert-manager", "create CertificateSigningRequest"),
        ("portcullis-cert-manager", "sign"),
    ];
    // Spans arrive one batch at a time: wait for the whole trace.
    eventually("the webhook's whole issuance trace in Jaeger", Duration::from_secs(40), || {
        jaeger_traces("service=portcullis-injector&operation=request%20certificate&lookback=1h&limit=20")
            .iter()
            .map(spans_of)
            .find(|spans| wanted.iter().all(|(svc, op)| spans.iter().any(|(s, o)| s == svc && o == op)))
    })
    .await;

    // Pods keep being admitted while the webhook renews its certificate
    // (SIGHUP forces it) under a loop of creates: zero failed creates.
    ok(cluster.kubectl(&["create", "namespace", "renewal"]));
    ok(cluster.kubectl(&["label", "namespace", "renewal", "e2e.portcullis.dev/case=renewal"]));
    let _registered = injector.register("portcullis-injector", "renewal");
    let dry_run = || {
        let out =
            cluster.kubectl(&["run", "probe", "--image=nginx", "-n", "renewal", "--dry-run=server", "-o", "json"]);
        String::from_utf8_lossy(&out.stdout).contains("portcullis.dev/status").then_some(())
    };
    eventually("the injector is used with the caBundle the cert-manager set", Duration::from_secs(30), dry_run).await;
    let issued = || primary.metric("portcullis_certs_issued_total") as u64;
    let before = issued();
    let mut failed = Vec::new();
    for i in 0..30 {
        if i % 10 == 5 {
            let pid = injector.process.id().to_string();
            assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
        }
        let out = cluster.kubectl(&["run", &format!("p{i}"), "--image=nginx", "-n", "renewal"]);
        if !out.status.success() {
            failed.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    assert!(failed.is_empty(), "creates failed during renewal: {failed:?}");
    // The last renewal may still be on its way when the loop ends.
    eventually("three forced renewals", Duration::from_secs(20), || (issued() - before >= 3).then_some(())).await;
    let statuses = ok(cluster.kubectl(&[
        "get",
        "pods",
        "-n",
        "renewal",
        "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.portcullis\\.dev/status}{\"\\n\"}{end}",
    ]));
    assert_eq!(statuses.lines().filter(|l| l.contains("templates")).count(), 30, "every pod was injected");

    // The finished CSR object is gone.
    let left = ok(cluster.kubectl(&[
        "get",
        "csr",
        "-o",
        "jsonpath={.items[*].metadata.annotations.portcullis\\.dev/identity}",
    ]));
    assert!(!left.contains(&format!("{ns}/webhook")), "CSR objects left behind: {left}");

    // The caBundle controller: a labelled configuration gets the trust
    // bundle, and gets it back after a manual edit; an unlabelled one is
    // left alone.
    let config = |name: &str, labelled: bool| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: {name}\n  labels: {{{}}}\n\
             webhooks:\n  - name: check.{name}.example.com\n    admissionReviewVersions: [v1]\n    sideEffects: None\n    failurePolicy: Ignore\n\
             \x20   clientConfig: {{url: 'https://127.0.0.1:1/validate'}}\n    rules: [{{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}}]\n",
            if labelled { "portcullis.dev/inject-ca: \"true\"" } else { "" }
        )
    };
    // RBAC lets it patch only Portcullis's own configurations, by name.
    let (labelled, plain, foreign) = ("portcullis-validator", "unlabelled", "someone-elses");
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &config(labelled, true)));
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &config(plain, false)));
    ok(cluster.kubectl_stdin(&["apply", "-f", "-"], &config(foreign, true)));
    let bundle_of = |name: &str| {
        let out = cluster.kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            name,
            "-o",
            "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let expected = base64::engine::general_purpose::STANDARD.encode(&secret_ca);
    eventually("caBundle set", Duration::from_secs(30), || (bundle_of(labelled) == expected).then_some(())).await;
    // Someone overwrites the caBundle by hand.
    let tamper = || {
        let bogus = r#"[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"Ym9ndXM="}]"#;
        ok(cluster.kubectl(&["patch", "validatingwebhookconfiguration", labelled, "--type=json", "-p", bogus]));
    };
    tamper();
    eventually("caBundle repaired", Duration::from_secs(30), || (bundle_of(labelled) == expected).then_some(())).await;
    assert_eq!(bundle_of(plain), "", "an unlabelled configuration is not touched");
    assert_eq!(bundle_of(foreign), "", "another team's configuration is out of the cert-manager's reach");

    // What deploy/ lets it do, as the API server's authorizer sees it.
    let can_i = |verb: &str, resource: &str| {
        let out = cluster.kubectl(&[
            "auth",
            "can-i",
            verb,
            resource,
            "--as=system:serviceaccount:portcullis-system:portcullis-cert-manager",
            "-n",
            "portcullis-system",
        ]);
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    // Signer names contain a slash, which `kubectl auth can-i` cannot take
    // as a resource name: ask with a SubjectAccessReview.
    let may = |verb: &str, signer: &str| {
        let review = format!(
            r#"{{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {{
                "user": "system:serviceaccount:portcullis-system:portcullis-cert-manager",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:portcullis-system", "system:authenticated"],
                "resourceAttributes": {{"group": "certificates.k8s.io", "resource": "signers", "verb": "{verb}", "name": "{signer}"}}}}}}"#
        );
        ok(cluster.kubectl_stdin(&["create", "-f", "-", "-o", "jsonpath={.status.allowed}"], &review)).trim() == "true"
    };
    assert!(may("sign", "portcullis.dev/webhook-serving"));
    assert!(may("approve", "portcullis.dev/webhook-serving"));
    assert!(!may("sign", "kubernetes.io/kubelet-serving"), "must not sign for another signer");
    assert!(!may("approve", "kubernetes.io/kube-apiserver-client"), "must not approve for another signer");
    assert!(can_i("get", "secrets/portcullis-webhook-ca"));
    assert!(!can_i("get", "secrets/other-secret"), "must not read other Secrets");
    assert!(!can_i("list", "secrets"));
    assert!(can_i("patch", "validatingwebhookconfigurations/portcullis-validator"));
    assert!(!can_i("patch", "validatingwebhookconfigurations/someone-elses"));
    assert!(!can_i("create", "pods"));

    match issue(&args("wrong-token", &[&format!("webhook.{ns}.svc")])).await {
        Err(IssueError::Refused { code, message }) => {
            assert_eq!(code, tonic::Code::Unauthenticated);
            assert!(message.contains("audience portcullis-cert-manager"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    match issue(&args("token", &["kubernetes.default.svc"])).await {
        Err(IssueError::Refused { code, message }) => {
            assert_eq!(code, tonic::Code::PermissionDenied);
            assert!(
                message.contains(&format!("{ns}/webhook may not have the name kubernetes.default.svc")),
                "{message}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Leader election: this replica holds the Lease; a second replica
    // serves gRPC but waits, and takes over when the first goes away.
    let holder = || {
        let out = cluster.kubectl(&[
            "get",
            "lease",
            "portcullis-cert-manager",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let first = eventually("a leader", Duration::from_secs(20), || Some(holder()).filter(|h| !h.is_empty())).await;
    let second = setup.start(cluster, "replica-two", &[]).await;
    second.process.wait_for_log("standing by: another replica holds the lease", Duration::from_secs(30));
    assert_eq!(holder(), first, "the second replica must not take a held lease");
    drop(primary);
    eventually("the second replica takes over", Duration::from_secs(40), || (holder() == "replica-two").then_some(()))
        .await;
    // ...and now it is the one that repairs caBundles.
    tamper();
    eventually("caBundle repaired by the new leader", Duration::from_secs(30), || {
        (bundle_of(labelled) == expected).then_some(())
    })
    .await;
    drop(second);
}
