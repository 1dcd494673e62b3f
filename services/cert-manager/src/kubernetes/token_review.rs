//! The [`Authenticator`] of Kubernetes mode: the API server reviews the
//! caller's projected ServiceAccount token (TokenReview), for the
//! cert-manager's audience.

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use tracing::Instrument as _;

use super::{KubeError, api_err};
use crate::issuer::{AuthError, Authenticator};

/// Reviews tokens with the API server.
#[derive(Clone)]
pub struct TokenReviewer {
    client: kube::Client,
    audience: String,
}

impl std::fmt::Debug for TokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewer").field("audience", &self.audience).finish_non_exhaustive()
    }
}

impl TokenReviewer {
    /// Tokens must be issued for `audience`.
    pub fn new(client: kube::Client, audience: String) -> Self {
        Self { client, audience }
    }

    /// The identity (`namespace/serviceaccount`) of a ServiceAccount token
    /// issued for the audience, or `None` when the API server does not
    /// vouch for it.
    pub async fn review(&self, token: &str) -> Result<Option<String>, KubeError> {
        let audience = &self.audience;
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_owned(), audiences: Some(vec![audience.clone()]) },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .instrument(tracing::info_span!("TokenReview", otel.kind = "client"))
            .await
            .map_err(api_err("TokenReview"))?;
        let Some(status) = reviewed.status else { return Ok(None) };
        let audience_ok = status.audiences.unwrap_or_default().iter().any(|a| a == audience);
        if status.authenticated != Some(true) || !audience_ok {
            return Ok(None);
        }
        let username = status.user.and_then(|u| u.username).unwrap_or_default();
        Ok(username.strip_prefix("system:serviceaccount:").map(|rest| rest.replacen(':', "/", 1)))
    }
}

impl Authenticator for TokenReviewer {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            match self.review(token).await {
                Ok(Some(identity)) => Ok(identity),
                Ok(None) => Err(AuthError::Rejected(format!(
                    "the token is not a valid ServiceAccount token for audience {} (expired, revoked or for another audience)",
                    self.audience
                ))),
                Err(err) => Err(AuthError::Unavailable(err.into())),
            }
        })
    }
}
