//! `bench-config`: what ConfigMap, Secret and projected token volumes cost, on real containerd
//! with a joined kubelet (release builds). Run by `hack/bench-config.sh`; figures go to
//! BENCHMARKS.md.
//!
//! - start: 110 pods created at once, from the first create to every pod `Ready=True` in the
//!   API; pods without volumes and pods each mounting a ConfigMap and a Secret of their own and
//!   a projected service-account token (220 objects watched, 110 TokenRequests), alternated
//!   over `--rounds` rounds; the kubelet's RSS with each set running;
//! - update: with the 110 volume pods running, `--updates` edits of one pod's ConfigMap
//!   (a merge patch through the API), each from the moment the patch is sent to the new
//!   content in the file the container mounts. The file is read on the node, in the volume's
//!   directory the container's mount is bound to (the same files, so what the container sees);
//!   the last content is checked inside the container too.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use e2e::cluster::JoinedNode;
use e2e::eventually;
use e2e::measure::{summary, usage};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const NODE: &str = "bench-node";
const PODS: usize = 110;
const LABEL: &str = "bench=config";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Set {
    Plain,
    Volumes,
}

impl Set {
    fn name(self) -> &'static str {
        match self {
            Set::Plain => "no volumes",
            Set::Volumes => "ConfigMap + Secret + projected token each",
        }
    }
}

fn pod(i: usize, set: Set) -> anyhow::Result<Pod> {
    let mut spec = json!({
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        "serviceAccountName": "default",
        "automountServiceAccountToken": false,
        "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"]}],
    });
    if set == Set::Volumes {
        spec["volumes"] = json!([
            {"name": "config", "configMap": {"name": format!("cfg-{i}")}},
            {"name": "secret", "secret": {"secretName": format!("sec-{i}")}},
            {"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            ]}},
        ]);
        spec["containers"][0]["volumeMounts"] = json!([
            {"name": "config", "mountPath": "/etc/config"},
            {"name": "secret", "mountPath": "/etc/secret"},
            {"name": "token", "mountPath": "/var/run/token"},
        ]);
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p-{i}"), "labels": {"bench": "config"}},
        "spec": spec,
    }))?)
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates the set's pods and waits for all to be ready: the seconds it took.
async fn start(pods: &Api<Pod>, set: Set) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    for i in 0..PODS {
        pods.create(&PostParams::default(), &pod(i, set)?).await?;
    }
    eventually("all pods ready", Duration::from_secs(600), Duration::from_millis(100), || async {
        let list = pods.list(&ListParams::default().labels(LABEL)).await.ok()?;
        (list.items.iter().filter(|p| ready(p)).count() == PODS).then_some(())
    })
    .await?;
    Ok(t0.elapsed().as_secs_f64())
}

async fn delete_all(pods: &Api<Pod>) -> anyhow::Result<()> {
    pods.delete_collection(&DeleteParams::default(), &ListParams::default().labels(LABEL)).await?;
    eventually("pods gone", Duration::from_secs(600), Duration::from_secs(1), || async {
        let list = pods.list(&ListParams::default().labels(LABEL)).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await
}

/// Each pod's ConfigMap and Secret, and the `default` ServiceAccount its token is for.
async fn objects(client: &kube::Client) -> anyhow::Result<()> {
    let pp = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    accounts
        .create(&pp, &serde_json::from_value(json!({"metadata": {"name": "default"}}))?)
        .await?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for i in 0..PODS {
        let cm = json!({"metadata": {"name": format!("cfg-{i}")}, "data": {"greeting": "v0"}});
        maps.create(&pp, &serde_json::from_value(cm)?).await?;
        let s = json!({"metadata": {"name": format!("sec-{i}")}, "stringData": {"password": "p"}});
        secrets.create(&pp, &serde_json::from_value(s)?).await?;
    }
    Ok(())
}

async fn rss(node: &JoinedNode) -> anyhow::Result<f64> {
    tokio::time::sleep(Duration::from_secs(10)).await; // settle after the starts
    Ok(usage(node.kubelet.pid_u32().context("kubelet pid")?)?.rss_mib())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| -> usize { e2e::measure::flag(&args, name, default) };
    let (rounds, updates) = (arg("--rounds", 3), arg("--updates", 20));
    let node = JoinedNode::start(NODE).await?;
    let result = run(&node, rounds, updates).await;
    if let Err(e) = &result {
        eprintln!("bench failed: {e:#}\n{}", node.logs(""));
    }
    node.stop().await?;
    result
}

async fn run(node: &JoinedNode, rounds: usize, updates: usize) -> anyhow::Result<()> {
    let client = node.api.admin_client().await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    objects(&client).await?;

    println!("== start: {PODS} pods created at once -> all Ready=True, {rounds} rounds");
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut rss_mib: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for (k, set) in [Set::Plain, Set::Volumes].into_iter().enumerate() {
            let took = start(&pods, set).await?;
            let rss = rss(node).await?;
            println!("round {round}: {:<44} {took:6.2} s   kubelet RSS {rss:5.1} MiB", set.name());
            times[k].push(took * 1e3);
            rss_mib[k].push(rss);
            let last = round + 1 == rounds && set == Set::Volumes;
            if !last {
                delete_all(&pods).await?;
            }
        }
    }
    let plain = summary(&format!("start, {}", Set::Plain.name()), times[0].clone());
    let volumes = summary(&format!("start, {}", Set::Volumes.name()), times[1].clone());
    println!("volumes add {:+.1} % to the median start time", (volumes / plain - 1.0) * 100.0);
    for (k, set) in [Set::Plain, Set::Volumes].into_iter().enumerate() {
        let mut v = rss_mib[k].clone();
        v.sort_by(f64::total_cmp);
        println!("kubelet RSS, {:<44} median {:5.1} MiB", set.name(), v[v.len() / 2]);
    }

    println!("== update: a ConfigMap edit -> the new content in the mounted file, {updates} edits");
    let target = pods.get("p-0").await?;
    let uid = target.metadata.uid.context("p-0 has no uid")?;
    let file = node
        .kubelet
        .root_dir()
        .join(format!("pods/{uid}/volumes/kubernetes.io~configmap/config/greeting"));
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut latencies = Vec::new();
    for n in 1..=updates {
        let content = format!("v{n}");
        let patch = json!({"data": {"greeting": content}});
        tokio::time::sleep(Duration::from_millis(200 + rand::random::<u64>() % 300)).await;
        let t0 = Instant::now();
        maps.patch("cfg-0", &PatchParams::default(), &Patch::Merge(&patch)).await?;
        eventually("the new content", Duration::from_secs(120), Duration::from_millis(2), || {
            let file = file.clone();
            let content = content.clone();
            async move { (std::fs::read_to_string(&file).ok()? == content).then_some(()) }
        })
        .await?;
        latencies.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    summary("ConfigMap edit -> file (110 volume pods running)", latencies);
    let seen = node.api.kubectl(&["exec", "p-0", "--", "cat", "/etc/config/greeting"])?;
    let seen = String::from_utf8_lossy(&seen.stdout).into_owned();
    ensure!(seen == format!("v{updates}"), "the container sees {seen:?}");
    delete_all(&pods).await
}
