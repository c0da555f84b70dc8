use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use record::{FakeSink, Source};

use super::*;
use crate::events::{ObjectRef, Recorder};

fn pod(name: &str, annotations: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"containers": [{"name": "app"}]},
    }))
    .unwrap()
}

fn static_pod(name: &str, hash: &str) -> Pod {
    pod(
        name,
        serde_json::json!({"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": hash}),
    )
}

fn mirror(name: &str, hash: &str, uid: &str) -> Pod {
    let mut m = pod(name, serde_json::json!({"kubernetes.io/config.mirror": hash}));
    m.metadata.uid = Some(uid.into());
    m
}

struct Joined {
    recorder: Recorder,
    sink: FakeSink,
    mirrors: watch::Sender<MirrorView>,
    stats: record::Stats,
    stop: CancellationToken,
}

/// A joined recorder writing to a fake apiserver, its tasks running.
fn joined(sink: FakeSink, capacity: usize) -> Joined {
    let source = Source { component: COMPONENT.into(), host: Some("node-a".into()) };
    let (events, queue) = record::channel(source, capacity);
    let stats = events.stats();
    let (mirrors, view) = watch::channel(None);
    let api = Arc::new(ApiEvents::new(events, view));
    let stop = CancellationToken::new();
    tokio::spawn(record::EventWriter::new(sink.clone(), queue).run(stop.clone()));
    tokio::spawn(api.clone().run(stop.clone()));
    Joined { recorder: Recorder::joined(api), sink, mirrors, stats, stop }
}

fn set_mirrors(j: &Joined, mirrors: &[Pod]) {
    let view: BTreeMap<String, Pod> =
        mirrors.iter().map(|m| (crate::mirror::full_name(m), m.clone())).collect();
    j.mirrors.send_replace(Some(view));
}

/// Lets the writer and the releaser run (time is paused: this only advances it as needed).
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
async fn a_static_pods_events_go_to_its_mirror_pod_once_it_exists() {
    let j = joined(FakeSink::default(), 100);
    let web = static_pod("web-node-a", "h2");
    j.recorder.normal(&ObjectRef::container(&web, "app"), "Pulled", "present");
    settle().await;
    assert!(j.sink.events().is_empty(), "held until the mirror is known");
    // A mirror of an older manifest does not stand for this version.
    set_mirrors(&j, &[mirror("web-node-a", "h1", "mirror-old")]);
    settle().await;
    assert!(j.sink.events().is_empty());
    set_mirrors(&j, &[mirror("web-node-a", "h2", "mirror-new")]);
    settle().await;
    j.recorder.normal(&ObjectRef::container(&web, "app"), "Started", "Container started");
    settle().await;
    let uids: Vec<_> =
        j.sink.events().into_iter().map(|e| e.involved_object.uid.unwrap_or_default()).collect();
    assert_eq!(uids, ["mirror-new", "mirror-new"]);
    j.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn without_a_mirror_a_static_pods_event_is_written_by_name_after_a_while() {
    let j = joined(FakeSink::default(), 100);
    let web = static_pod("web-node-a", "h1");
    j.recorder.warning(&ObjectRef::pod(&web), "FailedCreatePodSandBox", "no network");
    tokio::time::sleep(MIRROR_WAIT - Duration::from_secs(1)).await;
    assert!(j.sink.events().is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = j.sink.events();
    assert_eq!(events.len(), 1);
    let o = &events[0].involved_object;
    assert_eq!((o.name.as_deref(), o.uid.as_deref()), (Some("web-node-a"), None));
    j.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn held_events_are_bounded() {
    let j = joined(FakeSink::default(), 2000);
    let web = static_pod("web-node-a", "h1");
    for i in 0..HELD_CAPACITY + 10 {
        j.recorder.normal(&ObjectRef::pod(&web), "Test", format!("m{i}"));
    }
    settle().await;
    assert_eq!(j.stats.counts().written + j.stats.counts().skipped, 10, "the oldest go at once");
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
