//! Pod workers: one task per pod UID, as upstream's `podWorkers`. Updates are coalesced (only the
//! latest pending one is kept, but a kill is never replaced by a sync), and each worker moves
//! through `Syncing → Terminating → Terminated`, advanced by the pure [`step`]. A worker keeps
//! reading its mailbox while it acts: a termination cancels a sync in progress, and a shorter
//! grace period restarts a termination in progress with it ([`preempts`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::active_deadline::{self, Deadline};
use crate::events::{ObjectRef, Recorder};
use crate::metrics::{KubeletMetrics, SyncType};
use crate::prober::ProbeResults;
use crate::runtime::sync::{ERROR_REQUEUE, SyncOutcome, Waiting, grace_period};
use crate::runtime::{KillOptions, RuntimeManager};
use crate::status::{self, NodeView, PodFailure, StatusManager, SyncView};

/// What a worker is asked to do.
#[derive(Debug, Clone)]
pub enum Work {
    /// Bring the pod to its spec (create, update, resync, runtime event, probe result).
    Sync(Arc<Pod>),
    /// Stop the pod and remove it. `pod` is the spec (for preStop hooks and the stop order;
    /// `None` for pods only the runtime knows); `grace: None` uses each container's recorded
    /// grace period.
    Terminate { pod: Option<Arc<Pod>>, grace: Option<Duration> },
    /// Stop the pod within `grace` and fail it for `failure` (the eviction manager's
    /// eviction); the pod stays, finished, until its source removes it.
    Fail { pod: Arc<Pod>, failure: PodFailure, grace: Duration },
}

/// Whether grace period `new` is shorter than `old` (`None`: each container's own, the longest).
fn shorter(new: Option<Duration>, old: Option<Duration>) -> bool {
    match (new, old) {
        (Some(n), Some(o)) => n < o,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl Work {
    /// Upstream's coalescing: the newest sync wins; a failure beats a sync; a termination
    /// sticks, its shortest grace wins.
    fn merge(pending: Option<Work>, new: Work) -> Work {
        match (pending, new) {
            (
                Some(Work::Terminate { pod: a_pod, grace: a }),
                Work::Terminate { pod: b_pod, grace: b },
            ) => Work::Terminate { pod: b_pod.or(a_pod), grace: if shorter(b, a) { b } else { a } },
            (Some(t @ Work::Terminate { .. }), Work::Sync(_) | Work::Fail { .. }) => t,
            (Some(f @ Work::Fail { .. }), Work::Sync(_)) => f,
            (_, new) => new,
        }
    }
}

/// Where a worker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Bringing the pod to its spec, sync after sync.
    Syncing,
    /// Stopping every container, then the sandbox, within `grace`.
    Terminating { grace: Option<Duration> },
    /// Nothing runs any more: either the pod is being removed, or it finished (phase
    /// `Succeeded`/`Failed`) and its sandbox and resources were released; its containers and
    /// logs stay until it is removed.
    Terminated,
}

/// What the worker is told: work from the mailbox, or how its last action ended.
#[derive(Debug, Clone)]
pub enum Input {
    Work(Work),
    /// A sync ended; `finished`: the pod reached a terminal phase and will never run again.
    Synced {
        finished: bool,
    },
    /// Every container and sandbox of the pod is stopped.
    Killed,
}

/// What the worker does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Sync(Arc<Pod>),
    /// Stop the pod and set its status failed for the reason; it finishes.
    Fail {
        pod: Arc<Pod>,
        failure: PodFailure,
        grace: Duration,
    },
    /// Stop the pod; `hooks`: run preStop hooks (not again when a shorter grace restarts it).
    Kill {
        pod: Option<Arc<Pod>>,
        grace: Option<Duration>,
        hooks: bool,
    },
    /// Release a finished pod's sandbox, volumes and cgroup, keeping its containers and logs.
    Release,
    /// Remove everything the pod left in the runtime and on disk; the worker then ends.
    Remove,
    Nothing,
}

