//! The eviction manager on real containerd: when the node filesystem is short (a threshold no
//! filesystem meets: 99.99 % free), the node reports `DiskPressure`, the kubelet first removes
//! dead containers and unused images, and then evicts the BestEffort pod before the pod
//! within its ephemeral-storage request — phase `Failed`, reason `Evicted`, upstream's message
//! and a `DisruptionTarget` condition — with a Warning `Evicted` event.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use proto::cri;

const NODE: &str = "node-evict";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

fn pod(name: &str, restart: &str, command: &str, requests: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "image": "busybox:1.35",
                "command": ["sh", "-c", command],
                "resources": {"requests": requests}}],
        },
    }))
    .unwrap()
}

async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.ok()?.status?.phase
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_disk_pressure_dead_containers_and_unused_images_go_first_then_the_best_effort_pod() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut cluster = JoinedNode::start(NODE).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let sleep = "echo started; sleep 3600";
    pods.create(&pp, &pod("best-effort", "Always", sleep, serde_json::json!({}))).await.unwrap();
    let within = serde_json::json!({"memory": "8Mi", "ephemeral-storage": "2Mi"});
    pods.create(&pp, &pod("within-request", "Always", sleep, within)).await.unwrap();
    pods.create(&pp, &pod("done", "Never", "echo done", serde_json::json!({}))).await.unwrap();
    for (name, want) in
        [("best-effort", "Running"), ("within-request", "Running"), ("done", "Succeeded")]
    {
        eventually(&format!("{name} {want}"), WAIT, POLL, || async {
            (phase(&pods, name).await.as_deref() == Some(want)).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    }
    let cri = cluster.containerd.client().await.unwrap();
    let containers = |cri: proto::CriClient| async move {
        cri.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap().containers
    };
    let exited = containers(cri.clone())
        .await
        .into_iter()
        .filter(|c| c.state == cri::ContainerState::ContainerExited as i32)
        .count();
    assert_eq!(exited, 1, "the finished pod's container stays until reclaimed");

    // Restart the kubelet with a node filesystem threshold no disk meets, images collectable
    // at once.
    let path = cluster.kubelet.config_path();
    let config = std::fs::read_to_string(&path)
        .unwrap()
        .replace("nodefs.available: \"0%\"\n", "nodefs.available: \"99.99%\"\n")
        .replace(
            "imageGCHighThresholdPercent: 100\n",
            "imageGCHighThresholdPercent: 100\nimageMinimumGCAge: 0s\n",
        );
    std::fs::write(&path, config).unwrap();
    cluster.kubelet.stop();
    cluster.kubelet.restart_with(&[]).unwrap();

    let nodes: Api<Node> = Api::all(client.clone());
    eventually("DiskPressure", WAIT, POLL, || async {
        let conditions = nodes.get(NODE).await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "DiskPressure" && c.status == "True").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let evicted = eventually("best-effort evicted", WAIT, POLL, || async {
        let p = pods.get("best-effort").await.ok()?;
        let s = p.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    // One pod per round: the pod within its request still runs.
    assert_eq!(phase(&pods, "within-request").await.as_deref(), Some("Running"));
    assert_eq!(evicted.reason.as_deref(), Some("Evicted"));
    let message = evicted.message.clone().unwrap_or_default();
    assert!(
        message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: "),
        "{message}"
    );
    // Upstream's DisruptionTarget condition, with the same message.
    let conditions = evicted.conditions.clone().unwrap_or_default();
    let disruption = conditions.iter().find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(
        disruption.map(|c| (c.status.as_str(), c.reason.as_deref(), c.message.as_deref())),
        Some(("True", Some("TerminationByKubelet"), Some(message.as_str()))),
        "{conditions:?}"
    );
    // Reclaimed first: the dead container, and the images no container uses.
    let exited = containers(cri.clone())
        .await
        .into_iter()
        .filter(|c| c.state == cri::ContainerState::ContainerExited as i32)
        .count();
    assert!(exited <= 1, "only the evicted pod's container may be dead now: {exited}");
    let images = cri.list_images(cri::ListImagesRequest { filter: None }).await.unwrap().images;
    let tags: Vec<String> = images.into_iter().flat_map(|i| i.repo_tags).collect();
    assert!(!tags.iter().any(|t| t.contains("busybox-httpd")), "unused image left: {tags:?}");
    assert!(tags.iter().any(|t| t.contains("busybox:1.35")), "the image in use went: {tags:?}");

    let events: Api<Event> = Api::namespaced(client, "default");
    let event = eventually("an Evicted event", WAIT, POLL, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Evicted")
                && e.involved_object.name.as_deref() == Some("best-effort")
        })
    })
    .await
    .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    cluster.stop().await.unwrap();
}

/// A soft threshold: the node shows `DiskPressure` at once, but the pod goes only once the
/// threshold has been met for its grace period, and then within `evictionMaxPodGracePeriod`
/// (2 s) rather than its own 30 s (its shell, PID 1, ignores SIGTERM, so only the kill ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_threshold_evicts_after_its_grace_period_within_the_capped_pod_grace() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    const SOFT_NODE: &str = "node-evict-soft";
    const GRACE: Duration = Duration::from_secs(15);
    let mut cluster = JoinedNode::start(SOFT_NODE).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("soft-victim", "Always", "echo started; sleep 3600", serde_json::json!({}));
    p.spec.as_mut().unwrap().node_name = Some(SOFT_NODE.into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    eventually("soft-victim Running", WAIT, POLL, || async {
        (phase(&pods, "soft-victim").await.as_deref() == Some("Running")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    cluster.kubelet.stop();
    let started = std::time::Instant::now();
    cluster
        .kubelet
        .restart_with(&[
            "--eviction-soft=nodefs.available<99.99%",
            "--eviction-soft-grace-period=nodefs.available=15s",
            "--eviction-max-pod-grace-period=2",
        ])
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("DiskPressure", WAIT, POLL, || async {
        let conditions = nodes.get(SOFT_NODE).await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "DiskPressure" && c.status == "True").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    assert_eq!(
        phase(&pods, "soft-victim").await.as_deref(),
        Some("Running"),
        "the condition shows before the grace period is served"
    );
    let evicted = eventually("soft-victim evicted", WAIT * 2, POLL, || async {
        let s = pods.get("soft-victim").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let took = started.elapsed();
    assert_eq!(evicted.reason.as_deref(), Some("Evicted"));
    assert!(took >= GRACE, "evicted {took:?} after the restart, before the 15 s grace period");
    // First seen within a round or two (10 s each) of the start, evicted at the first round
    // after 15 s, killed 2 s later: well under the pod's own 30 s on top.
    assert!(took < GRACE + Duration::from_secs(30), "took {took:?}: the pod's grace not capped?");
    cluster.stop().await.unwrap();
}
