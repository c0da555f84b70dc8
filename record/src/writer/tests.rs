use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use tokio::time::Instant;

use super::*;
use crate::event::{EventType, Source};
use crate::fake::{Call, FakeSink};
use crate::recorder::{EventRecorder, channel};

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

fn kubelet(capacity: usize) -> (EventRecorder, EventQueue) {
    channel(Source { component: "kubelet".into(), host: Some("node-a".into()) }, capacity)
}

fn unreachable() -> SinkError {
    SinkError::Unreachable {
        namespace: "default".into(),
        name: "x".into(),
        message: "connection refused".into(),
    }
}

/// Runs a writer over `sink` until the recorder is dropped and its events are written.
async fn drain(sink: &FakeSink, recorder: EventRecorder, queue: EventQueue) {
    drop(recorder);
    EventWriter::new(sink.clone(), queue).run(CancellationToken::new()).await;
}

#[tokio::test(start_paused = true)]
async fn a_repeated_event_bumps_the_count_of_one_object() {
    let sink = FakeSink::default();
    let (recorder, queue) = kubelet(100);
    let writer = tokio::spawn(EventWriter::new(sink.clone(), queue).run(CancellationToken::new()));
    for _ in 0..3 {
        recorder.event(&pod("web"), EventType::Warning, "BackOff", "Back-off restarting");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "present");
    let counts = recorder.stats();
    drop(recorder);
    writer.await.unwrap();
    let events = sink.events();
    assert_eq!(events.len(), 2, "{events:#?}");
    let backoff = events.iter().find(|e| e.reason.as_deref() == Some("BackOff")).unwrap();
    assert_eq!(backoff.count, Some(3));
    assert!(backoff.last_timestamp >= backoff.first_timestamp);
    let name = backoff.metadata.name.clone().unwrap();
    let patches = sink
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Patch { name: n, .. } if *n == name))
        .count();
    assert_eq!(patches, 2);
    assert_eq!(counts.counts().written, 4);
}

#[tokio::test(start_paused = true)]
async fn a_patch_of_a_deleted_event_creates_it_again() {
    let sink = FakeSink::default();
    let (recorder, queue) = kubelet(100);
    let writer = tokio::spawn(EventWriter::new(sink.clone(), queue).run(CancellationToken::new()));
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "present");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = sink.events().pop().unwrap();
    let name = first.metadata.name.clone().unwrap();
    sink.delete("default", &name);
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "present");
    drop(recorder);
    writer.await.unwrap();
    let again = sink.events().pop().unwrap();
    assert_eq!(again.metadata.name.as_deref(), Some(name.as_str()), "created under its name");
    assert_eq!(again.count, Some(2));
    assert_eq!(
        sink.calls()[1..],
        [
            Call::Patch { namespace: "default".into(), name: name.clone() },
            Call::Create { namespace: "default".into(), name },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_apiserver_is_retried_with_jittered_sleeps_up_to_12_tries() {
    let sink = FakeSink::default();
    for _ in 0..3 {
        sink.fail_next(unreachable());
    }
    let (recorder, queue) = kubelet(100);
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "present");
    let counts = recorder.stats();
    let start = Instant::now();
    drain(&sink, recorder, queue).await;
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(20) && waited <= Duration::from_secs(30), "{waited:?}");
    assert_eq!(sink.calls().len(), 4);
    assert_eq!(sink.events().len(), 1);

    // Twelve failures: the event is given up, and the next one is written.
    let sink = FakeSink::default();
    for _ in 0..12 {
        sink.fail_next(unreachable());
    }
    let (recorder, queue) = kubelet(100);
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "present");
    recorder.event(&pod("db"), EventType::Normal, "Pulled", "present");
    let counts2 = recorder.stats();
    drain(&sink, recorder, queue).await;
    assert_eq!(sink.calls().len(), 13);
    let names: Vec<_> = sink.events().into_iter().filter_map(|e| e.involved_object.name).collect();
    assert_eq!(names, ["db"]);
    assert_eq!((counts2.counts().abandoned, counts2.counts().written), (1, 1));
    assert_eq!(counts.counts().written, 1);
}

#[tokio::test(start_paused = true)]
async fn an_event_the_apiserver_refuses_is_not_retried() {
    let sink = FakeSink::default();
    sink.fail_next(SinkError::Rejected {
        namespace: "default".into(),
        name: "x".into(),
        code: 422,
        reason: "Invalid".into(),
        message: "bad".into(),
    });
    let (recorder, queue) = kubelet(100);
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "present");
    let counts = recorder.stats();
    let start = Instant::now();
    drain(&sink, recorder, queue).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(sink.calls().len(), 1);
    assert_eq!(counts.counts().abandoned, 1);
}

#[tokio::test(start_paused = true)]
async fn the_spam_filter_drops_what_is_over_the_budget() {
    let sink = FakeSink::default();
    let (recorder, queue) = kubelet(100);
    for i in 0..30 {
        recorder.event(&pod("web"), EventType::Warning, "Unhealthy", &format!("probe {}", i % 2));
    }
    let counts = recorder.stats();
    drain(&sink, recorder, queue).await;
    assert_eq!((counts.counts().written, counts.counts().skipped), (25, 5));
    let total: i32 = sink.events().iter().filter_map(|e| e.count).sum();
    assert_eq!(total, 25, "two objects counting 25 occurrences between them");
}

#[tokio::test(start_paused = true)]
async fn an_apiserver_that_never_answers_fills_the_queue_then_drops_never_blocking() {
    let sink = FakeSink::default();
    sink.hang();
    let (recorder, queue) = kubelet(10);
    let stop = CancellationToken::new();
    let writer = tokio::spawn(EventWriter::new(sink.clone(), queue).run(stop.clone()));
    recorder.event(&pod("web"), EventType::Normal, "Pulled", "first");
    tokio::task::yield_now().await; // the writer takes it and hangs in the sink
    let start = std::time::Instant::now();
    for i in 0..1000 {
        recorder.event(&pod("web"), EventType::Normal, "Pulled", &format!("m{i}"));
    }
    assert!(start.elapsed() < Duration::from_secs(1), "recording never waits");
    let counts = recorder.counts();
    assert_eq!(counts.dropped, 990, "10 queued behind the hung write, the rest dropped");
    assert_eq!(sink.calls().len(), 1);
    // Stopping ends the writer even in the middle of a write that never returns.
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(1), writer).await.unwrap().unwrap();
    // A recorder whose writer is gone drops too, still without waiting.
    assert!(!recorder.record(crate::make_event(
        recorder.source(),
        &pod("web"),
        EventType::Normal,
        "Pulled",
        "late",
        jiff::Timestamp::now(),
    )));
    assert_eq!(recorder.counts().dropped, 991);
}
