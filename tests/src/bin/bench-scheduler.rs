//! `bench-scheduler`: scheduler throughput in pods/s against apiserver-lite with simulated nodes
//! (Node objects with no kubelet), as upstream's `scheduler_perf` measures it.
//!
//! Each run: a fresh apiserver-lite; N nodes and P pending pods created through the API before
//! the scheduler starts (so creation speed does not limit it); then the scheduler is started
//! and a watch on pods timestamps every pod's first event with `spec.nodeName` set.
//! Throughput is `(P - 1) / (last binding - first binding)`; the time from the scheduler's
//! start to the last binding (which includes its initial list of nodes and pods) is reported
//! beside it. Run through `hack/bench-scheduler.sh` (release build).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use e2e::apiserver::ApiServer;
use e2e::scheduler::{Scheduler, node};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};

/// Writes in flight while creating nodes and pods.
const CREATE_CONCURRENCY: usize = 32;

struct Args {
    nodes: Vec<usize>,
    pods: usize,
    runs: usize,
    extra: Vec<String>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args { nodes: vec![1000, 5000], pods: 5000, runs: 3, extra: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => {
                a.nodes = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--pods" => a.pods = value()?.parse()?,
            "--runs" => a.runs = value()?.parse()?,
            // Passed to the scheduler, e.g. `--scheduler-flag --max-bindings-in-flight=16`.
            "--scheduler-flag" => a.extra.push(value()?),
            other => bail!(
                "unknown flag {other} (--nodes 1000,5000 --pods 5000 --runs 3 --scheduler-flag F)"
            ),
        }
    }
    Ok(a)
}

fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    }))?)
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

struct RunResult {
    scheduled_events: usize,
    pods_per_second: f64,
    first_to_last: Duration,
    start_to_last: Duration,
    scheduler_cpu: Option<f64>,
}

async fn run_once(nodes: usize, pods: usize, extra: &[String]) -> anyhow::Result<RunResult> {
    let server = ApiServer::start()?;
    let client = server.admin_client().await?;
    let node_api: Api<Node> = Api::all(client.clone());
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");

    futures::stream::iter((0..nodes).map(|i| {
        let api = node_api.clone();
        async move {
            api.create(&PostParams::default(), &node(&format!("node-{i}"), "4", "32Gi", "110"))
                .await
        }
    }))
    .buffer_unordered(CREATE_CONCURRENCY)
    .try_collect::<Vec<_>>()
    .await
    .context("creating nodes")?;
    futures::stream::iter((0..pods).map(|i| {
        let api = pod_api.clone();
        async move {
            let p = pod(&format!("pod-{i}")).map_err(|e| anyhow::anyhow!(e))?;
            api.create(&PostParams::default(), &p).await.map_err(anyhow::Error::from)
        }
    }))
    .buffer_unordered(CREATE_CONCURRENCY)
    .try_collect::<Vec<_>>()
    .await
    .context("creating pods")?;

    // Watch first, so no binding is missed; the initial list holds only pending pods.
    let mut events = watcher::watcher(pod_api.clone(), watcher::Config::default()).boxed();
    loop {
        match events.try_next().await? {
            Some(Event::InitDone) => break,
            Some(_) => {}
            None => bail!("the pod watch ended"),
        }
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let started = Instant::now();
    let scheduler = Scheduler::start_with(&server.kubeconfig(), 0, &extra)?;
    let cpu_before = scheduler.pid().and_then(cpu_seconds);
    let mut bound: HashSet<String> = HashSet::with_capacity(pods);
    let mut first = None;
    let deadline = started + Duration::from_secs(600);
    while bound.len() < pods {
        let next = tokio::time::timeout_at(deadline.into(), events.try_next()).await;
        let event = match next {
            Err(_) => bail!(
                "{} of {pods} pods bound after 600 s; scheduler log:\n{}",
                bound.len(),
                scheduler.log_tail(20)
            ),
            Ok(e) => e?,
        };
        let Some(Event::Apply(p) | Event::InitApply(p)) = event else { continue };
        if p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
            && bound.insert(p.metadata.name.unwrap_or_default())
        {
            first.get_or_insert_with(Instant::now);
        }
    }
    let last = Instant::now();
    let scheduler_cpu = scheduler.pid().and_then(cpu_seconds).zip(cpu_before).map(|(a, b)| a - b);
    let first = first.unwrap_or(last);
    let first_to_last = last - first;
    // `Scheduled` events are written asynchronously (and dropped when their queue is full, as
    // upstream's broadcaster does): count what arrived once the writes settle.
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let mut scheduled_events = 0;
    for _ in 0..50 {
        let now = events
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Scheduled"))
            .count();
        if now == scheduled_events && now > 0 {
            break;
        }
        scheduled_events = now;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(RunResult {
        scheduled_events,
        pods_per_second: (pods.saturating_sub(1)) as f64 / first_to_last.as_secs_f64().max(1e-9),
        first_to_last,
        start_to_last: last - started,
        scheduler_cpu,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    for &nodes in &args.nodes {
        let mut rates = Vec::new();
        let mut totals = Vec::new();
        for run in 1..=args.runs {
            let r = run_once(nodes, args.pods, &args.extra).await?;
            println!(
                "nodes={nodes} pods={} run={run}: {:.0} pods/s (first→last binding {:.2} s; scheduler start→last {:.2} s; scheduler CPU {}; Scheduled events {})",
                args.pods,
                r.pods_per_second,
                r.first_to_last.as_secs_f64(),
                r.start_to_last.as_secs_f64(),
                r.scheduler_cpu.map_or("?".into(), |c| format!("{c:.2} s")),
                r.scheduled_events,
            );
            rates.push(r.pods_per_second);
            totals.push(args.pods as f64 / r.start_to_last.as_secs_f64());
        }
        let (lo, hi) = rates.iter().fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
        println!(
            "nodes={nodes} pods={}: median {:.0} pods/s (range {lo:.0}–{hi:.0}, {} runs); start→last median {:.0} pods/s",
            args.pods,
            median(rates),
            args.runs,
            median(totals),
        );
    }
    Ok(())
}
