//! The eviction manager on real containerd. On a test-made tmpfs holding the image filesystem,
//! the kubelet's root and the pod logs: when a BestEffort pod fills it past a hard threshold the
//! node reports `DiskPressure`, the kubelet first removes dead containers and unused images, and
//! then evicts that pod rather than the one within its ephemeral-storage request — phase
//! `Failed`, reason `Evicted`, upstream's message and a `DisruptionTarget` condition — with a
//! Warning `Evicted` event; its emptyDir goes with it and the pressure lifts.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::containerd::ContainerdOptions;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use proto::cri;

const NODE: &str = "node-evict";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
const TMPFS_BYTES: u64 = 256 << 20;

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
async fn a_pod_filling_a_small_node_filesystem_is_evicted_after_dead_containers_and_unused_images_go()
 {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    // containerd's root (the image filesystem), the kubelet's root (emptyDir volumes) and the
    // pod logs all on one 256 MiB tmpfs made for the test.
    let options = ContainerdOptions { tmpfs_bytes: Some(TMPFS_BYTES), ..Default::default() };
    let mut cluster = JoinedNode::start_on(NODE, options, &[], &[]).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let sleep = "echo started; sleep 3600";
    let within = serde_json::json!({"memory": "8Mi", "ephemeral-storage": "2Mi"});
    pods.create(&pp, &pod("within-request", "Always", sleep, within)).await.unwrap();
    pods.create(&pp, &pod("done", "Never", "echo done", serde_json::json!({}))).await.unwrap();
    for (name, want) in [("within-request", "Running"), ("done", "Succeeded")] {
        wait_phase(&cluster, &pods, name, want).await;
    }
    let cri = cluster.containerd.client().await.unwrap();
    assert_eq!(exited(&cri).await, 1, "the finished pod's container stays until reclaimed");

    // Restart the kubelet with a threshold of 64 MiB free on the node filesystem (the tmpfs
    // has far more free now), a short transition period, and images collectable at once.
    let path = cluster.kubelet.config_path();
    let config = std::fs::read_to_string(&path).unwrap().replace(
        "imageGCHighThresholdPercent: 100\n",
        "imageGCHighThresholdPercent: 100\nimageMinimumGCAge: 0s\n",
    );
    std::fs::write(&path, config).unwrap();
    cluster.kubelet.stop();
    cluster
        .kubelet
        .restart_with(&[
            "--eviction-hard=memory.available<100Mi,nodefs.available<64Mi,nodefs.inodesFree<0%,imagefs.available<0%",
            "--eviction-pressure-transition-period=5s",
        ])
        .unwrap();
    let free = free_bytes(cluster.containerd.dir());
    assert!(free > 128 << 20, "the tmpfs should have room before the filler: {free} bytes free");
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("the node Ready again", WAIT, POLL, || async {
        let conditions = nodes.get(NODE).await.ok()?.status?.conditions?;
        let ready = conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        let pressure = conditions.iter().any(|c| c.type_ == "DiskPressure" && c.status == "True");
        (ready && !pressure).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    // A BestEffort pod writes into its emptyDir until 32 MiB are left.
    let fill = "avail=$(df -k /data | awk 'NR==2 {print $4}'); \
        dd if=/dev/zero of=/data/fill bs=1024 count=$((avail - 32768)) 2>/dev/null; \
        echo filled; sleep 3600";
    let mut filler = pod("filler", "Always", fill, serde_json::json!({}));
    let spec = filler.spec.as_mut().unwrap();
    spec.volumes = Some(vec![
        serde_json::from_value(serde_json::json!({"name": "data", "emptyDir": {}})).unwrap(),
    ]);
    spec.containers[0].volume_mounts = Some(vec![
        serde_json::from_value(serde_json::json!({"name": "data", "mountPath": "/data"})).unwrap(),
    ]);
    pods.create(&pp, &filler).await.unwrap();

    eventually("DiskPressure", WAIT, POLL, || async {
        let conditions = nodes.get(NODE).await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "DiskPressure" && c.status == "True").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let evicted = eventually("filler evicted", WAIT, POLL, || async {
        let s = pods.get("filler").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    // One pod per round, the one using most beyond its request: the pod within its request
    // still runs.
    assert_eq!(phase(&pods, "within-request").await.as_deref(), Some("Running"));
    assert_eq!(evicted.reason.as_deref(), Some("Evicted"));
    let message = evicted.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(
            "The node was low on resource: ephemeral-storage. Threshold quantity: 64Mi, available: "
        ),
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
    // Reclaimed before the eviction: the dead container, and the images no container uses.
    assert!(exited(&cri).await <= 1, "only the evicted pod's container may be dead now");
    let images = cri.list_images(cri::ListImagesRequest { filter: None }).await.unwrap().images;
    let tags: Vec<String> = images.into_iter().flat_map(|i| i.repo_tags).collect();
    assert!(!tags.iter().any(|t| t.contains("busybox-httpd")), "unused image left: {tags:?}");
    assert!(tags.iter().any(|t| t.contains("busybox:1.35")), "the image in use went: {tags:?}");

    // The evicted pod's emptyDir goes with it: the filesystem has room again and the
    // pressure lifts once the transition period has passed.
    eventually("DiskPressure lifted", WAIT, POLL, || async {
        let conditions = nodes.get(NODE).await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "DiskPressure" && c.status == "False").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let free = free_bytes(cluster.containerd.dir());
    assert!(free > 128 << 20, "the filler's data should be gone: {free} bytes free");

    let events: Api<Event> = Api::namespaced(client, "default");
    let event = eventually("an Evicted event", WAIT, POLL, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Evicted")
                && e.involved_object.name.as_deref() == Some("filler")
        })
    })
    .await
    .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    cluster.stop().await.unwrap();
}

async fn wait_phase(cluster: &JoinedNode, pods: &Api<Pod>, name: &str, want: &str) {
    eventually(&format!("{name} {want}"), WAIT, POLL, || async {
        (phase(pods, name).await.as_deref() == Some(want)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
}

/// The runtime's exited containers.
async fn exited(cri: &proto::CriClient) -> usize {
    let list = cri.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap();
    list.containers
        .into_iter()
        .filter(|c| c.state == cri::ContainerState::ContainerExited as i32)
        .count()
}

/// Bytes free to unprivileged users on the filesystem holding `dir`.
fn free_bytes(dir: &std::path::Path) -> u64 {
    let st = nix::sys::statvfs::statvfs(dir).unwrap();
    st.blocks_available() * st.fragment_size()
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
