//! The kubelet joined to apiserver-lite on real containerd, observed only through the API
//! (kube-rs and the real kubectl): node registration and heartbeat, pods bound to the node run
//! and report status, deletion through the API stops them and the kubelet confirms it.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use e2e::cluster::JoinedNode;
use e2e::registry::http_get;
use e2e::{eventually, require};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use proto::cri;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn nginx_pod(node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nginx-pod", "labels": {"app": "nginx"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "nginx", "image": "busybox-httpd:1.35", "ports": [{"containerPort": 80}]}],
        },
    }))
    .unwrap()
}

/// A capacity or allocatable list's memory, in bytes.
fn memory(of: &std::collections::BTreeMap<String, Quantity>) -> i128 {
    api::quantity::Quantity::parse(&of["memory"].0).unwrap().value()
}

fn condition(node: &Node, type_: &str) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_).map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joined_kubelet_registers_heartbeats_runs_bound_pods_and_confirms_their_deletion() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let logs = |what: &str| cluster.logs(what);

    // The node registers itself, Ready, with what the scheduler and operators read.
    let node = eventually("node Ready", WAIT, POLL, || async {
        let n = nodes.get_opt(NODE).await.ok()??;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(n)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let labels = node.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], NODE);
    assert_eq!(labels["kubernetes.io/os"], "linux");
    let status = node.status.clone().unwrap();
    let info = status.node_info.clone().unwrap();
    assert!(info.container_runtime_version.starts_with("containerd://"), "{info:?}");
    assert!(!info.kernel_version.is_empty() && !info.boot_id.is_empty());
    assert_eq!(status.capacity.as_ref().unwrap()["pods"].0, "110");
    assert_eq!(condition(&node, "MemoryPressure").as_deref(), Some("False"));
    assert_eq!(condition(&node, "PIDPressure").as_deref(), Some("False"));
    // The harness turns the disk thresholds off, as kind does (e2e::kubelet::DISK_SETTINGS):
    // no DiskPressure however full this machine's disk; memory keeps upstream's 100Mi, held
    // back from allocatable.
    assert_eq!(condition(&node, "DiskPressure").as_deref(), Some("False"));
    let (capacity, allocatable) =
        (status.capacity.as_ref().unwrap(), status.allocatable.as_ref().unwrap());
    assert_eq!(memory(capacity) - memory(allocatable), 100 << 20);

    // Its lease is held by the node and owned by the Node object.
    let lease = eventually("node lease", WAIT, POLL, || async { leases.get_opt(NODE).await.ok()? })
        .await
        .unwrap();
    let spec = lease.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(NODE));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &lease.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Node", node.metadata.uid.as_deref().unwrap())
    );
    let first_renew = spec.renew_time.unwrap();

    // A pod bound to the node runs, reports its status and serves HTTP.
    let created = Instant::now();
    pods.create(&PostParams::default(), &nginx_pod(NODE)).await.unwrap();
    let pod = eventually("nginx-pod Running 1/1", WAIT, POLL, || async {
        let p = pods.get("nginx-pod").await.ok()?;
        let s = p.status.as_ref()?;
        let ready = s.container_statuses.as_ref()?.iter().all(|c| c.ready);
        (s.phase.as_deref() == Some("Running") && ready && s.pod_ip.is_some()).then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    eprintln!("nginx-pod Running 1/1 {:?} after its creation", created.elapsed());
    let status = pod.status.unwrap();
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    assert!(status.host_ip.is_some() && status.start_time.is_some());
    let ip: std::net::IpAddr = status.pod_ip.unwrap().parse().unwrap();
    let (code, body) = eventually("HTTP on the pod IP", WAIT, POLL, || async {
        http_get(SocketAddr::new(ip, 80), "/", Duration::from_secs(2)).ok()
    })
    .await
    .unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("It works"), "{body}");
    let out = cluster.api.kubectl(&["get", "pods"]).unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("nginx-pod")).unwrap_or_default();
    assert!(row.contains("1/1") && row.contains("Running"), "{table}");

    // Deleted through the API: the kubelet stops it and confirms, and the object goes.
    let cri = cluster.containerd.client().await.unwrap();
    pods.delete("nginx-pod", &DeleteParams::default()).await.unwrap();
    eventually("nginx-pod removed from the API", WAIT, POLL, || async {
        pods.get_opt("nginx-pod").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let running = cri
        .list_containers(cri::ListContainersRequest { filter: None })
        .await
        .unwrap()
        .containers
        .into_iter()
        .filter(|c| c.state == cri::ContainerState::ContainerRunning as i32)
        .count();
    assert_eq!(running, 0, "the container was stopped before the deletion was confirmed");

    // The lease has been renewed meanwhile (every 10 s).
    eventually("lease renewed", Duration::from_secs(30), POLL, || async {
        let renewed = leases.get(NODE).await.ok()?.spec?.renew_time?;
        (renewed.0 > first_renew.0).then_some(())
    })
    .await
    .unwrap();

    cluster.stop().await.unwrap();
}

fn bound_pod(name: &str, command: &str, restart: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE, "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "busybox:1.35", "command": ["sh", "-c", command]}],
        },
    }))
    .unwrap()
}

