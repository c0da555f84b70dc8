//! Service account tokens for projected volumes, as upstream's `pkg/kubelet/token`.
//!
//! [`TokenSource`] is where a token comes from; [`api::ApiTokenSource`] asks the apiserver
//! (`POST .../serviceaccounts/<name>/token`, a TokenRequest bound to the pod) and
//! [`TokenManager`] caches its answers, asking again once a token is past 80 % of its lifetime
//! or 24 h old (with up to 10 s of jitter), and keeping a still-valid token when the apiserver
//! cannot answer.

pub mod api;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;

/// A token's age after which it is refreshed whatever its lifetime (upstream's `maxTTL`).
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Upstream's `maxJitter`: refreshes are spread over this much.
pub const MAX_JITTER: Duration = Duration::from_secs(10);

/// What a projected `serviceAccountToken` source asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenRequest {
    pub namespace: String,
    pub service_account: String,
    /// Empty: the apiserver's own audiences.
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    /// The pod the token is bound to.
    pub pod_name: String,
    pub pod_uid: String,
}

/// A token and when it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub token: String,
    pub expiration: SystemTime,
    /// Its lifetime as the apiserver granted it (it may differ from the one asked for).
    pub lifetime: Duration,
}

/// Why no token could be had. Each variant names the service account and the pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error(
        "failed to fetch token for service account {namespace}/{service_account} (pod {pod}): {message}"
    )]
    Request { namespace: String, service_account: String, pod: String, message: String },
    #[error(
        "failed to fetch token for service account {namespace}/{service_account} (pod {pod}): the answer holds no token"
    )]
    Empty { namespace: String, service_account: String, pod: String },
    #[error("service account token for pod {namespace}/{pod}: the kubelet has no API server")]
    NoApiServer { namespace: String, pod: String },
    #[error(
        "service account token for pod {namespace}/{pod}: a static pod may not use service account tokens"
    )]
    StaticPod { namespace: String, pod: String },
}

/// Where tokens come from.
pub trait TokenSource: Send + Sync + std::fmt::Debug {
    fn token<'a>(&'a self, request: &'a TokenRequest) -> BoxFuture<'a, Result<Token, TokenError>>;
}

/// Upstream's `requiresRefresh`: past 80 % of its lifetime, or older than [`MAX_TTL`], each
/// less `jitter`.
pub fn requires_refresh(token: &Token, now: SystemTime, jitter: Duration) -> bool {
    let issued = token.expiration.checked_sub(token.lifetime).unwrap_or(SystemTime::UNIX_EPOCH);
    let too_old = issued + MAX_TTL.saturating_sub(jitter);
    let refresh_at =
        token.expiration.checked_sub(token.lifetime / 5 + jitter).unwrap_or(SystemTime::UNIX_EPOCH);
    now > too_old || now > refresh_at
}

/// Caches tokens from `source` by request, refreshing as [`requires_refresh`] says.
#[derive(Debug)]
pub struct TokenManager {
    source: Arc<dyn TokenSource>,
    cache: Mutex<HashMap<TokenRequest, Token>>,
}

impl TokenManager {
    pub fn new(source: Arc<dyn TokenSource>) -> Self {
        Self { source, cache: Mutex::default() }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<TokenRequest, Token>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the tokens of a pod that is gone (upstream's `DeleteServiceAccountToken`).
    pub fn forget_pod(&self, uid: &str) {
        self.cache().retain(|request, _| request.pod_uid != uid);
    }

    /// How many tokens are cached.
    pub fn cached(&self) -> usize {
        self.cache().len()
    }
}

fn jitter() -> Duration {
    MAX_JITTER.mul_f64(rand::random::<f64>())
}

impl TokenSource for TokenManager {
    fn token<'a>(&'a self, request: &'a TokenRequest) -> BoxFuture<'a, Result<Token, TokenError>> {
        Box::pin(async move {
            let cached = self.cache().get(request).cloned();
            let now = SystemTime::now();
            if let Some(token) = &cached
                && !requires_refresh(token, now, jitter())
            {
                return Ok(token.clone());
            }
            match self.source.token(request).await {
                Ok(token) => {
                    let mut cache = self.cache();
                    cache.retain(|_, t| t.expiration > now);
                    cache.insert(request.clone(), token.clone());
                    Ok(token)
                }
                Err(e) => match cached {
                    Some(token) if token.expiration > now => {
                        tracing::warn!(error = %e, "refreshing a service account token; the cached one is still valid");
                        Ok(token)
                    }
                    _ => Err(e),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests;
