//! The eviction manager, as upstream's `managerImpl.synchronize`: every 10 s the node's signals
//! are observed against the thresholds ([`super::config`]), and [`super::state`] decides
//! which pressure conditions hold and which thresholds are acted on (hard ones at once, soft
//! ones once met for their grace period, either until its minimum reclaim is freed). For the
//! first of those, a Warning `EvictionThresholdMet` (`Attempting to reclaim <resource>`) on the
//! node, then
//! 1. under disk pressure, node-level resources are reclaimed first — every dead container
//!    (with its logs), and on the image filesystem (or a shared one) every unused image — and
//!    if then no threshold is met even with its minimum reclaim, nothing more happens;
//! 2. otherwise the active pods (not finished, no deletion requested, not evicted at an earlier
//!    round and still stopping) are ranked
//!    ([`super::rank`]) by their use of the resource under pressure, from the stats summary,
//!    and the first that is not critical is evicted: its worker stops it within 1 s
//!    (upstream's grace for hard evictions; a soft one gives the pod's own grace period, at
//!    most `evictionMaxPodGracePeriod`) and fails it with reason `Evicted`, upstream's message
//!    and a `DisruptionTarget` condition, a Warning `Evicted` event, and
//!    `kubelet_evictions{eviction_signal}`. One pod per round, as upstream.
//!
//! The pressure conditions are published for admission ([`crate::lifecycle::eviction`]) and
//! the node status, both from this one verdict (upstream's `IsUnderMemoryPressure` and
//! friends). Memory pressure is acted on before the others; pods are never evicted for a
//! signal the node does not observe.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use proto::{CriClient, cri};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{EvictionConfig, Threshold};
use super::rank::{self, Candidate};
use super::state::State;
use super::{Observation, Observations, Pressure, Signal};
use crate::config::mux::SourcesReady;
use crate::events::{ObjectRef, Recorder};
use crate::lifecycle::eviction::{DISRUPTION_REASON, REASON, is_critical};
use crate::metrics::KubeletMetrics;
use crate::node_status::machine::ReadingSource;
use crate::runtime::images::gc::ImageGcManager;
use crate::runtime::remove_container_and_logs;
use crate::stats::layers::Want;
use crate::stats::summary::{FsStats, PodStats, Summary};
use crate::stats::{Detail, StatsProvider};
use crate::status::{PodFailure, StatusManager};

/// How often the signals are observed (upstream's `monitoringInterval`).
pub const MONITORING_INTERVAL: Duration = Duration::from_secs(10);
/// The grace a hard eviction gives the pod (upstream's `immediateEvictionGracePeriodSeconds`).
pub const HARD_EVICTION_GRACE: Duration = Duration::from_secs(1);
/// The pod's grace period when its spec leaves it out (the API's default).
const DEFAULT_TERMINATION_GRACE_SECONDS: i64 = 30;
/// How deep a pod's volumes are walked to measure them.
const VOLUME_DEPTH: usize = 64;

/// A pod the manager evicts: the sync loop hands it to the pod's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    pub uid: String,
    pub failure: PodFailure,
    pub grace: Duration,
}

/// What one round did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// No threshold met.
    Calm,
    /// Reclaiming dead containers and unused images relieved the signal.
    Reclaimed(Signal),
    /// This pod was evicted for the signal.
    Evicted { signal: Signal, uid: String },
    /// The signal is met and no pod may be evicted (none, or only critical ones).
    NothingToEvict(Signal),
}

/// The signal acted on, of those met: memory first, then the others in [`Signal::ALL`]'s
/// order (upstream's `byEvictionPriority`).
pub fn signal_to_act_on(met: &[Signal]) -> Option<Signal> {
    Signal::ALL.into_iter().find(|s| met.contains(s))
}

/// The threshold acted on, of those whose grace periods are served: its signal first by
/// [`signal_to_act_on`], a hard one before a soft one on the same signal.
pub fn threshold_to_act_on(thresholds: &[Threshold], act_on: &[usize]) -> Option<Threshold> {
    let chosen: Vec<Threshold> =
        act_on.iter().filter_map(|&i| thresholds.get(i).copied()).collect();
    let signal = signal_to_act_on(&chosen.iter().map(|t| t.signal).collect::<Vec<_>>())?;
    let on_signal = chosen.iter().filter(|t| t.signal == signal);
    on_signal.min_by_key(|t| t.grace).copied()
}

