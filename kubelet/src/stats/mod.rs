//! Resource usage, as upstream's `pkg/kubelet/stats` and the summary provider of
//! `pkg/kubelet/server/stats`: [`StatsProvider::summary`] answers the summary API
//! (`/stats/summary`) and is what the resource metrics (`/metrics/resource`) are made of.
//!
//! - [`summary`]: the `stats/v1alpha1` types.
//! - [`node`]: the node's figures: the root cgroup's CPU and memory, the filesystems and tasks
//!   of one [`NodeSample`](crate::node_status::machine::NodeSample), the boot time.
//! - [`cri`]: pods and containers from CRI `ListPodSandboxStats` (or `ListContainerStats` from a
//!   runtime that does not implement it) over the runtime's pods and running containers.
//! - [`cgroup`]: pods' and containers' CPU, memory and processes read from their cgroups where
//!   the kubelet makes them (as cAdvisor does for upstream), in CRI's form;
//! - [`housekeeping`]: the last reading of the pods' figures, answering the summaries asked
//!   within 10 s while the PLEG sees no pod change (cAdvisor's housekeeping interval).
//! - [`layers`]: the containers' writable layers from the runtime, recent ones for the summary
//!   API and fresh ones for the eviction manager.
//! - [`cpu`]: `usageNanoCores` from two samples, for what the runtime does not rate itself.
//! - [`logs`]: the bytes and inodes of a container's log directory.
//!
//! Not reported: pod `volume` and `ephemeral-storage` figures, `network`, the node's
//! `systemContainers` and swap.

pub mod cgroup;
pub mod cpu;
pub mod cri;
pub mod housekeeping;
pub mod layers;
pub mod logs;
pub mod node;
pub mod summary;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use proto::{CallError, CriClient, cri as api};
use tokio_util::task::TaskTracker;

use crate::node_status::machine::ReadingSource;
use crate::pleg::timeline::PodTimeline;
use cpu::{CpuUsageCache, Sample};
use housekeeping::{Housekeeping, PodFigures, Reading};
use summary::{FsStats, NodeStats, RuntimeStats, Summary, Time};

use crate::cm::ContainerManager;
use layers::{Want, WritableLayers};

/// What a summary carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Names, start times, CPU and memory alone (upstream's `only_cpu_and_memory=true`, and
    /// what the resource metrics read).
    CpuAndMemory,
    /// Everything; where usage is read from cgroups, the writable layers as fresh as asked.
    Full(Want),
}

