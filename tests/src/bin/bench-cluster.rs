//! `bench-cluster`: pod startup latency through the whole cluster path, as upstream's pod
//! startup SLO measures it (creation to all containers running, observed by watch): apiserver-lite
//! stores the pod, the scheduler binds it (or, with `--no-scheduler`, the pod names its node),
//! our kubelet runs it on a private containerd, and its status comes back. Run by
//! `hack/bench-cluster.sh`; the figures go to BENCHMARKS.md.
//!
//! Each pod's latency runs from just before its create request (the client's clock, which is
//! stricter than the second-granular `creationTimestamp`) to the watch event that first shows it
//! Running with every container running. Two shapes per run:
//! - paced: `--pods` pods created at `--rate` per second (upstream's latency pods);
//! - burst: `--pods` pods created at once (16 requests in flight), where the runtime's own
//!   throughput decides (on 2 cores containerd + runc + CNI start ~11 pods/s).

use e2e::measure::percentile;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use e2e::apiserver::ApiServer;
use e2e::containerd::Containerd;
use e2e::kubelet::Kubelet;
use e2e::scheduler::Scheduler;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};

const NODE: &str = "bench-node";

#[derive(Debug, Clone, Copy)]
struct Args {
    pods: usize,
    rate: f64,
    runs: usize,
    scheduler: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args { pods: 100, rate: 5.0, runs: 3, scheduler: true };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--pods" => a.pods = value()?.parse()?,
            "--rate" => a.rate = value()?.parse()?,
            "--runs" => a.runs = value()?.parse()?,
            "--no-scheduler" => a.scheduler = false,
            other => {
                anyhow::bail!("unknown flag {other} (--pods N, --rate R, --runs N, --no-scheduler)")
            }
        }
    }
    anyhow::ensure!(a.pods > 0 && a.rate > 0.0, "--pods and --rate must be positive");
    Ok(a)
}

fn pod(name: &str, run: &str, bind: bool) -> anyhow::Result<Pod> {
    let node = if bind { serde_json::json!(NODE) } else { serde_json::Value::Null };
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench-run": run}},
        "spec": {
            "nodeName": node, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"]}],
        },
    }))?)
}

