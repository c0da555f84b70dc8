//! The DaemonSet, node lifecycle and taint-eviction controllers of the controller-manager
//! against apiserver-lite: a DaemonSet placed by the scheduler on kubelet-less nodes (status
//! posted by the test) with the real kubectl's `rollout status`, and a joined kubelet on
//! containerd that stops, whose node goes NotReady and whose pod is evicted at its
//! `tolerationSeconds`, and recovers when its kubelet returns.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::apiserver::ApiServer;
use e2e::cluster::JoinedNode;
use e2e::controllers::ControllerManager;
use e2e::eventually;
use e2e::scheduler::{Scheduler, node};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn kubectl(api: &ApiServer, args: &[&str]) -> (bool, String, String) {
    let out = api.kubectl(args).unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Pod name → node, for the pods of `app=<app>` that are bound.
async fn bound(pods: &Api<Pod>, app: &str) -> Option<BTreeMap<String, String>> {
    let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.ok()?;
    Some(
        list.items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| Some((p.metadata.name?, p.spec?.node_name?)))
            .collect(),
    )
}

#[tokio::test]
async fn a_daemon_set_runs_one_pod_on_each_node_but_a_tainted_one_and_rolls_out() {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    for n in ["node-1", "node-2", "node-3", "node-tainted"] {
        let mut nd = node(n, "4", "8Gi", "110");
        if n == "node-tainted" {
            nd.spec.get_or_insert_default().taints = Some(vec![
                serde_json::from_value(
                    json!({"key": "dedicated", "value": "db", "effect": "NoSchedule"}),
                )
                .unwrap(),
            ]);
        }
        nodes.create(&PostParams::default(), &nd).await.unwrap();
    }
    let _scheduler = Scheduler::start(&server, &[]).unwrap();
    let manager =
        ControllerManager::start(&server, &["--controllers=daemonset-controller"]).unwrap();

    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "a", "image": "busybox:1.35"}]}}}
    }))
    .unwrap();
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    dss.create(&PostParams::default(), &ds).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let placed = eventually("a daemon pod bound on each untainted node", WAIT, POLL, || async {
        bound(&pods, "agent").await.filter(|b| b.len() == 3)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(30)));
    let mut on: Vec<&str> = placed.values().map(String::as_str).collect();
    on.sort_unstable();
    assert_eq!(on, ["node-1", "node-2", "node-3"], "{placed:?}");

    // No kubelets: the real kubectl waits for availability.
    let status = eventually("status counts 3 scheduled", WAIT, POLL, || async {
        let s = dss.get("agent").await.ok()?.status?;
        (s.current_number_scheduled == 3).then_some(s)
    })
    .await
    .unwrap();
    assert_eq!((status.desired_number_scheduled, status.number_misscheduled), (3, 0));
    let (ok, out, err) = kubectl(&server, &["rollout", "status", "ds/agent", "--watch=false"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "Waiting for daemon set \"agent\" rollout to finish: 0 of 3 updated pods are available...\n"
    );

    // Play the kubelets: each pod runs and is Ready.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    for name in placed.keys() {
        let mut p = pods.get(name).await.unwrap();
        p.status = Some(
            serde_json::from_value(json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]}))
            .unwrap(),
        );
        pods.replace_status(name, &PostParams::default(), &p).await.unwrap();
    }
    let (ok, out, err) = kubectl(&server, &["rollout", "status", "ds/agent", "--timeout=30s"]);
    assert!(ok, "{err}\n{}", manager.log_tail(30));
    assert!(out.ends_with("daemon set \"agent\" successfully rolled out\n"), "{out}");
    let s = dss.get("agent").await.unwrap().status.unwrap();
    assert_eq!(
        (s.number_ready, s.number_available, s.updated_number_scheduled),
        (3, Some(3), Some(3))
    );

    // The template's ControllerRevision: the real kubectl's history and table.
    let (ok, out, err) = kubectl(&server, &["rollout", "history", "ds/agent"]);
    assert!(ok, "{err}");
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["daemonset.apps/agent"], "{out}");
    assert_eq!(lines[1], ["REVISION", "CHANGE-CAUSE"], "{out}");
    assert_eq!(lines[2], ["1", "<none>"], "{out}");
    let (ok, out, err) = kubectl(&server, &["get", "controllerrevisions", "--no-headers"]);
    assert!(ok, "{err}");
    let cells: Vec<&str> = out.split_whitespace().collect();
    assert!(cells[0].starts_with("agent-"), "{out}");
    assert_eq!(cells[1..3], ["daemonset.apps/agent", "1"], "{out}");
}

