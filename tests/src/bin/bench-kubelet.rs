//! `bench-kubelet`: how fast our kubelet starts pods on real containerd, beside the floor of
//! issuing the same CRI calls directly, and what it costs idle. Run by `hack/bench-kubelet.sh`;
//! the figures go to BENCHMARKS.md.
//!
//! - start latency: manifest renamed into place → the container's `startedAt` as containerd
//!   records it, for 1 pod (repeated) and for a burst of 30 (all running, and the first);
//! - the direct-CRI floor: RunPodSandbox, CreateContainer, StartContainer from a minimal client,
//!   1 and 30 at once, with the time of each call (where the time goes);
//! - idle cost: the kubelet's RSS and CPU seconds per minute with 0, 30 and 110 pods;
//! - scrapes at 110 pods: `/metrics`, `/metrics/resource` and `/stats/summary` every 15 s, as
//!   Prometheus and metrics-server would, each response's time and the kubelet's cost meanwhile.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use e2e::containerd::{Containerd, remove_all_pods};
use e2e::cri_suite::{Target, start_pod};
use e2e::kubelet::Kubelet;
use e2e::measure::{runtime_cpu, summary, usage};
use futures::future::join_all;
use proto::{CriClient, cri};

fn ns(t: SystemTime) -> i64 {
    i64::try_from(t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos())
        .unwrap_or(0)
}

fn ms(nanos: i64) -> f64 {
    nanos as f64 / 1e6
}

/// One pod through CRI directly; returns (startedAt - t0, per-call durations).
async fn direct_pod(
    target: &Target<'_>,
    name: &str,
    t0: i64,
) -> anyhow::Result<(i64, [Duration; 3])> {
    let pod = start_pod(target, name, &["sleep", "3600"]).await?;
    let req = cri::ContainerStatusRequest { container_id: pod.container_id, verbose: false };
    let status = target.client.container_status(req).await?.status.context("status")?;
    Ok((status.started_at - t0, pod.calls))
}

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n"
    )
}

/// startedAt of every running container, by pod name.
async fn started(client: &CriClient) -> anyhow::Result<HashMap<String, i64>> {
    let list = client
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                state: Some(cri::ContainerStateValue {
                    state: cri::ContainerState::ContainerRunning as i32,
                }),
                ..Default::default()
            }),
        })
        .await?;
    let mut out = HashMap::new();
    for c in list.containers {
        let s = client
            .container_status(cri::ContainerStatusRequest {
                container_id: c.id.clone(),
                verbose: false,
            })
            .await?;
        if let Some(s) = s.status {
            out.insert(
                c.labels.get("io.kubernetes.pod.name").cloned().unwrap_or_default(),
                s.started_at,
            );
        }
    }
    Ok(out)
}

