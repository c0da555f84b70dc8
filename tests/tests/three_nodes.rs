//! Three kubelets (three private containerds on this machine) joined to apiserver-lite, with the
//! scheduler: pods spread by its scores and run, and a pod that fits nowhere gets a
//! FailedScheduling event with the per-filter reasons. Observed only through the API.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::Duration;

use e2e::apiserver::ApiServer;
use e2e::containerd::Containerd;
use e2e::kubelet::Kubelet;
use e2e::scheduler::Scheduler;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};

const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);

fn pod(name: &str, cpu: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "spread"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}},
            }],
        },
    }))
    .unwrap()
}

fn ready(n: &Node) -> bool {
    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_spreads_pods_over_three_kubelets_and_reports_a_pod_that_fits_nowhere() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let api = ApiServer::start_for_nodes(&NODES).unwrap();
    let mut containerds = Vec::new();
    let mut kubelets = Vec::new();
    for node in NODES {
        let c = Containerd::start(Default::default()).await.unwrap();
        c.import_test_images().unwrap();
        kubelets
            .push(Kubelet::start_joined(&c, node, &api.node_kubeconfig(node).unwrap()).unwrap());
        containerds.push(c);
    }
    let scheduler = Scheduler::start(&api, &[]).unwrap();
    let client = api.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let logs = |what: &str| {
        let kubelet_logs: String = kubelets.iter().map(|k| k.log_tail(15)).collect();
        format!("{what}\nscheduler:\n{}\nkubelets:\n{kubelet_logs}", scheduler.log_tail(30))
    };

    eventually("three nodes Ready", WAIT, POLL, || async {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        (list.items.iter().filter(|n| ready(n)).count() == 3).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));

    // Six equal pods on three equal nodes: LeastAllocated and BalancedAllocation put two on
    // each, and every one runs on the node it was bound to.
    for i in 0..6 {
        pods.create(&PostParams::default(), &pod(&format!("spread-{i}"), "100m")).await.unwrap();
    }
    let placed = eventually("six pods Running", WAIT, POLL, || async {
        let list = pods.list(&ListParams::default().labels("app=spread")).await.ok()?;
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        let per_node: BTreeMap<String, usize> = running.fold(BTreeMap::new(), |mut m, p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            *m.entry(node).or_default() += 1;
            m
        });
        (per_node.values().sum::<usize>() == 6).then_some(per_node)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let want: BTreeMap<String, usize> = NODES.iter().map(|n| (n.to_string(), 2)).collect();
    assert_eq!(placed, want, "spread by the scores");

    // A pod asking for more CPU than any node has: FailedScheduling, with the reason per node.
    pods.create(&PostParams::default(), &pod("too-big", "64")).await.unwrap();
    let event = eventually("FailedScheduling event", WAIT, POLL, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object.name.as_deref() == Some("too-big")
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{}", logs(&e.to_string())));
    let message = event.message.clone().unwrap_or_default();
    assert!(message.starts_with("0/3 nodes are available: 3 Insufficient cpu."), "{message}");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let too_big = pods.get("too-big").await.unwrap();
    assert_eq!(too_big.spec.unwrap().node_name, None, "not bound");
    let out = api.kubectl(&["get", "events"]).unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("FailedScheduling") && table.contains("0/3 nodes are available"),
        "{table}"
    );

    drop(scheduler);
    drop(kubelets);
    for c in containerds {
        let report = c.stop().await;
        assert!(report.is_clean(), "teardown leaked: {report:#?}");
    }
}