/// Why there is no summary, worded as upstream's summary provider.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("failed to list pod stats: failed to get pod or container map: {0}")]
    List(#[source] CallError),
    #[error("failed to list pod stats: {0}")]
    PodStats(#[source] CallError),
    #[error("failed to get imageFs stats: {0}")]
    ImageFs(#[source] CallError),
    #[error("failed to get imageFs stats: imageFs information is unavailable")]
    NoImageFs,
    #[error("failed to list pod stats: the cgroup reads were cancelled (the kubelet is stopping)")]
    Interrupted,
}

/// What the summary is made of, and the CPU samples kept between summaries.
#[derive(Debug)]
pub struct StatsProvider {
    cri: CriClient,
    node_name: String,
    readings: ReadingSource,
    pod_logs_dir: PathBuf,
    boot_time: Time,
    cpu: Mutex<CpuUsageCache>,
    /// Pod cgroups, read for pods' and containers' CPU, memory and processes where the kubelet
    /// makes them (`cgroupsPerQOS`), and the runtime's writable-layer figures beside them.
    cgroups: Option<(Arc<ContainerManager>, WritableLayers)>,
    /// The last reading of the pods' figures, kept for the next summaries.
    housekeeping: Option<Housekeeping>,
}

impl StatsProvider {
    pub fn new(
        cri: CriClient,
        node_name: String,
        readings: ReadingSource,
        pod_logs_dir: PathBuf,
    ) -> Self {
        let boot_time = node::boot_time(&readings.root);
        Self {
            cri,
            node_name,
            readings,
            pod_logs_dir,
            boot_time,
            cpu: Mutex::default(),
            cgroups: None,
            housekeeping: None,
        }
    }

    /// Reads pods' and containers' usage from their cgroups, when `cm` makes them; the
    /// writable layers' refreshes are owned by `tasks`.
    pub fn with_cgroups(mut self, cm: Arc<ContainerManager>, tasks: TaskTracker) -> Self {
        if cm.config().layout.per_qos {
            self.cgroups = Some((cm, WritableLayers::new(self.cri.clone(), tasks)));
        }
        self
    }

    /// Keeps each reading of the pods' figures for the summaries asked within
    /// [`housekeeping::INTERVAL`] while the PLEG (updating `timeline` every `relist_period`)
    /// sees no pod change.
    pub fn with_housekeeping(
        mut self,
        timeline: Arc<PodTimeline>,
        relist_period: Duration,
    ) -> Self {
        self.housekeeping = Some(Housekeeping::new(timeline, relist_period));
        self
    }

    /// The summary, with what `detail` asks for.
    pub async fn summary(&self, detail: Detail) -> Result<Summary, StatsError> {
        let cpu_and_memory_only = detail == Detail::CpuAndMemory;
        let layers = match (&self.cgroups, detail) {
            (Some((_, layers)), Detail::Full(want)) => {
                Some(layers.get(want).await.map_err(StatsError::PodStats)?)
            }
            _ => None,
        };
        let reading = self.reading(detail == Detail::Full(Want::Now)).await?;
        let listing: &cri::Listing = &reading.listing;
        let image_fs = if cpu_and_memory_only { None } else { Some(self.image_fs().await?) };

        let now = Time::now();
        let sample = self.readings.sample();
        let usage = node::root_usage(&self.readings.root, &sample);
        let disks = (!cpu_and_memory_only).then(|| {
            let mut by_mountpoint = HashMap::new();
            if let Some(dir) = &self.readings.image_fs_dir {
                by_mountpoint.insert(dir.display().to_string(), sample.imagefs);
            }
            cri::Disks {
                by_mountpoint,
                nodefs: sample.nodefs,
                pod_logs: logs::PodLogs::open(&self.pod_logs_dir),
                layers: layers.unwrap_or_default(),
            }
        });
        let mut cache = self.cpu.lock().unwrap_or_else(PoisonError::into_inner);
        let node_nano_cores = usage
            .cpu_core_nanos
            .and_then(|t| cache.observe(cpu::NODE, Sample { at: now.0, core_nanos: t }));
        let mut ctx = cri::Context { now, cpu: &mut cache, disks };
        let pods = match &reading.figures {
            PodFigures::Sandboxes(stats) => cri::from_sandbox_stats(stats, listing, &mut ctx),
            PodFigures::Containers(stats) => cri::from_container_stats(stats, listing, &mut ctx),
        };
        let mut disks = ctx.disks;
        cache.retain(&listing.ids());
        drop(cache);

        let mut node = NodeStats {
            node_name: self.node_name.clone(),
            start_time: self.boot_time,
            cpu: node::cpu(now, &usage, node_nano_cores),
            memory: node::memory(now, &usage, &sample),
            ..Default::default()
        };
        if let (Some(mut image_fs), Some(disks)) = (image_fs, disks.as_mut()) {
            if let Some(mountpoint) = image_fs.1.take() {
                let reading = *disks.by_mountpoint.entry(mountpoint.clone()).or_insert_with(|| {
                    crate::node_status::machine::FsReading::of(std::path::Path::new(&mountpoint))
                });
                if let Some(r) = reading {
                    let fs = &mut image_fs.0;
                    fs.available_bytes = Some(r.available);
                    fs.capacity_bytes = Some(r.capacity);
                    fs.inodes_free = Some(r.inodes_free);
                    fs.inodes = Some(r.inodes);
                }
            }
            node.fs = sample.nodefs.map(|r| node::fs(now, &r));
            node.runtime = Some(RuntimeStats { image_fs: Some(image_fs.0) });
            node.rlimit = Some(node::rlimit(now, &sample));
        }
        Ok(Summary { node, pods })
    }

    /// The pods' figures: the kept reading while it stands, unless `fresh` is asked for; else
    /// read now (and kept).
    async fn reading(&self, fresh: bool) -> Result<Arc<Reading>, StatsError> {
        let kept = self.housekeeping.as_ref().filter(|_| !fresh);
        if let Some(kept) = kept.and_then(|h| h.recent(Instant::now())) {
            return Ok(kept);
        }
        let began = Instant::now();
        let (sandboxes, containers) = tokio::try_join!(
            self.cri.list_pod_sandbox_brief(api::ListPodSandboxRequest { filter: None }),
            self.cri.list_containers_brief(api::ListContainersRequest { filter: None }),
        )
        .map_err(StatsError::List)?;
        let listing = Arc::new(cri::Listing::new(sandboxes, containers));
        let figures = match &self.cgroups {
            Some((cm, _)) => PodFigures::Sandboxes(cgroup_stats(cm, &listing, Time::now()).await?),
            None => self.runtime_stats().await?,
        };
        let reading = Arc::new(Reading { began, listing, figures });
        if let Some(h) = &self.housekeeping {
            h.keep(reading.clone());
        }
        Ok(reading)
    }

    /// The pods' usage as the runtime reports it: `ListPodSandboxStats`, or summed from
    /// `ListContainerStats` where the runtime lacks or fails the first.
    async fn runtime_stats(&self) -> Result<PodFigures, StatsError> {
        let sandbox_stats = api::ListPodSandboxStatsRequest { filter: None };
        // A runtime without ListPodSandboxStats, or one that fails it (containerd 1.6 does
        // whenever a stopped sandbox's cgroup is gone, which is every finished pod's once its
        // resources are released): the pods are summed from ListContainerStats, as upstream's
        // default (cAdvisor and container stats) would read them.
        Ok(match self.cri.list_pod_sandbox_stats(sandbox_stats).await {
            Ok(r) => PodFigures::Sandboxes(r.stats),
            Err(e) => {
                tracing::debug!(error = %e, "no ListPodSandboxStats; summing ListContainerStats");
                let r = api::ListContainerStatsRequest { filter: None };
                match self.cri.list_container_stats(r).await {
                    Ok(r) => PodFigures::Containers(r.stats),
                    Err(_) => return Err(StatsError::PodStats(e)),
                }
            }
        })
    }

    /// The runtime's first image filesystem (CRI `ImageFsInfo`): what its images use, and the
    /// mountpoint whose filesystem's figures complete it.
    async fn image_fs(&self) -> Result<(FsStats, Option<String>), StatsError> {
        let info = self.cri.image_fs_info(api::ImageFsInfoRequest {}).await;
        let info = info.map_err(StatsError::ImageFs)?;
        let fs = info.image_filesystems.into_iter().next().ok_or(StatsError::NoImageFs)?;
        let stats = FsStats {
            time: Time(fs.timestamp),
            used_bytes: fs.used_bytes.map(|v| v.value),
            inodes_used: fs.inodes_used.map(|v| v.value),
            ..Default::default()
        };
        Ok((stats, fs.fs_id.map(|id| id.mountpoint)))
    }
}

/// The pods' usage from their cgroups ([`cgroup`], read off the async workers).
async fn cgroup_stats(
    cm: &Arc<ContainerManager>,
    listing: &Arc<cri::Listing>,
    now: Time,
) -> Result<Vec<api::PodSandboxStats>, StatsError> {
    let (cm, listing) = (cm.clone(), listing.clone());
    let read = tokio::task::spawn_blocking(move || {
        cgroup::sandbox_stats(&listing, &cm, now.0, cgroup::readers())
    });
    match read.await {
        Ok(stats) => Ok(stats),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(StatsError::Interrupted),
    }
}

#[cfg(test)]
mod tests;