async fn wait_running(
    client: &CriClient,
    names: &[String],
) -> anyhow::Result<HashMap<String, i64>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = started(client).await?;
        if names.iter().all(|n| s.contains_key(n)) {
            return Ok(s);
        }
        anyhow::ensure!(Instant::now() < deadline, "pods did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn wait_empty(client: &CriClient) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !client
        .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None })
        .await?
        .items
        .is_empty()
    {
        anyhow::ensure!(Instant::now() < deadline, "pods were not removed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// What monitoring scrapes, every 15 s.
const SCRAPED: [&str; 3] = ["/metrics", "/metrics/resource", "/stats/summary"];
const SCRAPE_EVERY: Duration = Duration::from_secs(15);

/// Scrapes the three endpoints every 15 s through `window`: each one's response times (ms),
/// then the kubelet's RSS and CPU over the window.
async fn scraped_cost(
    kubelet: &Kubelet,
    window: Duration,
) -> anyhow::Result<(Vec<Vec<f64>>, f64, f64)> {
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = kubelet.pid_u32().context("kubelet pid")?;
    let before = usage(pid)?;
    let start = Instant::now();
    let mut times = vec![Vec::new(); SCRAPED.len()];
    while start.elapsed() < window {
        let round = Instant::now();
        for (i, path) in SCRAPED.iter().enumerate() {
            let t = Instant::now();
            let body = kubelet.get_body(path).await.with_context(|| format!("GET {path}"))?;
            anyhow::ensure!(body.len() > 100, "GET {path}: a short answer: {body}");
            times[i].push(t.elapsed().as_secs_f64() * 1000.0);
        }
        tokio::time::sleep(SCRAPE_EVERY.saturating_sub(round.elapsed())).await;
    }
    let after = usage(pid)?;
    let cpu = (after.cpu_seconds - before.cpu_seconds) * 60.0 / start.elapsed().as_secs_f64();
    Ok((times, after.rss_mib(), cpu))
}

/// The kubelet's CPU per scrape of each path: `n` scrapes back to back, the CPU they took
/// (idle work included, about 0.2 ms over such a window) divided among them.
async fn cpu_per_scrape(kubelet: &Kubelet, n: u32) -> anyhow::Result<Vec<f64>> {
    let pid = kubelet.pid_u32().context("kubelet pid")?;
    let mut out = Vec::new();
    for path in SCRAPED {
        let before = usage(pid)?;
        for _ in 0..n {
            kubelet.get_body(path).await.with_context(|| format!("GET {path}"))?;
        }
        let after = usage(pid)?;
        out.push((after.cpu_seconds - before.cpu_seconds) * 1000.0 / f64::from(n));
    }
    Ok(out)
}

async fn idle_cost(kubelet: &Kubelet, window: Duration) -> anyhow::Result<(f64, f64)> {
    tokio::time::sleep(Duration::from_secs(5)).await; // settle after the last change
    let pid = kubelet.pid_u32().context("kubelet pid")?;
    let before = usage(pid)?;
    tokio::time::sleep(window).await;
    let after = usage(pid)?;
    Ok((after.rss_mib(), (after.cpu_seconds - before.cpu_seconds) * 60.0 / window.as_secs_f64()))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| -> u64 { e2e::measure::flag(&args, name, default) };
    let (runs, bursts, window) =
        (arg("--runs", 20), arg("--bursts", 5), Duration::from_secs(arg("--idle-seconds", 60)));
    let idle_only = args.iter().any(|a| a == "--idle-only");
    // `--idle-pods 110` measures one count alone (a long window to look at one kubelet).
    let counts = match e2e::measure::flag(&args, "--idle-pods", 0usize) {
        0 => vec![0usize, 30, 110],
        n => vec![n],
    };
    let containerd = Containerd::start(Default::default()).await?;
    containerd.import_test_images()?;
    let client = containerd.client().await?;
    let log_root = containerd.dir().join("bench-pods");
    let target =
        Target { client: &client, cgroup_parent: containerd.cgroup_parent(), log_root: &log_root };

    if !idle_only {
        floor(&client, &target, &containerd, runs, bursts).await?;
    }
    if args.iter().any(|a| a == "--floor-only") {
        return Ok(());
    }
    // `--idle-only`: no start latencies, so no runs and no bursts.
    let (runs, bursts) = if idle_only { (0, 0) } else { (runs, bursts) };
    kubelet_part(&client, &containerd, runs, bursts, window, &counts).await?;
    let report = containerd.stop().await;
    anyhow::ensure!(report.is_clean(), "teardown left {report:#?}");
    Ok(())
}

async fn floor(
    client: &CriClient,
    target: &Target<'_>,
    containerd: &Containerd,
    runs: u64,
    bursts: u64,
) -> anyhow::Result<()> {
    let client = client.clone();
    println!("== direct CRI floor (RunPodSandbox + CreateContainer + StartContainer)");
    let (mut one, mut calls) = (Vec::new(), [Vec::new(), Vec::new(), Vec::new()]);
    for r in 0..runs {
        let t0 = ns(SystemTime::now());
        let (lat, d) = direct_pod(target, &format!("floor-{r}"), t0).await?;
        one.push(ms(lat));
        for (i, d) in d.iter().enumerate() {
            calls[i].push(d.as_secs_f64() * 1e3);
        }
        remove_all_pods(&client).await;
    }
    summary("floor, 1 pod: t0 -> startedAt", one);
    for (i, name) in ["RunPodSandbox", "CreateContainer", "StartContainer"].iter().enumerate() {
        summary(&format!("floor, 1 pod: {name} call"), calls[i].clone());
    }
    // 30 pods, with at most `limit` being created at once (30: all at once, as a naive client).
    for limit in [30usize, 2, 4, 8] {
        let (mut all, mut first, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..bursts {
            let names: Vec<String> = (0..30).map(|i| format!("floor-k{limit}-{b}-{i}")).collect();
            let gate = tokio::sync::Semaphore::new(limit);
            let cpu0 = runtime_cpu(containerd.dir());
            let t0 = ns(SystemTime::now());
            let futs: Vec<_> = names
                .iter()
                .map(|n| async {
                    let _permit = gate.acquire().await?;
                    direct_pod(target, n, t0).await
                })
                .collect();
            let results: Vec<i64> = join_all(futs)
                .await
                .into_iter()
                .map(|r| r.map(|(l, _)| l))
                .collect::<Result<_, _>>()?;
            all.push(ms(*results.iter().max().unwrap_or(&0)));
            first.push(ms(*results.iter().min().unwrap_or(&0)));
            cpu.push((runtime_cpu(containerd.dir()) - cpu0) * 1000.0);
            remove_all_pods(&client).await;
        }
        let label = if limit == 30 {
            "30 at once".to_string()
        } else {
            format!("30, at most {limit} in flight")
        };
        summary(&format!("floor, {label}: all started"), all);
        summary(&format!("floor, {label}: first started"), first);
        summary(&format!("floor, {label}: runtime CPU"), cpu);
    }
    Ok(())
}

async fn kubelet_part(
    client: &CriClient,
    containerd: &Containerd,
    runs: u64,
    bursts: u64,
    window: Duration,
    counts: &[usize],
) -> anyhow::Result<()> {
    let client = client.clone();
    println!("== kubelet (manifest renamed into place -> container startedAt)");
    let kubelet = Kubelet::start(containerd)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut one = Vec::new();
    for r in 0..runs {
        let name = format!("one-{r}");
        let t0 = ns(SystemTime::now());
        let file = kubelet.write_manifest(&format!("{name}.yaml"), &manifest(&name))?;
        let pod = format!("{name}-{}", e2e::kubelet::NODE);
        let s = wait_running(&client, std::slice::from_ref(&pod)).await?;
        one.push(ms(s[&pod] - t0));
        std::fs::remove_file(file)?;
        wait_empty(&client).await?;
    }
    if !one.is_empty() {
        summary("kubelet, 1 pod: write -> startedAt", one);
    }
    let (mut all, mut first, mut cpu, mut kcpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let kpid = kubelet.pid_u32().context("kubelet pid")?;
    for b in 0..bursts {
        let names: Vec<String> = (0..30).map(|i| format!("burst{b}-{i}")).collect();
        let (cpu0, k0) =
            (runtime_cpu(containerd.dir()) - usage(kpid)?.cpu_seconds, usage(kpid)?.cpu_seconds);
        let t0 = ns(SystemTime::now());
        let files: Vec<_> = names
            .iter()
            .map(|n| kubelet.write_manifest(&format!("{n}.yaml"), &manifest(n)))
            .collect::<Result<_, _>>()?;
        let pods: Vec<String> =
            names.iter().map(|n| format!("{n}-{}", e2e::kubelet::NODE)).collect();
        let s = wait_running(&client, &pods).await?;
        let lats: Vec<i64> = pods.iter().map(|p| s[p] - t0).collect();
        all.push(ms(*lats.iter().max().unwrap_or(&0)));
        first.push(ms(*lats.iter().min().unwrap_or(&0)));
        let k1 = usage(kpid)?.cpu_seconds;
        cpu.push((runtime_cpu(containerd.dir()) - k1 - cpu0) * 1000.0);
        kcpu.push((k1 - k0) * 1000.0);
        for f in files {
            std::fs::remove_file(f)?;
        }
        wait_empty(&client).await?;
    }
    if !all.is_empty() {
        summary("kubelet, 30-pod burst: runtime CPU (containerd+shims+runc+CNI)", cpu);
        summary("kubelet, 30-pod burst: kubelet CPU", kcpu);
        summary("kubelet, 30-pod burst: all started", all);
        summary("kubelet, 30-pod burst: first started", first);
    }

    println!("== kubelet idle cost ({window:?} windows)");
    for &count in counts {
        let names: Vec<String> = (0..count).map(|i| format!("idle-{i}")).collect();
        for n in &names {
            kubelet.write_manifest(&format!("{n}.yaml"), &manifest(n))?;
        }
        let pods: Vec<String> =
            names.iter().map(|n| format!("{n}-{}", e2e::kubelet::NODE)).collect();
        wait_running(&client, &pods).await?;
        let (rss, cpu) = idle_cost(&kubelet, window).await?;
        let now = usage(kubelet.pid_u32().context("kubelet pid")?)?;
        let (anon, file) = (now.anon_mib(), now.rss_mib() - now.anon_mib());
        println!(
            "idle with {count:>3} pods: RSS {rss:6.1} MiB (anon {anon:.1}, file {file:.1})   CPU {cpu:6.3} s/min ({:.3} % of a core)",
            cpu / 60.0 * 100.0
        );
        if count == 110 {
            let (times, rss, cpu) = scraped_cost(&kubelet, window).await?;
            for (path, t) in SCRAPED.iter().zip(times) {
                summary(&format!("scrape {path} at 110 pods"), t);
            }
            for (path, ms) in SCRAPED.iter().zip(cpu_per_scrape(&kubelet, 50).await?) {
                println!(
                    "kubelet CPU per scrape of {path} at 110 pods (50 back to back): {ms:.2} ms"
                );
            }
            println!(
                "scraped every 15 s with 110 pods: RSS {rss:6.1} MiB   CPU {cpu:6.3} s/min ({:.3} % of a core)",
                cpu / 60.0 * 100.0
            );
            // Nothing was restarted or replaced while it was measured.
            let listed =
                client.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await?;
            let ready = cri::PodSandboxState::SandboxReady as i32;
            let not_ready = listed.items.iter().filter(|s| s.state != ready).count();
            println!("sandboxes after the windows: {} ({not_ready} not ready)", listed.items.len());
            // What bounds the two stats scrapes: the runtime's own stats calls, timed directly
            // (informative: containerd 1.6 fails the first when any sandbox is not ready).
            let (mut sandboxes, mut containers) = (Vec::new(), Vec::new());
            for _ in 0..4 {
                let t = Instant::now();
                let r = cri::ListPodSandboxStatsRequest { filter: None };
                match client.list_pod_sandbox_stats(r).await {
                    Ok(_) => sandboxes.push(t.elapsed().as_secs_f64() * 1000.0),
                    Err(e) => println!("CRI ListPodSandboxStats failed: {e}"),
                }
                let t = Instant::now();
                let r = cri::ListContainerStatsRequest { filter: None };
                match client.list_container_stats(r).await {
                    Ok(_) => containers.push(t.elapsed().as_secs_f64() * 1000.0),
                    Err(e) => println!("CRI ListContainerStats failed: {e}"),
                }
            }
            summary("CRI ListPodSandboxStats at 110 pods (direct)", sandboxes);
            summary("CRI ListContainerStats at 110 pods (direct)", containers);
        }
        for n in &names {
            std::fs::remove_file(kubelet.manifests().join(format!("{n}.yaml")))?;
        }
        wait_empty(&client).await?;
    }
    drop(kubelet);
    Ok(())
}
