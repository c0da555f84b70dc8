//! `metrics.k8s.io` served by apiserver-lite itself (★: upstream needs metrics-server), on
//! real containerd: after two scrapes (`--metric-resolution=1s`), the real `kubectl top node`
//! and `kubectl top pod -A` print non-zero figures for the node and every running pod,
//! kubectl-lite prints the same rows and columns, and `get --raw` of the node metrics is a
//! NodeMetricsList. Before any pod runs, `top pod` says what kubectl says.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(500);

fn pod(name: &str, script: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "main", "image": "busybox:1.35", "command": ["sh", "-c", script]},
        ]},
    }))
    .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A row's cells (`kubectl top` pads every column).
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

fn figure(cell: &str, unit: &str) -> u64 {
    cell.strip_suffix(unit).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_top_prints_the_nodes_and_pods_usage_with_nothing_else_installed() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let node = JoinedNode::start_with(NODE, &["--metric-resolution=1s"], &[]).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(node.api.admin_client().await.unwrap(), "default");

    // Before any pod: kubectl's own answer for an empty namespace.
    let none = node.api.kubectl(&["top", "pod"]).unwrap();
    assert!(none.status.success(), "{:?}", text(&none));
    assert_eq!(text(&none), (String::new(), "No resources found in default namespace.\n".into()));
    let lite = node.api.kubectl_lite(&["top", "pod"]).unwrap();
    assert_eq!((text(&lite), lite.status.code()), (text(&none), none.status.code()));

    for p in [
        pod("busy", "while :; do :; done"),
        pod("idle", "head -c 8000000 /dev/zero > /dev/shm/held; exec sleep 3600"),
    ] {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }

    // The node: the real kubectl, once two scrapes are in.
    let top_node = eventually("kubectl top node with figures", WAIT, POLL, || async {
        let o = node.api.kubectl(&["top", "node"]).ok()?;
        o.status.success().then(|| text(&o).0)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", node.logs(&e.to_string())));
    let r = rows(&top_node);
    assert_eq!(r[0], ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"], "{top_node}");
    assert_eq!(r.len(), 2, "{top_node}");
    assert_eq!(r[1][0], NODE);
    assert!(figure(&r[1][1], "m") > 0 && figure(&r[1][3], "Mi") > 0, "{top_node}");
    assert!(r[1][2].ends_with('%') && r[1][4].ends_with('%'), "{top_node}");

    // Every running pod, across namespaces, with non-zero figures.
    let want: BTreeSet<&str> = ["busy", "idle"].into();
    let top_pods = eventually("kubectl top pod -A with every pod", WAIT, POLL, || async {
        let o = node.api.kubectl(&["top", "pod", "-A"]).ok()?;
        let out = text(&o).0;
        let named: BTreeSet<String> = rows(&out).iter().skip(1).map(|r| r[1].clone()).collect();
        let busy_cpu = rows(&out).iter().find(|r| r[1] == "busy").map(|r| figure(&r[2], "m"));
        let idle_mem = rows(&out).iter().find(|r| r[1] == "idle").map(|r| figure(&r[3], "Mi"));
        // (CPU is a rate over the last two scrapes, one of which may predate the spin; memory is
        // read at a scrape, which may come before the 8 MB are written.)
        let figures = busy_cpu > Some(100) && idle_mem > Some(0);
        (o.status.success() && want.iter().all(|p| named.contains(*p)) && figures).then_some(out)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", node.logs(&e.to_string())));
    let r = rows(&top_pods);
    assert_eq!(r[0], ["NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"], "{top_pods}");
    for row in &r[1..] {
        assert_eq!(row[0], "default", "{top_pods}");
        // A spinning shell may hold less than a MiB, which kubectl prints as 0Mi.
        assert!(row[2].ends_with('m') && row[3].ends_with("Mi"), "{top_pods}");
    }
    let idle = r.iter().find(|row| row[1] == "idle").unwrap();
    assert!(figure(&idle[3], "Mi") > 0, "8 MB held in /dev/shm: {top_pods}");
    let busy = r.iter().find(|row| row[1] == "busy").unwrap();
    assert!(figure(&busy[2], "m") > 100, "a spinning container uses a core's worth: {top_pods}");

    // kubectl-lite: the same rows and columns (figures move between two runs, so the layout
    // and names are compared, and its own figures are non-zero).
    let shape = |out: &str| -> Vec<(usize, String)> {
        rows(out).iter().map(|r| (r.len(), r[..r.len().min(2)].join(" "))).collect()
    };
    let lite_node = node.api.kubectl_lite(&["top", "node"]).unwrap();
    assert!(lite_node.status.success(), "{:?}", text(&lite_node));
    let lite_node = text(&lite_node).0;
    assert_eq!(rows(&lite_node)[0], rows(&top_node)[0]);
    assert_eq!(rows(&lite_node).len(), 2, "{lite_node}");
    assert!(figure(&rows(&lite_node)[1][1], "m") > 0, "{lite_node}");
    let lite_pods = node.api.kubectl_lite(&["top", "pod", "-A"]).unwrap();
    assert!(lite_pods.status.success(), "{:?}", text(&lite_pods));
    let lite_pods = text(&lite_pods).0;
    assert_eq!(shape(&lite_pods), shape(&top_pods), "{lite_pods}\n{top_pods}");
    // Header lines are byte for byte the same (kubectl pads every column, the last too).
    assert_eq!(lite_pods.lines().next(), top_pods.lines().next());

    // One pod by name with its containers, the same from both.
    let one = ["top", "pod", "idle", "--containers", "--no-headers"];
    let (real, lite) = (node.api.kubectl(&one).unwrap(), node.api.kubectl_lite(&one).unwrap());
    assert_eq!(shape(&text(&real).0), shape(&text(&lite).0), "{:?} {:?}", text(&real), text(&lite));

    // The raw API: a NodeMetricsList with the node's usage and window.
    let raw = node.api.kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"]).unwrap();
    let list: Value = serde_json::from_slice(&raw.stdout).unwrap();
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (Some("NodeMetricsList"), Some("metrics.k8s.io/v1beta1")),
        "{list}"
    );
    let item = &list["items"][0];
    assert_eq!(item["metadata"]["name"], NODE, "{list}");
    assert!(item["usage"]["cpu"].is_string() && item["usage"]["memory"].is_string(), "{list}");
    assert!(item["window"].as_str().is_some_and(|w| w.ends_with('s')), "{list}");

    // Bad input: an unknown node and a bad sort key, in kubectl's words from both.
    for args in [&["top", "node", "nope"][..], &["top", "pod", "--sort-by=name"][..]] {
        let (real, lite) = (node.api.kubectl(args).unwrap(), node.api.kubectl_lite(args).unwrap());
        assert_eq!(real.status.code(), Some(1), "{args:?}");
        assert_eq!(
            (text(&lite), lite.status.code()),
            (text(&real), real.status.code()),
            "{args:?}"
        );
    }
    node.stop().await.unwrap();
}
