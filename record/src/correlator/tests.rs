use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use tokio::time::{Instant, advance};

use super::aggregator::AGGREGATE_PREFIX;
use super::*;
use crate::event::{EventType, Source, make_event};

fn pod(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn event(object: &str, type_: EventType, reason: &str, message: &str) -> Event {
    let source = Source { component: "kubelet".into(), host: Some("node-a".into()) };
    make_event(&source, &pod(object), type_, reason, message, jiff::Timestamp::now())
}

fn backoff(message: &str) -> Event {
    event("web", EventType::Warning, "BackOff", message)
}

/// Correlates and, as the writer does after a successful write, records the apiserver's copy.
fn written(c: &mut EventCorrelator, e: Event) -> Correlation {
    let result = c.correlate(e, Instant::now(), jiff::Timestamp::now());
    match &result {
        Correlation::Create { event, key } | Correlation::Patch { event, key, .. } => {
            let mut stored = event.clone();
            stored.metadata.resource_version = Some("7".into());
            c.update_state(key, &stored);
        }
        Correlation::Skip => {}
    }
    result
}

#[tokio::test(start_paused = true)]
async fn an_identical_event_is_counted_on_the_object_already_written() {
    let mut c = EventCorrelator::default();
    let Correlation::Create { event: first, .. } = written(&mut c, backoff("m")) else {
        panic!("first occurrence creates")
    };
    advance(Duration::from_secs(30)).await;
    for n in 2..=3 {
        let again = backoff("m");
        let last = again.last_timestamp.clone();
        let Correlation::Patch { event, patch, .. } = written(&mut c, again) else {
            panic!("occurrence {n} patches")
        };
        assert_eq!(event.metadata.name, first.metadata.name, "same object");
        assert_eq!(event.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(event.first_timestamp, first.first_timestamp);
        assert_eq!(event.count, Some(n));
        assert_eq!(patch["count"], n);
        assert_eq!(patch["message"], "m");
        assert_eq!(patch["lastTimestamp"], serde_json::to_value(&last).unwrap());
    }
    // Another container's event (another fieldPath) is another object.
    let mut other = backoff("m");
    other.involved_object.field_path = Some("spec.containers{b}".into());
    assert!(matches!(written(&mut c, other), Correlation::Create { .. }));
}

#[tokio::test(start_paused = true)]
async fn similar_events_become_one_aggregate_after_ten_messages_within_ten_minutes() {
    let mut c = EventCorrelator::default();
    for i in 0..9 {
        advance(Duration::from_secs(50)).await;
        let Correlation::Create { event, .. } = written(&mut c, backoff(&format!("m{i}"))) else {
            panic!("message {i} is its own event")
        };
        assert_eq!(event.message.as_deref(), Some(format!("m{i}").as_str()));
    }
    advance(Duration::from_secs(50)).await;
    let Correlation::Create { event: combined, .. } = written(&mut c, backoff("m9")) else {
        panic!("the tenth distinct message is aggregated")
    };
    assert_eq!(combined.message.as_deref(), Some(format!("{AGGREGATE_PREFIX}m9").as_str()));
    assert_eq!(combined.reason.as_deref(), Some("BackOff"));
    assert_eq!(combined.involved_object.name.as_deref(), Some("web"));
    // The next similar event counts on the aggregate.
    let Correlation::Patch { event, patch, .. } = written(&mut c, backoff("m10")) else {
        panic!("later similar events patch the aggregate")
    };
    assert_eq!(event.metadata.name, combined.metadata.name);
    assert_eq!(event.count, Some(2));
    assert_eq!(patch["message"], format!("{AGGREGATE_PREFIX}m10"));
    // Another reason is another group.
    let killing = event_for("web", "Killing", "k");
    assert!(
        matches!(written(&mut c, killing), Correlation::Create { event, .. } if event.message.as_deref() == Some("k"))
    );
    // More than ten minutes after the last one, similar events start afresh.
    advance(Duration::from_secs(601)).await;
    let Correlation::Create { event, .. } = written(&mut c, backoff("m11")) else {
        panic!("a new window creates")
    };
    assert_eq!(event.message.as_deref(), Some("m11"));
}

fn event_for(object: &str, reason: &str, message: &str) -> Event {
    event(object, EventType::Warning, reason, message)
}

#[tokio::test(start_paused = true)]
async fn a_source_may_burst_25_events_per_object_then_one_every_5_minutes() {
    let mut c = EventCorrelator::default();
    let accepted = |c: &mut EventCorrelator, e| !matches!(written(c, e), Correlation::Skip);
    for i in 0..25 {
        assert!(accepted(&mut c, backoff("same")), "event {i} within the burst");
    }
    assert!(!accepted(&mut c, backoff("same")), "the 26th is dropped");
    assert!(!accepted(&mut c, event_for("web", "Unhealthy", "x")), "any reason, same object");
    // Other objects and the other type have their own buckets.
    assert!(accepted(&mut c, backoff_for("db")));
    assert!(accepted(&mut c, event("web", EventType::Normal, "Pulled", "p")));
    advance(Duration::from_secs(299)).await;
    assert!(!accepted(&mut c, backoff("same")));
    advance(Duration::from_secs(2)).await;
    assert!(accepted(&mut c, backoff("same")), "one token after 5 minutes");
    assert!(!accepted(&mut c, backoff("same")));
}

fn backoff_for(object: &str) -> Event {
    event(object, EventType::Warning, "BackOff", "m")
}

#[tokio::test(start_paused = true)]
async fn the_caches_stay_bounded() {
    let options = CorrelatorOptions { cache_size: 8, ..CorrelatorOptions::default() };
    let mut c = EventCorrelator::new(options);
    for i in 0..1000 {
        written(&mut c, backoff_for(&format!("pod-{i}")));
    }
    // pod-0 was evicted long ago: its event is new again, not a count on a forgotten object.
    assert!(matches!(written(&mut c, backoff_for("pod-0")), Correlation::Create { .. }));
    assert!(matches!(written(&mut c, backoff_for("pod-0")), Correlation::Patch { .. }));
}
