//! The kubelet's events on real containerd, seen as users see them: joined to apiserver-lite,
//! a pod's start (`Pulled`, `Created`, `Started`) and a crash-looping container's `BackOff`
//! come from `kubelet`/<node> in `kubectl get events` and `kubectl describe pod`, a repeat
//! counts on one Event instead of making more, and a static pod's events are its mirror pod's;
//! a standalone kubelet keeps serving its events at `/events`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::containerd::Containerd;
use e2e::kubelet::Kubelet;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);

fn pod(name: &str, command: &[&str]) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": "busybox:1.35", "command": command}],
        },
    }))
    .unwrap()
}

const STATIC: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static\nspec:\n  \
                      terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: \
                      busybox:1.35\n    command: [sleep, \"3600\"]\n";

/// The events about pod `name`, by reason.
async fn events_of(events: &Api<Event>, name: &str) -> Vec<Event> {
    let list = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter().filter(|e| e.involved_object.name.as_deref() == Some(name)).collect()
}

fn with_reason<'a>(events: &'a [Event], reason: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
}

fn stdout(out: std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joined_kubelets_events_reach_kubectl_get_events_and_describe() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let logs = |what: &str| cluster.logs(what);
    let web = pods.create(&PostParams::default(), &pod("web", &["sleep", "3600"])).await.unwrap();
    pods.create(&PostParams::default(), &pod("crash", &["sh", "-c", "exit 1"])).await.unwrap();
    cluster.kubelet.write_manifest("static.yaml", STATIC).unwrap();

    // The pod's start, as upstream's kubelet tells it, about the container, from this node.
    let started = eventually("web's Pulled, Created and Started", WAIT, POLL, || async {
        let e = events_of(&events, "web").await;
        ["Pulled", "Created", "Started"].iter().all(|r| !with_reason(&e, r).is_empty()).then_some(e)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    for e in &started {
        let o = &e.involved_object;
        assert_eq!(o.uid, web.metadata.uid, "{e:?}");
        assert_eq!((o.kind.as_deref(), o.api_version.as_deref()), (Some("Pod"), Some("v1")));
        assert_eq!(o.field_path.as_deref(), Some("spec.containers{app}"));
        let source = e.source.clone().unwrap_or_default();
        assert_eq!(
            (source.component.as_deref(), source.host.as_deref()),
            (Some("kubelet"), Some(NODE))
        );
        assert_eq!(e.type_.as_deref(), Some("Normal"));
    }
    let message = |reason| with_reason(&started, reason)[0].message.clone().unwrap_or_default();
    assert_eq!(
        message("Pulled"),
        "Container image \"busybox:1.35\" already present on machine and can be accessed by the pod"
    );
    assert_eq!(message("Created"), "Container created");
    assert_eq!(message("Started"), "Container started");

    // The crash loop: BackOff, and each restart counts on the same Created event.
    let crash = eventually("crash's BackOff and a repeated Created", WAIT, POLL, || async {
        let e = events_of(&events, "crash").await;
        let created = with_reason(&e, "Created");
        let repeated = created.len() == 1 && created[0].count.unwrap_or(0) > 1;
        (repeated && !with_reason(&e, "BackOff").is_empty()).then_some(e)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let backoff = with_reason(&crash, "BackOff")[0];
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    let crash_uid = pods.get("crash").await.unwrap().metadata.uid.unwrap();
    assert_eq!(
        backoff.message.as_deref(),
        Some(
            format!("Back-off restarting failed container app in pod crash_default({crash_uid})")
                .as_str()
        )
    );
    assert_eq!(with_reason(&crash, "Started").len(), 1, "restarts count, not multiply: {crash:#?}");

    // What kubectl shows.
    let table = stdout(cluster.api.kubectl(&["get", "events"]).unwrap());
    for want in ["Pulled", "Created", "Started", "BackOff", "pod/web", "pod/crash"] {
        assert!(table.contains(want), "{want} missing from:\n{table}");
    }
    let wide = stdout(cluster.api.kubectl(&["get", "events", "-o", "wide"]).unwrap());
    assert!(wide.contains("kubelet, node-a") && wide.contains("spec.containers{app}"), "{wide}");
    let described = stdout(cluster.api.kubectl(&["describe", "pod", "web"]).unwrap());
    let listed = described.split("Events:").nth(1).unwrap_or_default();
    for want in ["Pulled", "Created", "Started", "kubelet", "Container started"] {
        assert!(listed.contains(want), "{want} missing from:\n{described}");
    }
    let described = stdout(cluster.api.kubectl(&["describe", "pod", "crash"]).unwrap());
    let listed = described.split("Events:").nth(1).unwrap_or_default();
    assert!(
        listed.contains("BackOff") && listed.contains("Back-off restarting failed container app"),
        "{described}"
    );
    assert!(listed.contains("(x"), "a count above 1 shows as (xN over ...):\n{described}");

    // The static pod's events are its mirror pod's: they name the UID the mirror's
    // config.mirror annotation holds, by which `describe` finds them.
    let mirror =
        eventually("the static pod's mirror and its Started event", WAIT, POLL, || async {
            let mirror = pods.get_opt("static-node-a").await.ok()??;
            let static_uid =
                mirror.metadata.annotations.clone()?.get("kubernetes.io/config.mirror")?.clone();
            let e = events_of(&events, "static-node-a").await;
            with_reason(&e, "Started")
                .iter()
                .any(|e| e.involved_object.uid.as_deref() == Some(static_uid.as_str()))
                .then_some(mirror)
        })
        .await
        .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    assert_ne!(mirror.metadata.uid.as_deref(), None);
    let described = stdout(cluster.api.kubectl(&["describe", "pod", "static-node-a"]).unwrap());
    let listed = described.split("Events:").nth(1).unwrap_or_default();
    for want in ["Pulled", "Created", "Started", "kubelet"] {
        assert!(listed.contains(want), "{want} missing from:\n{described}");
    }

    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_kubelet_keeps_its_events_at_slash_events() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let containerd = Containerd::start(Default::default()).await.unwrap();
    containerd.import_test_images().unwrap();
    let mut kubelet = Kubelet::start(&containerd).unwrap();
    kubelet.write_manifest("static.yaml", STATIC).unwrap();
    let events = eventually("Started at /events", WAIT, POLL, || async {
        let events = kubelet.get("/events").await?;
        let started = events.as_array()?.iter().any(|e| e["reason"] == "Started");
        started.then_some(events)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", kubelet.log_tail(40)));
    let of = |reason: &str| {
        events.as_array().unwrap().iter().find(|e| e["reason"] == reason).cloned().unwrap()
    };
    for (reason, message) in [
        (
            "Pulled",
            "Container image \"busybox:1.35\" already present on machine and can be accessed by the pod",
        ),
        ("Created", "Container created"),
        ("Started", "Container started"),
    ] {
        let e = of(reason);
        assert_eq!(e["object"], format!("pod/default/static-{}", e2e::kubelet::NODE), "{e}");
        assert_eq!(e["fieldPath"], "spec.containers{app}", "{e}");
        assert_eq!(e["message"], message, "{e}");
        assert_eq!(e["type"], "Normal", "{e}");
    }
    kubelet.stop();
    let report = containerd.stop().await;
    assert!(report.is_clean(), "teardown leaked: {report:#?}");
}
