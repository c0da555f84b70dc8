//! Hollow nodes: real kubelet processes on fake CRI runtimes, joined to apiserver-lite with the
//! scheduler. Ten join, two hundred pods are spread, run, pass their exec readiness probes and
//! are deleted; a kubelet killed mid-run is named, not waited on; a missing binary fails the
//! start. No containerd and no root needed (as root, the kubelets run as `nobody`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::hollow::{self, HollowSpec};
use e2e::leaks;
use fake_cri::Rpc;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};

const NODES: usize = 10;
const PODS: usize = 200;
const WAIT: Duration = Duration::from_secs(60);

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "hollow"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                "readinessProbe": {
                    "exec": {"command": ["true"]}, "periodSeconds": 5, "timeoutSeconds": 10,
                },
            }],
        },
    }))
    .unwrap()
}

/// Running, with the pod's `Ready` condition `True`.
fn running_and_ready(p: &Pod) -> bool {
    let Some(s) = &p.status else { return false };
    let ready = s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    s.phase.as_deref() == Some("Running") && ready
}

/// The uid a process runs as (`Uid:` in `/proc/<pid>/status`, the real one).
fn uid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_hollow_nodes_join_and_run_two_hundred_scheduled_pods_until_deleted() {
    let cluster = HollowSpec::nodes(NODES).scheduler().start().await.unwrap();
    cluster.wait_ready(WAIT).await.unwrap();
    if nix::unistd::geteuid().is_root() {
        for n in cluster.nodes().iter() {
            assert_eq!(uid_of(n.kubelet().pid()), 65534, "{} runs unprivileged", n.name());
        }
    }

    // kubectl sees ten Ready nodes.
    let out = cluster.api().kubectl(&["get", "nodes", "--no-headers"]).unwrap();
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let ready: BTreeMap<&str, &str> = table
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            Some((cols.next()?, cols.next()?))
        })
        .collect();
    let want: BTreeMap<String, &str> =
        (0..NODES).map(|i| (hollow::node_name(i), "Ready")).collect();
    assert_eq!(
        ready.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
        want,
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A watch, established before the first create, records each pod once Running and Ready.
    let client = cluster.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let seen: Arc<Mutex<HashMap<String, Pod>>> = Arc::default();
    let mut events =
        watcher::watcher(pods.clone(), watcher::Config::default().labels("app=hollow")).boxed();
    while let Some(e) = events.try_next().await.unwrap() {
        if matches!(e, Event::InitDone) {
            break;
        }
    }
    let seen_w = seen.clone();
    let watch = tokio::spawn(async move {
        while let Some(Ok(e)) = events.next().await {
            if let Event::Apply(p) = e
                && running_and_ready(&p)
                && let Some(name) = p.metadata.name.clone()
            {
                seen_w.lock().unwrap().entry(name).or_insert(p);
            }
        }
    });

    let created: Vec<anyhow::Result<()>> = futures::stream::iter(0..PODS)
        .map(|i| {
            let pods = pods.clone();
            async move {
                pods.create(&PostParams::default(), &pod(&format!("hollow-pod-{i:03}"))).await?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>().unwrap();
    cluster
        .wait_for(&format!("{PODS} pods Running and Ready (watched)"), WAIT, || async {
            (seen.lock().unwrap().len() == PODS).then_some(())
        })
        .await
        .unwrap();
    watch.abort();

    // Spread over every node; each pod's address is distinct and from its node's subnet.
    let seen = seen.lock().unwrap().clone();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut ips = HashSet::new();
    for p in seen.values() {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        let ip: Ipv4Addr =
            p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap().parse().unwrap();
        let i: usize = node.strip_prefix("hollow-").unwrap().parse().unwrap();
        assert_eq!(ip.octets()[..3], [10, 244, u8::try_from(i).unwrap()], "{ip} on {node}");
        assert!(ips.insert(ip), "{ip} given twice");
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.len(), NODES, "every node got pods: {per_node:?}");
    let (least, most) = (per_node.values().min().unwrap(), per_node.values().max().unwrap());
    assert!(most - least <= PODS / NODES, "spread by the scores: {per_node:?}");
    let execs: u64 = cluster.nodes().iter().map(|n| n.runtime().calls(Rpc::ExecSync)).sum();
    assert!(execs >= PODS as u64, "every readiness probe ran through ExecSync: {execs}");

    // Deleted: gone from the API, and every kubelet removed its sandboxes.
    pods.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=hollow"))
        .await
        .unwrap();
    cluster
        .wait_for("every pod gone from the API and the runtimes", WAIT, || async {
            let left = pods.list(&ListParams::default().labels("app=hollow")).await.ok()?;
            let sandboxes: usize =
                cluster.nodes().iter().map(|n| n.runtime().sandboxes().len()).sum();
            (left.items.is_empty() && sandboxes == 0).then_some(())
        })
        .await
        .unwrap();

    // Teardown: the apiserver, the scheduler and every kubelet were there, and are gone.
    let dir = cluster.dir().to_path_buf();
    let running = leaks::processes(&dir, "\0none");
    assert!(running.len() >= NODES + 2, "{running:?}");
    cluster.stop().await.unwrap();
    assert_eq!(leaks::processes(&dir, "\0none"), Vec::new());
    assert!(!dir.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hollow_kubelet_killed_mid_run_is_named_with_its_log_tail() {
    let cluster = HollowSpec::nodes(2).start().await.unwrap();
    cluster.wait_ready(WAIT).await.unwrap();
    cluster.kill_kubelet("hollow-1").unwrap();

    let err = cluster
        .wait_for("something that never happens", Duration::from_secs(300), || async { None::<()> })
        .await
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("hollow-1's kubelet exited (killed by SIGKILL)"), "{message}");
    assert!(message.contains("kubelet started"), "the log tail: {message}");
    assert!(!message.contains("timed out"), "reported, not waited on: {message}");
    assert!(cluster.check().is_err(), "still reported");

    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn a_missing_binary_or_a_bad_node_count_fails_the_start_naming_it() {
    let err = HollowSpec::nodes(1).companion("no-such-controller", &[]).start().await.unwrap_err();
    let message = format!("{err:#}");
    assert!(
        message.contains("missing binaries") && message.contains("no-such-controller"),
        "{message}"
    );
    assert!(message.contains("cargo build --workspace --bins"), "says how to fix it: {message}");

    for n in [0, hollow::MAX_NODES + 1] {
        let err = HollowSpec::nodes(n).start().await.unwrap_err();
        assert!(format!("{err:#}").contains(&format!("{n} nodes requested")), "{err:#}");
    }
}
