//! The injector binary over real TLS: a client that verifies the
//! certificate, bad input, metrics, a kubelet-style certificate swap
//! without dropped connections, a slow client, and SIGTERM with a drain
//! that loses no request on a kept-alive connection.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use portcullis_test_support::process::Process;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// A CA and a leaf for 127.0.0.1 signed by it: (ca pem, leaf pem, key pem).
fn pki(name: &str) -> (String, String, String) {
    let ca_key = KeyPair::generate().expect("test PKI");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("test PKI");
    ca.distinguished_name.push(rcgen::DnType::CommonName, format!("{name} CA"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("test PKI");
    let issuer = Issuer::new(ca, &ca_key);
    let leaf_key = KeyPair::generate().expect("test PKI");
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("test PKI")
        .signed_by(&leaf_key, &issuer)
        .expect("test PKI");
    (ca_cert.pem(), leaf.pem(), leaf_key.serialize_pem())
}

/// Writes a Secret volume the way the kubelet does: files in a timestamped
/// directory, `..data` pointing at it, the visible names pointing through
/// `..data`; an update renames a new `..data` symlink over the old one.
fn kubelet_write(dir: &Path, version: &str, cert: &str, key: &str) {
    let data = dir.join(version);
    std::fs::create_dir(&data).expect("writing test files");
    std::fs::write(data.join("tls.crt"), cert).expect("writing test files");
    std::fs::write(data.join("tls.key"), key).expect("writing test files");
    std::os::unix::fs::symlink(version, dir.join("..data_tmp")).expect("writing test files");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("writing test files");
    for file in ["tls.crt", "tls.key"] {
        if !dir.join(file).exists() {
            std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).expect("writing test files");
        }
    }
}

struct Server {
    process: Process,
    webhook: SocketAddr,
    admin: SocketAddr,
}

async fn start(certs: &Path) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis-injector"));
    command
        .args(["serve", "--config"])
        .arg(support::data("config.yaml"))
        .arg("--tls-cert-file")
        .arg(certs.join("tls.crt"))
        .arg("--tls-key-file")
        .arg(certs.join("tls.key"))
        .args(["--tls-reload-interval", "100ms", "--request-timeout", "2s", "--shutdown-grace", "5s"])
        // Longer than any deadline here: a drain ends when no connection is left.
        .args(["--shutdown-drain", "30s"])
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .stderr(Stdio::inherit());
    let (process, addrs) = Process::spawn_reporting(command, &["webhook", "admin"], false);
    let (webhook, admin) = (addrs[0], addrs[1]);
    let server = Server { process, webhook, admin };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = reqwest::get(format!("http://{admin}/readyz")).await
            && r.status() == 200
        {
            return server;
        }
        assert!(Instant::now() < deadline, "injector did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server on a certificate of its own CA: the directory it reads the
/// certificate from (kept while the server runs), the CA's PEM, the server.
async fn serving(name: &str) -> (tempfile::TempDir, String, Server) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (ca, cert, key) = pki(name);
    kubelet_write(dir.path(), "..v1", &cert, &key);
    let server = start(dir.path()).await;
    (dir, ca, server)
}

/// Sends SIGTERM to the server and waits (within 10 s) for it to say it
/// is draining.
fn terminate(server: &Server) {
    let pid = server.process.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("running kill").success());
    server.process.wait_for_log("draining: every response closes its connection", Duration::from_secs(10));
}

/// Waits (within 10 s) for the server to exit, and checks it exited 0.
async fn exited(server: &mut Server) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.process.child.try_wait().expect("the process's status") {
            assert!(status.success(), "exit status after SIGTERM: {status}");
            return;
        }
        assert!(Instant::now() < deadline, "did not stop after SIGTERM once no connection was left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("test TLS settings"))
        .https_only(true)
        .build()
        .expect("test TLS settings")
}

async fn mutate(client: &reqwest::Client, server: &Server, body: Vec<u8>) -> reqwest::Result<reqwest::Response> {
    client.post(format!("https://{}/mutate", server.webhook)).body(body).send().await
}

