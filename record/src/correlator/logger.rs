//! Upstream's `eventLogger`: remembers, per event key, the object an event was written as
//! (name, resourceVersion, count, firstTimestamp). An event seen again keeps that name and
//! first timestamp, counts one more, and is written as a patch of `count`, `lastTimestamp`
//! and `message` instead of a new object.

use hashlink::LruCache;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Observation {
    count: i32,
    first: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

#[derive(Debug)]
pub struct Logger {
    cache: LruCache<String, Observation>,
}

impl Logger {
    pub fn new(cache_size: usize) -> Self {
        Self { cache: LruCache::new(cache_size) }
    }

    fn remember(&mut self, key: &str, event: &Event) {
        let observation = Observation {
            count: event.count.unwrap_or(1),
            first: event.first_timestamp.clone(),
            name: event.metadata.name.clone(),
            resource_version: event.metadata.resource_version.clone(),
        };
        self.cache.insert(key.to_string(), observation);
    }

    /// The event as it is to be written, and the patch when it exists already.
    pub fn observe(&mut self, mut event: Event, key: &str) -> (Event, Option<Value>) {
        let mut patch = None;
        if let Some(last) = self.cache.get(key).filter(|o| o.count > 0).cloned() {
            event.metadata.name = last.name;
            event.metadata.resource_version = last.resource_version;
            event.first_timestamp = last.first;
            event.count = Some(last.count.saturating_add(1));
            patch = Some(json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            }));
        }
        self.remember(key, &event);
        (event, patch)
    }

    /// The apiserver's copy of the event written under `key`.
    pub fn update(&mut self, key: &str, written: &Event) {
        self.remember(key, written);
    }
}
