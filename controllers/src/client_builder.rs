//! Which identity each controller talks to the apiserver as, as upstream's `clientbuilder`:
//! the controller-manager's own (its kubeconfig), or with `--use-service-account-credentials`
//! the service account `kube-system/<account>` of each controller (`replicaset-controller`,
//! `generic-garbage-collector`, ...), the subject the bootstrap policy binds each
//! `system:controller:<account>` role to. The account is created if missing (with the
//! manager's identity); its token comes from a TokenRequest of an hour, asked again when a
//! fifth of that is left or when the apiserver answers 401 (upstream's cached, resettable token
//! source). The shared informers and leader election keep the manager's identity.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response, StatusCode, header::AUTHORIZATION};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use crate::throttle::ThrottleLayer;

/// Where controllers' service accounts live.
pub const NAMESPACE: &str = "kube-system";
/// Upstream's `defaultExpirationSeconds`.
pub const EXPIRATION_SECONDS: i64 = 3600;
/// Upstream's `defaultLeewayPercent`: a token is renewed when this share of its life is left.
pub const LEEWAY_PERCENT: u32 = 20;

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("service account {NAMESPACE}/{account}: {source}")]
    Account { account: String, source: kube::Error },
    #[error("token for service account {NAMESPACE}/{account}: {source}")]
    Token { account: String, source: kube::Error },
    #[error("token for service account {NAMESPACE}/{account}: the response carries no token")]
    Empty { account: String },
    #[error("token for service account {NAMESPACE}/{account} is not a valid header value")]
    Header { account: String },
    #[error("a request was sent before the credentials were ready")]
    NotReady,
    #[error("building the client for service account {NAMESPACE}/{account}: {source}")]
    Client { account: String, source: kube::Error },
}

/// A token and how long it lives.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub lifetime: Duration,
}

/// Asks the apiserver for an account's token (a fake in tests).
pub trait TokenFetch: Send + Sync + 'static {
    fn fetch(&self, account: &str) -> BoxFuture<'static, Result<Issued, CredentialsError>>;
}

/// The real fetch: the account made if missing, then `serviceaccounts/token`, both with the
/// manager's own client.
#[derive(Clone)]
pub struct ApiTokens {
    pub root: kube::Client,
}

impl TokenFetch for ApiTokens {
    fn fetch(&self, account: &str) -> BoxFuture<'static, Result<Issued, CredentialsError>> {
        let api: Api<ServiceAccount> = Api::namespaced(self.root.clone(), NAMESPACE);
        let account = account.to_string();
        Box::pin(async move {
            let known = api
                .get_opt(&account)
                .await
                .map_err(|source| CredentialsError::Account { account: account.clone(), source })?;
            if known.is_none() {
                let mut sa = ServiceAccount::default();
                sa.metadata.name = Some(account.clone());
                match api.create(&PostParams::default(), &sa).await {
                    Ok(_) => tracing::info!(account, "created the controller's service account"),
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(source) => {
                        return Err(CredentialsError::Account { account, source });
                    }
                }
            }
            let request = TokenRequest {
                spec: TokenRequestSpec {
                    expiration_seconds: Some(EXPIRATION_SECONDS),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            };
            let issued = api
                .create_token_request(&account, &PostParams::default(), &request)
                .await
                .map_err(|source| CredentialsError::Token { account: account.clone(), source })?;
            let status =
                issued.status.ok_or(CredentialsError::Empty { account: account.clone() })?;
            if status.token.is_empty() {
                return Err(CredentialsError::Empty { account });
            }
            let left = status.expiration_timestamp.0.duration_since(jiff::Timestamp::now());
            let lifetime = Duration::try_from(left)
                .unwrap_or(Duration::ZERO)
                .min(Duration::from_secs(EXPIRATION_SECONDS.unsigned_abs()));
            Ok(Issued { token: status.token, lifetime })
        })
    }
}

impl std::fmt::Debug for ApiTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiTokens")
    }
}