/// A TLS connection to the webhook listener, verified against `ca_pem`.
async fn connect(ca_pem: &str, server: &Server) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = rustls_pki_types::pem::PemObject::from_pem_slice(ca_pem.as_bytes()).expect("test TLS settings");
    roots.add(ca_der).expect("test TLS settings");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("test TLS settings")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server.webhook).await.expect("the webhook listener accepts");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("test TLS settings");
    connector.connect(name, tcp).await.expect("a TLS handshake")
}

/// One `POST /mutate` on an open connection: the response's head (lower
/// case) and body.
async fn exchange(conn: &mut (impl AsyncRead + AsyncWrite + Unpin), body: &[u8]) -> (String, Vec<u8>) {
    let head = format!("POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n", body.len());
    conn.write_all(head.as_bytes()).await.expect("writing a request");
    conn.write_all(body).await.expect("writing a request");
    let mut buf = Vec::new();
    let mut chunk = [0; 8192];
    let mut read = async |buf: &mut Vec<u8>| {
        let n = conn.read(&mut chunk).await.expect("reading a response");
        assert!(n > 0, "the connection closed before the response was complete: {}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        read(&mut buf).await;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("a response with a length: {head}"));
    while buf.len() < end + length {
        read(&mut buf).await;
    }
    (head, buf[end..end + length].to_vec())
}

/// Whether the server closes `conn` (within a deadline).
async fn closed_by_server(conn: &mut (impl AsyncRead + Unpin)) -> bool {
    let mut rest = Vec::new();
    match tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut rest)).await {
        // A close without TLS close_notify is a close too.
        Ok(_) => rest.is_empty(),
        Err(_) => false,
    }
}

fn fixture() -> Vec<u8> {
    std::fs::read(support::data("pod-v1.json")).expect("reading a file of the repository")
}

