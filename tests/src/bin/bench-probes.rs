//! `bench-probes`: what probes cost and how soon readiness shows, on real containerd with a
//! joined kubelet (release builds). Run by `hack/bench-probes.sh`; figures go to BENCHMARKS.md.
//!
//! - cost: 110 pods without probes, then 110 pods each with an httpGet readiness probe and an
//!   exec liveness probe, both every second (the stress case; upstream's default period is
//!   10 s): the kubelet's CPU (% of one core) and RSS, and the runtime's CPU (containerd, its
//!   shims and what they reaped: runc for each exec probe), over a window;
//! - readiness latency (with `--http-only`; exec liveness at 1 s restarts containers on a small
//!   machine, which would be timed instead): on 50 of the probed pods, the readiness file is removed (the pod goes
//!   NotReady), then created again through CRI `ExecSync`; from the moment the exec returns
//!   (the server answers 200 from then on) to `Ready=True` seen by an API watch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use e2e::cluster::JoinedNode;
use e2e::eventually;
use e2e::measure::{cost_over, percentile, runtime_cpu, summary};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use proto::cri;

const NODE: &str = "bench-node";
const PODS: usize = 110;

/// Which probes the probed pods carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probes {
    None,
    /// httpGet readiness only: the target case (110 httpGet probes per second).
    HttpGet,
    /// httpGet readiness and exec liveness.
    Both,
}

fn pod(name: &str, probes: Probes) -> anyhow::Result<Pod> {
    let mut container = serde_json::json!({
        "name": "web", "image": "busybox-httpd:1.35",
        "command": ["sh", "-c", "touch /var/www/ready.html; exec httpd -f -p 80 -h /var/www"],
    });
    if probes != Probes::None {
        container["readinessProbe"] = serde_json::json!({"httpGet": {"path": "/ready.html", "port": 80},
            "periodSeconds": 1, "failureThreshold": 1});
    }
    if probes == Probes::Both {
        container["livenessProbe"] =
            serde_json::json!({"exec": {"command": ["true"]}, "periodSeconds": 1});
    }
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "probes"}},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [container]},
    }))?)
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Pod name → (ready, when that was last seen to change), from a watch.
type Readiness = Arc<Mutex<HashMap<String, (bool, Instant)>>>;

async fn create_all(pods: &Api<Pod>, prefix: &str, probes: Probes) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = (0..PODS).map(|i| format!("{prefix}-{i}")).collect();
    for n in &names {
        pods.create(&PostParams::default(), &pod(n, probes)?).await?;
    }
    let all = names.clone();
    eventually("all pods ready", Duration::from_secs(600), Duration::from_secs(1), || async {
        let list = pods.list(&ListParams::default().labels("bench=probes")).await.ok()?;
        let ready = list.items.iter().filter(|p| ready(p)).count();
        (ready == all.len()).then_some(())
    })
    .await?;
    Ok(names)
}

async fn delete_all(pods: &Api<Pod>) -> anyhow::Result<()> {
    pods.delete_collection(&DeleteParams::default(), &ListParams::default().labels("bench=probes"))
        .await?;
    eventually("pods gone", Duration::from_secs(600), Duration::from_secs(1), || async {
        let list = pods.list(&ListParams::default().labels("bench=probes")).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await
}

/// Container restarts summed over the bench's pods.
async fn restarts(pods: &Api<Pod>) -> anyhow::Result<i32> {
    Ok(pods
        .list(&ListParams::default().labels("bench=probes"))
        .await?
        .items
        .iter()
        .flat_map(|p| p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()))
        .map(|c| c.restart_count)
        .sum())
}

async fn cost(node: &JoinedNode, label: &str, window: Duration) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_secs(10)).await; // settle after the starts
    let pid = node.kubelet.pid_u32().context("kubelet pid")?;
    let runtime0 = runtime_cpu(node.containerd.dir());
    let (rss, cpu) = cost_over(pid, window).await?;
    let runtime = (runtime_cpu(node.containerd.dir()) - runtime0) / window.as_secs_f64() * 100.0;
    println!(
        "{label:<44} kubelet CPU {cpu:6.2} % of a core   RSS {rss:6.1} MiB   runtime CPU {runtime:6.1} % of a core"
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| -> u64 { e2e::measure::flag(&args, name, default) };
    let window = Duration::from_secs(arg("--window-seconds", 60));
    let samples = usize::try_from(arg("--latency-pods", 50)).unwrap_or(50);
    let probes =
        if args.iter().any(|a| a == "--http-only") { Probes::HttpGet } else { Probes::Both };
    let node = JoinedNode::start(NODE).await?;
    let result = run(&node, window, samples, probes).await;
    if let Err(e) = &result {
        eprintln!("bench failed: {e:#}");
    }
    node.stop().await?;
    result
}

