//! Upstream's `EventAggregator` with `EventAggregatorByReasonFunc`: similar events (same
//! source, object, type, reason, reporting controller and instance) are grouped; once a group
//! has seen `max_events` distinct messages, each within `max_interval` of the previous one,
//! the event becomes an aggregate: `(combined from similar events): <message>`, keyed by the
//! group so that later ones count on the same aggregate object.

use std::collections::HashSet;
use std::time::Duration;

use hashlink::LruCache;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use tokio::time::Instant;

use super::{CorrelatorOptions, event_key, join, object, source};
use crate::event::{event_name, truncate_message};

/// The prefix of an aggregate event's message.
pub const AGGREGATE_PREFIX: &str = "(combined from similar events): ";

#[derive(Debug)]
struct Record {
    messages: HashSet<String>,
    last: Instant,
}

#[derive(Debug)]
pub struct Aggregator {
    cache: LruCache<String, Record>,
    max_events: usize,
    max_interval: Duration,
}

/// The group key and the key within the group (the message).
fn keys(e: &Event) -> (String, String) {
    let (component, host) = source(e);
    let [kind, namespace, name, uid, api_version] = object(e);
    let group = join(&[
        component,
        host,
        kind,
        namespace,
        name,
        uid,
        api_version,
        e.type_.as_deref().unwrap_or_default(),
        e.reason.as_deref().unwrap_or_default(),
        e.reporting_component.as_deref().unwrap_or_default(),
        e.reporting_instance.as_deref().unwrap_or_default(),
    ]);
    (group, e.message.clone().unwrap_or_default())
}

impl Aggregator {
    pub fn new(o: &CorrelatorOptions) -> Self {
        Self {
            cache: LruCache::new(o.cache_size),
            max_events: o.max_events,
            max_interval: o.max_interval,
        }
    }

    /// The event to go on with and its cache key: the event itself under its own key, or an
    /// aggregate under the group's key.
    pub fn aggregate(
        &mut self,
        event: Event,
        now: Instant,
        wall: jiff::Timestamp,
    ) -> (Event, String) {
        let (group, message) = keys(&event);
        let mut record = match self.cache.remove(&group) {
            Some(r) if now.saturating_duration_since(r.last) <= self.max_interval => r,
            _ => Record { messages: HashSet::new(), last: now },
        };
        record.messages.insert(message);
        record.last = now;
        let aggregate = record.messages.len() >= self.max_events;
        if aggregate {
            // Keep the set below the threshold, as upstream's PopAny.
            if let Some(any) = record.messages.iter().next().cloned() {
                record.messages.remove(&any);
            }
        }
        self.cache.insert(group.clone(), record);
        if !aggregate {
            let key = event_key(&event);
            return (event, key);
        }
        let name = event.involved_object.name.as_deref().unwrap_or_default();
        let message = format!("{AGGREGATE_PREFIX}{}", event.message.as_deref().unwrap_or_default());
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(event_name(name, wall)),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(wall)),
            last_timestamp: Some(Time(wall)),
            message: Some(truncate_message(message)),
            type_: event.type_,
            reason: event.reason,
            source: event.source,
            involved_object: event.involved_object,
            ..Event::default()
        };
        (combined, group)
    }
}
