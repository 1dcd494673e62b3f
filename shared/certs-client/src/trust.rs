//! The trust bundle stream: who signs now, so a CA rotation is seen at once.

use std::time::Duration;

use portcullis_proto::certs::v1::WatchTrustBundleRequest;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Settings;
use crate::issue::{IssueError, connect};

/// Sends the issuer (PEM) of every trust bundle the cert-manager announces
/// to `issuer`, reconnecting with backoff (1 s doubling to 60 s), until
/// `shutdown`.
pub async fn follow_issuer(settings: Settings, issuer: watch::Sender<String>, shutdown: CancellationToken) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let followed = async {
            let (mut client, bearer) = connect(&settings).await?;
            let mut request = tonic::Request::new(WatchTrustBundleRequest {});
            request.metadata_mut().insert("authorization", bearer);
            let mut stream = client.watch_trust_bundle(request).await?.into_inner();
            while let Some(bundle) = stream.message().await? {
                backoff = Duration::from_secs(1);
                issuer.send_replace(bundle.issuer_pem);
            }
            Ok::<_, IssueError>(())
        };
        let ended = tokio::select! {
            ended = followed => ended,
            _ = shutdown.cancelled() => return,
        };
        if let Err(err) = ended {
            tracing::debug!(error = %portcullis_telemetry::error_chain(&err), "the trust bundle stream ended");
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}
