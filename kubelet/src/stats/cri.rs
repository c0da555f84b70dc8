//! Pods and containers from the runtime's stats, as upstream's CRI stats provider builds them:
//! the pods and running containers the runtime lists ([`Listing`]), with their figures from
//! `ListPodSandboxStats` ([`from_sandbox_stats`]) or, from a runtime that does not implement
//! it, `ListContainerStats` with each pod's CPU and memory the sum of its containers'
//! ([`from_container_stats`]). Pure: the caller makes the calls.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use proto::{brief, cri};

use super::cpu::{CpuUsageCache, Sample};
use super::logs;
use super::node;
use super::summary::{
    ContainerStats, CpuStats, FsStats, MemoryStats, PodReference, PodStats, ProcessStats, Time,
};
use crate::node_status::machine::FsReading;

/// The sandboxes and containers a summary reports: upstream's `removeTerminatedPods` (of the
/// sandboxes of one pod name, the ready ones, else the newest) and only running containers,
/// each with only what the summary reports of it (a kept reading holds the listing,
/// [`super::housekeeping`]).
#[derive(Debug, Default)]
pub struct Listing {
    sandboxes: HashMap<String, Sandbox>,
    containers: HashMap<String, Container>,
}

/// A listed pod sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub id: String,
    pub pod: PodReference,
    pub created_at: i64,
}

/// A listed running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    pub sandbox_id: String,
    pub name: String,
    pub created_at: i64,
}

impl Listing {
    pub fn new(sandboxes: Vec<brief::Sandbox>, containers: Vec<brief::Container>) -> Self {
        let mut by_pod: BTreeMap<(String, String), Vec<brief::Sandbox>> = BTreeMap::new();
        for s in sandboxes {
            let m = s.metadata.clone().unwrap_or_default();
            by_pod.entry((m.namespace.into(), m.name.into())).or_default().push(s);
        }
        let ready = cri::PodSandboxState::SandboxReady as i32;
        let mut kept = HashMap::new();
        for (_, mut group) in by_pod {
            group.sort_by_key(|s| s.created_at);
            if group.iter().any(|s| s.state == ready) && group.len() > 1 {
                group.retain(|s| s.state == ready);
            } else {
                group.drain(..group.len().saturating_sub(1));
            }
            kept.extend(group.into_iter().map(|s| {
                let m = s.metadata.unwrap_or_default();
                let pod = PodReference {
                    name: m.name.into(),
                    namespace: m.namespace.into(),
                    uid: m.uid.into(),
                };
                let id = String::from(s.id);
                (id.clone(), Sandbox { id, pod, created_at: s.created_at })
            }));
        }
        let running = cri::ContainerState::ContainerRunning as i32;
        let containers = containers.into_iter().filter(|c| c.state == running).map(|c| {
            let container = Container {
                name: c.metadata.map(|m| m.name.into()).unwrap_or_default(),
                sandbox_id: c.pod_sandbox_id.into(),
                created_at: c.created_at,
                id: c.id.into(),
            };
            (container.id.clone(), container)
        });
        Self { sandboxes: kept, containers: containers.collect() }
    }

    /// The pods' sandboxes kept (one a pod).
    pub fn sandboxes(&self) -> impl Iterator<Item = &Sandbox> {
        self.sandboxes.values()
    }

    /// The running containers of a sandbox.
    pub fn containers_of<'a>(&'a self, sandbox: &'a str) -> impl Iterator<Item = &'a Container> {
        self.containers.values().filter(move |c| c.sandbox_id == sandbox)
    }

    /// Every id a stat may be cached under.
    pub fn ids(&self) -> HashSet<&str> {
        self.sandboxes.keys().chain(self.containers.keys()).map(String::as_str).collect()
    }
}

/// What building a summary's pods needs besides the runtime's answers.
#[derive(Debug)]
pub struct Context<'a> {
    pub now: Time,
    pub cpu: &'a mut CpuUsageCache,
    /// `None` for CPU and memory only; else what the containers' `rootfs` and `logs` need.
    pub disks: Option<Disks>,
}

