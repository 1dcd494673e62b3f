//! A webhook that takes its serving certificate from the cert-manager
//! (standalone mode): not ready until the certificate arrives, serving it
//! to clients that trust only the cert-manager's CA, and serving on when
//! the cert-manager goes away.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use portcullis_e2e::{Process, binaries, eventually, free_addr, repo};

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
    let (cm_addr, cm_admin, hook, admin) = (free_addr(), free_addr(), free_addr(), free_addr());
    let cert_manager = || {
        Process(
            Command::new(binaries().join("portcullis-cert-manager"))
                .arg("serve")
                .arg("--config")
                .arg(dir.path().join("cert-manager.yaml"))
                .arg("--ca-dir")
                .arg(dir.path().join("ca"))
                .args(["--listen", &cm_addr.to_string(), "--admin-listen", &cm_admin.to_string()])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    // The CA exists before the webhook needs to trust the cert-manager.
    let first = cert_manager();
    eventually("the CA is made", Duration::from_secs(10), || dir.path().join("ca/ca.crt").exists().then_some(())).await;
    drop(first);

    let _injector = Process(
        Command::new(binaries().join("portcullis-injector"))
            .arg("serve")
            .arg("--config")
            .arg(repo().join("deploy/base/config/injector.yaml"))
            .args(["--listen", &hook.to_string(), "--admin-listen", &admin.to_string()])
            .args(["--cert-manager-url", &format!("https://127.0.0.1:{}", cm_addr.port())])
            .arg("--cert-manager-ca-file")
            .arg(dir.path().join("ca/ca.crt"))
            .arg("--cert-manager-token-file")
            .arg(dir.path().join("token"))
            .args(["--cert-names", "localhost,127.0.0.1"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ready = || {
        Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &format!("http://{admin}/readyz")])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let status = eventually("the admin port answers", Duration::from_secs(10), || ready().filter(|s| s != "000")).await;
    assert_eq!(status, "503", "not ready without a certificate");

    let cm = cert_manager();
    eventually("ready once the certificate arrives", Duration::from_secs(20), || ready().filter(|s| s == "200")).await;
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("ca/ca.crt")).unwrap()).unwrap();
    let client = reqwest::Client::builder().tls_built_in_root_certs(false).add_root_certificate(ca).build().unwrap();
    let body = std::fs::read(repo().join("services/injector/tests/data/pod-v1.json")).unwrap();
    let response =
        client.post(format!("https://127.0.0.1:{}/mutate", hook.port())).body(body.clone()).send().await.unwrap();
    assert_eq!(response.status(), 200);

    // The cert-manager goes away: the webhook keeps serving its certificate.
    drop(cm);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fresh = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("ca/ca.crt")).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    let response = fresh.post(format!("https://127.0.0.1:{}/mutate", hook.port())).body(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(ready().as_deref(), Some("200"));
}
