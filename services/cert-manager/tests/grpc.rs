//! The cert-manager binary over real TLS with the real client the webhooks
//! use: issuance, every refusal as a precise status, gRPC health, and the
//! trust-bundle stream.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use portcullis_certs_client::{IssueError, Settings, issue};
use portcullis_proto::certs::v1::certificates_client::CertificatesClient;
use portcullis_proto::certs::v1::{IssueRequest, WatchTrustBundleRequest};
use portcullis_test_support::http;
use portcullis_test_support::process::Process;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

struct CertManager {
    process: Process,
    addr: SocketAddr,
    admin: SocketAddr,
    dir: tempfile::TempDir,
}

/// Starts `command` (a cert-manager on port 0) and reads the addresses it
/// bound from its log.
fn spawn(mut command: Command, dir: tempfile::TempDir) -> CertManager {
    command.args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]).stderr(Stdio::inherit());
    let (process, addrs) = Process::spawn_reporting(command, &["grpc", "admin"], false);
    CertManager { process, addr: addrs[0], admin: addrs[1], dir }
}

fn start() -> CertManager {
    start_with(&[])
}

/// A cert-manager in standalone mode with `extra` flags, publishing its
/// trust bundle to `trust.pem`.
fn start_with(extra: &[&str]) -> CertManager {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("injector-token"), "s3cret-injector-token\n").expect("writing test files");
    std::fs::write(dir.path().join("validator-token"), "s3cret-validator-token\n").expect("writing test files");
    let config = format!(
        "apiVersion: portcullis.dev/v1alpha1\nkind: CertManagerConfig\nspec:\n  defaultLifetimeSeconds: 3600\n  clients:\n\
         \x20   - identity: injector\n      tokenFile: {0}/injector-token\n      dnsNames: [localhost]\n      ipAddresses: [127.0.0.1]\n\
         \x20   - identity: validator\n      tokenFile: {0}/validator-token\n      dnsNames: [validator.local]\n",
        dir.path().display()
    );
    std::fs::write(dir.path().join("config.yaml"), config).expect("writing test files");
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"));
    command
        .arg("serve")
        .arg("--config")
        .arg(dir.path().join("config.yaml"))
        .arg("--ca-dir")
        .arg(dir.path().join("ca"))
        .arg("--publish-ca")
        .arg(dir.path().join("trust.pem"))
        .args(extra);
    let mut cm = spawn(command, dir);
    // Its own published bundle as well as its addresses.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cm.dir.path().join("trust.pem").exists() {
        assert!(cm.process.child.try_wait().expect("running a command").is_none(), "cert-manager exited");
        assert!(Instant::now() < deadline, "cert-manager did not publish its trust bundle");
        std::thread::sleep(Duration::from_millis(50));
    }
    cm
}

fn args(cm: &CertManager, token: &str, names: &[&str]) -> Settings {
    args_for(cm.dir.path(), cm.addr, token, names)
}

/// The webhooks' client settings for the cert-manager at `addr` whose
/// trust bundle is in `dir/trust.pem`.
fn args_for(dir: &Path, addr: SocketAddr, token: &str, names: &[&str]) -> Settings {
    let token_file = dir.join(format!("client-{token}"));
    std::fs::write(&token_file, token).expect("writing test files");
    Settings::new(format!("https://localhost:{}", addr.port()), dir.join("trust.pem"), token_file, names)
}

/// A raw gRPC channel to `cm`, trusting `ca_pem`.
async fn channel(cm: &CertManager, ca_pem: &str) -> tonic::transport::Channel {
    Endpoint::from_shared(format!("https://localhost:{}", cm.addr.port()))
        .expect("a valid endpoint address")
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem)))
        .expect("a CA certificate")
        .connect()
        .await
        .expect("the cert-manager accepts a connection")
}