async fn run(
    node: &JoinedNode,
    window: Duration,
    samples: usize,
    probes: Probes,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(node.api.admin_client().await?, "default");

    println!("== cost: {PODS} pods, {window:?} window");
    create_all(&pods, "plain", Probes::None).await?;
    cost(node, &format!("{PODS} pods, no probes"), window).await?;
    delete_all(&pods).await?;
    let names = create_all(&pods, "probed", probes).await?;
    let shape = match probes {
        Probes::HttpGet => "httpGet readiness at 1 s",
        _ => "httpGet readiness + exec liveness at 1 s",
    };
    cost(node, &format!("{PODS} pods, {shape}"), window).await?;

    if probes == Probes::Both {
        // Exec liveness at 1 s can outrun the runtime (runc exec per probe): timed-out probes
        // restart containers, whose command makes them ready again on its own, so a latency
        // measured here would time restarts, not probes. The latency phase runs with
        // `--http-only`.
        println!(
            "restarts during the probed window (liveness timeouts): {}",
            restarts(&pods).await?
        );
        delete_all(&pods).await?;
        return Ok(());
    }
    println!("== readiness latency: server answers 200 -> Ready=True seen by a watch");
    let seen: Readiness = Arc::default();
    let record = seen.clone();
    let config = watcher::Config::default().labels("bench=probes");
    let mut events = watcher::watcher(pods.clone(), config).boxed();
    let watch = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = event else {
                continue;
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            let now_ready = ready(&p);
            let mut map = record.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = map.get(&name).is_none_or(|(r, _)| *r != now_ready);
            if changed {
                map.insert(name, (now_ready, Instant::now()));
            }
        }
    });
    let cri = node.containerd.client().await?;
    let state = |name: &str| {
        seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).copied()
    };
    let mut latencies = Vec::new();
    println!("restarts during the probed window: {}", restarts(&pods).await?);
    for name in names.iter().take(samples) {
        // The running container (a liveness timeout under load may have replaced it).
        let id = eventually(
            "a running container",
            Duration::from_secs(30),
            Duration::from_millis(50),
            || async {
                let p = pods.get(name).await.ok()?;
                let c = p.status?.container_statuses?.into_iter().next()?;
                c.state?.running?;
                c.container_id
            },
        )
        .await?;
        let id = id.split_once("://").map_or(id.as_str(), |(_, i)| i).to_string();
        let exec = |cmd: &str| cri::ExecSyncRequest {
            container_id: id.clone(),
            cmd: vec!["sh".into(), "-c".into(), cmd.into()],
            timeout: 5,
        };
        cri.exec_sync(exec("rm /var/www/ready.html")).await?;
        eventually("not ready", Duration::from_secs(30), Duration::from_millis(20), || async {
            state(name).filter(|(r, _)| !r).map(|_| ())
        })
        .await?;
        // Spread the start over a probe period, so the figures cover every phase of it.
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 1000)).await;
        cri.exec_sync(exec("touch /var/www/ready.html")).await?;
        let t0 = Instant::now();
        let t1 = eventually("ready", Duration::from_secs(30), Duration::from_millis(5), || async {
            state(name).filter(|(r, at)| *r && *at >= t0).map(|(_, at)| at)
        })
        .await?;
        latencies.push((t1 - t0).as_secs_f64() * 1e3);
    }
    watch.abort();
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);
    summary("readiness latency (period 1 s)", latencies);
    println!("p99 - period: {:.1} ms", percentile(&sorted, 99.0) - 1000.0);
    delete_all(&pods).await?;
    Ok(())
}
