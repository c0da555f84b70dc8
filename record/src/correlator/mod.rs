//! Upstream's `EventCorrelator`: what happens to an event before it is written.
//!
//! - [`aggregator`]: events that differ only in their message (same source, object, type and
//!   reason), more than 10 distinct messages within 10 minutes of each other, become one
//!   aggregate event `(combined from similar events): <message>`.
//! - [`logger`]: an event seen before (identical but for timestamps) is not created again: the
//!   existing object's `count` and `lastTimestamp` are patched.
//! - [`spam`]: a token bucket per source and object (burst 25, one more every 5 minutes);
//!   events over it are dropped.
//!
//! Each keeps its state in an LRU cache of 4096 entries, so memory is bounded whatever the
//! events. The correlator is a plain value driven by the writer, with time passed in.

pub mod aggregator;
pub mod logger;
pub mod spam;

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use serde_json::Value;
use tokio::time::Instant;

use aggregator::Aggregator;
use logger::Logger;
use spam::SpamFilter;

/// Upstream's defaults (`NewEventCorrelator`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CorrelatorOptions {
    /// Entries each cache keeps.
    pub cache_size: usize,
    /// Distinct messages of similar events before they are aggregated.
    pub max_events: usize,
    /// How long after the last similar event a new one starts afresh.
    pub max_interval: Duration,
    /// Events a source may record about one object at once...
    pub burst: u32,
    /// ...and how often it earns one more.
    pub refill_every: Duration,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        Self {
            cache_size: 4096,
            max_events: 10,
            max_interval: Duration::from_secs(600),
            burst: 25,
            refill_every: Duration::from_secs(300),
        }
    }
}

/// What to do with an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlation {
    /// Create it (a first occurrence, or an aggregate).
    Create { event: Event, key: String },
    /// It exists already (`event.metadata.name`): patch its count, lastTimestamp and message.
    Patch { event: Event, patch: Value, key: String },
    /// Over the source's budget for this object: dropped.
    Skip,
}

#[derive(Debug)]
pub struct EventCorrelator {
    aggregator: Aggregator,
    logger: Logger,
    spam: SpamFilter,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self::new(CorrelatorOptions::default())
    }
}

fn source(e: &Event) -> (&str, &str) {
    let s = e.source.as_ref();
    (
        s.and_then(|s| s.component.as_deref()).unwrap_or_default(),
        s.and_then(|s| s.host.as_deref()).unwrap_or_default(),
    )
}

/// The parts joined with a separator no part contains in practice.
fn join(parts: &[&str]) -> String {
    parts.join("\u{1f}")
}

/// The object an event is about, as upstream's keys list it: kind, namespace, name, UID,
/// apiVersion.
fn object(e: &Event) -> [&str; 5] {
    let o = &e.involved_object;
    [
        o.kind.as_deref().unwrap_or_default(),
        o.namespace.as_deref().unwrap_or_default(),
        o.name.as_deref().unwrap_or_default(),
        o.uid.as_deref().unwrap_or_default(),
        o.api_version.as_deref().unwrap_or_default(),
    ]
}

/// Upstream's `getEventKey`: everything but timestamps and counts.
pub fn event_key(e: &Event) -> String {
    let (component, host) = source(e);
    let [kind, namespace, name, uid, api_version] = object(e);
    join(&[
        component,
        host,
        kind,
        namespace,
        name,
        e.involved_object.field_path.as_deref().unwrap_or_default(),
        uid,
        api_version,
        e.type_.as_deref().unwrap_or_default(),
        e.reason.as_deref().unwrap_or_default(),
        e.message.as_deref().unwrap_or_default(),
    ])
}

impl EventCorrelator {
    pub fn new(options: CorrelatorOptions) -> Self {
        Self {
            aggregator: Aggregator::new(&options),
            logger: Logger::new(options.cache_size),
            spam: SpamFilter::new(&options),
        }
    }

    /// Upstream's `EventCorrelate`: aggregate, then count, then filter. `now` drives the
    /// windows; `wall` names and stamps an aggregate event.
    pub fn correlate(&mut self, event: Event, now: Instant, wall: jiff::Timestamp) -> Correlation {
        let (event, key) = self.aggregator.aggregate(event, now, wall);
        let (event, patch) = self.logger.observe(event, &key);
        if self.spam.filter(&event, now) {
            return Correlation::Skip;
        }
        match patch {
            Some(patch) => Correlation::Patch { event, patch, key },
            None => Correlation::Create { event, key },
        }
    }

    /// Upstream's `UpdateState`: what the apiserver answered for the event written under
    /// `key` (its name, resourceVersion and count are what the next occurrence patches).
    pub fn update_state(&mut self, key: &str, written: &Event) {
        self.logger.update(key, written);
    }
}

#[cfg(test)]
mod tests;
