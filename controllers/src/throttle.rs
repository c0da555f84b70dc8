//! client-go's client-side rate limit (`--kube-api-qps`, `--kube-api-burst`): a token bucket
//! every request to the apiserver passes, as a tower layer on the kube-rs client. A request
//! that finds the bucket empty waits for its token; a non-positive QPS disables the limit.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self { qps, burst, tokens: burst, last: Instant::now() }
    }

    /// Takes a token; how long to wait until it is there.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * self.qps;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

#[derive(Debug, Clone)]
pub struct ThrottleLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl ThrottleLayer {
    pub fn new(qps: f32, burst: u32) -> Self {
        Self { bucket: Arc::new(Mutex::new(TokenBucket::new(f64::from(qps), burst))) }
    }
}

impl<S> tower::Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;
    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle { inner, bucket: self.bucket.clone() }
    }
}

#[derive(Debug, Clone)]
pub struct Throttle<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
}

impl<S, Req> tower::Service<Req> for Throttle<S>
where
    S: tower::Service<Req>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .reserve(Instant::now());
        let response = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            response.await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_requests_are_spaced_at_the_qps() {
        let mut b = TokenBucket::new(20.0, 30);
        let now = Instant::now();
        for _ in 0..30 {
            assert_eq!(b.reserve(now), Duration::ZERO);
        }
        assert_eq!(b.reserve(now), Duration::from_millis(50));
        assert_eq!(b.reserve(now), Duration::from_millis(100));
        let mut off = TokenBucket::new(-1.0, 1);
        assert_eq!(off.reserve(now), Duration::ZERO);
        assert_eq!(off.reserve(now), Duration::ZERO);
    }
}