/// The worker's state machine: what `input` does in `state`.
pub fn step(state: WorkerState, input: Input) -> (WorkerState, Action) {
    use WorkerState::{Syncing, Terminated, Terminating};
    match (state, input) {
        (Syncing, Input::Work(Work::Sync(pod))) => (Syncing, Action::Sync(pod)),
        (Syncing, Input::Work(Work::Fail { pod, failure, grace })) => {
            (Syncing, Action::Fail { pod, failure, grace })
        }
        (Syncing, Input::Work(Work::Terminate { pod, grace })) => {
            (Terminating { grace }, Action::Kill { pod, grace, hooks: true })
        }
        (Syncing, Input::Synced { finished: true }) => (Terminated, Action::Release),
        (Syncing, Input::Synced { finished: false }) => (Syncing, Action::Nothing),
        (Terminating { grace: old }, Input::Work(Work::Terminate { pod, grace }))
            if shorter(grace, old) =>
        {
            (Terminating { grace }, Action::Kill { pod, grace, hooks: false })
        }
        (Terminating { .. }, Input::Killed) => (Terminated, Action::Remove),
        (Terminated, Input::Work(Work::Terminate { .. })) => (Terminated, Action::Remove),
        (s, _) => (s, Action::Nothing),
    }
}

/// Whether `pending` work cancels what a worker in `state` is doing now: a termination or a
/// failure cancels a sync, and a shorter grace period restarts a termination (upstream's
/// `cancelFn`).
pub fn preempts(state: WorkerState, pending: &Work) -> bool {
    match (state, pending) {
        (WorkerState::Syncing, Work::Terminate { .. } | Work::Fail { .. }) => true,
        (WorkerState::Terminating { grace: old }, Work::Terminate { grace, .. }) => {
            shorter(*grace, old)
        }
        _ => false,
    }
}

/// A one-slot mailbox with coalescing.
#[derive(Debug, Default)]
struct Mailbox {
    pending: Mutex<Option<Work>>,
    notify: Notify,
}

impl Mailbox {
    fn put(&self, work: Work) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        *pending = Some(Work::merge(pending.take(), work));
        drop(pending);
        self.notify.notify_one();
    }

    async fn take(&self) -> Work {
        loop {
            if let Some(w) = self.pending.lock().unwrap_or_else(PoisonError::into_inner).take() {
                return w;
            }
            self.notify.notified().await;
        }
    }

    fn pending_preempts(&self, state: WorkerState) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|w| preempts(state, w))
    }

    /// Runs `action` to its end, or until work arrives that preempts it in `state` (`None`; the
    /// work stays in the mailbox for the next `take`). Work that does not preempt waits there.
    async fn preemptible<F: Future>(&self, state: WorkerState, action: F) -> Option<F::Output> {
        let mut action = std::pin::pin!(action);
        loop {
            tokio::select! {
                out = &mut action => return Some(out),
                () = self.notify.notified() => {
                    if self.pending_preempts(state) {
                        return None;
                    }
                }
            }
        }
    }
}

/// Pods whose next sync is due at a time: retries after errors, backoff expiries, resyncs.
#[derive(Debug, Default)]
pub struct WorkQueue {
    due: Mutex<HashMap<String, Instant>>,
}

impl WorkQueue {
    pub fn enqueue(&self, uid: &str, after: Duration) {
        let at = Instant::now() + after;
        let mut due = self.due.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = due.entry(uid.to_string()).or_insert(at);
        *slot = (*slot).min(at);
    }

    /// Removes and returns the pods due by `now`.
    pub fn take_due(&self, now: Instant) -> Vec<String> {
        let mut due = self.due.lock().unwrap_or_else(PoisonError::into_inner);
        let ready: Vec<String> =
            due.iter().filter(|(_, at)| **at <= now).map(|(u, _)| u.clone()).collect();
        for u in &ready {
            due.remove(u);
        }
        ready
    }

    pub fn forget(&self, uid: &str) {
        self.due.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
    }
}

/// The last sync's waiting reasons per pod (upstream's `reasonCache`): a status generated
/// before a sync acts shows `CrashLoopBackOff` rather than forgetting it. One entry per pod
/// with a worker; removed with the pod.
#[derive(Debug, Default)]
pub struct ReasonCache(Mutex<HashMap<String, std::collections::BTreeMap<String, Waiting>>>);