fn all_running(p: &Pod) -> bool {
    let Some(s) = &p.status else { return false };
    let running = s.container_statuses.as_ref().is_some_and(|cs| {
        !cs.is_empty() && cs.iter().all(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
    });
    s.phase.as_deref() == Some("Running") && running
}

/// Creates `n` pods (paced at `rate`, or all at once) and returns each one's latency in ms and
/// the time until the last was running.
async fn batch(
    pods: &Api<Pod>,
    run: &str,
    n: usize,
    rate: Option<f64>,
    bind: bool,
) -> anyhow::Result<(Vec<f64>, Duration)> {
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let config = watcher::Config::default().labels(&format!("bench-run={run}"));
    let mut events = watcher::watcher(pods.clone(), config).boxed();
    // The watch is established (its initial, empty list done) before the first create.
    while let Some(e) = events.try_next().await? {
        if matches!(e, Event::InitDone) {
            break;
        }
    }
    let seen_w = seen.clone();
    let watch = tokio::spawn(async move {
        while let Some(Ok(e)) = events.next().await {
            if let Event::Apply(p) | Event::InitApply(p) = e
                && all_running(&p)
                && let Some(name) = p.metadata.name
            {
                let mut seen = seen_w.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                seen.entry(name).or_insert_with(Instant::now);
                if seen.len() == n {
                    return;
                }
            }
        }
    });
    let names: Vec<String> = (0..n).map(|i| format!("{run}-{i:03}")).collect();
    let start = Instant::now();
    let created: HashMap<String, Instant> = match rate {
        Some(rate) => {
            let mut created = HashMap::new();
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            let mut inflight = Vec::new();
            for name in &names {
                tick.tick().await;
                created.insert(name.clone(), Instant::now());
                let (pods, p) = (pods.clone(), pod(name, run, bind)?);
                inflight.push(tokio::spawn(async move {
                    pods.create(&PostParams::default(), &p).await.map(|_| ())
                }));
            }
            for t in inflight {
                t.await??;
            }
            created
        }
        None => {
            let results: Vec<anyhow::Result<(String, Instant)>> =
                futures::stream::iter(names.iter().cloned())
                    .map(|name| async move {
                        let p = pod(&name, run, bind)?;
                        let t = Instant::now();
                        pods.create(&PostParams::default(), &p).await?;
                        Ok((name, t))
                    })
                    .buffer_unordered(16)
                    .collect()
                    .await;
            results.into_iter().collect::<anyhow::Result<_>>()?
        }
    };
    tokio::time::timeout(Duration::from_secs(300), watch)
        .await
        .context("pods not all running within 300 s")??;
    let seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let last = seen.values().max().map_or(Duration::ZERO, |t| t.duration_since(start));
    let mut ms: Vec<f64> = created
        .iter()
        .filter_map(|(name, t)| Some(seen.get(name)?.duration_since(*t).as_secs_f64() * 1e3))
        .collect();
    ms.sort_by(f64::total_cmp);
    Ok((ms, last))
}

/// Deletes the run's pods and waits until the kubelet has confirmed every deletion.
async fn clean(pods: &Api<Pod>, run: &str) -> anyhow::Result<()> {
    let lp = ListParams::default().labels(&format!("bench-run={run}"));
    pods.delete_collection(&DeleteParams::default(), &lp).await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while !pods.list(&lp).await?.items.is_empty() {
        anyhow::ensure!(Instant::now() < deadline, "pods of {run} not deleted within 300 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

fn report(shape: &str, ms: &[f64], last: Duration) -> (f64, f64) {
    let (p50, p99) = (percentile(ms, 50.0), percentile(ms, 99.0));
    println!(
        "{shape:<8} n={:<4} p50 {p50:8.0} ms   p99 {p99:8.0} ms   max {:8.0} ms   all running after {:.1} s",
        ms.len(),
        ms.last().copied().unwrap_or(f64::NAN),
        last.as_secs_f64()
    );
    (p50, p99)
}

async fn bench(args: Args, api: &ApiServer) -> anyhow::Result<()> {
    let client = api.admin_client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let deadline = Instant::now() + Duration::from_secs(60);
    while nodes.get_opt(NODE).await?.is_none() {
        anyhow::ensure!(Instant::now() < deadline, "the kubelet did not register");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bind = !args.scheduler;
    // Warm-up: the image is unpacked once, outside the figures.
    batch(&pods, "warmup", 1, None, bind).await?;
    clean(&pods, "warmup").await?;
    let mut paced = Vec::new();
    let mut burst = Vec::new();
    for r in 0..args.runs {
        let run = format!("paced{r}");
        let (ms, last) = batch(&pods, &run, args.pods, Some(args.rate), bind).await?;
        paced.push(report("paced", &ms, last));
        clean(&pods, &run).await?;
        let run = format!("burst{r}");
        let (ms, last) = batch(&pods, &run, args.pods, None, bind).await?;
        burst.push(report("burst", &ms, last));
        clean(&pods, &run).await?;
    }
    for (shape, v) in [("paced", paced), ("burst", burst)] {
        let mut p50: Vec<f64> = v.iter().map(|x| x.0).collect();
        let mut p99: Vec<f64> = v.iter().map(|x| x.1).collect();
        p50.sort_by(f64::total_cmp);
        p99.sort_by(f64::total_cmp);
        println!(
            "median of {} runs, {shape}: p50 {:.0} ms, p99 {:.0} ms",
            v.len(),
            percentile(&p50, 50.0),
            percentile(&p99, 50.0)
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    println!(
        "{} pods per shape, paced at {}/s, {} runs, {}",
        args.pods,
        args.rate,
        args.runs,
        if args.scheduler { "bound by the scheduler" } else { "bound by spec.nodeName" }
    );
    let containerd = Containerd::start(Default::default()).await.context("containerd")?;
    containerd.import_test_images()?;
    let api = ApiServer::start_for_nodes(&[NODE])?;
    let kubelet = Kubelet::start_joined(&containerd, NODE, &api.node_kubeconfig(NODE)?)?;
    let scheduler = if args.scheduler { Some(Scheduler::start(&api, &[])?) } else { None };
    let result = bench(args, &api).await;
    if let Err(e) = &result {
        eprintln!("bench failed: {e:#}\nkubelet:\n{}", kubelet.log_tail(30));
    }
    drop(scheduler);
    drop(kubelet);
    drop(api);
    containerd.stop().await;
    result
}