/// One account's token, fetched when first needed and again near its end or after a 401.
pub struct CachedToken {
    account: String,
    fetch: Arc<dyn TokenFetch>,
    current: std::sync::Mutex<Option<(HeaderValue, Instant)>>,
}

impl std::fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedToken").field("account", &self.account).finish_non_exhaustive()
    }
}

impl CachedToken {
    pub fn new(account: &str, fetch: Arc<dyn TokenFetch>) -> Self {
        Self { account: account.to_string(), fetch, current: std::sync::Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(HeaderValue, Instant)>> {
        self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `Authorization` value while the token has more than the leeway left.
    pub fn fresh(&self) -> Option<HeaderValue> {
        let current = self.lock();
        let (value, renew_at) = current.as_ref()?;
        (Instant::now() < *renew_at).then(|| value.clone())
    }

    /// Asks for a new token and keeps it.
    pub async fn renew(&self) -> Result<HeaderValue, CredentialsError> {
        let issued = self.fetch.fetch(&self.account).await?;
        let mut value = HeaderValue::from_str(&format!("Bearer {}", issued.token))
            .map_err(|_| CredentialsError::Header { account: self.account.clone() })?;
        value.set_sensitive(true);
        let renew_at = Instant::now() + issued.lifetime * (100 - LEEWAY_PERCENT) / 100;
        *self.lock() = Some((value.clone(), renew_at));
        Ok(value)
    }

    /// The value to send now: the kept one, or a new one.
    pub async fn header(&self) -> Result<HeaderValue, CredentialsError> {
        match self.fresh() {
            Some(v) => Ok(v),
            None => self.renew().await,
        }
    }

    /// Forgets the token (the apiserver refused it).
    pub fn reset(&self) {
        *self.lock() = None;
    }
}

/// A tower layer that sends each request with the account's current token.
#[derive(Debug, Clone)]
pub struct BearerLayer {
    token: Arc<CachedToken>,
}

impl<S> tower::Layer<S> for BearerLayer {
    type Service = Bearer<S>;
    fn layer(&self, inner: S) -> Bearer<S> {
        Bearer { inner, token: self.token.clone(), renewing: None, next: None }
    }
}

/// Ready once it holds a token for the next request (renewing it in `poll_ready` when due);
/// a failed renewal fails that one request, not the service.
pub struct Bearer<S> {
    inner: S,
    token: Arc<CachedToken>,
    renewing: Option<BoxFuture<'static, Result<HeaderValue, CredentialsError>>>,
    next: Option<Result<HeaderValue, CredentialsError>>,
}

impl<S> std::fmt::Debug for Bearer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer").field("token", &self.token).finish_non_exhaustive()
    }
}

impl<S, B, RB> tower::Service<Request<B>> for Bearer<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: From<CredentialsError> + Send + 'static,
    RB: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if self.next.is_none() {
            if let Some(value) = self.token.fresh() {
                self.next = Some(Ok(value));
            } else {
                let token = &self.token;
                let renewing = self.renewing.get_or_insert_with(|| {
                    let token = token.clone();
                    Box::pin(async move { token.renew().await })
                });
                match renewing.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(r) => {
                        self.renewing = None;
                        self.next = Some(r);
                    }
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let value = match self.next.take() {
            Some(Ok(value)) => value,
            Some(Err(e)) => return Box::pin(std::future::ready(Err(e.into()))),
            None => return Box::pin(std::future::ready(Err(CredentialsError::NotReady.into()))),
        };
        req.headers_mut().insert(AUTHORIZATION, value);
        let response = self.inner.call(req);
        let token = self.token.clone();
        Box::pin(async move {
            let response = response.await?;
            if response.status() == StatusCode::UNAUTHORIZED {
                token.reset();
            }
            Ok(response)
        })
    }
}

/// The identity controllers' clients carry.
pub enum ClientBuilder {
    /// Every controller as the manager itself.
    Root(kube::Client),
    /// Each controller as its own service account (`--use-service-account-credentials`).
    ServiceAccounts {
        root: kube::Client,
        /// The manager's connection settings without its credentials.
        base: Box<kube::Config>,
        qps: f32,
        burst: u32,
    },
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientBuilder::Root(_) => "ClientBuilder::Root",
            ClientBuilder::ServiceAccounts { .. } => "ClientBuilder::ServiceAccounts",
        })
    }
}