#[tokio::test]
async fn issues_and_refuses_with_precise_statuses() {
    let cm = start();
    let ca = std::fs::read_to_string(cm.dir.path().join("trust.pem")).unwrap();
    let key_mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(cm.dir.path().join("ca/ca-state.json")).unwrap().permissions(),
    );
    assert_eq!(key_mode & 0o777, 0o600, "the CA keys are private");
    assert!(!ca.contains("PRIVATE KEY"), "only certificates are published");

    let issued = issue(&args(&cm, "s3cret-injector-token", &["localhost", "127.0.0.1"])).await.unwrap();
    assert_eq!(issued.ca_bundle_pem, ca, "the trust bundle is the CA");
    let lifetime = issued.not_after.duration_since(std::time::SystemTime::now()).unwrap();
    assert!(lifetime > Duration::from_secs(3500) && lifetime <= Duration::from_secs(3600), "{lifetime:?}");
    let renew = issued.renew_after.duration_since(std::time::SystemTime::now()).unwrap();
    assert!(renew > Duration::from_secs(2000) && renew < Duration::from_secs(2500), "renew at about 2/3: {renew:?}");
    assert_eq!(issued.key.cert.len(), 1);

    let refused = |r: Result<_, IssueError>| match r {
        Err(IssueError::Refused { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let (code, message) = refused(issue(&args(&cm, "s3cret-injector-token", &["validator.local"])).await);
    assert_eq!(code, tonic::Code::PermissionDenied);
    assert_eq!(message, "injector may not have the name validator.local (it may have: localhost, 127.0.0.1)");
    let (code, message) = refused(issue(&args(&cm, "wrong-token", &["localhost"])).await);
    assert_eq!(code, tonic::Code::Unauthenticated);
    assert_eq!(message, "the bearer token is not valid");
    assert!(
        issue(&args(&cm, "s3cret-validator-token", &["validator.local"])).await.is_ok(),
        "the validator gets its own name"
    );

    // The same by hand, with `portcullis-cert-manager request`.
    let by_hand = |names: &str| {
        let token = cm.dir.path().join("injector-token");
        Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"))
            .args(["request", "--cert-manager-url", &format!("https://localhost:{}", cm.addr.port())])
            .arg("--cert-manager-ca-file")
            .arg(cm.dir.path().join("trust.pem"))
            .arg("--cert-manager-token-file")
            .arg(token)
            .args(["--cert-names", names])
            .output()
            .unwrap()
    };
    let granted = by_hand("localhost");
    assert!(granted.status.success(), "{}", String::from_utf8_lossy(&granted.stderr));
    assert!(String::from_utf8_lossy(&granted.stdout).starts_with("-----BEGIN CERTIFICATE-----"));
    let refused = by_hand("validator.local");
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        "refused: PermissionDenied: injector may not have the name validator.local (it may have: localhost, 127.0.0.1)"
    );

    // Raw gRPC: no token at all, health, and the trust-bundle stream.
    let channel = channel(&cm, &ca).await;
    let status =
        CertificatesClient::new(channel.clone()).watch_trust_bundle(WatchTrustBundleRequest {}).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(status.message().contains("no bearer token"), "{}", status.message());
    let mut request = tonic::Request::new(WatchTrustBundleRequest {});
    request.metadata_mut().insert("authorization", "Bearer s3cret-injector-token".parse().unwrap());
    let mut stream = CertificatesClient::new(channel.clone()).watch_trust_bundle(request).await.unwrap().into_inner();
    let bundle = stream.message().await.unwrap().unwrap();
    assert_eq!(bundle.ca_bundle_pem, ca);
    // A request for CA:true, made by hand: refused, and why.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let csr_pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let mut request = tonic::Request::new(IssueRequest { csr_pem, lifetime_seconds: 0 });
    request.metadata_mut().insert("authorization", "Bearer s3cret-injector-token".parse().unwrap());
    let status = CertificatesClient::new(channel.clone()).issue(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "the certificate request asks for CA:true; only leaf certificates are issued");
    let health = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest { service: "portcullis.certs.v1.Certificates".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    // Metrics: what was issued and refused, and when the CA expires.
    let metrics = http::get_ok(&format!("http://{}/metrics", cm.admin)).expect("the admin port answers");
    assert!(metrics.contains("portcullis_certs_issued_total 3"), "{metrics}");
    assert!(metrics.contains(r#"portcullis_certs_refused_total{reason="name_not_allowed"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"portcullis_certs_refused_total{reason="ca"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"portcullis_certs_refused_total{reason="unauthenticated"}"#), "{metrics}");
    let ca_expiry: i64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("portcullis_ca_expiry_timestamp_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(ca_expiry > now + 364 * 86400, "the CA's notAfter (a year by default) is exported: {ca_expiry}");
}

#[tokio::test]
async fn the_ca_survives_a_restart() {
    let cm = start();
    let before = std::fs::read_to_string(cm.dir.path().join("trust.pem")).unwrap();
    let dir = cm.dir.path().to_path_buf();
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"));
    command.args(["serve", "--config"]).arg(dir.join("config.yaml")).arg("--ca-dir").arg(dir.join("ca"));
    let restarted = spawn(command, tempfile::tempdir().unwrap());
    // A client that trusts only the first CA gets a certificate from the
    // second process, and the same trust bundle: the CA was loaded, not made anew.
    let issued = issue(&args_for(&dir, restarted.addr, "s3cret-injector-token", &["localhost"])).await.unwrap();
    assert_eq!(issued.ca_bundle_pem, before);
}

/// Whether `leaf` verifies for `localhost` against the CAs in `bundle_pem`
/// only, as a TLS client (the API server) would check it.
fn signed_by(leaf: &rustls::pki_types::CertificateDer<'_>, bundle_pem: &str) -> bool {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls::pki_types::CertificateDer::pem_slice_iter(bundle_pem.as_bytes()) {
        roots.add(ca.expect("a PEM certificate")).expect("test TLS settings");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(std::sync::Arc::new(roots), provider)
        .build()
        .expect("test TLS settings");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("test TLS settings");
    verifier.verify_server_cert(leaf, &[], &name, &[], rustls::pki_types::UnixTime::now()).is_ok()
}

/// A CA rotation as a webhook lives through it: the new CA is trusted
/// first (stream and published bundle) while the old one still signs; once
/// the new one signs, the webhook's client renews onto it by itself; the
/// old CA stays trusted for the certificates it signed.
#[tokio::test]
async fn a_rotated_ca_is_trusted_first_then_signs_and_the_webhook_moves_to_it() {
    use portcullis_server::tls::CertResolver;
    let cm = start_with(&["--ca-overlap", "3s", "--ca-check-interval", "300ms"]);
    let old = std::fs::read_to_string(cm.dir.path().join("trust.pem")).unwrap();
    let resolver = std::sync::Arc::new(CertResolver::default());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _client = portcullis_server::cert_manager::spawn(
        args(&cm, "s3cret-injector-token", &["localhost"]),
        resolver.clone(),
        shutdown.clone(),
    );
    let served = || resolver.current().map(|key| key.cert[0].clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while served().is_none() {
        assert!(Instant::now() < deadline, "no certificate from the cert-manager");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = served().unwrap();
    assert!(signed_by(&first, &old));

    let channel = channel(&cm, &old).await;
    let mut request = tonic::Request::new(WatchTrustBundleRequest {});
    request.metadata_mut().insert("authorization", "Bearer s3cret-injector-token".parse().unwrap());
    let mut stream = CertificatesClient::new(channel).watch_trust_bundle(request).await.unwrap().into_inner();
    let before = stream.message().await.unwrap().unwrap();
    assert_eq!((before.ca_bundle_pem.as_str(), before.issuer_pem.as_str()), (old.as_str(), old.as_str()));

    let asked = Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"))
        .args(["rotate-ca", "--ca-dir"])
        .arg(cm.dir.path().join("ca"))
        .output()
        .unwrap();
    assert!(asked.status.success(), "{}", String::from_utf8_lossy(&asked.stderr));
    let typo = Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"))
        .args(["rotate-ca", "--ca-dir"])
        .arg(cm.dir.path().join("cas"))
        .output()
        .unwrap();
    assert!(!typo.status.success());
    assert!(String::from_utf8_lossy(&typo.stderr).contains("no CA here"), "{}", String::from_utf8_lossy(&typo.stderr));
    let added = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.unwrap().unwrap().unwrap();
    assert_eq!(added.ca_bundle_pem.matches("BEGIN CERTIFICATE").count(), 2, "the new CA is trusted first");
    assert_eq!(added.issuer_pem, old, "the old CA still signs during the overlap");
    assert!(added.generation > before.generation);
    assert!(!cm.dir.path().join("ca/rotate").exists(), "the request was taken");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(cm.dir.path().join("trust.pem")).unwrap() != added.ca_bundle_pem {
        assert!(Instant::now() < deadline, "the published bundle does not follow");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(served().unwrap(), first, "no renewal while the old CA signs");
    let bundle_size = http::metric(cm.admin, "portcullis_ca_bundle_certificates");
    assert_eq!(bundle_size, Some(2.0), "a rotation under way shows");

    let switched = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.unwrap().unwrap().unwrap();
    let new = switched.issuer_pem.clone();
    assert_ne!(new, old, "after the overlap the new CA signs");
    assert!(switched.ca_bundle_pem.contains(old.trim()), "the old CA stays trusted for its certificates");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !signed_by(&served().unwrap(), &new) {
        assert!(Instant::now() < deadline, "the webhook did not move to the new CA");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!signed_by(&served().unwrap(), &old), "the renewed certificate is the new CA's");
    // The cert-manager's own certificate moved too: a client trusting
    // only the new CA gets in.
    std::fs::write(cm.dir.path().join("new-ca.pem"), &new).unwrap();
    let only_new =
        Settings { ca_file: cm.dir.path().join("new-ca.pem"), ..args(&cm, "s3cret-injector-token", &["localhost"]) };
    assert!(signed_by(&issue(&only_new).await.unwrap().key.cert[0], &new));
    shutdown.cancel();
}

/// `request` sends what a webhook sends: a granted name prints the chain
/// (exit 0), CA:true or a name the client may not have prints the refusal
/// (exit 1), and a missing flag is a usage error (exit 2).
#[test]
fn the_request_command_prints_the_chain_or_the_refusal() {
    let cm = start();
    let settings = args(&cm, "s3cret-injector-token", &["localhost"]);
    let request = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"))
            .args(["request", "--cert-manager-url", &settings.url, "--cert-manager-ca-file"])
            .arg(&settings.ca_file)
            .arg("--cert-manager-token-file")
            .arg(&settings.token_file)
            .args(extra)
            .output()
            .unwrap()
    };
    let granted = request(&["--cert-names", "localhost"]);
    let stdout = String::from_utf8_lossy(&granted.stdout);
    assert_eq!(granted.status.code(), Some(0), "{}", String::from_utf8_lossy(&granted.stderr));
    assert!(stdout.starts_with("-----BEGIN CERTIFICATE-----") && !stdout.contains("PRIVATE KEY"), "{stdout}");

    for extra in [&["--cert-names", "localhost", "--ask-for-ca"][..], &["--cert-names", "kubernetes.default.svc"]] {
        let refused = request(extra);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(
            stderr.contains("refused: PermissionDenied") || stderr.contains("refused: InvalidArgument"),
            "{stderr}"
        );
    }

    let usage = Command::new(env!("CARGO_BIN_EXE_portcullis-cert-manager"))
        .args(["request", "--cert-manager-url", &settings.url, "--cert-names", "localhost"])
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2), "the CA and token files are required with the URL");
}