impl ReasonCache {
    fn get(&self, uid: &str) -> std::collections::BTreeMap<String, Waiting> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(uid).cloned().unwrap_or_default()
    }

    fn set(&self, uid: &str, waiting: std::collections::BTreeMap<String, Waiting>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.is_empty() {
            map.remove(uid);
        } else {
            map.insert(uid.to_string(), waiting);
        }
    }

    fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
    }
}

/// What every worker shares.
#[derive(Debug)]
pub struct WorkerContext {
    pub runtime: Arc<RuntimeManager>,
    pub statuses: Arc<StatusManager>,
    pub recorder: Recorder,
    /// Probe verdicts: liveness kills in the plan, readiness in the status.
    pub probes: Arc<ProbeResults>,
    /// Why each pod's containers last could not start, for statuses set before a sync acts.
    pub reasons: ReasonCache,
    pub queue: Arc<WorkQueue>,
    /// Workers report here when their pod is terminated and removed.
    pub done: mpsc::UnboundedSender<String>,
    pub host_ip: Option<String>,
    /// Resync interval (`syncFrequency`).
    pub resync: Duration,
    /// Sync and kill durations, pod startup latencies.
    pub metrics: Arc<KubeletMetrics>,
}

/// The set of workers, owned by the sync loop.
#[derive(Debug)]
pub struct PodWorkers {
    workers: HashMap<String, Arc<Mailbox>>,
    ctx: Arc<WorkerContext>,
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl PodWorkers {
    pub fn new(ctx: Arc<WorkerContext>, stop: CancellationToken) -> Self {
        Self { workers: HashMap::new(), ctx, tracker: TaskTracker::new(), stop }
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.workers.contains_key(uid)
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Hands `work` to the pod's worker, starting one if there is none.
    pub fn update(&mut self, uid: &str, work: Work) {
        if let Some(mailbox) = self.workers.get(uid) {
            mailbox.put(work);
            return;
        }
        let mailbox = Arc::new(Mailbox::default());
        mailbox.put(work);
        self.workers.insert(uid.to_string(), mailbox.clone());
        let (ctx, stop, uid) = (self.ctx.clone(), self.stop.clone(), uid.to_string());
        self.tracker.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = run_worker(&ctx, &uid, &mailbox) => {
                    let _ = ctx.done.send(uid);
                }
            }
        });
    }

    /// The worker reported done: forget it.
    pub fn remove(&mut self, uid: &str) {
        self.workers.remove(uid);
    }

    /// Stops every worker where it stands, leaving pods running (the kubelet is not their
    /// parent), and waits up to `grace` for them to finish.
    pub async fn shutdown(&self, grace: Duration) {
        self.stop.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait()).await.is_err() {
            tracing::warn!("pod workers did not stop within {grace:?}");
        }
    }
}

/// One worker: takes work, steps the state machine, and runs each action — preemptibly where
/// [`preempts`] says so — feeding how it ended back into [`step`]. Ends after `Remove`.
async fn run_worker(ctx: &WorkerContext, uid: &str, mailbox: &Mailbox) {
    let mut state = WorkerState::Syncing;
    let mut synced_before = false;
    // Whether the pod's declared order no longer holds its start (it started once).
    let mut released = false;
    loop {
        let work = mailbox.take().await;
        let (mut next, mut action) = step(state, Input::Work(work));
        loop {
            state = next;
            // Boxed: a future is as large as its largest state, and the sync path's is tens of
            // kilobytes. Boxing keeps that only while an action runs, so an idle worker costs a
            // few hundred bytes (measured in BENCHMARKS.md: the idle RSS per pod).
            let ended = match action {
                Action::Nothing => break,
                Action::Sync(pod) => {
                    let kind = if synced_before { SyncType::Sync } else { SyncType::Create };
                    let started = Instant::now();
                    let sync = Box::pin(sync_once(ctx, uid, &pod, &mut released));
                    match mailbox.preemptible(state, sync).await {
                        Some(finished) => {
                            synced_before = true;
                            ctx.metrics.pod_worker(kind, started.elapsed().as_secs_f64());
                            Input::Synced { finished }
                        }
                        None => break, // a termination is waiting in the mailbox
                    }
                }
                Action::Fail { pod, failure, grace } => {
                    ctx.queue.forget(uid);
                    let started = Instant::now();
                    let failed = Box::pin(fail(ctx, uid, &pod, failure, Some(grace), false));
                    match mailbox
                        .preemptible(WorkerState::Terminating { grace: Some(grace) }, failed)
                        .await
                    {
                        Some(finished) => {
                            ctx.metrics.pod_worker(SyncType::Kill, started.elapsed().as_secs_f64());
                            Input::Synced { finished }
                        }
                        None => break, // a termination with a shorter grace is waiting
                    }
                }
                Action::Kill { pod, grace, hooks } => {
                    ctx.queue.forget(uid);
                    let started = Instant::now();
                    let kill = Box::pin(kill(ctx, uid, pod.as_deref(), grace, hooks));
                    match mailbox.preemptible(state, kill).await {
                        Some(()) => {
                            let took = started.elapsed().as_secs_f64();
                            ctx.metrics.pod_worker(SyncType::Kill, took);
                            Input::Killed
                        }
                        None => break, // a shorter grace period is waiting in the mailbox
                    }
                }
                Action::Release => {
                    ctx.queue.forget(uid);
                    ctx.reasons.forget(uid);
                    ctx.runtime.release_pod(uid);
                    break;
                }
                Action::Remove => {
                    Box::pin(remove(ctx, uid)).await;
                    return;
                }
            };
            (next, action) = step(state, ended);
        }
    }
}