impl ClientBuilder {
    /// Per-account clients from the manager's `config`: its credentials are dropped, each
    /// client gets the account's token and its own `--kube-api-qps` bucket (as upstream's
    /// copied rest config).
    pub fn service_accounts(
        root: kube::Client,
        config: &kube::Config,
        qps: f32,
        burst: u32,
    ) -> Self {
        let mut base = config.clone();
        base.auth_info = kube::config::AuthInfo::default();
        ClientBuilder::ServiceAccounts { root, base: Box::new(base), qps, burst }
    }

    /// The manager's own client (informers, leader election).
    pub fn root(&self) -> &kube::Client {
        match self {
            ClientBuilder::Root(c) | ClientBuilder::ServiceAccounts { root: c, .. } => c,
        }
    }

    /// The client the controller whose account is `account` uses.
    pub fn client(&self, account: &str) -> Result<kube::Client, CredentialsError> {
        let ClientBuilder::ServiceAccounts { root, base, qps, burst } = self else {
            return Ok(self.root().clone());
        };
        let token = Arc::new(CachedToken::new(account, Arc::new(ApiTokens { root: root.clone() })));
        let builder = kube::client::ClientBuilder::try_from((**base).clone())
            .map_err(|source| CredentialsError::Client { account: account.to_string(), source })?;
        Ok(builder
            .with_layer(&BearerLayer { token })
            .with_layer(&ThrottleLayer::new(*qps, *burst))
            .build())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Counting {
        calls: Arc<AtomicUsize>,
        lifetime: Duration,
    }

    impl TokenFetch for Counting {
        fn fetch(&self, account: &str) -> BoxFuture<'static, Result<Issued, CredentialsError>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let issued = Issued { token: format!("{account}-{n}"), lifetime: self.lifetime };
            Box::pin(async move { Ok(issued) })
        }
    }

    fn cached(lifetime: Duration) -> (CachedToken, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let fetch = Arc::new(Counting { calls: calls.clone(), lifetime });
        (CachedToken::new("job-controller", fetch), calls)
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_reused_until_a_fifth_of_its_life_is_left() {
        let (token, calls) = cached(Duration::from_secs(3600));
        assert_eq!(token.header().await.unwrap(), "Bearer job-controller-0");
        tokio::time::advance(Duration::from_secs(2879)).await;
        assert_eq!(token.header().await.unwrap(), "Bearer job-controller-0");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(token.header().await.unwrap(), "Bearer job-controller-1");
        assert!(token.header().await.unwrap().is_sensitive());
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_token_is_asked_for_again() {
        let (token, calls) = cached(Duration::from_secs(3600));
        token.header().await.unwrap();
        token.reset();
        assert_eq!(token.header().await.unwrap(), "Bearer job-controller-1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_carries_the_token_and_a_401_resets_it() {
        use tower::{Layer, Service, ServiceExt};
        let (token, calls) = cached(Duration::from_secs(3600));
        let token = Arc::new(token);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let inner = tower::service_fn(move |req: Request<()>| {
            let auth = req.headers()[AUTHORIZATION].to_str().unwrap().to_string();
            let status =
                if auth.ends_with("-0") { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
            log.lock().unwrap().push(auth);
            async move {
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                    Response::builder().status(status).body(()).unwrap(),
                )
            }
        });
        let mut svc = BearerLayer { token }.layer(inner);
        let first = svc.ready().await.unwrap().call(Request::new(())).await.unwrap();
        assert_eq!(first.status(), StatusCode::UNAUTHORIZED);
        let second = svc.ready().await.unwrap().call(Request::new(())).await.unwrap();
        assert_eq!(second.status(), StatusCode::OK);
        assert_eq!(*seen.lock().unwrap(), ["Bearer job-controller-0", "Bearer job-controller-1"]);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
