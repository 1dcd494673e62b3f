//! `portcullis-bench serve bare`: the least an HTTPS webhook can be, to
//! measure the load generator against (docs/BENCHMARKS.md, "the generator
//! check"). A tokio listener, a tokio-rustls acceptor with the choices of
//! Portcullis' transport that cost or save time (the ring provider, TLS 1.3
//! and 1.2, ALPN `http/1.1`, the same certificate), hyper's HTTP/1.1
//! connection with keep-alive, and a `service_fn` that reads the body and
//! answers a fixed allow with the request's uid. No framework, no routing,
//! no timeouts, no drain, no metrics: nothing this server does can be made
//! cheaper, so what a generator gets out of it is the generator's limit.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use hyper::body::{Body as _, Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use portcullis_certs_client::certified_key;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The answer before and after the uid.
const HEAD: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":""#;
const TAIL: &str = r#"","allowed":true}}"#;

/// The TLS configuration: Portcullis' choices (`portcullis-server::tls`),
/// with the certificate fixed instead of behind a reloading resolver.
pub(crate) fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let key = certified_key(&std::fs::read(cert)?, &std::fs::read(key)?, "bench")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key)));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts and serves until the process is stopped (the benchmark kills it).
pub(crate) async fn serve(listener: TcpListener, tls: Arc<rustls::ServerConfig>) -> anyhow::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true);
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let (acceptor, http) = (acceptor.clone(), http.clone());
        tokio::spawn(async move {
            // No TCP_NODELAY: Portcullis' transport does not set it either.
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let _ = http.serve_connection(TokioIo::new(tls), hyper::service::service_fn(answer)).await;
        });
    }
}

/// Reads the whole body, answers the allow with its uid.
async fn answer(request: Request<Incoming>) -> Result<Response<String>, Infallible> {
    let mut body = request.into_body();
    let mut bytes: Vec<u8> = Vec::new();
    let mut first: Option<Bytes> = None;
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(Some(data)) = frame.map(|f| f.into_data().ok()) else { continue };
        // A body that came in one frame is read where it is, not copied.
        match first.take() {
            None if bytes.is_empty() => first = Some(data),
            taken => {
                if let Some(taken) = taken {
                    bytes.extend_from_slice(&taken);
                }
                bytes.extend_from_slice(&data);
            }
        }
    }
    let body: &[u8] = first.as_deref().unwrap_or(&bytes);
    let uid = crate::servers::uid(body).unwrap_or_default();
    let mut text = String::with_capacity(HEAD.len() + uid.len() + TAIL.len());
    text.push_str(HEAD);
    text.push_str(uid);
    text.push_str(TAIL);
    let mut response = Response::new(text);
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client sees: the allow, with its own uid, over TLS.
    #[tokio::test]
    async fn answers_an_allow_with_the_request_uid() {
        let pki = portcullis_e2e::webhook::Pki::new();
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, &pki.cert).expect("cert");
        std::fs::write(&key, &pki.key).expect("key");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, tls_config(&cert, &key).expect("tls")));
        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(pki.ca.as_bytes()).expect("ca"))
            .build()
            .expect("client");
        let review = crate::fixtures::review(&crate::fixtures::pod(2));
        let response = client.post(format!("https://{addr}/mutate")).body(review).send().await.expect("send");
        assert_eq!(response.status(), 200);
        let answer: serde_json::Value = response.json().await.expect("json");
        assert_eq!(answer["response"]["uid"], "8e7f8b4e-0000-4000-8000-000000000001");
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["kind"], "AdmissionReview");
    }
}