/// Holds a pod's first start while the pods it declares it starts after are not Ready
/// ([`crate::ordering`]): true when it is held (its status says why; it is looked at again
/// in a second). A pod the runtime already runs is never held.
async fn held(ctx: &WorkerContext, uid: &str, pod: &Pod, released: &mut bool) -> bool {
    if *released || crate::ordering::after(pod).is_empty() {
        return false;
    }
    match ctx.runtime.pod_status(uid).await {
        Ok(s) if s.sandboxes.is_empty() && s.containers.is_empty() => {}
        Ok(_) => {
            *released = true;
            return false;
        }
        // Unknown whether it ever started: the order still holds it.
        Err(e) => tracing::debug!(uid, error = %e, "reading a held pod's runtime state"),
    }
    let me = (
        pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        pod.metadata.name.clone().unwrap_or_default(),
    );
    let Some(message) = crate::ordering::blocked(&me, pod, &ctx.statuses.ordering_view()) else {
        *released = true;
        return false;
    };
    let waiting = Waiting { reason: crate::ordering::REASON.into(), message: message.clone() };
    let spec = pod.spec.as_ref();
    let names = spec.into_iter().flat_map(|s| {
        s.init_containers.iter().flatten().chain(s.containers.iter()).map(|c| c.name.clone())
    });
    let outcome = SyncOutcome {
        waiting: names.map(|n| (n, waiting.clone())).collect(),
        ..Default::default()
    };
    ctx.statuses.set_status(uid, generate(ctx, pod, &outcome, None), SystemTime::now());
    tracing::debug!(pod = %me.1, %message, "held by its declared order");
    ctx.queue.enqueue(uid, ORDER_RECHECK);
    true
}

/// How often a held pod looks at its dependencies again.
const ORDER_RECHECK: Duration = Duration::from_secs(1);

