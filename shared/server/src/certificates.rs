//! Where the serving certificate comes from, chosen once at startup from
//! the TLS flags: the cert-manager (requested and renewed over gRPC),
//! certificate files (watched, swapped in when both change to a valid
//! pair), or, with neither, a self-signed certificate whose CA is written to
//! disk. Every source feeds the same [`CertResolver`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use portcullis_certs_client::certified_key;
use portcullis_telemetry::error_chain;
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use crate::args::TlsArgs;
use crate::tls::{CertResolver, TlsError};
use crate::watch;

/// Starts serving from the configured source: the certificate files
/// (watched, and swapped in when both change to a valid pair) or, without
/// files, a self-signed certificate whose CA is written to disk.
pub fn resolver_from_args(
    args: &TlsArgs,
    service: &str,
    expiry: prometheus_client::metrics::gauge::Gauge,
    shutdown: CancellationToken,
) -> Result<Arc<CertResolver>, TlsError> {
    let resolver = Arc::new(CertResolver::with_expiry_gauge(expiry));
    if let Some(settings) = args.cert_manager.settings() {
        tracing::info!(url = %settings.url, names = ?settings.names, "getting the serving certificate from the cert-manager; not ready until it arrives");
        crate::cert_manager::spawn(settings, resolver.clone(), shutdown);
        return Ok(resolver);
    }
    match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => {
            let paths = vec![cert.clone(), key.clone()];
            let contents = watch::read_all(&paths).map_err(TlsError::Io)?;
            resolver.set(certified_key(&contents[0].1, &contents[1].1, &cert.display().to_string())?);
            tracing::info!(cert = %cert.display(), "serving the certificate from files; reloaded on change");
            let target = resolver.clone();
            let source = cert.display().to_string();
            watch::spawn_poll("tls certificate", paths, args.tls_reload_interval, contents, shutdown, move |c| {
                match certified_key(&c[0].1, &c[1].1, &source) {
                    Ok(key) => {
                        target.set(key);
                        tracing::info!(cert = %source, "serving certificate reloaded");
                    }
                    // Mid-update (new cert, old key) or broken files: keep
                    // the old pair; the next change is picked up.
                    Err(err) => {
                        tracing::error!(cert = %source, error = %error_chain(&err), "new certificate refused; still serving the previous one")
                    }
                }
            });
        }
        _ => {
            let ca_file = args.self_signed_ca_file.clone().unwrap_or_else(|| default_ca_file(service));
            let (key, ca_pem) = self_signed(&args.self_signed_sans)?;
            resolver.set(key);
            write_ca(&ca_file, &ca_pem);
        }
    }
    Ok(resolver)
}

fn write_ca(path: &Path, pem: &str) {
    match std::fs::write(path, pem) {
        Ok(()) => tracing::warn!(
            ca_file = %path.display(),
            "no certificate configured: serving a self-signed certificate for localhost and 127.0.0.1; \
             its CA is in the ca_file (use it as the webhook caBundle)"
        ),
        Err(err) => tracing::warn!(
            ca_file = %path.display(), error = %error_chain(&err),
            "no certificate configured: serving a self-signed certificate, but its CA could not be written"
        ),
    }
}

/// Makes a throwaway CA and a leaf for `localhost`, `127.0.0.1`, `::1` and
/// `extra_sans`. Returns the leaf (chain: leaf, CA) and the CA's PEM.
pub fn self_signed(extra_sans: &[String]) -> Result<(Arc<CertifiedKey>, String), TlsError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().map_err(TlsError::SelfSigned)?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name.push(DnType::CommonName, "portcullis self-signed CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca_params.self_signed(&ca_key).map_err(TlsError::SelfSigned)?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    names.extend(extra_sans.iter().cloned());
    let mut leaf_params = CertificateParams::new(names).map_err(TlsError::SelfSigned)?;
    leaf_params.distinguished_name.push(DnType::CommonName, "portcullis webhook");
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().map_err(TlsError::SelfSigned)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(TlsError::SelfSigned)?;

    let chain = format!("{}{}", leaf.pem(), ca_cert.pem());
    let key = certified_key(chain.as_bytes(), leaf_key.serialize_pem().as_bytes(), "self-signed")?;
    Ok((key, ca_cert.pem()))
}

/// Where the self-signed CA is written when `--self-signed-ca-file` is not given.
pub fn default_ca_file(service: &str) -> PathBuf {
    std::env::temp_dir().join(format!("portcullis-{service}-ca.crt"))
}
