//! The reference webhooks, on the same transport as Portcullis (its rustls
//! configuration and HTTP/1.1 server, `portcullis-server::serve`):
//!
//! - `noop` answers every request with a fixed allow: the ceiling that TLS
//!   and HTTP alone allow on one core;
//! - `floor` answers the injector's precomputed patch for the benchmark pod,
//!   copying only the request's uid: the least a mutating webhook can cost
//!   the API server, so that the cost of a real one can be split into the
//!   API server's part and its own;
//! - `bare` answers a fixed allow on hyper and rustls alone, not on that
//!   transport (`bare.rs`): what the load generator is measured against.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use base64::Engine as _;
use portcullis_certs_client::certified_key;
use portcullis_server::serve::{Limits, serve_tls};
use portcullis_server::tls::{CertResolver, server_config};

/// Which reference webhook.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Reference {
    /// A fixed allow, whatever the request.
    Noop,
    /// The injector's patch for the benchmark pod, computed at start.
    Floor,
    /// A fixed allow from hyper and rustls alone, no framework (`bare.rs`).
    Bare,
}

/// `portcullis-bench serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Which one.
    reference: Reference,
    /// Where to listen (port 0: any; the address is printed as `webhook=ADDR`).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// PEM certificate to serve.
    #[arg(long)]
    tls_cert_file: PathBuf,
    /// Its PEM key.
    #[arg(long)]
    tls_key_file: PathBuf,
    /// Containers in the benchmark pod (the floor's patch is for it).
    #[arg(long, default_value_t = 2)]
    containers: usize,
}

/// Serves until SIGTERM or SIGINT.
pub(crate) async fn serve(args: Args) -> anyhow::Result<()> {
    let key = certified_key(&std::fs::read(&args.tls_cert_file)?, &std::fs::read(&args.tls_key_file)?, "bench")?;
    let resolver = Arc::new(CertResolver::default());
    resolver.set(key);
    let (head, tail) = match args.reference {
        Reference::Noop => (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":""#.to_owned(),
            r#"","allowed":true}}"#.to_owned(),
        ),
        Reference::Bare => {
            let tls = crate::bare::tls_config(&args.tls_cert_file, &args.tls_key_file)?;
            let listener = tokio::net::TcpListener::bind(args.listen).await?;
            println!("portcullis-bench Bare listening webhook={}", listener.local_addr()?);
            return crate::bare::serve(listener, tls).await;
        }
        Reference::Floor => {
            let patch = crate::fixtures::precomputed_patch(&crate::fixtures::pod(args.containers))?;
            let patch = base64::engine::general_purpose::STANDARD.encode(patch);
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":""#.to_owned(),
                format!(r#"","allowed":true,"patchType":"JSONPatch","patch":"{patch}"}}}}"#),
            )
        }
    };
    let answer = Arc::new((head, tail));
    let app = Router::new().route(
        "/mutate",
        post(move |body: Bytes| {
            let answer = answer.clone();
            async move {
                let uid = uid(&body).unwrap_or_default();
                let text = format!("{}{uid}{}", answer.0, answer.1);
                ([(axum::http::header::CONTENT_TYPE, "application/json")], text)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("portcullis-bench {:?} listening webhook={}", args.reference, listener.local_addr()?);
    let shutdown = portcullis_server::shutdown_signal();
    let limits = Limits {
        request_timeout: Duration::from_secs(10),
        drain: Duration::from_secs(1),
        shutdown_grace: Duration::from_secs(1),
    };
    serve_tls(listener, app, server_config(resolver, b"http/1.1"), limits, shutdown).await;
    Ok(())
}

/// The request's uid, found by its key in the raw bytes: the API server
/// writes `"uid":"..."` in the request before the object, and a uid has no
/// escapes. Nothing else of the request is read.
pub(crate) fn uid(body: &[u8]) -> Option<&str> {
    const KEY: &[u8] = br#""uid":""#;
    let start = body.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = body[start..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&body[start..start + len]).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_first_uid() {
        let body = br#"{"request":{"uid":"abc-1","object":{"metadata":{"uid":"x"}}}}"#;
        assert_eq!(super::uid(body), Some("abc-1"));
        assert_eq!(super::uid(b"{}"), None);
    }
}