/// Renews `node`'s Lease every 500 ms until dropped (a kubelet that keeps its node alive).
fn keep_alive(client: kube::Client, node: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
        loop {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let body: Lease = serde_json::from_value(json!({
                "metadata": {"name": node, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}
            }))
            .unwrap();
            match leases.get(node).await {
                Ok(mut l) => {
                    l.spec = body.spec;
                    let _ = leases.replace(node, &PostParams::default(), &l).await;
                }
                Err(_) => {
                    let _ = leases.create(&PostParams::default(), &body).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

#[tokio::test]
async fn a_node_whose_kubelet_stops_goes_not_ready_its_pod_is_evicted_at_its_toleration_and_it_recovers()
 {
    let mut cluster = JoinedNode::start("node-a").await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    // A second node kept alive by the test, so the zone is not wholly disrupted (then
    // upstream's controller taints nothing).
    nodes.create(&PostParams::default(), &node("node-b", "4", "8Gi", "110")).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kube-node-lease"}})).unwrap(),
        )
        .await;
    let alive = keep_alive(client.clone(), "node-b");
    let manager = ControllerManager::start(
        &cluster.api,
        &[
            "--controllers=node-lifecycle-controller,taint-eviction-controller",
            "--node-monitor-period=1s",
            // Longer than the kubelet's Lease renewal interval (a quarter of its 40 s), as
            // upstream requires, so a live node never flaps.
            "--node-monitor-grace-period=12s",
        ],
    )
    .unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let toleration = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3});
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "evictee"},
        "spec": {"nodeName": "node-a",
                 "containers": [{"name": "c", "image": "busybox:1.35", "command": ["sleep", "3600"]}],
                 "tolerations": [toleration("node.kubernetes.io/unreachable"),
                                 toleration("node.kubernetes.io/not-ready")]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("the pod running", WAIT, POLL, || async {
        let p = pods.get("evictee").await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    // The kubelet stops cleanly; its containers keep running, as upstream's would.
    cluster.kubelet.stop();
    let stopped = Instant::now();
    eventually("node-a NotReady", WAIT, POLL, || async {
        let (_, out, _) = kubectl(&cluster.api, &["get", "node", "node-a", "--no-headers"]);
        out.split_whitespace().nth(1).is_some_and(|s| s == "NotReady").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(30)));
    let not_ready_after = stopped.elapsed();
    let n = nodes.get("node-a").await.unwrap();
    let ready =
        n.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref(), ready.message.as_deref()),
        ("Unknown", Some("NodeStatusUnknown"), Some("Kubelet stopped posting node status."))
    );
    let taints = eventually("the unreachable NoExecute taint", WAIT, POLL, || async {
        let taints = nodes.get("node-a").await.ok()?.spec?.taints?;
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
            .then_some(taints)
    })
    .await
    .unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoSchedule")
    );
    eventually("the pod evicted", WAIT, POLL, || async {
        match pods.get("evictee").await {
            Err(_) => Some(()),
            Ok(p) => p.metadata.deletion_timestamp.map(|_| ()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(30)));
    let evicted_after = stopped.elapsed();
    // The node kept alive is untouched.
    let b = nodes.get("node-b").await.unwrap();
    assert!(b.spec.and_then(|s| s.taints).unwrap_or_default().is_empty());
    eprintln!(
        "kubelet stopped → NotReady after {not_ready_after:?}, pod evicted after {evicted_after:?} \
         (grace 12 s, period 1 s, tolerationSeconds 3)"
    );
    assert!(
        evicted_after >= not_ready_after + Duration::from_secs(2),
        "evicted before its toleration ran out"
    );

    // The kubelet returns: the node is Ready again and the controller's taints go.
    cluster.kubelet.restart().unwrap();
    let back = Instant::now();
    eventually("node-a Ready without taints", WAIT, POLL, || async {
        let n = nodes.get("node-a").await.ok()?;
        let ready =
            n.status?.conditions?.into_iter().any(|c| c.type_ == "Ready" && c.status == "True");
        let tainted = n.spec.and_then(|s| s.taints).is_some_and(|t| !t.is_empty());
        (ready && !tainted).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}\n{}", cluster.logs(&e.to_string()), manager.log_tail(30)));
    eprintln!("kubelet restarted → Ready and untainted after {:?}", back.elapsed());
    alive.abort();
    drop(manager);
    cluster.stop().await.unwrap();
}