/// One sync; true when the pod reached a terminal phase (`Succeeded`/`Failed`).
async fn sync_once(ctx: &WorkerContext, uid: &str, pod: &Pod, released: &mut bool) -> bool {
    if held(ctx, uid, pod, released).await {
        return false;
    }
    let started = ctx.statuses.status(uid).and_then(|s| s.start_time);
    let deadline = active_deadline::check(pod, started.as_ref(), jiff::Timestamp::now());
    if let Deadline::Exceeded(failure) = deadline {
        return fail(ctx, uid, pod, failure, None, true).await;
    }
    let mut observe = |before: &crate::runtime::status::PodRuntimeStatus| {
        let cached = ctx.reasons.get(uid);
        let outcome = SyncOutcome { status: before.clone(), waiting: cached, ..Default::default() };
        ctx.statuses.set_status(uid, generate(ctx, pod, &outcome, None), SystemTime::now());
    };
    match ctx.runtime.sync_pod(pod, &ctx.probes, &mut observe).await {
        Ok(outcome) => {
            ctx.reasons.set(uid, outcome.waiting.clone());
            if let Some(e) = &outcome.error {
                ctx.recorder.warning(&ObjectRef::pod(pod), "FailedCreatePodSandBox", e.clone());
            }
            let status = generate(ctx, pod, &outcome, None);
            let finished = status::is_terminal(&status);
            let was_pending = ctx
                .statuses
                .status(uid)
                .is_none_or(|s| s.phase.as_deref().is_none_or(|p| p == "Pending"));
            let now = SystemTime::now();
            ctx.metrics.pod_status(pod, was_pending, &status, now);
            ctx.statuses.set_status(uid, status, now);
            if !finished {
                let mut after = outcome.requeue_after.unwrap_or(ctx.resync);
                if let Deadline::In(left) = deadline {
                    after = after.min(left);
                }
                ctx.queue.enqueue(uid, after);
            }
            finished
        }
        Err(e) => {
            ctx.recorder.warning(&ObjectRef::pod(pod), "FailedSync", e.to_string());
            ctx.queue.enqueue(uid, ERROR_REQUEUE);
            false
        }
    }
}

fn generate(
    ctx: &WorkerContext,
    pod: &Pod,
    outcome: &SyncOutcome,
    failure: Option<&PodFailure>,
) -> k8s_openapi::api::core::v1::PodStatus {
    let node =
        NodeView { runtime_name: &ctx.runtime.runtime_name, host_ip: ctx.host_ip.as_deref() };
    let sync = SyncView {
        runtime: &outcome.status,
        waiting: &outcome.waiting,
        probes: &ctx.probes,
        failure,
    };
    status::generate(pod, sync, &node)
}

/// The kubelet fails the pod itself (its deadline passed, or it was evicted): everything is
/// stopped within `grace` (the pod's own when `None`), and the status says why; `announce`
/// records the reason as an event (the eviction manager records its own). Always finishes
/// the pod.
async fn fail(
    ctx: &WorkerContext,
    uid: &str,
    pod: &Pod,
    failure: PodFailure,
    grace: Option<Duration>,
    announce: bool,
) -> bool {
    if announce {
        ctx.recorder.normal(&ObjectRef::pod(pod), &failure.reason, failure.message.clone());
    }
    let grace = grace.unwrap_or_else(|| grace_period(pod)).min(grace_period(pod));
    kill(ctx, uid, Some(pod), Some(grace), true).await;
    let mut outcome = SyncOutcome::default();
    match ctx.runtime.pod_status(uid).await {
        Ok(s) => outcome.status = s,
        Err(e) => tracing::warn!(uid, error = %e, "reading the failed pod's runtime state"),
    }
    let status = generate(ctx, pod, &outcome, Some(&failure));
    ctx.statuses.set_status(uid, status, SystemTime::now());
    true
}

/// Retries `op` with a doubling delay (2 s → 60 s) until it succeeds.
async fn retrying<F, Fut>(uid: &str, what: &str, mut op: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), crate::runtime::RuntimeError>>,
{
    let mut retry = ERROR_REQUEUE;
    while let Err(e) = op().await {
        tracing::warn!(uid, error = %e, "{what}; will retry");
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(Duration::from_secs(60));
    }
}

/// Stops every container and the sandbox, retrying until the runtime lets it.
async fn kill(
    ctx: &WorkerContext,
    uid: &str,
    pod: Option<&Pod>,
    grace: Option<Duration>,
    hooks: bool,
) {
    let opts = KillOptions { pod, grace, hooks };
    retrying(uid, "stopping the pod", || ctx.runtime.kill_pod(uid, &opts)).await;
}

/// Removes what the pod left behind, retrying until the runtime lets it.
async fn remove(ctx: &WorkerContext, uid: &str) {
    ctx.queue.forget(uid);
    ctx.metrics.pod_starts.forget(uid);
    ctx.reasons.forget(uid);
    let stopped = KillOptions { pod: None, grace: None, hooks: false };
    retrying(uid, "removing the pod", || async {
        ctx.runtime.kill_pod(uid, &stopped).await?;
        ctx.runtime.remove_pod(uid).await
    })
    .await;
    tracing::info!(uid, "pod terminated and removed");
}

#[cfg(test)]
mod tests;
