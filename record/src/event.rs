//! The core/v1 Event upstream's recorder makes (`recorderImpl.makeEvent`): named
//! `<involvedObject.name>.<hex unix nanos>` in the object's namespace (`default` for
//! cluster-scoped objects), `count: 1`, `firstTimestamp` = `lastTimestamp` = now, the
//! recorder's `source`, and `reportingComponent`/`reportingInstance` from it.

use std::fmt;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Serialize;

/// Messages longer than this many bytes are cut (at a character boundary). core/v1 does not
/// limit `message`; events.k8s.io limits its `note` to 1 KiB, and so do we, so one chatty error
/// cannot make every copy of an event large.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Upstream's two event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who records: `source.component` (`kubelet`, `default-scheduler`, ...) and `source.host`
/// (the node, for node components).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub component: String,
    pub host: Option<String>,
}

/// Upstream's `GenerateEventName`: `<name>.<hex nanos>`, or a random UUID when that is not a
/// valid object name (the referenced name may be one an Event cannot carry, e.g. too long).
pub fn event_name(object_name: &str, now: jiff::Timestamp) -> String {
    let nanos = now.as_nanosecond();
    let name = format!("{object_name}.{nanos:x}");
    if api::validation::names::dns1123_subdomain(&name).is_none() {
        return name;
    }
    random_uuid()
}

/// A version 4 UUID, as upstream uses for names it cannot derive.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// `message` cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
pub fn truncate_message(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

/// The Event `source` records about `object` at `now`.
pub fn make_event(
    source: &Source,
    object: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) -> Event {
    let name = object.name.as_deref().unwrap_or_default();
    let namespace =
        object.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(name, now)),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.into()),
        message: Some(truncate_message(message.to_string())),
        type_: Some(type_.as_str().into()),
        source: Some(EventSource {
            component: Some(source.component.clone()),
            host: source.host.clone(),
        }),
        reporting_component: Some(source.component.clone()),
        reporting_instance: source.host.clone(),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some("prod".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        }
    }

    fn kubelet() -> Source {
        Source { component: "kubelet".into(), host: Some("node-a".into()) }
    }

    #[test]
    fn events_are_named_and_attributed_as_upstreams() {
        let now = jiff::Timestamp::from_nanosecond(0x1234_5678_9abc).unwrap();
        let e = make_event(&kubelet(), &pod("web"), EventType::Normal, "Pulled", "done", now);
        assert_eq!(e.metadata.name.as_deref(), Some("web.123456789abc"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("u1"));
        let source = e.source.unwrap();
        assert_eq!(
            (source.component.as_deref(), source.host.as_deref()),
            (Some("kubelet"), Some("node-a"))
        );
        assert_eq!(e.reporting_component.as_deref(), Some("kubelet"));
        assert_eq!(e.reporting_instance.as_deref(), Some("node-a"));
        assert_eq!(e.count, Some(1));
        assert_eq!(e.first_timestamp, e.last_timestamp);
        assert_eq!(e.type_.as_deref(), Some("Normal"));
    }

    #[test]
    fn a_cluster_scoped_object_has_its_events_in_default() {
        let node = ObjectReference {
            kind: Some("Node".into()),
            name: Some("n".into()),
            ..Default::default()
        };
        let e = make_event(
            &kubelet(),
            &node,
            EventType::Normal,
            "Starting",
            "",
            jiff::Timestamp::now(),
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn an_object_name_too_long_for_an_event_name_gets_a_valid_random_one() {
        let long = "a".repeat(253);
        let name = event_name(&long, jiff::Timestamp::now());
        assert_eq!(name.len(), 36, "{name}");
        assert!(api::validation::names::dns1123_subdomain(&name).is_none(), "{name}");
        assert_ne!(name, event_name(&long, jiff::Timestamp::now()), "unique");
        let fits = "a".repeat(200);
        assert!(event_name(&fits, jiff::Timestamp::now()).starts_with(&fits));
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let ascii = truncate_message("x".repeat(5000));
        assert_eq!(ascii.len(), MAX_MESSAGE_BYTES);
        let wide = truncate_message("é".repeat(1000)); // 2 bytes each
        assert_eq!(wide.len(), MAX_MESSAGE_BYTES);
        let odd = truncate_message(format!("x{}", "é".repeat(1000)));
        assert_eq!(odd.len(), MAX_MESSAGE_BYTES - 1);
        assert_eq!(truncate_message("short".into()), "short");
        let e = make_event(
            &kubelet(),
            &pod("p"),
            EventType::Warning,
            "Failed",
            &"y".repeat(4096),
            jiff::Timestamp::now(),
        );
        assert_eq!(e.message.map(|m| m.len()), Some(MAX_MESSAGE_BYTES));
    }
}
