//! `bench-hollow`: a burst of pods on hollow nodes (real kubelets on fake CRI runtimes, joined
//! to apiserver-lite, with the scheduler), as upstream's kubemark density runs measure it. Run
//! by `hack/bench-hollow.sh`; the figures go to BENCHMARKS.md.
//!
//! Each run creates `--pods` pods at once (`--inflight` create requests in flight) through
//! kube-rs and times, from just before the first create: the last create answered, every pod
//! bound (`spec.nodeName` seen by a watch), every pod Running with `Ready=True` (seen by the
//! same watch); then deletes them and times until the API and every runtime are empty. Beside
//! the times: each component's CPU seconds over the burst (kubelets, apiserver-lite, the
//! scheduler, and this process, which serves the fake runtimes and the watch), and RSS with the
//! pods running. After the last run the pods are left running for an idle window: CPU per
//! minute of each kubelet holding them.
//!
//! With `--deployment`, the controller-manager joins and the runs are [`deployment`]'s instead.

mod deployment;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use e2e::hollow::{HollowCluster, HollowSpec};
use e2e::process::{self, Usage};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};

#[derive(Debug, Clone, Copy)]
struct Args {
    nodes: usize,
    pods: usize,
    runs: usize,
    inflight: usize,
    exec_probe: bool,
    idle_seconds: u64,
    deployment: bool,
    qps: u32,
    cached: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        nodes: 10,
        pods: 1000,
        runs: 3,
        inflight: 32,
        exec_probe: false,
        idle_seconds: 30,
        deployment: false,
        qps: 20,
        cached: 10_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--hollow" | "--nodes" => a.nodes = value()?.parse()?,
            "--pods" => a.pods = value()?.parse()?,
            "--runs" => a.runs = value()?.parse()?,
            "--inflight" => a.inflight = value()?.parse()?,
            "--exec-probe" => a.exec_probe = true,
            "--idle-seconds" => a.idle_seconds = value()?.parse()?,
            "--deployment" => a.deployment = true,
            "--qps" => a.qps = value()?.parse()?,
            "--cached" => a.cached = value()?.parse()?,
            other => anyhow::bail!(
                "unknown flag {other} (--hollow N, --pods P, --runs R, --inflight K, --exec-probe, --idle-seconds S, --deployment, --qps Q, --cached C)"
            ),
        }
    }
    anyhow::ensure!(a.pods > 0 && a.runs > 0 && a.inflight > 0, "counts must be positive");
    Ok(a)
}

fn pod(name: &str, run: &str, exec_probe: bool) -> anyhow::Result<Pod> {
    let probe = exec_probe.then(|| {
        serde_json::json!({"exec": {"command": ["true"]}, "periodSeconds": 10, "timeoutSeconds": 5})
    });
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench-run": run}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                "readinessProbe": probe,
            }],
        },
    }))?)
}

fn bound(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
}

fn running_and_ready(p: &Pod) -> bool {
    let Some(s) = &p.status else { return false };
    let ready = s.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    s.phase.as_deref() == Some("Running") && ready
}

/// When the watch first saw each pod bound, and Running and Ready.
#[derive(Debug, Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    ready: HashMap<String, Instant>,
}

/// What one burst measured.
#[derive(Debug, Clone)]
struct Burst {
    created: Duration,
    bound: Duration,
    ready: Duration,
    deleted: Duration,
    cpu: Vec<(String, f64)>,
    rss: Vec<(String, Usage)>,
}

fn usage_map(cluster: &HollowCluster) -> HashMap<String, Usage> {
    let mut all: HashMap<String, Usage> = cluster.usage().into_iter().collect();
    if let Some(me) = process::usage(std::process::id()) {
        all.insert("bench (fake runtimes, watch, client)".into(), me);
    }
    all
}