fn container_id(p: &Pod) -> Option<String> {
    p.status.as_ref()?.container_statuses.as_ref()?.first()?.container_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_keep_running_through_a_30_s_apiserver_outage_and_status_catches_up() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut cluster = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.api.admin_client().await.unwrap(), "default");
    pods.create(&PostParams::default(), &bound_pod("steady", "exec sleep 3600", "Always"))
        .await
        .unwrap();
    // Exits 3 about 10 s in: during the outage.
    pods.create(&PostParams::default(), &bound_pod("short", "sleep 10; exit 3", "Never"))
        .await
        .unwrap();
    let running = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.ok()?;
            (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
        }
    };
    let steady = eventually("steady Running", WAIT, POLL, || running("steady")).await.unwrap();
    eventually("short Running", WAIT, POLL, || running("short")).await.unwrap();
    let steady_id = container_id(&steady).unwrap();

    cluster.api.kill9();
    tokio::time::sleep(Duration::from_secs(30)).await;
    cluster.api.restart().unwrap();

    let pods: Api<Pod> = Api::namespaced(cluster.api.admin_client().await.unwrap(), "default");
    let short = eventually("short Failed with exit 3 in the API", WAIT, POLL, || async {
        let p = pods.get("short").await.ok()?;
        let s = p.status.as_ref()?;
        let code = s.container_statuses.as_ref()?[0].state.as_ref()?.terminated.as_ref()?.exit_code;
        (s.phase.as_deref() == Some("Failed") && code == 3).then_some(p)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    assert!(short.status.is_some());
    let steady = pods.get("steady").await.unwrap();
    assert_eq!(container_id(&steady), Some(steady_id.clone()), "steady was not restarted");
    let cs = &steady.status.unwrap().container_statuses.unwrap()[0];
    assert!(cs.ready && cs.restart_count == 0, "{cs:?}");
    let cri = cluster.containerd.client().await.unwrap();
    let live =
        cri.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap().containers;
    assert!(
        live.iter().any(|c| steady_id.ends_with(&c.id)
            && c.state == cri::ContainerState::ContainerRunning as i32),
        "the steady container kept running: {live:?}"
    );

    cluster.stop().await.unwrap();
}

/// `--eviction-hard` takes effect on a real node: a threshold on the runtime's image filesystem
/// (found through CRI `ImageFsInfo`, containerd's snapshotter directory) above what is free
/// turns the node DiskPressure, and a memory threshold is what allocatable holds back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_thresholds_decide_disk_pressure_on_the_image_filesystem_and_allocatable() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let flags = ["--eviction-hard=imagefs.available<99.99%,memory.available<64Mi"];
    let cluster = JoinedNode::start_with_kubelet_flags(NODE, &flags).await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.api.admin_client().await.unwrap());
    // The node registers without pressure, as upstream's, and shows DiskPressure once the
    // eviction manager's first round has found it.
    let node = eventually("DiskPressure", WAIT, POLL, || async {
        let n = nodes.get_opt(NODE).await.ok()??;
        (condition(&n, "DiskPressure").as_deref() == Some("True")).then_some(n)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let fs = nix::sys::statvfs::statvfs(cluster.containerd.dir()).unwrap();
    assert!(fs.blocks_available() * 10_000 < fs.blocks() * 9_999, "this disk is not full");
    let conditions = node.status.as_ref().unwrap().conditions.clone().unwrap();
    let disk = conditions.iter().find(|c| c.type_ == "DiskPressure").unwrap();
    assert_eq!(
        (disk.status.as_str(), disk.reason.as_deref()),
        ("True", Some("KubeletHasDiskPressure")),
        "{}",
        cluster.logs("imagefs.available<99.99% on a filesystem with less free")
    );
    assert_eq!(condition(&node, "MemoryPressure").as_deref(), Some("False"));
    let status = node.status.unwrap();
    let (capacity, allocatable) = (status.capacity.unwrap(), status.allocatable.unwrap());
    assert_eq!(memory(&capacity) - memory(&allocatable), 64 << 20);
    // nodefs has no threshold here: nothing held back from ephemeral storage.
    assert_eq!(capacity["ephemeral-storage"], allocatable["ephemeral-storage"]);
    cluster.stop().await.unwrap();
}
