//! The sync loop: one `select!` over config updates, PLEG events, a sync ticker, a housekeeping
//! ticker, finished workers and changed ConfigMaps and Secrets, each read as a
//! [`SyncLoopEvent`] and dispatched to its handler, as upstream's `syncLoopIteration`. The loop
//! registers each API pod's references with the object manager as the pod is added or
//! updated, and unregisters them when it goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::mux::SourcesReady;
use crate::config::{Op, PodUpdate, Source};
use crate::events::{ObjectRef, Recorder};
use crate::eviction::Pressure;
use crate::eviction::manager::Eviction;
use crate::lifecycle::{self, Rejection, preemption};
use crate::objects::ObjectSources;
use crate::pleg::{PodLifecycleEvent, RuntimePods};
use crate::pod_workers::{PodWorkers, Work, WorkQueue};
use crate::prober::{ProbeManager, ProbeResults, ProbeUpdate};
use crate::runtime::RuntimeManager;
use crate::runtime::sync::grace_period;
use crate::status::{PodFailure, StatusManager};
use crate::watchdog::SyncLoopHealth;

/// How often pods whose resync is due are synced.
pub const SYNC_TICK: Duration = Duration::from_secs(1);
/// The grace period for a pod the apiserver no longer has (force-deleted, `--force
/// --grace-period=0`): upstream's floor. Upstream keeps the last grace period it knew; an
/// operator who forces a deletion wants the pod gone, so ours stops it at once.
pub const FORCED_GRACE: Duration = Duration::from_secs(1);

/// The grace period of a pod the apiserver is deleting: its `deletionGracePeriodSeconds`
/// (at least 1 s, as upstream's `calculateEffectiveGracePeriod`).
fn grace_period_of_deleted(pod: &Pod) -> Duration {
    grace_period(pod).max(crate::runtime::MIN_TERMINATION_GRACE)
}

/// How often housekeeping looks for pods to clean up.
pub const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(2);

/// Everything that wakes the sync loop.
#[derive(Debug)]
pub enum SyncLoopEvent {
    Config(PodUpdate),
    Pleg(PodLifecycleEvent),
    SyncTick,
    Housekeeping,
    /// A worker finished terminating and removing its pod.
    WorkerDone(String),
    /// Probe verdicts changed (readiness, liveness, startup).
    ProbeResults(Vec<ProbeUpdate>),
    /// A ConfigMap or Secret these pods reference changed (or was first read after a pod
    /// waited for it): their files and environment are brought up to date.
    ObjectsChanged(Vec<String>),
    /// The eviction manager chose a pod to evict.
    Evict(Eviction),
}

/// The channels the loop reads.
#[derive(Debug)]
pub struct Inputs {
    pub config: mpsc::Receiver<PodUpdate>,
    pub pleg: mpsc::Receiver<PodLifecycleEvent>,
    pub done: mpsc::UnboundedReceiver<String>,
    pub runtime_pods: watch::Receiver<RuntimePods>,
    /// Pods to sync because an object they reference changed.
    pub objects: mpsc::UnboundedReceiver<Vec<String>>,
    /// Pods the eviction manager evicts.
    pub evictions: mpsc::Receiver<Eviction>,
}

/// The kubelet's core: the desired pods and the workers that make them so.
#[derive(Debug)]
pub struct SyncLoop {
    /// Desired, admitted pods by UID (upstream's pod manager).
    pods: BTreeMap<String, Arc<Pod>>,
    workers: PodWorkers,
    probes: ProbeManager,
    results: Arc<ProbeResults>,
    queue: Arc<WorkQueue>,
    statuses: Arc<StatusManager>,
    runtime: Arc<RuntimeManager>,
    sources_ready: Arc<SourcesReady>,
    recorder: Recorder,
    /// The node as admission sees it: the apiserver's Node once the status reporter has
    /// written it, the kubelet's own before (and standalone).
    node: watch::Receiver<Arc<Node>>,
    /// The apiserver's ConfigMaps and Secrets, for API pods (`None` standalone).
    objects: ObjectSources,
    /// Marked at every iteration, for the watchdog and `/healthz`.
    health: Option<Arc<SyncLoopHealth>>,
    /// The node's pressure as the eviction manager last saw it, for admission.
    pressures: watch::Receiver<Vec<Pressure>>,
    /// Whether the node is shutting down, as the shutdown manager says, for admission.
    shutting_down: watch::Receiver<bool>,
}

