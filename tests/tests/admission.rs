//! Pod admission and node allocatable on real containerd: `systemReserved`/`kubeReserved`
//! come out of the node's allocatable, a pod bound to the node that asks for more than is left
//! is `Failed` with upstream's reason and message (`OutOfcpu`, `OutOfmemory`, `NodeAffinity`)
//! and a Warning event while pods that fit run; a static (critical) pod short of CPU preempts
//! an API pod (`Preempting`) as upstream's kubelet does; and a reservation above capacity stops
//! the kubelet at start in upstream's words.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::containerd::Containerd;
use e2e::kubelet::Kubelet;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};

const NODE: &str = "node-admit";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn pod(name: &str, requests: serde_json::Value, selector: Option<(&str, &str)>) -> Pod {
    let mut spec = serde_json::json!({
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "busybox-httpd:1.35",
            "resources": {"requests": requests}}],
    });
    if let Some((k, v)) = selector {
        spec["nodeSelector"] = serde_json::json!({ k: v });
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn quantity(of: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, milli: bool) -> i128 {
    let q = api::quantity::Quantity::parse(&of.0).unwrap();
    if milli { q.milli_value() } else { q.value() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_shrink_allocatable_and_pods_beyond_it_are_rejected_as_upstream() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let flags = ["--system-reserved=cpu=500m,memory=256Mi", "--kube-reserved=cpu=250m,pid=100"];
    let cluster = JoinedNode::start_with_kubelet_flags(NODE, &flags).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node =
        eventually("node registered", WAIT, POLL, || async { nodes.get_opt(NODE).await.ok()? })
            .await
            .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let status = node.status.unwrap();
    let (capacity, allocatable) = (status.capacity.unwrap(), status.allocatable.unwrap());
    let cpu = quantity(&capacity["cpu"], true);
    assert_eq!(quantity(&allocatable["cpu"], true), cpu - 750, "{allocatable:?}");
    let memory = quantity(&capacity["memory"], false);
    // systemReserved 256Mi and the test kubelets' memory.available<100Mi.
    assert_eq!(quantity(&allocatable["memory"], false), memory - (356 << 20));
    let alloc_cpu = cpu - 750;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let too_much_cpu =
        pod("too-much-cpu", serde_json::json!({"cpu": format!("{}m", alloc_cpu + 1)}), None);
    let too_much_memory = pod("too-much-memory", serde_json::json!({"memory": "1Ti"}), None);
    let elsewhere = pod("elsewhere", serde_json::json!({}), Some(("disk", "none")));
    let fits = pod("fits", serde_json::json!({"cpu": "10m", "memory": "8Mi"}), None);
    for p in [&too_much_cpu, &too_much_memory, &elsewhere, &fits] {
        pods.create(&pp, p).await.unwrap();
    }
    let failed = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let s = pods.get(name).await.ok()?.status?;
            (s.phase.as_deref() == Some("Failed"))
                .then(|| (s.reason.unwrap_or_default(), s.message.unwrap_or_default()))
        }
    };
    let cpu_rejection = eventually("too-much-cpu rejected", WAIT, POLL, || failed("too-much-cpu"))
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    assert_eq!(
        cpu_rejection,
        (
            "OutOfcpu".to_string(),
            format!(
                "Pod was rejected: Node didn't have enough resource: cpu, requested: {}, used: 0, capacity: {alloc_cpu}",
                alloc_cpu + 1
            )
        )
    );
    let (reason, message) =
        eventually("too-much-memory rejected", WAIT, POLL, || failed("too-much-memory"))
            .await
            .unwrap();
    assert_eq!(reason, "OutOfmemory");
    assert!(
        message.starts_with("Pod was rejected: Node didn't have enough resource: memory, requested: 1099511627776, used: "),
        "{message}"
    );
    let (reason, message) =
        eventually("elsewhere rejected", WAIT, POLL, || failed("elsewhere")).await.unwrap();
    assert_eq!(
        (reason.as_str(), message.as_str()),
        (
            "NodeAffinity",
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
        )
    );
    eventually("fits runs", WAIT, POLL, || async {
        let s = pods.get("fits").await.ok()?.status?;
        (s.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    let events: Api<Event> = Api::namespaced(client, "default");
    let warning = eventually("an OutOfcpu event", WAIT, POLL, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("OutOfcpu")
                && e.involved_object.name.as_deref() == Some("too-much-cpu")
        })
    })
    .await
    .unwrap();
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_pod_short_of_cpu_preempts_an_api_pod_to_run_as_upstream() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node =
        eventually("node registered", WAIT, POLL, || async { nodes.get_opt(NODE).await.ok()? })
            .await
            .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let alloc_cpu = quantity(&node.status.unwrap().allocatable.unwrap()["cpu"], true);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // An API pod takes all but 100m of the node's CPU.
    let hog = pod("hog", serde_json::json!({"cpu": format!("{}m", alloc_cpu - 100)}), None);
    pods.create(&PostParams::default(), &hog).await.unwrap();
    eventually("hog runs", WAIT, POLL, || async {
        let s = pods.get("hog").await.ok()?.status?;
        (s.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    // A static pod asking 500m: critical, so the hog makes room instead of it being refused.
    cluster
        .kubelet
        .write_manifest(
            "critical.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: critical\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n    resources:\n      requests: {cpu: 500m}\n",
        )
        .unwrap();
    let preempted = eventually("hog preempted", WAIT, POLL, || async {
        let s = pods.get("hog").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    assert_eq!(preempted.reason.as_deref(), Some("Preempting"));
    assert_eq!(preempted.message.as_deref(), Some("Preempted in order to admit critical pod"));
    let disruption =
        preempted.conditions.unwrap().into_iter().find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(disruption.and_then(|c| c.reason).as_deref(), Some("TerminationByKubelet"));
    let mirror = format!("critical-{NODE}");
    eventually("the static pod runs", WAIT, POLL, || async {
        let p = cluster.kubelet.pod(&mirror).await?;
        (p["status"]["phase"] == "Running").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let events: Api<Event> = Api::namespaced(client, "default");
    eventually("a Preempting event on the hog", WAIT, POLL, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Preempting")
                && e.involved_object.name.as_deref() == Some("hog")
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_above_capacity_stops_the_kubelet_at_start() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let containerd = Containerd::start(Default::default()).await.unwrap();
    let mut kubelet =
        Kubelet::start_standalone_with(&containerd, &["--system-reserved=memory=100Ti,cpu=100000"])
            .unwrap();
    let status = eventually("the kubelet exits", WAIT, POLL, || {
        let exited = kubelet.exited();
        async move { exited }
    })
    .await
    .unwrap();
    assert!(!status.success());
    let log = kubelet.log_tail(1000); // the error, then a backtrace
    // cpu: 100000 cores; memory: 100Ti plus the hard eviction threshold's 100Mi.
    for want in [
        "invalid Node Allocatable configuration. Resource \"cpu\" has a reservation of 100000 but capacity of ",
        "Resource \"memory\" has a reservation of 104857700Mi but capacity of ",
        "Expected capacity >= reservation.",
    ] {
        assert!(log.contains(want), "{want}\n{log}");
    }
    drop(kubelet);
    let report = containerd.stop().await;
    assert!(report.is_clean(), "teardown leaked: {report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_disk_pressure_a_new_pod_is_turned_away_as_evicted() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    // The image filesystem is never 99.99 % free: DiskPressure from the start.
    let flags = ["--eviction-hard=imagefs.available<99.99%,memory.available<64Mi"];
    let cluster = JoinedNode::start_with_kubelet_flags(NODE, &flags).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("DiskPressure", WAIT, POLL, || async {
        let node = nodes.get_opt(NODE).await.ok()??;
        let conditions = node.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "DiskPressure" && c.status == "True").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    // Admission reads the pressure the eviction manager published at its first round (which
    // waits for the sources' first pods, as upstream's manager starts without conditions);
    // the round logs what it found under pressure.
    eventually("the eviction manager's first round", WAIT, POLL, || {
        let log = cluster.kubelet.log_tail(2000);
        async move { log.contains("kubelet::eviction::manager").then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("turned-away", serde_json::json!({}), None))
        .await
        .unwrap();
    let (reason, message) = eventually("turned-away rejected", WAIT, POLL, || async {
        let s = pods.get("turned-away").await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed"))
            .then(|| (s.reason.unwrap_or_default(), s.message.unwrap_or_default()))
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    assert_eq!(
        (reason.as_str(), message.as_str()),
        ("Evicted", "Pod was rejected: The node had condition: [DiskPressure]. ")
    );
    cluster.stop().await.unwrap();
}
