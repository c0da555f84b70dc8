//! The kubelet's `/metrics` and `/metrics/probes` on real containerd, read through
//! apiserver-lite's `nodes/proxy` with the real kubectl: with N pods running, `/metrics` passes
//! `promtool check metrics`, counts the N pods and their containers, the runtime operations
//! that started them, the pod workers' syncs, PLEG's relists and its own request; the
//! process's figures are there; `/metrics/probes` counts a readiness probe's successes.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::prom::{promtool, raw, samples};
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

const NODE: &str = "node-a";
const PODS: usize = 3;
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(500);

fn pod(name: &str, readiness: bool) -> Pod {
    let mut container = serde_json::json!({
        "name": "app", "image": "busybox:1.35", "command": ["sh", "-c", "exec sleep 3600"],
    });
    if readiness {
        container["readinessProbe"] =
            serde_json::json!({"exec": {"command": ["true"]}, "periodSeconds": 1});
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [container]},
    }))
    .unwrap()
}

/// Running pods of the default namespace, per the API.
async fn running(pods: &Api<Pod>) -> Option<usize> {
    let list = pods.list(&Default::default()).await.ok()?;
    let running = list
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
    Some(running.count())
}

/// The value of the series `name` whose labels contain every one of `labels`.
fn value(samples: &[(String, String, f64)], name: &str, labels: &[&str]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && labels.iter().all(|want| l.split(',').any(|x| x == *want)))
        .map(|s| s.2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_running_pods_runtime_operations_and_probes_through_nodes_proxy() {
    let mut tools = require::CONTAINERD_TOOLS.to_vec();
    tools.push("promtool");
    if !require::real_runtime(&tools) {
        return;
    }
    let node = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(node.api.admin_client().await.unwrap(), "default");
    for i in 0..PODS {
        let p = pod(&format!("app-{i}"), i == 0);
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    eventually("the pods running", WAIT, POLL, || async {
        running(&pods).await.filter(|n| *n == PODS)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", node.logs(&e.to_string())));

    let path = format!("/api/v1/nodes/{NODE}/proxy/metrics");
    let text = eventually("kubelet_running_pods at the pod count", WAIT, POLL, || async {
        let text = raw(&node, &path).ok()?;
        #[allow(clippy::cast_precision_loss)]
        let want = PODS as f64;
        let s = samples(&text);
        let counted = value(&s, "kubelet_running_pods", &[]) == Some(want)
            && value(&s, "kubelet_running_containers", &["container_state=\"running\""])
                == Some(want);
        counted.then_some(text)
    })
    .await
    .unwrap_or_else(|e| panic!("{}\n{:?}", node.logs(&e.to_string()), raw(&node, &path)));
    let (ok, said) = promtool(&text);
    assert!(ok, "promtool check metrics: {said}\n{text}");
    println!("promtool check metrics on /metrics said: {said:?}");

    let s = samples(&text);
    let at_least = |name: &str, labels: &[&str], n: f64| {
        let v = value(&s, name, labels);
        assert!(v.is_some_and(|v| v >= n), "{name}{labels:?} = {v:?}, want >= {n}:\n{text}");
    };
    #[allow(clippy::cast_precision_loss)]
    let n = PODS as f64;
    for op in ["run_podsandbox", "create_container", "start_container"] {
        let label = format!("operation_type=\"{op}\"");
        at_least("kubelet_runtime_operations_total", &[&label], n);
        at_least("kubelet_runtime_operations_duration_seconds_count", &[&label], n);
    }
    at_least("kubelet_runtime_operations_total", &["operation_type=\"list_podsandbox\""], 1.0);
    at_least("kubelet_runtime_operations_total", &["operation_type=\"list_containers\""], 1.0);
    at_least("kubelet_started_pods_total", &[], n);
    at_least("kubelet_started_containers_total", &["container_type=\"container\""], n);
    at_least("kubelet_pod_worker_duration_seconds_count", &["operation_type=\"create\""], n);
    at_least("kubelet_pod_start_duration_seconds_count", &[], n);
    at_least("kubelet_pod_start_sli_duration_seconds_count", &["first_with_network=\"true\""], 1.0);
    at_least("kubelet_pleg_relist_duration_seconds_count", &[], 1.0);
    at_least("kubelet_pleg_relist_interval_seconds_count", &[], 1.0);
    at_least("kubelet_pleg_last_seen_seconds", &[], 1.7e9);
    at_least("kubelet_node_name", &["node=\"node-a\""], 1.0);
    at_least(
        "kubelet_http_requests_total",
        &["path=\"metrics\"", "server_type=\"readwrite\"", "method=\"GET\""],
        1.0,
    );
    at_least("process_resident_memory_bytes", &[], 1e6);
    at_least("process_cpu_seconds_total", &[], 0.0);
    at_least("process_start_time_seconds", &[], 1.7e9);
    at_least("process_open_fds", &[], 3.0);
    at_least("process_max_fds", &[], 64.0);
    assert!(text.contains("# TYPE kubelet_runtime_operations_duration_seconds histogram\n"));
    assert!(!text.contains("kubelet_evictions{"), "nothing evicts: {text}");

    let probes_path = format!("/api/v1/nodes/{NODE}/proxy/metrics/probes");
    let probes = eventually("readiness successes counted", WAIT, POLL, || async {
        let text = raw(&node, &probes_path).ok()?;
        let labels = [
            "probe_type=\"Readiness\"",
            "result=\"successful\"",
            "pod=\"app-0\"",
            "container=\"app\"",
            "namespace=\"default\"",
        ];
        (value(&samples(&text), "prober_probe_total", &labels)? >= 2.0).then_some(text)
    })
    .await
    .unwrap_or_else(|e| panic!("{}\n{:?}", node.logs(&e.to_string()), raw(&node, &probes_path)));
    let (ok, said) = promtool(&probes);
    assert!(ok, "promtool check metrics: {said}\n{probes}");
    let ps = samples(&probes);
    assert!(value(&ps, "process_start_time_seconds", &[]).is_some_and(|v| v > 1.7e9), "{probes}");
    assert!(
        ps.iter()
            .all(|(n, l, _)| !n.starts_with("prober_probe_total") || l.contains("pod=\"app-0\"")),
        "only the probed pod: {probes}"
    );
    assert!(probes.contains("prober_probe_duration_seconds_count{"), "{probes}");

    node.stop().await.unwrap();
}
