//! `bench-hollow --deployment`: the controllers issue's benchmark. With the controller-manager
//! as a companion, a Deployment is scaled from 0 to `--pods` replicas and timed until that many
//! pods exist, are bound, and are Running and Ready (each first seen by one pod watch); then a
//! rolling update (maxSurge 25 %, maxUnavailable 25 %) is timed until the Deployment reports
//! every replica updated and available and no old pod is left. Last, bare pods that no node
//! can take are added until the controller-manager's pod cache holds `--cached` pods, and its
//! RSS is read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use e2e::hollow::HollowCluster;
use e2e::process::Usage;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

use crate::{Args, bound, running_and_ready};

const NAME: &str = "bench";
const WAIT: Duration = Duration::from_secs(600);

/// The manager's flags beside `--kubeconfig`: no serving port, client limits from `--qps`.
pub fn manager_flags(args: &Args) -> Vec<String> {
    let qps = args.qps.to_string();
    ["--secure-port", "0", "--kube-api-qps", &qps, "--kube-api-burst", &qps, "-v", "0"]
        .map(String::from)
        .to_vec()
}

fn deployment() -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": NAME}},
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": "busybox:1.35",
                        "command": ["sleep", "3600"]}],
                },
            },
        },
    }))?)
}

/// When the watch first saw each pod (by name) exist, bound, and Running and Ready.
#[derive(Debug, Default)]
struct Seen {
    exists: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
    ready: HashMap<String, Instant>,
}

impl Seen {
    /// The time from `start` until the `n`th entry of `m` appeared.
    fn nth(m: &HashMap<String, Instant>, n: usize, start: Instant) -> Option<Duration> {
        let mut at: Vec<Instant> = m.values().copied().collect();
        at.sort();
        at.get(n.checked_sub(1)?).map(|t| t.duration_since(start))
    }
}

fn watch_pods(pods: Api<Pod>, seen: Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let config = watcher::Config::default().labels(&format!("app={NAME}"));
        let mut events = watcher::watcher(pods, config).boxed();
        while let Ok(Some(e)) = events.try_next().await {
            let (Event::Apply(p) | Event::InitApply(p)) = e else { continue };
            let Some(name) = p.metadata.name.clone() else { continue };
            let now = Instant::now();
            let mut s = seen.lock().unwrap_or_else(PoisonError::into_inner);
            s.exists.entry(name.clone()).or_insert(now);
            if bound(&p) {
                s.bound.entry(name.clone()).or_insert(now);
            }
            if running_and_ready(&p) {
                s.ready.entry(name).or_insert(now);
            }
        }
    })
}

fn manager_usage(cluster: &HollowCluster) -> Usage {
    cluster.companion("controller-manager").and_then(|p| p.usage()).unwrap_or_default()
}

/// Whether the rollout of generation `generation` is complete, as `kubectl rollout status`
/// decides it, with no old replica left.
fn rolled_out(d: &Deployment, generation: i64, replicas: i32) -> bool {
    let Some(s) = &d.status else { return false };
    s.observed_generation.unwrap_or(0) >= generation
        && s.updated_replicas.unwrap_or(0) == replicas
        && s.replicas.unwrap_or(0) == replicas
        && s.available_replicas.unwrap_or(0) == replicas
}

pub async fn bench(cluster: &HollowCluster, args: Args) -> anyhow::Result<()> {
    cluster.wait_ready(Duration::from_secs(120)).await?;
    let client = cluster.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    deployments.create(&PostParams::default(), &deployment()?).await?;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let watch = watch_pods(pods.clone(), seen.clone());
    let n = args.pods;
    let replicas = i32::try_from(n)?;

    // Scale 0 → n.
    let cm0 = manager_usage(cluster);
    let start = Instant::now();
    let scale = json!({"spec": {"replicas": replicas}});
    deployments.patch(NAME, &PatchParams::default(), &Patch::Merge(&scale)).await?;
    cluster
        .wait_for(&format!("{n} pods Running and Ready"), WAIT, || {
            let done = seen.lock().unwrap_or_else(PoisonError::into_inner).ready.len() >= n;
            async move { done.then_some(()) }
        })
        .await?;
    let cm1 = manager_usage(cluster);
    {
        let s = seen.lock().unwrap_or_else(PoisonError::into_inner);
        let t = |m: &HashMap<String, Instant>| {
            Seen::nth(m, n, start).map_or(f64::NAN, |d| d.as_secs_f64())
        };
        println!(
            "scale 0 → {n}: {n} pods exist {:6.2} s   all bound {:6.2} s   all Running+Ready {:6.2} s   (controller-manager CPU {:.2} s)",
            t(&s.exists),
            t(&s.bound),
            t(&s.ready),
            cm1.cpu_seconds - cm0.cpu_seconds
        );
    }

    // A rolling update to a new template.
    let generation = deployments.get(NAME).await?.metadata.generation.unwrap_or(0) + 1;
    let start = Instant::now();
    let update = json!({"spec": {"template": {"metadata": {"annotations": {"bench/rev": "2"}}}}});
    deployments.patch(NAME, &PatchParams::default(), &Patch::Merge(&update)).await?;
    cluster
        .wait_for("the rollout to complete", WAIT, || async {
            let d = deployments.get(NAME).await.ok()?;
            rolled_out(&d, generation, replicas).then_some(())
        })
        .await?;
    let rolled = start.elapsed();
    let cm2 = manager_usage(cluster);
    println!(
        "rolling update of {n} replicas (25 %/25 %): complete {:6.2} s   (controller-manager CPU {:.2} s)",
        rolled.as_secs_f64(),
        cm2.cpu_seconds - cm1.cpu_seconds
    );
    println!(
        "controller-manager RSS with {n} pods: {:.1} MiB (anonymous {:.1})",
        cm2.rss_mib(),
        cm2.anon_mib()
    );
    watch.abort();

    // The pod cache at `--cached` pods: bare pods no node can take (no kubelet cost).
    let now = pods.list(&Default::default()).await?.items.len();
    let extra = args.cached.saturating_sub(now);
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..extra)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let p: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("cached-{i:05}"), "labels": {"bench": "cached"}},
                    "spec": {"nodeSelector": {"bench/none": "true"},
                        "containers": [{"name": "app", "image": "busybox:1.35"}]},
                }))?;
                pods.create(&PostParams::default(), &p).await?;
                Ok(())
            }
        })
        .buffer_unordered(args.inflight)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let all = pods.list(&Default::default()).await?.items.len();
    tokio::time::sleep(Duration::from_secs(10)).await; // the manager's watch catches up
    let cm3 = manager_usage(cluster);
    println!(
        "controller-manager RSS with {all} pods in the API (and its cache): {:.1} MiB (anonymous {:.1}); CPU {:.2} s while they were added",
        cm3.rss_mib(),
        cm3.anon_mib(),
        cm3.cpu_seconds - cm2.cpu_seconds
    );
    Ok(())
}
