//! The kubelet's events: what happened to pods and manifest files, for operators.
//!
//! - [`reference`]: what an event is about ([`ObjectRef`]: a pod, a container of it, a file).
//! - [`api`]: pod events as the apiserver gets them when joined, through the shared `record`
//!   writer (a static pod's under the UID its mirror pod names).
//!
//! [`Recorder`] keeps a bounded local list (the oldest events are dropped), mirrored to the
//! log and served at `/events`, standalone or joined; joined, pod events also go to the
//! apiserver. Recording never waits, whatever the apiserver does.

pub mod api;
pub mod reference;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use serde::Serialize;

pub use record::EventType;
pub use reference::{ObjectRef, PodRef};

/// How many events are kept.
pub const CAPACITY: usize = 1000;

/// One event as `/events` shows it: like a core/v1 Event, about a pod (`pod/<ns>/<name>`, with
/// the container's `fieldPath`) or a file (`file/<path>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalEvent {
    pub time: String,
    #[serde(rename = "type")]
    pub type_: EventType,
    pub reason: String,
    pub object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Recorder {
    events: Arc<Mutex<VecDeque<LocalEvent>>>,
    api: Option<record::EventRecorder>,
}

impl Recorder {
    /// A recorder that also sends pod events to the apiserver, through `api`.
    pub fn joined(api: record::EventRecorder) -> Self {
        Self { events: Arc::default(), api: Some(api) }
    }

    /// Records an event; never waits.
    pub fn record(
        &self,
        object: &ObjectRef,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let message = record::event::truncate_message(message.into());
        if let Some(recorder) = &self.api {
            match object {
                ObjectRef::Pod(pod) => {
                    recorder.event(&api::object_reference(pod), type_, reason, &message)
                }
                ObjectRef::Node(name) => {
                    recorder.event(&api::node_reference(name), type_, reason, &message)
                }
                ObjectRef::File(_) => {}
            }
        }
        let field_path = object.field_path();
        match type_ {
            EventType::Normal => tracing::info!(reason, %object, field_path, "{message}"),
            EventType::Warning => tracing::warn!(reason, %object, field_path, "{message}"),
        }
        let event = LocalEvent {
            time: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
            type_,
            reason: reason.to_string(),
            object: object.to_string(),
            field_path: field_path.map(str::to_string),
            message,
        };
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.len() == CAPACITY {
            events.pop_front();
        }
        events.push_back(event);
    }

    pub fn warning(&self, object: &ObjectRef, reason: &str, message: impl Into<String>) {
        self.record(object, EventType::Warning, reason, message);
    }

    pub fn normal(&self, object: &ObjectRef, reason: &str, message: impl Into<String>) {
        self.record(object, EventType::Normal, reason, message);
    }

    /// Oldest first.
    pub fn list(&self) -> Vec<LocalEvent> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn keeps_the_newest_events_up_to_capacity() {
        let r = Recorder::default();
        let object = ObjectRef::file(Path::new("/m/x.yaml"));
        for i in 0..CAPACITY + 5 {
            r.normal(&object, "Test", format!("event {i}"));
        }
        let list = r.list();
        assert_eq!(list.len(), CAPACITY);
        assert_eq!(list[0].message, "event 5");
    }

    #[test]
    fn the_local_list_keeps_its_json_shape() {
        let r = Recorder::default();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "app"}]},
        }))
        .unwrap();
        r.warning(&ObjectRef::pod(&pod), "FailedSync", "boom");
        r.normal(&ObjectRef::container(&pod, "app"), "Started", "Container started");
        let json = serde_json::to_value(r.list()).unwrap();
        assert_eq!(json[0]["object"], "pod/default/web");
        assert_eq!(json[0]["type"], "Warning");
        assert!(json[0].get("fieldPath").is_none());
        assert_eq!(json[1]["fieldPath"], "spec.containers{app}");
        assert_eq!(json[1]["reason"], "Started");
    }
}