/// Whether reclaiming relieved the node: no threshold met even with its minimum reclaim
/// enforced (upstream's check in `reclaimNodeLevelResources`: every threshold, grace periods
/// aside).
pub fn relieved(thresholds: &[Threshold], observed: &Observations) -> bool {
    !thresholds.iter().any(|t| t.met(observed, true))
}

/// The grace a soft eviction gives `pod`: its `terminationGracePeriodSeconds`, at most
/// `evictionMaxPodGracePeriod` (negative counts as 0), and never under 1 s, as upstream's
/// eviction manager and pod workers together.
pub fn soft_eviction_grace(pod: &Pod, max_pod_grace_period_seconds: i64) -> Duration {
    let max = max_pod_grace_period_seconds.max(0);
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_TERMINATION_GRACE_SECONDS);
    Duration::from_secs(u64::try_from(own.min(max)).unwrap_or(0).max(1))
}

/// The resource a signal is short of, as upstream's `signalToResource`.
pub fn resource(signal: Signal) -> &'static str {
    match signal {
        Signal::MemoryAvailable => "memory",
        Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
        Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
        Signal::PidAvailable => "pids",
    }
}

fn amount(signal: Signal, n: u64) -> String {
    match resource(signal) {
        "memory" | "ephemeral-storage" => api::quantity::format_binary(n),
        _ => n.to_string(),
    }
}

/// One container's use of the resource under pressure, and its request as the spec writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerUse {
    pub name: String,
    pub usage: u64,
}

/// Upstream's `evictionMessage`: the resource, the threshold and what is available, then each
/// container using more of memory or ephemeral storage than it requests.
pub fn message(
    signal: Signal,
    threshold: u64,
    observed: Observation,
    pod: &Pod,
    containers: &[ContainerUse],
) -> String {
    let resource = resource(signal);
    let mut m = format!(
        "The node was low on resource: {resource}. Threshold quantity: {}, available: {}. ",
        amount(signal, threshold),
        amount(signal, observed.available)
    );
    if matches!(resource, "memory" | "ephemeral-storage") {
        let spec_containers =
            pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
        for c in spec_containers {
            let Some(used) = containers.iter().find(|u| u.name == c.name) else { continue };
            let written = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .map(|q| q.0.clone());
            let request = written
                .as_deref()
                .and_then(|q| api::quantity::Quantity::parse(q).ok())
                .map_or(0, |q| u64::try_from(q.value()).unwrap_or(0));
            if used.usage > request {
                m.push_str(&format!(
                    "Container {} was using {}, request is {}, has larger consumption of {resource}. ",
                    c.name,
                    amount(signal, used.usage),
                    written.unwrap_or_else(|| "0".into()),
                ));
            }
        }
    }
    m
}

/// Evicts pods under node pressure.
#[derive(Debug)]
pub struct EvictionManager {
    /// The thresholds, transition period and soft evictions' grace.
    pub config: EvictionConfig,
    /// What the rounds remember (when thresholds were first met, pressures last seen).
    pub state: Mutex<State>,
    pub readings: ReadingSource,
    pub stats: Arc<StatsProvider>,
    pub statuses: Arc<StatusManager>,
    pub cri: CriClient,
    pub image_gc: Arc<ImageGcManager>,
    /// The kubelet's root directory (pods' volumes; the node filesystem).
    pub root_dir: PathBuf,
    pub evictions: mpsc::Sender<Eviction>,
    pub recorder: Recorder,
    /// The node's name, for the node's `EvictionThresholdMet` events.
    pub node: String,
    pub metrics: Arc<KubeletMetrics>,
    /// The pressure conditions at the last round, for admission and the node status
    /// (upstream's `nodeConditions`).
    pub pressures: watch::Sender<Vec<Pressure>>,
    /// The first round waits until the sources' first pods are handled, so the pods a
    /// restarted kubelet finds are admitted again before pressure turns pods away.
    pub sources_ready: Arc<SourcesReady>,
}

