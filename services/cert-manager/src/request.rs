//! `request`: one certificate request by hand, made and sent exactly as a
//! webhook's client does, to see what the cert-manager grants or refuses
//! (a name, a subject, CA:true, a token). Prints the certificate, never a key.

use std::io::Write as _;

use anyhow::Context as _;
use std::time::{SystemTime, UNIX_EPOCH};

use portcullis_certs_client::{IssueError, issue_for, request_params};
use portcullis_process::Answer;

use crate::cli::Request;

/// Sends the request; [`Answer::No`] (exit 1) when the cert-manager
/// refuses it, its answer on stderr.
pub async fn run(args: Request) -> anyhow::Result<Answer> {
    let settings = args.cert_manager.settings().context("--cert-manager-url is required")?;
    let mut params = request_params(&settings)?;
    if args.ask_for_ca {
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    }
    match issue_for(&settings, params).await {
        Ok(issued) => {
            let unix = |t: SystemTime| t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
            let cas = issued.ca_bundle_pem.matches("BEGIN CERTIFICATE").count();
            eprintln!(
                "issued: notAfter {} (Unix), renew after {} (Unix); trust bundle: {cas} CA(s)",
                unix(issued.not_after),
                unix(issued.renew_after)
            );
            write!(std::io::stdout(), "{}", issued.chain_pem)?;
            Ok(Answer::Yes)
        }
        Err(IssueError::Refused { code, message }) => {
            eprintln!("refused: {code:?}: {message}");
            Ok(Answer::No)
        }
        Err(err) => Err(err.into()),
    }
}