async fn burst(cluster: &HollowCluster, args: Args, run: &str) -> anyhow::Result<Burst> {
    let pods: Api<Pod> = Api::namespaced(cluster.client().await?, "default");
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let selector = format!("bench-run={run}");
    let mut events =
        watcher::watcher(pods.clone(), watcher::Config::default().labels(&selector)).boxed();
    while let Some(e) = events.try_next().await? {
        if matches!(e, Event::InitDone) {
            break;
        }
    }
    let (seen_w, n) = (seen.clone(), args.pods);
    let watch = tokio::spawn(async move {
        while let Some(Ok(e)) = events.next().await {
            let (Event::Apply(p) | Event::InitApply(p)) = e else { continue };
            let Some(name) = p.metadata.name.clone() else { continue };
            let now = Instant::now();
            let mut s = seen_w.lock().unwrap_or_else(PoisonError::into_inner);
            if bound(&p) {
                s.bound.entry(name.clone()).or_insert(now);
            }
            if running_and_ready(&p) {
                s.ready.entry(name).or_insert(now);
            }
            if s.ready.len() == n {
                return;
            }
        }
    });

    let before = usage_map(cluster);
    let start = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..args.pods)
        .map(|i| {
            let pods = pods.clone();
            let p = pod(&format!("{run}-{i:04}"), run, args.exec_probe);
            async move {
                pods.create(&PostParams::default(), &p?).await?;
                Ok(())
            }
        })
        .buffer_unordered(args.inflight)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let created = start.elapsed();
    cluster
        .wait_for(
            &format!("{} pods Running and Ready", args.pods),
            Duration::from_secs(600),
            || {
                let s = seen.lock().unwrap_or_else(PoisonError::into_inner);
                let done = s.ready.len() == n || watch.is_finished();
                async move { done.then_some(()) }
            },
        )
        .await?;
    let ready_count = seen.lock().unwrap_or_else(PoisonError::into_inner).ready.len();
    anyhow::ensure!(ready_count == n, "the watch ended with {ready_count} of {n} pods Ready");
    let after = usage_map(cluster);
    let (bound, ready) = {
        let s = seen.lock().unwrap_or_else(PoisonError::into_inner);
        let last = |m: &HashMap<String, Instant>| {
            m.values().max().map_or(Duration::ZERO, |t| t.duration_since(start))
        };
        (last(&s.bound), last(&s.ready))
    };
    let mut cpu: Vec<(String, f64)> = after
        .iter()
        .map(|(k, u)| (k.clone(), u.cpu_seconds - before.get(k).map_or(0.0, |b| b.cpu_seconds)))
        .collect();
    cpu.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rss: Vec<(String, Usage)> = after.into_iter().collect();
    rss.sort_by(|a, b| a.0.cmp(&b.0));

    let deleted = if run.starts_with("last") {
        Duration::ZERO
    } else {
        delete(cluster, &pods, &selector).await?
    };
    Ok(Burst { created, bound, ready, deleted, cpu, rss })
}