/// The filesystems containers' layers and logs live on.
#[derive(Debug)]
pub struct Disks {
    /// Filesystems by mountpoint, read once per summary.
    pub by_mountpoint: HashMap<String, Option<FsReading>>,
    /// The kubelet's root directory's (`nodefs`), which upstream gives the logs.
    pub nodefs: Option<FsReading>,
    /// The pod log directory, opened for this summary.
    pub pod_logs: logs::PodLogs,
    /// The writable layers by container ID, where the stats themselves have none (those read
    /// from cgroups).
    pub layers: std::sync::Arc<super::layers::Layers>,
}

fn value(v: Option<&cri::UInt64Value>) -> Option<u64> {
    v.map(|v| v.value)
}

fn time(at: i64, now: Time) -> Time {
    if at > 0 { Time(at) } else { now }
}

/// CPU from a CRI reading: the runtime's `usageNanoCores` when it gives one, else the rate
/// against the cached sample under `key`.
fn cpu(c: &cri::CpuUsage, key: &str, ctx: &mut Context<'_>) -> CpuStats {
    let at = time(c.timestamp, ctx.now);
    let total = value(c.usage_core_nano_seconds.as_ref());
    let nano_cores = value(c.usage_nano_cores.as_ref())
        .or_else(|| total.and_then(|t| ctx.cpu.observe(key, Sample { at: at.0, core_nanos: t })));
    CpuStats { time: at, usage_nano_cores: nano_cores, usage_core_nano_seconds: total }
}

fn memory(m: &cri::MemoryUsage, now: Time) -> MemoryStats {
    MemoryStats {
        time: time(m.timestamp, now),
        available_bytes: value(m.available_bytes.as_ref()),
        usage_bytes: value(m.usage_bytes.as_ref()),
        working_set_bytes: value(m.working_set_bytes.as_ref()),
        rss_bytes: value(m.rss_bytes.as_ref()),
        page_faults: value(m.page_faults.as_ref()),
        major_page_faults: value(m.major_page_faults.as_ref()),
    }
}

fn rootfs(
    layer: &cri::FilesystemUsage,
    by_mountpoint: &mut HashMap<String, Option<FsReading>>,
    now: Time,
) -> FsStats {
    let mut fs = FsStats {
        time: time(layer.timestamp, now),
        used_bytes: value(layer.used_bytes.as_ref()),
        inodes_used: value(layer.inodes_used.as_ref()),
        ..Default::default()
    };
    if let Some(id) = &layer.fs_id {
        let reading = *by_mountpoint
            .entry(id.mountpoint.clone())
            .or_insert_with(|| FsReading::of(Path::new(&id.mountpoint)));
        // A filesystem that cannot be read here leaves its figures out (upstream's partial
        // result).
        if let Some(r) = reading {
            fs.available_bytes = Some(r.available);
            fs.capacity_bytes = Some(r.capacity);
            fs.inodes_free = Some(r.inodes_free);
            fs.inodes = Some(r.inodes);
        }
    }
    fs
}

/// One container's stats, as upstream's `makeContainerStats`; a runtime that sent no CPU or
/// memory reading gets zeros, as upstream gives.
fn container(
    s: &cri::ContainerStats,
    c: &Container,
    pod: &PodReference,
    ctx: &mut Context<'_>,
) -> ContainerStats {
    let name = c.name.clone();
    let now = ctx.now;
    let zero = Some(0);
    let cpu = match &s.cpu {
        Some(u) => cpu(u, &c.id, ctx),
        None => CpuStats { time: now, usage_nano_cores: zero, usage_core_nano_seconds: zero },
    };
    let memory = match &s.memory {
        Some(m) => memory(m, now),
        None => MemoryStats { time: now, working_set_bytes: zero, ..Default::default() },
    };
    let (rootfs, logs) = match ctx.disks.as_mut() {
        None => (None, None),
        Some(disks) => {
            let layer = s.writable_layer.as_ref().or_else(|| disks.layers.get(&c.id));
            let layer = layer.map(|l| rootfs(l, &mut disks.by_mountpoint, now));
            let logs = disks.pod_logs.container_usage(pod, &name).map(|(used, inodes_used)| {
                let mut fs = disks.nodefs.map_or_else(FsStats::default, |r| node::fs(now, &r));
                fs.time = now;
                fs.used_bytes = Some(used);
                fs.inodes_used = Some(inodes_used);
                fs
            });
            (Some(layer.unwrap_or(FsStats { time: now, ..Default::default() })), logs)
        }
    };
    ContainerStats {
        name,
        start_time: Time(c.created_at),
        cpu: Some(cpu),
        memory: Some(memory),
        rootfs,
        logs,
    }
}