impl EvictionManager {
    /// Synchronizes every [`MONITORING_INTERVAL`] until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        while !self.sources_ready.pods_handled() {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let mut tick = tokio::time::interval(MONITORING_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let round = self.synchronize().await;
            if round != Round::Calm {
                tracing::info!(?round, "eviction manager");
            }
        }
    }

    /// One round, now.
    pub async fn synchronize(&self) -> Round {
        self.synchronize_at(Instant::now()).await
    }

    /// One round at `now` (tests step the clock through grace and transition periods).
    pub async fn synchronize_at(&self, now: Instant) -> Round {
        let observed = self.readings.sample().observations();
        let thresholds = &self.config.thresholds;
        let transition = self.config.pressure_transition_period;
        let verdict = self.lock_state().observe(thresholds, &observed, transition, now);
        self.pressures.send_replace(verdict.pressures);
        let Some(threshold) = threshold_to_act_on(thresholds, &verdict.act_on) else {
            return Round::Calm;
        };
        let signal = threshold.signal;
        self.recorder.warning(
            &ObjectRef::Node(self.node.clone()),
            "EvictionThresholdMet",
            format!("Attempting to reclaim {}", resource(signal)),
        );
        let mut observed = observed;
        if signal.pressure() == Pressure::Disk {
            self.reclaim(signal).await;
            observed = self.readings.sample().observations();
            if relieved(&self.config.thresholds, &observed) {
                return Round::Reclaimed(signal);
            }
        }
        let Some(now) = observed.get(signal) else {
            return Round::Calm;
        };
        let value = threshold.value;
        let summary = match self.stats.summary(Detail::Full(Want::Now)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "eviction manager: no stats to rank pods by");
                return Round::NothingToEvict(signal);
            }
        };
        let usage = self.usage(signal, &summary);
        let mut candidates: Vec<Candidate> = self
            .active_pods()
            .into_iter()
            .map(|pod| {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let used = usage.get(&uid).map_or(0, |u| u.total);
                let requests =
                    pod.spec.as_ref().map(api::resources::pod_requests).unwrap_or_default();
                let request = match resource(signal) {
                    "memory" => requests.memory,
                    "ephemeral-storage" => requests.ephemeral_storage,
                    _ => 0,
                };
                Candidate { pod, usage: used, request: u64::try_from(request).unwrap_or(0) }
            })
            .collect();
        rank::rank(&mut candidates, signal != Signal::PidAvailable);
        for c in candidates {
            if is_critical(&c.pod) {
                tracing::info!(pod = ?c.pod.metadata.name, "eviction manager: cannot evict a critical pod");
                continue;
            }
            let uid = c.pod.metadata.uid.clone().unwrap_or_default();
            let containers = usage.get(&uid).map(|u| u.containers.clone()).unwrap_or_default();
            let text = message(signal, value.amount(now.capacity), now, &c.pod, &containers);
            self.recorder.warning(&ObjectRef::pod(&c.pod), REASON, text.clone());
            self.metrics.evictions.with(&[signal.as_str()]).inc();
            let failure = PodFailure {
                reason: REASON.into(),
                message: text,
                disruption: Some(DISRUPTION_REASON.into()),
            };
            let grace = if threshold.is_hard() {
                HARD_EVICTION_GRACE
            } else {
                soft_eviction_grace(&c.pod, self.config.max_pod_grace_period_seconds)
            };
            let eviction = Eviction { uid: uid.clone(), failure, grace };
            if self.evictions.send(eviction).await.is_err() {
                return Round::NothingToEvict(signal); // the kubelet is stopping
            }
            self.lock_state().evicted.insert(uid.clone());
            return Round::Evicted { signal, uid };
        }
        Round::NothingToEvict(signal)
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The pods admitted and not finished, from the status manager, but those whose
    /// termination was requested (upstream's `filterOutInactivePods`): deleted through the API,
    /// or evicted at an earlier round and still stopping (a soft eviction's grace can outlast
    /// a round).
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let unfinished: Vec<Pod> = self
            .statuses
            .pods()
            .into_iter()
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .collect();
        let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
        let mut state = self.lock_state();
        state.evicted.retain(|e| unfinished.iter().any(|p| uid(p) == *e));
        unfinished
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !state.evicted.contains(&uid(p)))
            .map(Arc::new)
            .collect()
    }

    /// Whether the image filesystem is the node filesystem's device too.
    fn shared_image_fs(&self) -> bool {
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        match &self.readings.image_fs_dir {
            Some(images) => dev(images) == dev(&self.root_dir),
            None => true,
        }
    }

    /// Frees what the node holds for nobody, as upstream's node-level reclaim: dead
    /// containers always, unused images when the signal is the image filesystem's or it is
    /// shared with the node's.
    async fn reclaim(&self, signal: Signal) {
        let images = matches!(signal, Signal::ImageFsAvailable | Signal::ImageFsInodesFree)
            || self.shared_image_fs();
        let removed = self.remove_dead_containers().await;
        let freed = if images {
            match self.image_gc.delete_unused(SystemTime::now()).await {
                Ok(freed) => freed,
                Err(e) => {
                    tracing::warn!(error = %e, "eviction manager: removing unused images");
                    0
                }
            }
        } else {
            0
        };
        tracing::info!(%signal, dead_containers = removed, image_bytes = freed, "eviction manager: reclaimed node-level resources");
    }

    /// Removes every exited container and its logs (upstream's `DeleteAllUnusedContainers`).
    async fn remove_dead_containers(&self) -> usize {
        let exited = cri::ContainerFilter {
            state: Some(cri::ContainerStateValue {
                state: cri::ContainerState::ContainerExited as i32,
            }),
            ..Default::default()
        };
        let list = self
            .cri
            .list_containers(cri::ListContainersRequest { filter: Some(exited) })
            .await
            .map(|r| r.containers)
            .unwrap_or_default();
        let mut removed = 0;
        for c in list.into_iter().filter(|c| c.state == cri::ContainerState::ContainerExited as i32)
        {
            let status = self
                .cri
                .container_status(cri::ContainerStatusRequest {
                    container_id: c.id.clone(),
                    verbose: false,
                })
                .await;
            let log = status.ok().and_then(|s| s.status).map(|s| s.log_path).unwrap_or_default();
            match remove_container_and_logs(&self.cri, &c.id, &log).await {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(container = %c.id, error = %e, "eviction manager: removing a dead container")
                }
            }
        }
        removed
    }

    /// Each pod's use of what `signal` measures: memory's working set; PIDs its process count
    /// (the summary's `process_stats`, as upstream's `rankPIDPressure`); on the node filesystem
    /// its logs and volumes (and writable layers when the image filesystem is the same); on the
    /// image filesystem its writable layers; bytes or inodes as the signal counts.
    fn usage(&self, signal: Signal, summary: &Summary) -> HashMap<String, PodUse> {
        let shared = self.shared_image_fs();
        let inodes = matches!(signal, Signal::NodeFsInodesFree | Signal::ImageFsInodesFree);
        let fs = |s: Option<&FsStats>| {
            s.and_then(|f| if inodes { f.inodes_used } else { f.used_bytes }).unwrap_or(0)
        };
        let (rootfs, logs, volumes) = match signal {
            Signal::MemoryAvailable | Signal::PidAvailable => (false, false, false),
            Signal::NodeFsAvailable | Signal::NodeFsInodesFree => (shared, true, true),
            Signal::ImageFsAvailable | Signal::ImageFsInodesFree => (true, shared, shared),
        };
        summary
            .pods
            .iter()
            .map(|p: &PodStats| {
                let mut u = PodUse::default();
                if signal == Signal::PidAvailable {
                    u.total = p.process_stats.as_ref().and_then(|s| s.process_count).unwrap_or(0);
                    return (p.pod_ref.uid.clone(), u);
                }
                for c in &p.containers {
                    let used = if signal == Signal::MemoryAvailable {
                        c.memory.as_ref().and_then(|m| m.working_set_bytes).unwrap_or(0)
                    } else {
                        (if rootfs { fs(c.rootfs.as_ref()) } else { 0 })
                            + (if logs { fs(c.logs.as_ref()) } else { 0 })
                    };
                    u.total += used;
                    u.containers.push(ContainerUse { name: c.name.clone(), usage: used });
                }
                if volumes {
                    let dir = crate::volume::pod_volumes_dir(&self.root_dir, &p.pod_ref.uid);
                    let (bytes, files) =
                        crate::stats::logs::usage_within(&dir, VOLUME_DEPTH).unwrap_or((0, 0));
                    u.total += if inodes { files } else { bytes };
                }
                (p.pod_ref.uid.clone(), u)
            })
            .collect()
    }
}

/// A pod's use of the resource under pressure, and its containers'.
#[derive(Debug, Clone, Default)]
struct PodUse {
    total: u64,
    containers: Vec<ContainerUse>,
}

#[cfg(test)]
mod tests;