/// Deletes the run's pods; the time until the API and every runtime are empty.
async fn delete(
    cluster: &HollowCluster,
    pods: &Api<Pod>,
    selector: &str,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let lp = ListParams::default().labels(selector);
    pods.delete_collection(&DeleteParams::default(), &lp).await?;
    cluster
        .wait_for("every pod deleted", Duration::from_secs(600), || async {
            let left = pods.list(&lp).await.ok()?;
            let sandboxes: usize =
                cluster.nodes().iter().map(|n| n.runtime().sandboxes().len()).sum();
            (left.items.is_empty() && sandboxes == 0).then_some(())
        })
        .await?;
    Ok(start.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn is_kubelet(name: &str) -> bool {
    name.starts_with("hollow-")
}

fn report(b: &Burst) {
    println!(
        "  created {:6.2} s   all bound {:6.2} s   all Running+Ready {:6.2} s   deleted {:6.2} s",
        b.created.as_secs_f64(),
        b.bound.as_secs_f64(),
        b.ready.as_secs_f64(),
        b.deleted.as_secs_f64()
    );
    let kubelets: Vec<f64> = b.cpu.iter().filter(|(k, _)| is_kubelet(k)).map(|(_, c)| *c).collect();
    let total_kubelets: f64 = kubelets.iter().sum();
    print!(
        "  CPU s over the burst: kubelets {total_kubelets:.2} (median {:.3} each)",
        median(kubelets)
    );
    for (k, c) in b.cpu.iter().filter(|(k, _)| !is_kubelet(k)) {
        print!(", {k} {c:.2}");
    }
    println!();
}

fn report_rss(b: &Burst) {
    let kubelets: Vec<&Usage> =
        b.rss.iter().filter(|(k, _)| is_kubelet(k)).map(|(_, u)| u).collect();
    let mib: Vec<f64> = kubelets.iter().map(|u| u.rss_mib()).collect();
    let anon: Vec<f64> = kubelets.iter().map(|u| u.anon_mib()).collect();
    let max = mib.iter().copied().fold(0.0, f64::max);
    let min = mib.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "RSS with the pods running: kubelet median {:.1} MiB (min {min:.1}, max {max:.1}; anonymous {:.1})",
        median(mib.clone()),
        median(anon)
    );
    for (k, u) in b.rss.iter().filter(|(k, _)| !is_kubelet(k)) {
        println!("  {k}: {:.1} MiB (anonymous {:.1})", u.rss_mib(), u.anon_mib());
    }
}

async fn idle(cluster: &HollowCluster, window: Duration) {
    tokio::time::sleep(Duration::from_secs(5)).await; // settle after the last change
    let before: HashMap<String, Usage> = cluster.usage().into_iter().collect();
    tokio::time::sleep(window).await;
    let per_min = 60.0 / window.as_secs_f64();
    let mut kubelets = Vec::new();
    for (k, u) in cluster.usage() {
        let d = (u.cpu_seconds - before.get(&k).map_or(0.0, |b| b.cpu_seconds)) * per_min;
        if is_kubelet(&k) {
            kubelets.push(d);
        } else {
            println!("  idle {k}: {d:.3} CPU-s/min");
        }
    }
    println!(
        "  idle kubelet (median of {}): {:.3} CPU-s/min ({:.2} % of a core)",
        kubelets.len(),
        median(kubelets.clone()),
        median(kubelets) / 60.0 * 100.0
    );
}

async fn bench(cluster: &HollowCluster, args: Args) -> anyhow::Result<()> {
    cluster.wait_ready(Duration::from_secs(120)).await?;
    let nodes_usage = usage_map(cluster);
    let idle_rss: Vec<f64> =
        nodes_usage.iter().filter(|(k, _)| is_kubelet(k)).map(|(_, u)| u.rss_mib()).collect();
    println!("RSS with no pods: kubelet median {:.1} MiB", median(idle_rss));
    let mut bursts = Vec::new();
    for r in 0..args.runs {
        let run = if r + 1 == args.runs { format!("last{r}") } else { format!("run{r}") };
        println!("run {r}:");
        let b = burst(cluster, args, &run).await?;
        report(&b);
        bursts.push(b);
    }
    let secs =
        |f: fn(&Burst) -> Duration| median(bursts.iter().map(|b| f(b).as_secs_f64()).collect());
    println!(
        "median of {} runs: created {:.2} s, all bound {:.2} s, all Running+Ready {:.2} s",
        bursts.len(),
        secs(|b| b.created),
        secs(|b| b.bound),
        secs(|b| b.ready)
    );
    if let Some(last) = bursts.last() {
        report_rss(last);
    }
    println!("idle, {} pods running, {} s window:", args.pods, args.idle_seconds);
    idle(cluster, Duration::from_secs(args.idle_seconds)).await;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    if args.deployment {
        println!(
            "{} hollow nodes, a Deployment of {} replicas, the controller-manager at --kube-api-qps {} (burst the same), {} pods cached",
            args.nodes, args.pods, args.qps, args.cached
        );
    } else {
        println!(
            "{} hollow nodes, bursts of {} pods ({} creates in flight), {} runs{}",
            args.nodes,
            args.pods,
            args.inflight,
            args.runs,
            if args.exec_probe { ", exec readiness probes every 10 s" } else { "" }
        );
    }
    let mut spec = HollowSpec::nodes(args.nodes).scheduler();
    if args.deployment {
        let flags = deployment::manager_flags(&args);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        spec = spec.companion("controller-manager", &flags);
    }
    let cluster = spec.start().await?;
    let result = if args.deployment {
        deployment::bench(&cluster, args).await
    } else {
        bench(&cluster, args).await
    };
    if let Err(e) = &result {
        eprintln!("bench failed: {e:#}");
    }
    cluster.stop().await?;
    result
}
