//! Pod workers: one task per pod UID, as upstream's `podWorkers`. Updates are coalesced (only the
//! latest pending one is kept, but a kill is never replaced by a sync), and each worker moves
//! through `Syncing → Terminating → Terminated`, advanced by the pure [`step`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::events::{ObjectRef, Recorder};
use crate::runtime::RuntimeManager;
use crate::runtime::sync::ERROR_REQUEUE;
use crate::status::{self, NodeView, StatusManager};

/// What a worker is asked to do.
#[derive(Debug, Clone)]
pub enum Work {
    /// Bring the pod to its spec (create, update, resync, runtime event).
    Sync(Arc<Pod>),
    /// Stop the pod and remove it; `None` uses each container's recorded grace period.
    Terminate { grace: Option<Duration> },
}

impl Work {
    /// Upstream's coalescing: the newest sync wins; a termination sticks, its shortest grace wins.
    fn merge(pending: Option<Work>, new: Work) -> Work {
        match (pending, new) {
            (Some(Work::Terminate { grace: a }), Work::Terminate { grace: b }) => Work::Terminate {
                grace: match (a, b) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            },
            (Some(t @ Work::Terminate { .. }), Work::Sync(_)) => t,
            (_, new) => new,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    Syncing,
    Terminating { grace: Option<Duration> },
    Terminated,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Sync(Arc<Pod>),
    Kill { grace: Option<Duration> },
    Nothing,
}

/// The worker's state machine: what `work` does in `state`.
pub fn step(state: WorkerState, work: Work) -> (WorkerState, Action) {
    match (state, work) {
        (WorkerState::Syncing, Work::Sync(pod)) => (WorkerState::Syncing, Action::Sync(pod)),
        (WorkerState::Syncing, Work::Terminate { grace }) => {
            (WorkerState::Terminating { grace }, Action::Kill { grace })
        }
        (s @ WorkerState::Terminating { .. }, Work::Sync(_)) => (s, Action::Nothing),
        (WorkerState::Terminating { grace: Some(old) }, Work::Terminate { grace: Some(new) })
            if new < old =>
        {
            (WorkerState::Terminating { grace: Some(new) }, Action::Kill { grace: Some(new) })
        }
        (s @ WorkerState::Terminating { .. }, Work::Terminate { .. }) => (s, Action::Nothing),
        (WorkerState::Terminated, _) => (WorkerState::Terminated, Action::Nothing),
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

/// What every worker shares.
#[derive(Debug)]
pub struct WorkerContext {
    pub runtime: Arc<RuntimeManager>,
    pub statuses: Arc<StatusManager>,
    pub recorder: Recorder,
    pub queue: Arc<WorkQueue>,
    /// Workers report here when their pod is terminated and removed.
    pub done: mpsc::UnboundedSender<String>,
    pub host_ip: Option<String>,
    /// Resync interval (`syncFrequency`).
    pub resync: Duration,
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

async fn run_worker(ctx: &WorkerContext, uid: &str, mailbox: &Mailbox) {
    let mut state = WorkerState::Syncing;
    loop {
        let work = mailbox.take().await;
        let (next, action) = step(state, work);
        state = next;
        // Boxed: a future is as large as its largest state, and the sync path's is tens of
        // kilobytes. Boxing keeps that only while a sync runs, so an idle worker costs a few
        // hundred bytes (measured in BENCHMARKS.md: the idle RSS per pod).
        match action {
            Action::Nothing => {}
            Action::Sync(pod) => Box::pin(sync_once(ctx, uid, &pod)).await,
            Action::Kill { grace } => {
                Box::pin(terminate(ctx, uid, grace)).await;
                return;
            }
        }
    }
}

async fn sync_once(ctx: &WorkerContext, uid: &str, pod: &Pod) {
    match ctx.runtime.sync_pod(pod).await {
        Ok(outcome) => {
            if let Some(e) = &outcome.error {
                ctx.recorder.warning(&ObjectRef::pod(pod), "FailedCreatePodSandBox", e.clone());
            }
            let node = NodeView {
                runtime_name: &ctx.runtime.runtime_name,
                host_ip: ctx.host_ip.as_deref(),
            };
            let status = status::generate(pod, &outcome.status, &outcome.waiting, &node);
            ctx.statuses.set_status(uid, status, SystemTime::now());
            ctx.queue.enqueue(uid, outcome.requeue_after.unwrap_or(ctx.resync));
        }
        Err(e) => {
            ctx.recorder.warning(&ObjectRef::pod(pod), "FailedSync", e.to_string());
            ctx.queue.enqueue(uid, ERROR_REQUEUE);
        }
    }
}

/// Kills and removes the pod, retrying until the runtime lets it.
async fn terminate(ctx: &WorkerContext, uid: &str, grace: Option<Duration>) {
    ctx.queue.forget(uid);
    let pod = ctx.statuses.pod(uid); // for events; the kill itself works from runtime state
    let mut retry = ERROR_REQUEUE;
    loop {
        let result = async {
            ctx.runtime.kill_pod(pod.as_deref(), uid, grace).await?;
            ctx.runtime.remove_pod(uid).await
        }
        .await;
        match result {
            Ok(()) => {
                tracing::info!(uid, "pod terminated and removed");
                return;
            }
            Err(e) => {
                tracing::warn!(uid, error = %e, "terminating the pod; will retry");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_secs(60));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        Arc::new(p)
    }

    /// The size of the future a function returns, without calling it.
    fn future_size<A, B, C, F>(_: impl FnOnce(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn an_idle_worker_is_small() {
        let size = future_size(run_worker);
        assert!(size < 1024, "a worker task's future is {size} bytes");
    }

    #[test]
    fn the_state_machine_syncs_then_terminates_once() {
        let s = WorkerState::Syncing;
        let (s, a) = step(s, Work::Sync(pod("a")));
        assert!(matches!((s, a), (WorkerState::Syncing, Action::Sync(_))));
        let g = Some(Duration::from_secs(30));
        let (s, a) = step(s, Work::Terminate { grace: g });
        assert_eq!((s, a), (WorkerState::Terminating { grace: g }, Action::Kill { grace: g }));
        assert_eq!(step(s, Work::Sync(pod("a"))).1, Action::Nothing, "no syncs while terminating");
        assert_eq!(step(s, Work::Terminate { grace: g }).1, Action::Nothing);
        let shorter = Some(Duration::from_secs(1));
        assert_eq!(
            step(s, Work::Terminate { grace: shorter }).1,
            Action::Kill { grace: shorter },
            "a shorter grace applies"
        );
        assert_eq!(step(WorkerState::Terminated, Work::Sync(pod("a"))).1, Action::Nothing);
    }

    #[test]
    fn the_mailbox_keeps_the_latest_sync_but_never_drops_a_kill() {
        let m = Mailbox::default();
        m.put(Work::Sync(pod("1")));
        m.put(Work::Sync(pod("2")));
        assert!(
            matches!(m.pending.lock().unwrap().clone(), Some(Work::Sync(p)) if p.metadata.uid.as_deref() == Some("2"))
        );
        m.put(Work::Terminate { grace: Some(Duration::from_secs(30)) });
        m.put(Work::Sync(pod("3")));
        m.put(Work::Terminate { grace: Some(Duration::from_secs(5)) });
        assert!(
            matches!(m.pending.lock().unwrap().clone(), Some(Work::Terminate { grace: Some(d) }) if d == Duration::from_secs(5))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_work_queue_releases_pods_when_due() {
        let q = WorkQueue::default();
        q.enqueue("a", Duration::from_secs(10));
        q.enqueue("b", Duration::from_secs(1));
        q.enqueue("a", Duration::from_secs(2));
        assert!(q.take_due(Instant::now()).is_empty());
        tokio::time::advance(Duration::from_secs(2)).await;
        let mut due = q.take_due(Instant::now());
        due.sort();
        assert_eq!(due, ["a", "b"]);
        assert!(q.take_due(Instant::now() + Duration::from_secs(100)).is_empty());
    }
}
