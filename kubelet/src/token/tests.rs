use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Answers with tokens `t1`, `t2`, ... of `lifetime`, issued now; fails when told to.
#[derive(Debug)]
struct FakeSource {
    calls: AtomicUsize,
    lifetime: Duration,
    /// Issued this long ago (to make a token look old).
    age: Mutex<Duration>,
    fail: Mutex<bool>,
}

impl FakeSource {
    fn new(lifetime: Duration) -> Arc<Self> {
        Arc::new(Self {
            calls: AtomicUsize::new(0),
            lifetime,
            age: Mutex::new(Duration::ZERO),
            fail: Mutex::new(false),
        })
    }
}

impl TokenSource for FakeSource {
    fn token<'a>(&'a self, request: &'a TokenRequest) -> BoxFuture<'a, Result<Token, TokenError>> {
        Box::pin(async move {
            if *self.fail.lock().unwrap() {
                return Err(TokenError::Request {
                    namespace: request.namespace.clone(),
                    service_account: request.service_account.clone(),
                    pod: request.pod_name.clone(),
                    message: "apiserver down".into(),
                });
            }
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let issued = SystemTime::now() - *self.age.lock().unwrap();
            Ok(Token {
                token: format!("t{n}"),
                expiration: issued + self.lifetime,
                lifetime: self.lifetime,
            })
        })
    }
}

fn request(pod_uid: &str) -> TokenRequest {
    TokenRequest {
        namespace: "ns".into(),
        service_account: "default".into(),
        audiences: vec![],
        expiration_seconds: 3600,
        pod_name: "p".into(),
        pod_uid: pod_uid.into(),
    }
}

#[test]
fn refresh_is_due_at_80_percent_of_the_lifetime_or_after_a_day() {
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let token = |issued: SystemTime, lifetime: Duration| Token {
        token: "x".into(),
        expiration: issued + lifetime,
        lifetime,
    };
    let fresh = token(now, hour);
    assert!(!requires_refresh(&fresh, now, Duration::ZERO));
    assert!(!requires_refresh(&fresh, now + hour.mul_f64(0.79), Duration::ZERO));
    assert!(requires_refresh(&fresh, now + hour.mul_f64(0.81), Duration::ZERO));
    assert!(
        requires_refresh(&fresh, now + hour.mul_f64(0.79), MAX_JITTER * 10),
        "jitter brings it forward"
    );
    let year = Duration::from_secs(365 * 24 * 3600);
    let long = token(now, year);
    assert!(!requires_refresh(&long, now + Duration::from_secs(23 * 3600), Duration::ZERO));
    assert!(requires_refresh(&long, now + Duration::from_secs(25 * 3600), Duration::ZERO));
}

#[tokio::test]
async fn tokens_are_cached_until_a_refresh_is_due() {
    let source = FakeSource::new(Duration::from_secs(3600));
    let manager = TokenManager::new(source.clone());
    let a = manager.token(&request("u1")).await.unwrap();
    let again = manager.token(&request("u1")).await.unwrap();
    assert_eq!((a.token.as_str(), again.token.as_str()), ("t1", "t1"));
    let other_pod = manager.token(&request("u2")).await.unwrap();
    assert_eq!(other_pod.token, "t2", "bound to another pod: another token");
    // A token issued 50 minutes ago with an hour's lifetime is past 80 %.
    *source.age.lock().unwrap() = Duration::from_secs(50 * 60);
    manager.forget_pod("u1");
    let old = manager.token(&request("u1")).await.unwrap();
    assert_eq!(old.token, "t3");
    let refreshed = manager.token(&request("u1")).await.unwrap();
    assert_eq!(refreshed.token, "t4", "due for a refresh: asked again");
}

#[tokio::test]
async fn a_failed_refresh_keeps_a_valid_token_and_an_expired_one_is_an_error() {
    let source = FakeSource::new(Duration::from_secs(3600));
    let manager = TokenManager::new(source.clone());
    *source.age.lock().unwrap() = Duration::from_secs(50 * 60);
    let first = manager.token(&request("u1")).await.unwrap();
    *source.fail.lock().unwrap() = true;
    let kept = manager.token(&request("u1")).await.unwrap();
    assert_eq!(kept, first, "still valid: kept while the apiserver cannot answer");
    *source.fail.lock().unwrap() = false;
    *source.age.lock().unwrap() = Duration::from_secs(2 * 3600);
    manager.forget_pod("u1");
    manager.token(&request("u1")).await.unwrap(); // an already expired one is cached
    *source.fail.lock().unwrap() = true;
    let err = manager.token(&request("u1")).await.unwrap_err();
    assert!(err.to_string().contains("ns/default (pod p): apiserver down"), "{err}");
}

#[tokio::test]
async fn forgetting_a_pod_drops_its_tokens() {
    let manager = TokenManager::new(FakeSource::new(Duration::from_secs(3600)));
    manager.token(&request("u1")).await.unwrap();
    manager.token(&request("u2")).await.unwrap();
    manager.forget_pod("u1");
    assert_eq!(manager.cached(), 1);
}

#[test]
fn the_request_is_bound_to_the_pod() {
    let body =
        api::request_body(&TokenRequest { audiences: vec!["vault".into()], ..request("u1") });
    let json = serde_json::to_value(&body).unwrap();
    assert_eq!(json["spec"]["audiences"], serde_json::json!(["vault"]));
    assert_eq!(json["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        json["spec"]["boundObjectRef"],
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"})
    );
}
