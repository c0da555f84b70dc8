//! Authorization of the kubelet API, as upstream's `server/auth.go`: a request is described as
//! the API request that would allow it — a verb from the HTTP method on `nodes/<subresource>` of
//! this node (`proxy` for logs, exec and the rest; `stats`, `metrics`, `log`, `spec` for their
//! paths) — and, in Webhook mode, the apiserver is asked (SubjectAccessReview). Its answers are
//! reused for `cacheAuthorizedTTL` (yes) and `cacheUnauthorizedTTL` (no); errors are not cached.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use tokio::time::Instant;

use super::answers::Answers;
use super::request::text_error;
use super::secure::Identity;

/// What a request to the kubelet API amounts to, in the apiserver's terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    pub verb: &'static str,
    pub subresource: &'static str,
    /// This node: the `nodes` object the request is about.
    pub node: String,
}

impl Attributes {
    /// The attributes of `method path` by `caller` on node `node`.
    pub fn of(method: &Method, path: &str, caller: &Identity, node: &str) -> Self {
        let verb = match *method {
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "get",
        };
        let under = |prefix: &str| {
            path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        let subresource = [
            ("/stats", "stats"),
            ("/metrics", "metrics"),
            ("/logs", "log"),
            ("/spec", "spec"),
            ("/checkpoint", "checkpoint"),
            ("/configz", "configz"),
        ]
        .into_iter()
        .find(|(prefix, _)| under(prefix))
        .map_or("proxy", |(_, sub)| sub);
        Self {
            user: caller.name.clone(),
            groups: caller.groups.clone(),
            verb,
            subresource,
            node: node.to_string(),
        }
    }

    /// The SubjectAccessReview that asks about these attributes.
    pub fn review(&self) -> SubjectAccessReview {
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(self.user.clone()),
                groups: Some(self.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(self.verb.into()),
                    group: Some(String::new()),
                    version: Some("v1".into()),
                    resource: Some("nodes".into()),
                    subresource: Some(self.subresource.into()),
                    name: Some(self.node.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Upstream's answer to a caller that may not: 403 naming who and what.
    pub fn forbidden(&self) -> Response {
        text_error(StatusCode::FORBIDDEN, format!("Forbidden ({})", self.describe()))
    }

    /// The answer when the apiserver could not be asked: 500, and the caller may retry.
    pub fn error(&self) -> Response {
        text_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Authorization error ({})", self.describe()),
        )
    }

    fn describe(&self) -> String {
        format!(
            "user={}, verb={}, resource=nodes, subresource={}",
            self.user, self.verb, self.subresource
        )
    }
}

/// The apiserver could not answer.
#[derive(Debug, thiserror::Error)]
#[error("asking the apiserver whether {user} may {verb} nodes/{subresource}: {source}")]
pub struct ReviewError {
    pub user: String,
    pub verb: &'static str,
    pub subresource: &'static str,
    #[source]
    pub source: kube::Error,
}

/// Who answers SubjectAccessReviews: the apiserver (a fake in unit tests).
pub trait Reviewer: Send + Sync + 'static {
    fn allowed(
        &self,
        review: SubjectAccessReview,
    ) -> impl Future<Output = Result<bool, kube::Error>> + Send;
}

/// The apiserver, through the kubelet's own client (a node may create SubjectAccessReviews).
#[derive(Clone)]
pub struct ApiReviewer(pub kube::Api<SubjectAccessReview>);

impl std::fmt::Debug for ApiReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiReviewer")
    }
}

impl Reviewer for ApiReviewer {
    async fn allowed(&self, review: SubjectAccessReview) -> Result<bool, kube::Error> {
        let answered = self.0.create(&Default::default(), &review).await?;
        Ok(answered.status.is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}

/// Webhook mode: asks `reviewer`, remembering answers for their TTLs.
pub struct Webhook<R> {
    reviewer: R,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: Answers<Attributes, bool>,
}

impl<R> std::fmt::Debug for Webhook<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("allowed_ttl", &self.allowed_ttl)
            .field("denied_ttl", &self.denied_ttl)
            .finish_non_exhaustive()
    }
}

impl<R: Reviewer> Webhook<R> {
    pub fn new(reviewer: R, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        Self { reviewer, allowed_ttl, denied_ttl, cache: Answers::default() }
    }

    pub async fn authorize(&self, a: &Attributes) -> Result<bool, ReviewError> {
        let now = Instant::now();
        if let Some(allowed) = self.cache.get(a, now) {
            return Ok(allowed);
        }
        let allowed = self.reviewer.allowed(a.review()).await.map_err(|source| ReviewError {
            user: a.user.clone(),
            verb: a.verb,
            subresource: a.subresource,
            source,
        })?;
        let ttl = if allowed { self.allowed_ttl } else { self.denied_ttl };
        self.cache.put(a.clone(), allowed, now, now + ttl);
        Ok(allowed)
    }
}

/// How the secure API decides, per `authorization.mode`.
#[derive(Debug, Clone)]
pub enum Authorizer {
    AlwaysAllow,
    Webhook(Arc<Webhook<ApiReviewer>>),
}

