//! Bearer tokens on the kubelet API, as upstream's webhook token authenticator
//! (`authentication.webhook`): the token goes to the apiserver in a TokenReview and the identity
//! it names is reused for `cacheTTL` (a refusal too). Tokens are kept only as SHA-256 digests.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::answers::Answers;
use super::secure::Identity;

/// The apiserver could not say whom a token names.
#[derive(Debug, thiserror::Error)]
#[error("asking the apiserver whom a bearer token names: {0}")]
pub struct TokenError(#[source] pub kube::Error);

/// Who answers TokenReviews: the apiserver (a fake in unit tests).
pub trait TokenReviewer: Send + Sync + 'static {
    /// The identity `token` names, or `None` when it names nobody.
    fn review(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<Option<Identity>, kube::Error>> + Send;
}

/// The apiserver, through the kubelet's own client (a node may create TokenReviews).
#[derive(Clone)]
pub struct ApiTokenReviewer(pub kube::Api<TokenReview>);

impl std::fmt::Debug for ApiTokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiTokenReviewer")
    }
}

impl TokenReviewer for ApiTokenReviewer {
    async fn review(&self, token: &str) -> Result<Option<Identity>, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.into()), audiences: None },
            ..Default::default()
        };
        let answered = self.0.create(&Default::default(), &review).await?;
        let status = answered.status.unwrap_or_default();
        let user = status.user.filter(|_| status.authenticated == Some(true));
        Ok(user.and_then(|u| {
            let name = u.username.filter(|n| !n.is_empty())?;
            Some(Identity { name, groups: u.groups.unwrap_or_default() })
        }))
    }
}

/// Checks tokens with `reviewer`, remembering answers for `ttl`.
#[derive(Debug)]
pub struct TokenAuthenticator<R> {
    reviewer: R,
    ttl: Duration,
    answers: Answers<[u8; 32], Option<Identity>>,
}

impl<R: TokenReviewer> TokenAuthenticator<R> {
    pub fn new(reviewer: R, ttl: Duration) -> Self {
        Self { reviewer, ttl, answers: Answers::default() }
    }

    /// Whom `token` names (`None`: nobody). Errors are not remembered.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Identity>, TokenError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(known) = self.answers.get(&key, now) {
            return Ok(known);
        }
        let who = self.reviewer.review(token).await.map_err(TokenError)?;
        self.answers.put(key, who.clone(), now, now + self.ttl);
        Ok(who)
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    /// Knows one token; counts the questions; fails while `down`.
    #[derive(Default)]
    struct FakeApiserver {
        asked: AtomicUsize,
        down: AtomicBool,
    }

    impl TokenReviewer for Arc<FakeApiserver> {
        async fn review(&self, token: &str) -> Result<Option<Identity>, kube::Error> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                let status = kube::core::Status::failure("down", "ServiceUnavailable");
                return Err(kube::Error::Api(Box::new(status.with_code(503))));
            }
            Ok((token == "good").then(|| Identity {
                name: "system:node:b".into(),
                groups: vec!["system:nodes".into()],
            }))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_asked_about_once_per_ttl_and_errors_are_not_kept() {
        let api = Arc::new(FakeApiserver::default());
        let authn = TokenAuthenticator::new(api.clone(), Duration::from_secs(120));
        let who = authn.authenticate("good").await.unwrap().unwrap();
        assert_eq!(who.name, "system:node:b");
        assert_eq!(authn.authenticate("bad").await.unwrap(), None);
        authn.authenticate("good").await.unwrap();
        authn.authenticate("bad").await.unwrap();
        assert_eq!(api.asked.load(Ordering::SeqCst), 2);
        tokio::time::advance(Duration::from_secs(121)).await;
        api.down.store(true, Ordering::SeqCst);
        let err = authn.authenticate("good").await.unwrap_err();
        assert!(err.to_string().contains("bearer token"), "{err}");
        api.down.store(false, Ordering::SeqCst);
        assert!(authn.authenticate("good").await.unwrap().is_some());
    }

    #[test]
    fn only_bearer_headers_carry_a_token() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }
}
