//! Upstream's `EventSourceObjectSpamFilter`: a token bucket per source, object and type
//! (`getSpamKey`), `burst` tokens, refilled at one per `refill_every`. An event finding the
//! bucket empty is dropped: a pod that is always unhealthy cannot flood the apiserver.

use std::time::Duration;

use hashlink::LruCache;
use k8s_openapi::api::core::v1::Event;
use tokio::time::Instant;

use super::{CorrelatorOptions, join, object, source};

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug)]
pub struct SpamFilter {
    cache: LruCache<String, Bucket>,
    burst: f64,
    refill_every: Duration,
}

fn spam_key(e: &Event) -> String {
    let (component, host) = source(e);
    let [kind, namespace, name, uid, api_version] = object(e);
    join(&[
        component,
        host,
        kind,
        namespace,
        name,
        uid,
        api_version,
        e.type_.as_deref().unwrap_or_default(),
    ])
}

impl SpamFilter {
    pub fn new(o: &CorrelatorOptions) -> Self {
        Self {
            cache: LruCache::new(o.cache_size),
            burst: f64::from(o.burst),
            refill_every: o.refill_every,
        }
    }

    /// True if the event is to be dropped.
    pub fn filter(&mut self, event: &Event, now: Instant) -> bool {
        let key = spam_key(event);
        let mut bucket = self.cache.remove(&key).unwrap_or(Bucket { tokens: self.burst, at: now });
        let earned = now.saturating_duration_since(bucket.at).as_secs_f64()
            / self.refill_every.as_secs_f64().max(f64::MIN_POSITIVE);
        bucket.tokens = (bucket.tokens + earned).min(self.burst);
        bucket.at = now;
        let accept = bucket.tokens >= 1.0;
        if accept {
            bucket.tokens -= 1.0;
        }
        self.cache.insert(key, bucket);
        !accept
    }
}
