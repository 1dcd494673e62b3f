//! The cert-manager as the certificate source: get a certificate through
//! [`portcullis_certs_client`] (the key is made here and never leaves the
//! process), serve it at once through the swappable resolver, renew at
//! about two thirds of its lifetime with jitter, at once when the CA is
//! rotated or on SIGHUP, and keep serving the old one with backoff when the
//! cert-manager cannot be reached.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portcullis_certs_client::{Settings, follow_issuer, issue};
use portcullis_telemetry::error_chain;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::tls::CertResolver;

/// Keeps `resolver` supplied from the cert-manager until `shutdown`.
/// Renews at once when the cert-manager announces a new signing CA (a CA
/// rotation), and on SIGHUP.
pub fn spawn(
    settings: Settings,
    resolver: Arc<CertResolver>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let (issuer_updates, mut issuer) = watch::channel(String::new());
    tokio::spawn(follow_issuer(settings.clone(), issuer_updates, shutdown.clone()));
    tokio::spawn(async move {
        let mut hangup = hangup();
        let mut backoff = Duration::from_secs(1);
        let mut signed_by = String::new();
        loop {
            let wait = match issue(&settings).await {
                Ok(issued) => {
                    resolver.set(issued.key);
                    signed_by = issued.issuer_pem;
                    backoff = Duration::from_secs(1);
                    let remaining = issued.renew_after.duration_since(SystemTime::now()).unwrap_or_default();
                    let not_after = issued.not_after.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
                    tracing::info!(
                        not_after_unix = not_after,
                        renew_in_seconds = remaining.as_secs(),
                        "serving a certificate from the cert-manager"
                    );
                    jitter(remaining)
                }
                Err(err) => {
                    let serving = resolver.is_ready();
                    tracing::warn!(error = %error_chain(&err), retry_in_seconds = backoff.as_secs(), serving_previous = serving, "certificate request failed");
                    let wait = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    wait
                }
            };
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => break,
                    Some(()) = next_hangup(&mut hangup) => {
                        tracing::info!("SIGHUP: renewing the certificate now");
                        break;
                    }
                    Ok(()) = issuer.changed() => {
                        let announced = issuer.borrow_and_update().clone();
                        if !announced.is_empty() && !signed_by.is_empty() && announced != signed_by {
                            // Spread the replicas' renewals over a few seconds.
                            let spread = random_up_to(Duration::from_secs(5));
                            tracing::info!(in_ms = spread.as_millis() as u64, "the CA was rotated: renewing onto the new one");
                            tokio::time::sleep(spread).await;
                            break;
                        }
                    }
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    })
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = Option<()>;

#[cfg(unix)]
fn hangup() -> Hangup {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}

#[cfg(not(unix))]
fn hangup() -> Hangup {
    None
}

/// The next SIGHUP; never, where there is none to wait for.
async fn next_hangup(hangup: &mut Hangup) -> Option<()> {
    #[cfg(unix)]
    if let Some(signal) = hangup {
        return signal.recv().await;
    }
    let _ = hangup;
    std::future::pending().await
}

/// `wait` less up to a tenth, so that replicas do not renew in lockstep.
fn jitter(wait: Duration) -> Duration {
    wait - random_up_to(wait / 10)
}

/// Somewhere between zero and `max`, differing between processes and moments.
fn random_up_to(max: Duration) -> Duration {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    max.mul_f64(f64::from(nanos % 1000) / 1000.0)
}
