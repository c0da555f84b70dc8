//! Graceful node shutdown on real containerd, with a stand-in systemd-logind on a private
//! system bus (`e2e::logind`): the kubelet takes a delay lock; when logind announces a shutdown
//! the node turns NotReady, regular pods are stopped first (`Failed`/`Terminated`, upstream's
//! message, a `DisruptionTarget` condition), critical ones after, new pods are rejected
//! (`NodeShutdown`), and the lock is released; a cancelled shutdown brings the node back with a
//! new lock. Without logind the kubelet says graceful shutdown is off, and runs.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::{JoinedNode, StandaloneNode};
use e2e::kubelet::NODE as STANDALONE_NODE;
use e2e::logind::{FakeLogind, InhibitCall};
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;

const NODE: &str = "node-shutdown";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
const SETTINGS: &str = "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n";

fn tools() -> Vec<&'static str> {
    let mut t = require::CONTAINERD_TOOLS.to_vec();
    t.push("dbus-daemon");
    t
}

/// A pod on the node; `slow` stops in about 3 s (a preStop hook), `priority` set directly.
fn pod(name: &str, priority: Option<i32>, slow: bool) -> Pod {
    let mut container = serde_json::json!({
        "name": "c", "image": "busybox:1.35", "command": ["sleep", "3600"],
    });
    if slow {
        container["lifecycle"] =
            serde_json::json!({"preStop": {"exec": {"command": ["sleep", "3"]}}});
    }
    let mut spec = serde_json::json!({
        "nodeName": NODE, "terminationGracePeriodSeconds": 30, "containers": [container],
    });
    if let Some(p) = priority {
        spec["priority"] = p.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

fn finished_at(p: &Pod) -> jiff::Timestamp {
    let c = &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    c.state.as_ref().unwrap().terminated.as_ref().unwrap().finished_at.as_ref().unwrap().0
}

fn ready(n: &Node) -> Option<(String, String)> {
    let c = n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.message.clone().unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_logind_announces_stops_pods_by_priority_then_releases_the_lock() {
    if !require::real_runtime(&tools()) {
        return;
    }
    let logind = FakeLogind::start(Duration::from_secs(60)).await.unwrap();
    let mut cluster = JoinedNode::start(NODE).await.unwrap();
    cluster.kubelet.stop();
    let config = cluster.kubelet.config_path();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}{SETTINGS}")).unwrap();
    cluster.kubelet.set_env("DBUS_SYSTEM_BUS_ADDRESS", &logind.address());
    cluster.kubelet.restart().unwrap();
    eventually("the kubelet holds logind's delay lock", WAIT, POLL, || async {
        (logind.held() == 1).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}\ndbus:\n{}", cluster.logs(&e.to_string()), logind.log_tail()));
    let call = InhibitCall {
        what: "shutdown".into(),
        who: "kubelet".into(),
        why: "Kubelet needs time to handle node shutdown".into(),
        mode: "delay".into(),
    };
    assert_eq!(logind.calls(), vec![call.clone()]);

    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client);
    let pp = PostParams::default();
    pods.create(&pp, &pod("web", None, true)).await.unwrap();
    pods.create(&pp, &pod("critical", Some(2_000_001_000), false)).await.unwrap();
    for name in ["web", "critical"] {
        eventually(&format!("{name} Running"), WAIT, POLL, || async {
            pods.get(name).await.ok().filter(|p| phase(p) == Some("Running"))
        })
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    }

    logind.prepare_for_shutdown(true).await.unwrap();
    eventually("the node NotReady: shutting down", WAIT, POLL, || async {
        let n = nodes.get(NODE).await.ok()?;
        (ready(&n)? == ("False".into(), "node is shutting down".into())).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let failed = |name: &'static str| {
        let pods = pods.clone();
        async move { pods.get(name).await.ok().filter(|p| phase(p) == Some("Failed")) }
    };
    let web = eventually("web Failed", WAIT, POLL, || failed("web"))
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let critical = eventually("critical Failed", WAIT, POLL, || failed("critical"))
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    for p in [&web, &critical] {
        let s = p.status.as_ref().unwrap();
        assert_eq!(s.reason.as_deref(), Some("Terminated"));
        assert_eq!(
            s.message.as_deref(),
            Some("Pod was terminated in response to imminent node shutdown.")
        );
        let disruption =
            s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == "DisruptionTarget").unwrap();
        assert_eq!(
            (disruption.status.as_str(), disruption.reason.as_deref()),
            ("True", Some("TerminationByKubelet"))
        );
    }
    // The critical pod was stopped only once the regular one (3 s in its preStop hook) was.
    assert!(finished_at(&critical) >= finished_at(&web), "critical stopped before web");
    eventually("logind's lock released", WAIT, POLL, || async {
        (logind.held() == 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    // Meanwhile no pod gets in.
    let mut late = pod("late", None, false);
    late.spec.as_mut().unwrap().containers[0].lifecycle = None;
    pods.create(&pp, &late).await.unwrap();
    let late = eventually("late rejected", WAIT, POLL, || failed("late"))
        .await
        .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let s = late.status.unwrap();
    assert_eq!(s.reason.as_deref(), Some("NodeShutdown"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: Pod was rejected as the node is shutting down.")
    );

    // Cancelled: Ready again, and a new lock.
    logind.prepare_for_shutdown(false).await.unwrap();
    eventually("the node Ready again with a new lock", WAIT, POLL, || async {
        let n = nodes.get(NODE).await.ok()?;
        (ready(&n)?.0 == "True" && logind.held() == 1).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    assert_eq!(logind.calls(), vec![call.clone(), call]);
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_logind_the_kubelet_says_graceful_shutdown_is_off_and_runs_its_pods() {
    if !require::real_runtime(&tools()) {
        return;
    }
    let mut node = StandaloneNode::start_with_config(SETTINGS, &[]).await.unwrap();
    node.kubelet.stop();
    node.kubelet.set_env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/system_bus_socket");
    node.kubelet.restart().unwrap();
    node.kubelet
        .write_manifest(
            "web.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n",
        )
        .unwrap();
    node.running(&format!("web-{STANDALONE_NODE}"), WAIT, POLL).await;
    let log = node.kubelet.log_tail(usize::MAX);
    assert!(
        log.contains("graceful node shutdown is off: systemd-logind cannot be reached"),
        "{log}"
    );
    node.teardown().await;
}
