//! How long a failed key waits before it is retried: client-go's
//! `DefaultControllerRateLimiter`, the larger of
//!
//! - a per-key exponential backoff, 5 ms doubling with each failure up to 1000 s
//!   (`ItemExponentialFailureRateLimiter`), reset by [`RateLimiter::forget`] after a success;
//! - an overall token bucket, 10 retries/s with a burst of 100 (`BucketRateLimiter`), so many
//!   failing keys together cannot hammer the apiserver.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

pub const BASE_DELAY: Duration = Duration::from_millis(5);
pub const MAX_DELAY: Duration = Duration::from_secs(1000);
pub const BUCKET_QPS: f64 = 10.0;
pub const BUCKET_BURST: f64 = 100.0;

#[derive(Debug)]
pub struct RateLimiter<K> {
    failures: HashMap<K, u32>,
    tokens: f64,
    last: Option<Instant>,
}

impl<K: Eq + Hash + Clone> Default for RateLimiter<K> {
    fn default() -> Self {
        Self { failures: HashMap::new(), tokens: BUCKET_BURST, last: None }
    }
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    /// The delay before `key`'s next retry, counting this failure.
    pub fn when(&mut self, key: &K, now: Instant) -> Duration {
        let n = self.failures.entry(key.clone()).or_insert(0);
        let exp = 2f64.powi(i32::try_from(*n).unwrap_or(i32::MAX).min(64));
        *n = n.saturating_add(1);
        let backoff =
            BASE_DELAY.mul_f64(exp.min(MAX_DELAY.as_secs_f64() / BASE_DELAY.as_secs_f64()));
        backoff.min(MAX_DELAY).max(self.reserve(now))
    }

    /// Takes a token from the bucket; how long until it would have been there.
    fn reserve(&mut self, now: Instant) -> Duration {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * BUCKET_QPS;
            self.tokens = (self.tokens + refill).min(BUCKET_BURST);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / BUCKET_QPS)
        }
    }

    /// Forgets `key`'s failures (after a successful sync).
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    /// How many times `key` has failed since it was last forgotten.
    pub fn retries(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn per_key_backoff_doubles_from_5ms_to_1000s_and_forget_resets_it() {
        let mut r = RateLimiter::default();
        let now = Instant::now();
        let delays: Vec<u128> = (0..5).map(|_| r.when(&"a", now).as_millis()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80]);
        assert_eq!(r.when(&"b", now), BASE_DELAY, "keys back off independently");
        for _ in 0..40 {
            r.when(&"a", now + Duration::from_secs(1000));
        }
        assert_eq!(r.when(&"a", now + Duration::from_secs(2000)), MAX_DELAY);
        r.forget(&"a");
        assert_eq!(r.retries(&"a"), 0);
        assert_eq!(r.when(&"a", now + Duration::from_secs(3000)), BASE_DELAY);
    }

    #[tokio::test(start_paused = true)]
    async fn the_overall_bucket_holds_many_keys_to_10_per_second_after_a_burst_of_100() {
        let mut r = RateLimiter::default();
        let now = Instant::now();
        for i in 0..100 {
            assert_eq!(r.when(&i, now), BASE_DELAY, "within the burst");
        }
        assert_eq!(r.when(&100, now), Duration::from_millis(100));
        assert_eq!(r.when(&101, now), Duration::from_millis(200));
        // A second later ten tokens are back, two of them owed.
        let later = now + Duration::from_secs(1);
        assert_eq!(r.when(&102, later), BASE_DELAY);
    }
}