/// Whether every source's first pods have been handled here. The mux queues a source's updates
/// before marking it ready, so readiness is read first: if every source is ready, their first
/// updates were queued before this call, and an empty queue means they have been handled.
fn first_pods_handled(ready: &SourcesReady, config: &mpsc::Receiver<PodUpdate>) -> bool {
    ready.all_ready() && config.is_empty()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

impl SyncLoop {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        workers: PodWorkers,
        probes: ProbeManager,
        results: Arc<ProbeResults>,
        queue: Arc<WorkQueue>,
        statuses: Arc<StatusManager>,
        runtime: Arc<RuntimeManager>,
        sources_ready: Arc<SourcesReady>,
        recorder: Recorder,
        node: watch::Receiver<Arc<Node>>,
    ) -> Self {
        Self {
            pods: BTreeMap::new(),
            workers,
            probes,
            results,
            queue,
            statuses,
            runtime,
            sources_ready,
            recorder,
            node,
            objects: ObjectSources::default(),
            health: None,
            pressures: watch::channel(Vec::new()).1,
            shutting_down: watch::channel(false).1,
        }
    }

    /// Marks `health` at every iteration.
    pub fn with_health(mut self, health: Arc<SyncLoopHealth>) -> Self {
        self.health = Some(health);
        self
    }

    /// Admits pods under the pressure the eviction manager publishes.
    pub fn with_pressures(mut self, pressures: watch::Receiver<Vec<Pressure>>) -> Self {
        self.pressures = pressures;
        self
    }

    /// Turns new pods away while the node shuts down.
    pub fn with_shutdown(mut self, shutting_down: watch::Receiver<bool>) -> Self {
        self.shutting_down = shutting_down;
        self
    }

    /// Keeps the objects pods reference through `objects`: API pods the apiserver's, static
    /// pods the static config directory's.
    pub fn with_objects(mut self, objects: ObjectSources) -> Self {
        self.objects = objects;
        self
    }

    /// Registers what a pod references with the manager it reads from.
    fn track_objects(&self, pod: &Pod) {
        self.objects.register_pod(pod);
    }

    fn untrack_objects(&self, uid: &str) {
        self.objects.unregister_pod(uid);
    }

    /// Runs until `stop`, then stops the workers without touching the pods.
    pub async fn run(mut self, mut inputs: Inputs, stop: CancellationToken) {
        let mut sync_ticker = tokio::time::interval(SYNC_TICK);
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_PERIOD);
        for t in [&mut sync_ticker, &mut housekeeping] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        }
        let results = self.results.clone();
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => break,
                changes = results.changes() => SyncLoopEvent::ProbeResults(changes),
                Some(u) = inputs.config.recv() => SyncLoopEvent::Config(u),
                Some(e) = inputs.pleg.recv() => SyncLoopEvent::Pleg(e),
                Some(uid) = inputs.done.recv() => SyncLoopEvent::WorkerDone(uid),
                Some(uids) = inputs.objects.recv() => SyncLoopEvent::ObjectsChanged(uids),
                Some(e) = inputs.evictions.recv() => SyncLoopEvent::Evict(e),
                _ = sync_ticker.tick() => SyncLoopEvent::SyncTick,
                _ = housekeeping.tick() => SyncLoopEvent::Housekeeping,
            };
            // Before handling: a housekeeping tick may win the select over a queued update.
            if !self.sources_ready.pods_handled()
                && first_pods_handled(&self.sources_ready, &inputs.config)
            {
                self.sources_ready.mark_handled();
            }
            let runtime_pods = inputs.runtime_pods.borrow().clone();
            self.handle(event, &runtime_pods);
            if let Some(h) = &self.health {
                h.iterated();
            }
        }
        self.workers.shutdown(Duration::from_secs(5)).await;
        self.probes.shutdown().await;
    }

    /// Dispatches one event.
    pub fn handle(&mut self, event: SyncLoopEvent, runtime_pods: &RuntimePods) {
        match event {
            SyncLoopEvent::Config(update) => self.handle_config(update),
            SyncLoopEvent::Pleg(e) => {
                if let Some(pod) = self.pods.get(&e.uid) {
                    self.workers.update(&e.uid, Work::Sync(pod.clone()));
                }
            }
            SyncLoopEvent::SyncTick => {
                for uid in self.queue.take_due(tokio::time::Instant::now()) {
                    if let Some(pod) = self.pods.get(&uid) {
                        self.workers.update(&uid, Work::Sync(pod.clone()));
                    }
                }
            }
            SyncLoopEvent::Housekeeping => self.housekeeping(runtime_pods),
            SyncLoopEvent::ProbeResults(changes) => {
                // Readiness and startup show in the status; a liveness or startup failure
                // makes the plan restart the container: either way the pod is synced.
                let mut seen = std::collections::BTreeSet::new();
                for change in changes {
                    if seen.insert(change.uid.clone())
                        && let Some(pod) = self.pods.get(&change.uid)
                    {
                        self.workers.update(&change.uid, Work::Sync(pod.clone()));
                    }
                }
            }
            SyncLoopEvent::ObjectsChanged(uids) => {
                for uid in uids {
                    if let Some(pod) = self.pods.get(&uid) {
                        self.workers.update(&uid, Work::Sync(pod.clone()));
                    }
                }
            }
            SyncLoopEvent::Evict(eviction) => {
                // Its worker kills it and fails it; it stays, finished, until removed.
                if let Some(pod) = self.pods.get(&eviction.uid).cloned() {
                    self.probes.remove_pod(&eviction.uid);
                    let Eviction { uid, failure, grace } = eviction;
                    self.workers.update(&uid, Work::Fail { pod, failure, grace });
                }
            }
            SyncLoopEvent::WorkerDone(uid) => {
                self.workers.remove(&uid);
                match self.pods.get(&uid) {
                    // Re-added while it was terminating: start it again.
                    Some(pod) => self.workers.update(&uid, Work::Sync(pod.clone())),
                    None => self.statuses.terminated(&uid),
                }
            }
        }
    }

    fn handle_config(&mut self, mut update: PodUpdate) {
        if update.op == Op::Add {
            // Admitted oldest first, as upstream's `HandlePodAdditions`.
            update.pods.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        }
        for pod in update.pods {
            let uid = uid(&pod);
            match update.op {
                Op::Add => self.add(pod),
                // A pod being deleted through the API: terminate it, and shorten a termination
                // in progress when a later delete asks for a shorter grace period.
                Op::Update | Op::Reconcile | Op::Delete
                    if pod.metadata.deletion_timestamp.is_some() =>
                {
                    let known = self.pods.remove(&uid).is_some();
                    if known {
                        self.untrack_objects(&uid);
                    }
                    if known || self.workers.contains(&uid) {
                        self.statuses.set_pod(pod.clone());
                        let grace = grace_period_of_deleted(&pod);
                        self.terminate(&uid, pod, Some(grace));
                    }
                }
                Op::Update | Op::Reconcile | Op::Delete => {
                    if self.pods.contains_key(&uid) {
                        self.track_objects(&pod);
                        self.pods.insert(uid.clone(), pod.clone());
                        self.statuses.set_pod(pod.clone());
                        self.workers.update(&uid, Work::Sync(pod));
                    }
                }
                Op::Remove => {
                    let forced = update.source == Source::Api;
                    if self.pods.remove(&uid).is_some() {
                        self.untrack_objects(&uid);
                        let grace = if forced { FORCED_GRACE } else { grace_period(&pod) };
                        self.terminate(&uid, pod, Some(grace));
                    } else if forced && self.workers.contains(&uid) {
                        // Force-deleted while terminating: finish quickly.
                        self.terminate(&uid, pod, Some(FORCED_GRACE));
                    } else if !self.workers.contains(&uid) {
                        self.statuses.remove(&uid); // a rejected pod: nothing runs
                    }
                }
            }
        }
    }

    /// Stops the pod's probes and hands its worker a termination.
    fn terminate(&mut self, uid: &str, pod: Arc<Pod>, grace: Option<Duration>) {
        self.probes.remove_pod(uid);
        self.workers.update(uid, Work::Terminate { pod: Some(pod), grace });
    }

    /// Admits a new pod (upstream's `canAdmitPod`) and starts its worker, or rejects it.
    fn add(&mut self, pod: Arc<Pod>) {
        let uid = uid(&pod);
        self.statuses.set_pod(pod.clone());
        let node = self.node.borrow().clone();
        let admitted = self.active_pods();
        let pressures = self.pressures.borrow().clone();
        let shutting_down = *self.shutting_down.borrow();
        let victims: Vec<String> =
            match lifecycle::admit(&pod, &admitted, &node, &pressures, shutting_down) {
                Ok(preempt) => preempt
                    .into_iter()
                    .map(|i| admitted[i].metadata.uid.clone().unwrap_or_default())
                    .collect(),
                Err(rejection) => {
                    self.reject(&pod, rejection);
                    return;
                }
            };
        for victim in &victims {
            self.preempt(victim, &pod);
        }
        self.track_objects(&pod);
        self.pods.insert(uid.clone(), pod.clone());
        self.probes.add_pod(&pod);
        self.workers.update(&uid, Work::Sync(pod));
    }

    /// Fails a pod to make room for the critical pod `for_pod` (upstream's
    /// `evictPodsToFreeRequests`): killed within its own grace, `Failed`/`Preempting`.
    fn preempt(&mut self, uid: &str, for_pod: &Pod) {
        let Some(pod) = self.pods.get(uid).cloned() else { return };
        tracing::info!(pod = ?pod.metadata.name, critical = ?for_pod.metadata.name, "preempting a pod to admit a critical one");
        self.recorder.warning(&ObjectRef::pod(&pod), preemption::REASON, preemption::MESSAGE);
        self.probes.remove_pod(uid);
        let failure = PodFailure {
            reason: preemption::REASON.to_string(),
            message: preemption::MESSAGE.to_string(),
            disruption: Some(crate::lifecycle::eviction::DISRUPTION_REASON.to_string()),
        };
        let grace = grace_period(&pod);
        self.workers.update(uid, Work::Fail { pod, failure, grace });
    }

    /// The admitted pods that have not finished (upstream's `filterOutInactivePods`).
    fn active_pods(&self) -> Vec<&Pod> {
        self.pods
            .iter()
            .filter(|(uid, _)| !self.statuses.finished(uid))
            .map(|(_, pod)| pod.as_ref())
            .collect()
    }

    /// Upstream's `rejectPod`: a Warning event, and the pod `Failed` for good.
    fn reject(&self, pod: &Pod, rejection: Rejection) {
        let Rejection { reason, message } = rejection;
        tracing::info!(pod = ?pod.metadata.name, %reason, %message, "pod rejected at admission");
        self.recorder.warning(&ObjectRef::pod(pod), &reason, message.clone());
        let status = PodStatus {
            phase: Some("Failed".into()),
            reason: Some(reason),
            message: Some(format!("Pod was rejected: {message}")),
            qos_class: pod.spec.as_ref().map(|s| api::qos::pod_qos(s).as_str().to_string()),
            ..Default::default()
        };
        self.statuses.set_status(&uid(pod), status, std::time::SystemTime::now());
    }

    /// Kills pods the runtime holds that no source wants (once every source's first pods have
    /// been handled here, so a restart does not kill pods before their manifests are read).
    fn housekeeping(&mut self, runtime_pods: &RuntimePods) {
        self.runtime.gc();
        if !self.sources_ready.pods_handled() || !runtime_pods.relisted {
            return;
        }
        for uid in &runtime_pods.uids {
            if !self.pods.contains_key(uid) && !self.workers.contains(uid) {
                tracing::info!(uid, "found a pod in the runtime that no source wants; stopping it");
                self.workers.update(uid, Work::Terminate { pod: None, grace: None });
            }
        }
        let known = |uid: &str| {
            self.pods.contains_key(uid)
                || self.workers.contains(uid)
                || runtime_pods.uids.contains(uid)
        };
        self.runtime.cm.remove_orphans(known);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_pods_count_as_handled_only_once_the_ready_sources_updates_were_taken() {
        let ready = SourcesReady::new([Source::File]);
        let (tx, mut rx) = mpsc::channel(4);
        assert!(!first_pods_handled(&ready, &rx), "no source has delivered");
        // The mux's order: queue the source's updates, then mark it ready.
        let update = PodUpdate { op: Op::Add, source: Source::File, pods: Vec::new() };
        tx.send(update).await.expect("queued");
        ready.mark(Source::File);
        assert!(!first_pods_handled(&ready, &rx), "ready, but its pods are still queued");
        rx.recv().await.expect("taken");
        assert!(first_pods_handled(&ready, &rx));
    }
}
