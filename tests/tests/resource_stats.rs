//! The kubelet's `/stats/summary` and `/metrics/resource` on real containerd, read through
//! apiserver-lite's `nodes/proxy` with the real kubectl: every running container is there with
//! its pod, non-zero memory and CPU time, the node's own figures are there, and the metrics
//! pass `promtool check metrics`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::prom::{promtool, raw, samples};
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(500);

fn pod(name: &str, containers: &[(&str, &str)]) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(n, script)| {
            serde_json::json!({"name": n, "image": "busybox:1.35", "command": ["sh", "-c", script]})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": containers},
    }))
    .unwrap()
}

/// `(pod, container)` of every running container of the default namespace, per the API.
async fn running(pods: &Api<Pod>) -> Option<BTreeSet<(String, String)>> {
    let mut out = BTreeSet::new();
    for p in pods.list(&Default::default()).await.ok()? {
        let name = p.metadata.name.clone()?;
        let statuses = p.status?.container_statuses?;
        for c in statuses {
            c.state.as_ref()?.running.as_ref()?;
            out.insert((name.clone(), c.name));
        }
    }
    Some(out)
}

fn number(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The summary's `(pod, container)`s of the default namespace whose memory and CPU are read.
fn summary_containers(s: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for p in s["pods"].as_array().into_iter().flatten() {
        if p["podRef"]["namespace"] != "default" {
            continue;
        }
        for c in p["containers"].as_array().into_iter().flatten() {
            if number(&c["memory"]["workingSetBytes"]) > 0
                && c["cpu"]["usageCoreNanoSeconds"].is_u64()
            {
                out.insert((
                    p["podRef"]["name"].as_str().unwrap().into(),
                    c["name"].as_str().unwrap().into(),
                ));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_and_resource_metrics_carry_every_running_container_through_nodes_proxy() {
    let mut tools = require::CONTAINERD_TOOLS.to_vec();
    tools.push("promtool");
    if !require::real_runtime(&tools) {
        return;
    }
    let node = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(node.api.admin_client().await.unwrap(), "default");
    let busy = pod("busy", &[("spin", "while :; do :; done"), ("sleeper", "exec sleep 3600")]);
    let idle =
        pod("idle", &[("sleeper", "x=$(head -c 4000000 /dev/zero | tr '\\0' a); exec sleep 3600")]);
    for p in [busy, idle] {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let want = eventually("3 containers running", WAIT, POLL, || async {
        running(&pods).await.filter(|r| r.len() == 3)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", node.logs(&e.to_string())));

    let path = format!("/api/v1/nodes/{NODE}/proxy/stats/summary");
    let summary: Value =
        eventually("every running container in the summary", WAIT, POLL, || async {
            let s: Value = serde_json::from_str(&raw(&node, &path).ok()?).ok()?;
            (summary_containers(&s) == want).then_some(s)
        })
        .await
        .unwrap_or_else(|e| panic!("{}\n{:?}", node.logs(&e.to_string()), raw(&node, &path)));
    let n = &summary["node"];
    assert_eq!(n["nodeName"], NODE);
    assert!(n["startTime"].is_string());
    assert!(number(&n["cpu"]["usageCoreNanoSeconds"]) > 0, "{n}");
    assert!(number(&n["memory"]["workingSetBytes"]) > 0, "{n}");
    assert!(number(&n["fs"]["capacityBytes"]) > 0, "{n}");
    assert!(n["runtime"]["imageFs"]["capacityBytes"].is_u64(), "{n}");
    assert!(number(&n["rlimit"]["maxpid"]) > 0 && number(&n["rlimit"]["curproc"]) > 0, "{n}");
    for p in summary["pods"].as_array().unwrap() {
        assert!(number(&p["memory"]["workingSetBytes"]) > 0, "the pod's own memory: {p}");
        assert!(p["startTime"].is_string() && p["podRef"]["uid"].is_string(), "{p}");
        // The runtime's process count for the pod, which PID pressure ranks pods by.
        assert!(number(&p["process_stats"]["process_count"]) > 0, "{p}");
        for c in p["containers"].as_array().unwrap() {
            assert!(c["logs"]["usedBytes"].is_u64(), "{c}");
            assert!(c["rootfs"]["capacityBytes"].is_u64(), "{c}");
        }
    }
    let spin = eventually("the spinning container's CPU time", WAIT, POLL, || async {
        let s: Value = serde_json::from_str(&raw(&node, &path).ok()?).ok()?;
        let busy = s["pods"].as_array()?.iter().find(|p| p["podRef"]["name"] == "busy")?.clone();
        let spin = busy["containers"].as_array()?.iter().find(|c| c["name"] == "spin")?.clone();
        // A rate needs two readings (the cgroup's counter, as cAdvisor's): polled until there.
        let rate = spin["cpu"]["usageNanoCores"].is_u64();
        (number(&spin["cpu"]["usageCoreNanoSeconds"]) > 100_000_000 && rate).then_some(spin)
    })
    .await
    .unwrap();
    assert!(number(&spin["cpu"]["usageNanoCores"]) > 0, "{spin}");

    let cpu_only = raw(&node, &format!("{path}?only_cpu_and_memory=true")).unwrap();
    let cpu_only: Value = serde_json::from_str(&cpu_only).unwrap();
    assert!(cpu_only["node"]["fs"].is_null() && cpu_only["node"]["memory"].is_object());

    // The metrics: promtool accepts them, and every running container has its working set.
    let text = raw(&node, &format!("/api/v1/nodes/{NODE}/proxy/metrics/resource")).unwrap();
    let (ok, said) = promtool(&text);
    assert!(ok, "promtool check metrics: {said}\n{text}");
    let samples = samples(&text);
    let value = |name: &str, labels: &str| {
        samples.iter().find(|(n, l, _)| n == name && l == labels).map(|s| s.2)
    };
    assert_eq!(value("resource_scrape_error", ""), Some(0.0), "{text}");
    assert!(value("node_cpu_usage_seconds_total", "").is_some_and(|v| v > 0.0), "{text}");
    assert!(value("node_memory_working_set_bytes", "").is_some_and(|v| v > 0.0), "{text}");
    for (pod, container) in &want {
        let labels = format!("container=\"{container}\",namespace=\"default\",pod=\"{pod}\"");
        for name in ["container_memory_working_set_bytes", "container_start_time_seconds"] {
            assert!(value(name, &labels).is_some_and(|v| v > 0.0), "{name}{{{labels}}}: {text}");
        }
        assert!(value("container_cpu_usage_seconds_total", &labels).is_some(), "{labels}: {text}");
        let pod_labels = format!("namespace=\"default\",pod=\"{pod}\"");
        assert!(
            value("pod_memory_working_set_bytes", &pod_labels).is_some_and(|v| v > 0.0),
            "{text}"
        );
    }
    let containers = samples.iter().filter(|(n, _, _)| n == "container_memory_working_set_bytes");
    assert_eq!(containers.count(), want.len(), "only running containers: {text}");

    node.stop().await.unwrap();
}