impl Authorizer {
    pub async fn authorize(&self, a: &Attributes) -> Result<bool, ReviewError> {
        match self {
            Authorizer::AlwaysAllow => Ok(true),
            Authorizer::Webhook(w) => w.authorize(a).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::server::answers::CACHE_LIMIT;

    fn caller(name: &str) -> Identity {
        Identity { name: name.into(), groups: vec!["system:nodes".into()] }
    }

    #[test]
    fn requests_map_to_the_node_subresource_that_allows_them() {
        let me = caller("system:node:b");
        let table = [
            (Method::GET, "/containerLogs/default/p/c", "get", "proxy"),
            (Method::POST, "/exec/default/p/c", "create", "proxy"),
            (Method::GET, "/exec/default/p/c", "get", "proxy"),
            (Method::GET, "/pods", "get", "proxy"),
            (Method::GET, "/healthz", "get", "proxy"),
            (Method::GET, "/stats/summary", "get", "stats"),
            (Method::GET, "/statsfoo", "get", "proxy"),
            (Method::POST, "/stats/summary", "create", "stats"),
            (Method::GET, "/metrics", "get", "metrics"),
            (Method::GET, "/metrics/resource", "get", "metrics"),
            (Method::GET, "/logs/syslog", "get", "log"),
            (Method::GET, "/spec/", "get", "spec"),
            (Method::DELETE, "/configz", "delete", "configz"),
            (Method::PUT, "/checkpoint/ns/p/c", "update", "checkpoint"),
            (Method::PATCH, "/x", "patch", "proxy"),
            (Method::HEAD, "/pods", "get", "proxy"),
        ];
        for (method, path, verb, sub) in table {
            let a = Attributes::of(&method, path, &me, "a");
            assert_eq!((a.verb, a.subresource), (verb, sub), "{method} {path}");
        }
        let a = Attributes::of(&Method::POST, "/exec/default/p/c", &me, "a");
        let spec = a.review().spec;
        let r = spec.resource_attributes.unwrap();
        assert_eq!((spec.user.as_deref(), r.name.as_deref()), (Some("system:node:b"), Some("a")));
        assert_eq!(
            (r.resource.as_deref(), r.subresource.as_deref()),
            (Some("nodes"), Some("proxy"))
        );
        let body = String::from_utf8(
            futures::executor::block_on(axum::body::to_bytes(a.forbidden().into_body(), 1024))
                .unwrap()
                .to_vec(),
        )
        .unwrap();
        assert_eq!(
            body,
            "Forbidden (user=system:node:b, verb=create, resource=nodes, subresource=proxy)\n"
        );
    }

    /// Allows only `system:node:a`; counts the questions; fails while `down`.
    #[derive(Default)]
    struct FakeApiserver {
        asked: AtomicUsize,
        down: std::sync::atomic::AtomicBool,
    }

    impl Reviewer for Arc<FakeApiserver> {
        async fn allowed(&self, review: SubjectAccessReview) -> Result<bool, kube::Error> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            if self.down.load(Ordering::SeqCst) {
                let status = kube::core::Status::failure("down", "ServiceUnavailable");
                return Err(kube::Error::Api(Box::new(status.with_code(503))));
            }
            Ok(review.spec.user.as_deref() == Some("system:node:a"))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_reused_for_their_ttls_and_errors_are_not_cached() {
        let api = Arc::new(FakeApiserver::default());
        let w = Webhook::new(api.clone(), Duration::from_secs(300), Duration::from_secs(30));
        let yes = Attributes::of(&Method::POST, "/exec/ns/p/c", &caller("system:node:a"), "a");
        let no = Attributes::of(&Method::POST, "/exec/ns/p/c", &caller("system:node:b"), "a");
        assert!(w.authorize(&yes).await.unwrap());
        assert!(!w.authorize(&no).await.unwrap());
        assert!(w.authorize(&yes).await.unwrap() && !w.authorize(&no).await.unwrap());
        assert_eq!(api.asked.load(Ordering::SeqCst), 2, "the second round came from the cache");

        // The no expires after 30 s, the yes after 5 min.
        tokio::time::advance(Duration::from_secs(31)).await;
        w.authorize(&yes).await.unwrap();
        w.authorize(&no).await.unwrap();
        assert_eq!(api.asked.load(Ordering::SeqCst), 3);

        // The apiserver down: a cached answer still serves; a new question is an error, and
        // the error is not remembered.
        api.down.store(true, Ordering::SeqCst);
        assert!(w.authorize(&yes).await.unwrap());
        let other = Attributes::of(&Method::GET, "/pods", &caller("system:node:a"), "a");
        let err = w.authorize(&other).await.unwrap_err();
        assert!(err.to_string().contains("system:node:a may get nodes/proxy"), "{err}");
        api.down.store(false, Ordering::SeqCst);
        assert!(w.authorize(&other).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_stays_bounded_whatever_the_callers() {
        let api = Arc::new(FakeApiserver::default());
        let w = Webhook::new(api.clone(), Duration::from_secs(300), Duration::from_secs(30));
        for i in 0..(CACHE_LIMIT + 10) {
            let a = Attributes::of(&Method::GET, "/pods", &caller(&format!("u{i}")), "a");
            w.authorize(&a).await.unwrap();
        }
        assert!(w.cache.len() <= CACHE_LIMIT);
    }
}