#[tokio::test]
async fn serves_verified_tls_refuses_bad_input_and_swaps_certificates_live() {
    let dir = tempfile::tempdir().unwrap();
    let (ca1, cert1, key1) = pki("first");
    kubelet_write(dir.path(), "..2026_11_22_v1", &cert1, &key1);
    let server = start(dir.path()).await;
    let old_client = client(&ca1);

    // A pod comes back injected, through a certificate-verifying client.
    let response = mutate(&old_client, &server, fixture()).await.unwrap();
    assert_eq!(response.status(), 200);
    let review: Value = response.json().await.unwrap();
    assert_eq!(review["response"]["allowed"], true);
    let patch = review["response"]["patch"].as_str().expect("response.patch is a base64 string");
    let patch = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    let mut pod: Value = serde_json::from_slice::<Value>(&fixture()).unwrap()["request"]["object"].clone();
    support::rfc6902::apply(&mut pod, &patch).unwrap();
    assert_eq!(support::names(&pod["spec"]["initContainers"]), ["proxy-init", "migrate"]);

    // Bad input: a clear 4xx with a message, and the server keeps serving.
    let bad = mutate(&old_client, &server, b"{not json".to_vec()).await.unwrap();
    assert_eq!(bad.status(), 400);
    let message: Value = bad.json().await.unwrap();
    assert!(message["error"].as_str().unwrap().contains("not a valid AdmissionReview"), "{message}");
    let no_uid = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec();
    let response = mutate(&old_client, &server, no_uid).await.unwrap();
    assert_eq!(response.status(), 400);
    let huge = vec![b' '; 3 * 1024 * 1024 + 1];
    let response = mutate(&old_client, &server, huge).await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(mutate(&old_client, &server, fixture()).await.unwrap().status(), 200);

    // Metrics count what happened, with bounded labels.
    let metrics = reqwest::get(format!("http://{}/metrics", server.admin)).await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains(r#"portcullis_admission_requests_total{operation="CREATE",kind="Pod",result="patched"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics
            .contains(r#"portcullis_admission_requests_total{operation="unknown",kind="unknown",result="invalid"} 3"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"portcullis_injector_injections_total{template="proxy"} 2"#), "{metrics}");
    let expiry: i64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("portcullis_serving_certificate_expiry_timestamp_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(expiry > now, "the served certificate's notAfter is exported: {expiry}");

    // The kubelet swaps the Secret volume: new handshakes get the new
    // certificate, while the open keep-alive connection carries on.
    let (ca2, cert2, key2) = pki("second");
    kubelet_write(dir.path(), "..2026_11_22_v2", &cert2, &key2);
    let new_client = client(&ca2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mutate(&new_client, &server, fixture()).await.is_err() {
        assert!(Instant::now() < deadline, "the new certificate was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fresh_old = client(&ca1);
    assert!(mutate(&fresh_old, &server, fixture()).await.is_err(), "a new connection must see the new certificate");
    assert_eq!(mutate(&old_client, &server, fixture()).await.unwrap().status(), 200, "kept-alive connection dropped");

    // A broken update (key that does not match) is refused; service goes on.
    let (_, cert3, _) = pki("third");
    kubelet_write(dir.path(), "..2026_11_22_v3", &cert3, &key2);
    server.process.wait_for_log("new certificate refused; still serving the previous one", Duration::from_secs(10));
    assert_eq!(mutate(&client(&ca2), &server, fixture()).await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_slow_client_is_cut_off_and_sigterm_drains() {
    let (_dir, ca, mut server) = serving("slow").await;

    let mut tls = connect(&ca, &server).await;
    tls.write_all(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server must close a connection whose headers never finish");
    assert!(started.elapsed() >= Duration::from_millis(1500), "cut off only after the request timeout");

    // The container healthcheck agrees.
    let ready = Command::new(env!("CARGO_BIN_EXE_portcullis-injector"))
        .args(["ready", "--admin-listen", &server.admin.to_string()])
        .status()
        .unwrap();
    assert!(ready.success());

    // Still serving, then SIGTERM: exits cleanly.
    assert_eq!(mutate(&client(&ca), &server, fixture()).await.unwrap().status(), 200);
    terminate(&server);
    exited(&mut server).await;
    let stopped = Command::new(env!("CARGO_BIN_EXE_portcullis-injector"))
        .args(["ready", "--admin-listen", &server.admin.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!stopped.success(), "a stopped service is not ready");
}

#[tokio::test]
async fn sigterm_drains_kept_alive_connections_without_losing_a_request() {
    let (_dir, ca, mut server) = serving("drain").await;
    let allowed = |body: &[u8]| serde_json::from_slice::<Value>(body).unwrap()["response"]["allowed"] == true;

    // A client (the API server) keeps a connection open between requests.
    let mut kept = connect(&ca, &server).await;
    let (head, body) = exchange(&mut kept, &fixture()).await;
    assert!(head.starts_with("http/1.1 200") && !head.contains("connection: close"), "{head}");
    assert!(allowed(&body));

    terminate(&server);
    // Not ready any more, and the admin listener says so.
    let readyz = reqwest::get(format!("http://{}/readyz", server.admin)).await.unwrap();
    assert_eq!(readyz.status(), 503, "not ready while draining");

    // A connection made during the drain (an endpoint not yet removed
    // everywhere) is answered, and closed after its answer.
    let mut late = connect(&ca, &server).await;
    let (head, body) = exchange(&mut late, &fixture()).await;
    assert!(head.starts_with("http/1.1 200") && head.contains("connection: close"), "{head}");
    assert!(allowed(&body));
    assert!(closed_by_server(&mut late).await, "the server closes a connection after saying so");

    // The kept-alive connection's next request is answered, not lost; the
    // answer tells the client not to reuse it, and then it is closed.
    let (head, body) = exchange(&mut kept, &fixture()).await;
    assert!(head.starts_with("http/1.1 200") && head.contains("connection: close"), "{head}");
    assert!(allowed(&body));
    assert!(closed_by_server(&mut kept).await, "the server closes a connection after saying so");

    // No connection left: the drain ends there, long before its 30 s limit.
    exited(&mut server).await;
}
