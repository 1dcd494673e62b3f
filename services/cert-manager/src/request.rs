//! `request`: one certificate request by hand, made and sent exactly as a
//! webhook's client does, to see what the cert-manager grants or refuses
//! (a name, a subject, CA:true, a token). Prints the certificate, never a key.

use std::time::{SystemTime, UNIX_EPOCH};

use portcullis_server::cert_manager::{IssueError, issue_for, request_params};
use portcullis_server::tls::error_chain;

use crate::cli::Request;

/// Sends the request; `Err` (exit 1) with the cert-manager's answer when refused.
pub async fn run(args: Request) -> anyhow::Result<()> {
    let mut params = request_params(&args.tls).map_err(|e| anyhow::anyhow!(error_chain(&e)))?;
    if args.ask_for_ca {
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    }
    match issue_for(&args.tls, params).await {
        Ok(issued) => {
            let unix = |t: SystemTime| t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
            let cas = issued.ca_bundle_pem.matches("BEGIN CERTIFICATE").count();
            eprintln!(
                "issued: notAfter {} (Unix), renew after {} (Unix); trust bundle: {cas} CA(s)",
                unix(issued.not_after),
                unix(issued.renew_after)
            );
            print!("{}", issued.chain_pem);
            Ok(())
        }
        Err(IssueError::Refused { code, message }) => anyhow::bail!("refused: {code:?}: {message}"),
        Err(err) => anyhow::bail!(error_chain(&err)),
    }
}
