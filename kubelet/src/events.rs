//! The kubelet's local event list: what happened to pods and manifest files, for operators.
//! Bounded (the oldest events are dropped), mirrored to the log, served at `/events`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use serde::Serialize;

/// How many events are kept.
pub const CAPACITY: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    Normal,
    Warning,
}

/// One event: like a core/v1 Event, about a pod (`pod/<ns>/<name>`) or a file (`file/<path>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalEvent {
    pub time: String,
    #[serde(rename = "type")]
    pub type_: EventType,
    pub reason: String,
    pub object: String,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Recorder {
    events: Arc<Mutex<VecDeque<LocalEvent>>>,
}

impl Recorder {
    pub fn record(&self, type_: EventType, reason: &str, object: &str, message: impl Into<String>) {
        let message = message.into();
        match type_ {
            EventType::Normal => tracing::info!(reason, object, "{message}"),
            EventType::Warning => tracing::warn!(reason, object, "{message}"),
        }
        let event = LocalEvent {
            time: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
            type_,
            reason: reason.to_string(),
            object: object.to_string(),
            message,
        };
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.len() == CAPACITY {
            events.pop_front();
        }
        events.push_back(event);
    }

    pub fn warning(&self, reason: &str, object: &str, message: impl Into<String>) {
        self.record(EventType::Warning, reason, object, message);
    }

    pub fn normal(&self, reason: &str, object: &str, message: impl Into<String>) {
        self.record(EventType::Normal, reason, object, message);
    }

    /// Oldest first.
    pub fn list(&self) -> Vec<LocalEvent> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_events_up_to_capacity() {
        let r = Recorder::default();
        for i in 0..CAPACITY + 5 {
            r.normal("Test", "pod/default/x", format!("event {i}"));
        }
        let list = r.list();
        assert_eq!(list.len(), CAPACITY);
        assert_eq!(list[0].message, "event 5");
    }
}
