//! Who is calling: a bearer token becomes an identity. Standalone, the
//! token is compared with each client's token file ([`TokenFiles`]); in
//! Kubernetes mode the API server reviews it
//! (`crate::kubernetes::token_review`).

use futures::future::BoxFuture;
use portcullis_telemetry::error_chain;
use subtle::ConstantTimeEq as _;

use crate::config::Config;

/// Why a token did not authenticate anyone.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The token is not valid: what the caller is told.
    #[error("{0}")]
    Rejected(String),
    /// The token could not be checked now.
    #[error("cannot check the token")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Turns a bearer token into an identity (`namespace/serviceaccount` in
/// Kubernetes mode, a configured name standalone).
pub trait Authenticator: Send + Sync {
    /// The identity `token` proves.
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<String, AuthError>>;
}

/// Standalone: each client's `tokenFile`, read at each request so that a
/// rotated token file takes effect at once.
#[derive(Debug)]
pub struct TokenFiles {
    config: Config,
}

impl TokenFiles {
    /// The token files of `config`'s clients.
    pub fn new(config: Config) -> Self {
        Self { config }
    }

    fn identity(&self, token: &str) -> Result<String, AuthError> {
        for client in &self.config.clients {
            let Some(file) = &client.token_file else { continue };
            match std::fs::read_to_string(file) {
                // In constant time: how much of a guess matched must not show.
                Ok(expected) if bool::from(expected.trim().as_bytes().ct_eq(token.as_bytes())) => {
                    return Ok(client.identity.clone());
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(file = %file.display(), error = %error_chain(&err), "cannot read a client's token file")
                }
            }
        }
        Err(AuthError::Rejected("the bearer token is not valid".into()))
    }
}

impl Authenticator for TokenFiles {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(std::future::ready(self.identity(token)))
    }
}
