use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use record::FakeSink;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::events::{ObjectRef, Recorder};

fn pod(name: &str, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"containers": [{"name": "app"}]},
    }))
    .unwrap()
}

struct Joined {
    recorder: Recorder,
    sink: FakeSink,
    stats: record::Stats,
    stop: CancellationToken,
}

/// A joined recorder writing to a fake apiserver, its writer running.
fn joined(sink: FakeSink, capacity: usize) -> Joined {
    let source = Source { component: COMPONENT.into(), host: Some("node-a".into()) };
    let (events, queue) = record::channel(source, capacity);
    let stats = events.stats();
    let stop = CancellationToken::new();
    tokio::spawn(record::EventWriter::new(sink.clone(), queue).run(stop.clone()));
    Joined { recorder: Recorder::joined(events), sink, stats, stop }
}

/// Lets the writer run (time is paused: this only advances it as needed).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_event_reaches_the_apiserver_from_the_kubelet_of_this_node() {
    let j = joined(FakeSink::default(), 100);
    let web = pod("web", serde_json::json!({"kubernetes.io/config.source": "api"}));
    j.recorder.normal(&ObjectRef::container(&web, "app"), "Started", "Container started");
    j.recorder.normal(
        &ObjectRef::file(std::path::Path::new("/m/x.yaml")),
        "RemovedManifest",
        "gone",
    );
    settle().await;
    let events = j.sink.events();
    assert_eq!(events.len(), 1, "file events stay local: {events:#?}");
    let e = &events[0];
    let o = &e.involved_object;
    assert_eq!(
        (o.api_version.as_deref(), o.kind.as_deref(), o.namespace.as_deref(), o.name.as_deref()),
        (Some("v1"), Some("Pod"), Some("default"), Some("web"))
    );
    assert_eq!(o.uid.as_deref(), Some("uid-web"));
    assert_eq!(o.field_path.as_deref(), Some("spec.containers{app}"));
    let source = e.source.clone().unwrap();
    assert_eq!(source.component.as_deref(), Some("kubelet"));
    assert_eq!(source.host.as_deref(), Some("node-a"));
    assert_eq!(e.reporting_instance.as_deref(), Some("node-a"));
    assert_eq!(j.recorder.list().len(), 2, "both stay in /events");
    j.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_static_pods_events_carry_the_uid_its_mirror_pod_names() {
    let j = joined(FakeSink::default(), 100);
    // A static pod's UID is its config hash; its mirror carries it as config.mirror.
    let web = pod(
        "web-node-a",
        serde_json::json!({"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": "uid-web-node-a"}),
    );
    j.recorder.normal(&ObjectRef::container(&web, "app"), "Pulled", "present");
    settle().await;
    let events = j.sink.events();
    assert_eq!(events.len(), 1, "written at once, with or without a mirror");
    let o = &events[0].involved_object;
    assert_eq!((o.name.as_deref(), o.uid.as_deref()), (Some("web-node-a"), Some("uid-web-node-a")));
    j.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn recording_never_waits_for_an_apiserver_that_does_not_answer() {
    let sink = FakeSink::default();
    sink.hang();
    let j = joined(sink, 50);
    let web = pod("web", serde_json::json!({}));
    let start = std::time::Instant::now();
    for i in 0..5000 {
        j.recorder.warning(&ObjectRef::container(&web, "app"), "BackOff", format!("m{i}"));
        if i == 0 {
            settle().await; // the writer takes the first and hangs on it
        }
    }
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    assert_eq!(j.stats.counts().dropped, 5000 - 50 - 1);
    assert_eq!(j.recorder.list().len(), crate::events::CAPACITY, "/events unaffected");
    j.stop.cancel();
}