fn pod(sandbox: &Sandbox) -> PodStats {
    PodStats {
        pod_ref: sandbox.pod.clone(),
        start_time: Time(sandbox.created_at),
        ..Default::default()
    }
}

fn sorted(mut pods: Vec<PodStats>) -> Vec<PodStats> {
    pods.sort_by(|a, b| a.pod_ref.cmp(&b.pod_ref));
    for p in &mut pods {
        p.containers.sort_by(|a, b| a.name.cmp(&b.name));
    }
    pods
}

/// Pods from `ListPodSandboxStats`: the pod's own CPU and memory (its cgroup), and its
/// running containers'.
pub fn from_sandbox_stats(
    stats: &[cri::PodSandboxStats],
    listing: &Listing,
    ctx: &mut Context<'_>,
) -> Vec<PodStats> {
    let mut pods = Vec::new();
    for s in stats {
        let Some(sandbox) = s.attributes.as_ref().and_then(|a| listing.sandboxes.get(&a.id)) else {
            continue;
        };
        let mut p = pod(sandbox);
        if let Some(linux) = &s.linux {
            for cs in &linux.containers {
                let id = cs.attributes.as_ref().map(|a| a.id.as_str()).unwrap_or_default();
                if let Some(c) = listing.containers.get(id) {
                    let stats = container(cs, c, &p.pod_ref, ctx);
                    p.containers.push(stats);
                }
            }
            p.cpu = linux.cpu.as_ref().map(|u| cpu(u, &sandbox.id, ctx));
            p.memory = linux.memory.as_ref().map(|m| memory(m, ctx.now));
            p.process_stats = linux
                .process
                .as_ref()
                .map(|u| ProcessStats { process_count: u.process_count.as_ref().map(|c| c.value) });
        }
        pods.push(p);
    }
    sorted(pods)
}

fn add(into: &mut Option<u64>, v: Option<u64>) {
    *into = Some(into.unwrap_or(0) + v.unwrap_or(0));
}

/// Pods from `ListContainerStats`: each pod with a running container, its CPU and memory the
/// sums of its containers', as upstream when no pod cgroup reading is at hand.
pub fn from_container_stats(
    stats: &[cri::ContainerStats],
    listing: &Listing,
    ctx: &mut Context<'_>,
) -> Vec<PodStats> {
    let mut pods: BTreeMap<String, PodStats> = BTreeMap::new();
    for s in stats {
        let id = s.attributes.as_ref().map(|a| a.id.as_str()).unwrap_or_default();
        let Some(c) = listing.containers.get(id) else { continue };
        let Some(sandbox) = listing.sandboxes.get(&c.sandbox_id) else { continue };
        let p = pods.entry(sandbox.id.clone()).or_insert_with(|| pod(sandbox));
        let cs = container(s, c, &p.pod_ref, ctx);
        if let Some(u) = &cs.cpu {
            let total = p.cpu.get_or_insert_with(CpuStats::default);
            total.time = u.time;
            add(&mut total.usage_core_nano_seconds, u.usage_core_nano_seconds);
            add(&mut total.usage_nano_cores, u.usage_nano_cores);
        }
        if let Some(m) = &cs.memory {
            let total = p.memory.get_or_insert_with(MemoryStats::default);
            total.time = m.time;
            add(&mut total.available_bytes, m.available_bytes);
            add(&mut total.usage_bytes, m.usage_bytes);
            add(&mut total.working_set_bytes, m.working_set_bytes);
            add(&mut total.rss_bytes, m.rss_bytes);
            add(&mut total.page_faults, m.page_faults);
            add(&mut total.major_page_faults, m.major_page_faults);
        }
        p.containers.push(cs);
    }
    sorted(pods.into_values().collect())
}

#[cfg(test)]
mod tests;
