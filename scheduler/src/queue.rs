//! The scheduling queue, as upstream's `PriorityQueue`: pods waiting to be scheduled move
//! between three places.
//!
//! - `activeQ`: ready now, highest `spec.priority` first, then oldest.
//! - `backoffQ`: failed recently; each waits `1 s × 2^(attempts-1)` capped at 10 s
//!   (upstream's `podInitialBackoff`/`podMaxBackoff`) before going back to activeQ.
//! - `unschedulablePods`: no node fitted. They leave when the cluster changes in a way that may
//!   help (a node added or changed, a bound pod deleted: `move_all_to_active_or_backoff`), or
//!   after 5 minutes (`podMaxInUnschedulablePodsDuration`). A pod whose cycle saw such a change
//!   while it was being scheduled goes to backoffQ instead, so the change is not missed.
//!
//! [`Queue`] is the pure state, driven by explicit instants; [`SchedulingQueue`] wraps it for
//! the tasks that feed and drain it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cache::PodInfo;

pub const POD_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const POD_MAX_BACKOFF: Duration = Duration::from_secs(10);
pub const POD_MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(5 * 60);

/// Upstream's `calculateBackoffDuration`.
pub fn backoff_duration(attempts: u32) -> Duration {
    let mut d = POD_INITIAL_BACKOFF;
    for _ in 1..attempts {
        d *= 2;
        if d > POD_MAX_BACKOFF {
            return POD_MAX_BACKOFF;
        }
    }
    d
}

/// A pod in the queue, as upstream's `QueuedPodInfo`.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    pub info: PodInfo,
    /// Scheduling attempts so far (incremented by each pop).
    pub attempts: u32,
    /// When it last entered the queue (orders equal priorities).
    pub timestamp: Instant,
    /// The scheduling cycle of its last pop.
    pub cycle: u64,
}

impl QueuedPod {
    fn priority(&self) -> i32 {
        self.info.spec().and_then(|s| s.priority).unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active,
    Backoff(Instant),
    Unschedulable(Instant),
    InFlight,
}

#[derive(Debug)]
struct Entry {
    pod: QueuedPod,
    place: Place,
    seq: u64,
}

type ActiveKey = (Reverse<i32>, Instant, u64, String);

/// The queue's state. Keys are pod UIDs.
#[derive(Debug, Default)]
pub struct Queue {
    entries: HashMap<String, Entry>,
    active: BTreeSet<ActiveKey>,
    backoff: BTreeSet<(Instant, u64, String)>,
    seq: u64,
    scheduling_cycle: u64,
    move_request_cycle: u64,
}

/// How many pods are in each place (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub in_flight: usize,
}

/// Whether an update may change the scheduling outcome (upstream's `isPodUpdated` ignores
/// status, resourceVersion, generation and managed fields).
fn spec_changed(old: &Pod, new: &Pod) -> bool {
    old.spec != new.spec
        || old.metadata.labels != new.metadata.labels
        || old.metadata.annotations != new.metadata.annotations
}

impl Queue {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn unlink(&mut self, uid: &str) -> Option<Entry> {
        let e = self.entries.remove(uid)?;
        match e.place {
            Place::Active => {
                self.active.remove(&(
                    Reverse(e.pod.priority()),
                    e.pod.timestamp,
                    e.seq,
                    uid.to_string(),
                ));
            }
            Place::Backoff(at) => {
                self.backoff.remove(&(at, e.seq, uid.to_string()));
            }
            Place::Unschedulable(_) | Place::InFlight => {}
        }
        Some(e)
    }

    fn place(&mut self, pod: QueuedPod, place: Place) {
        let seq = self.next_seq();
        let uid = pod.info.uid.clone();
        match place {
            Place::Active => {
                self.active.insert((Reverse(pod.priority()), pod.timestamp, seq, uid.clone()));
            }
            Place::Backoff(at) => {
                self.backoff.insert((at, seq, uid.clone()));
            }
            Place::Unschedulable(_) | Place::InFlight => {}
        }
        self.entries.insert(uid, Entry { pod, place, seq });
    }

    fn backoff_expiry(pod: &QueuedPod) -> Instant {
        pod.timestamp + backoff_duration(pod.attempts)
    }

    /// Adds a new pending pod, or updates the one with its UID.
    pub fn add(&mut self, pod: Arc<Pod>, now: Instant) {
        let info = PodInfo::new(pod);
        let uid = info.uid.clone();
        let Some(e) = self.entries.get_mut(&uid) else {
            let pod = QueuedPod { info, attempts: 0, timestamp: now, cycle: 0 };
            self.place(pod, Place::Active);
            return;
        };
        let changed = spec_changed(&e.pod.info.pod, &info.pod);
        match e.place {
            // Priority and timestamp are unchanged, so its position in the sets still holds.
            Place::Active | Place::Backoff(_) | Place::InFlight => e.pod.info = info,
            Place::Unschedulable(_) if !changed => e.pod.info = info,
            Place::Unschedulable(_) => {
                if let Some(mut e) = self.unlink(&uid) {
                    e.pod.info = info;
                    let expiry = Self::backoff_expiry(&e.pod);
                    let place = if expiry > now { Place::Backoff(expiry) } else { Place::Active };
                    self.place(e.pod, place);
                }
            }
        }
    }

    /// Removes a pod (deleted, bound elsewhere, or no longer ours).
    pub fn delete(&mut self, uid: &str) {
        self.unlink(uid);
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.entries.contains_key(uid)
    }

    /// Drops pods not in `keep` (after a relist); pods being scheduled stay.
    pub fn retain(&mut self, keep: &HashSet<String>) {
        let gone: Vec<String> = self
            .entries
            .iter()
            .filter(|(uid, e)| e.place != Place::InFlight && !keep.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            self.unlink(&uid);
        }
    }

    /// Moves what is due: backoffs that expired, and pods unschedulable for too long.
    fn flush(&mut self, now: Instant) {
        while let Some((at, _, uid)) = self.backoff.first().cloned() {
            if at > now {
                break;
            }
            if let Some(e) = self.unlink(&uid) {
                self.place(e.pod, Place::Active);
            }
        }
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                matches!(e.place, Place::Unschedulable(since) if since + POD_MAX_IN_UNSCHEDULABLE <= now)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        if !stale.is_empty() {
            self.move_to_active_or_backoff(stale, now);
        }
    }

    /// The next pod to schedule, if one is ready at `now`; it stays in the queue, in flight,
    /// until [`done`](Self::done) or a requeue.
    pub fn pop(&mut self, now: Instant) -> Option<QueuedPod> {
        self.flush(now);
        let (_, _, _, uid) = self.active.pop_first()?;
        let e = self.entries.get_mut(&uid)?;
        self.scheduling_cycle += 1;
        e.place = Place::InFlight;
        e.pod.attempts += 1;
        e.pod.cycle = self.scheduling_cycle;
        Some(e.pod.clone())
    }

    /// The pod was assumed on a node: it leaves the queue.
    pub fn done(&mut self, uid: &str) {
        if self.entries.get(uid).is_some_and(|e| e.place == Place::InFlight) {
            self.entries.remove(uid);
        }
    }

    /// No node fitted: back to unschedulablePods, or to backoffQ when the cluster changed
    /// during its cycle. Ignored when the pod was deleted meanwhile.
    pub fn requeue_unschedulable(&mut self, uid: &str, now: Instant) {
        self.requeue(uid, now, false);
    }

    /// Scheduling or binding failed for another reason (an API error): back to backoffQ.
    pub fn requeue_backoff(&mut self, uid: &str, now: Instant) {
        self.requeue(uid, now, true);
    }

    /// A pod that was assumed (and so left the queue) but whose binding failed comes back.
    pub fn readd_after_bind_failure(&mut self, mut pod: QueuedPod, now: Instant) {
        if self.entries.contains_key(&pod.info.uid) {
            return;
        }
        pod.timestamp = now;
        let expiry = Self::backoff_expiry(&pod);
        self.place(pod, Place::Backoff(expiry));
    }

    fn requeue(&mut self, uid: &str, now: Instant, error: bool) {
        if !self.entries.get(uid).is_some_and(|e| e.place == Place::InFlight) {
            return;
        }
        let Some(mut e) = self.unlink(uid) else { return };
        e.pod.timestamp = now;
        let place = if error || self.move_request_cycle >= e.pod.cycle {
            Place::Backoff(Self::backoff_expiry(&e.pod))
        } else {
            Place::Unschedulable(now)
        };
        self.place(e.pod, place);
    }

    fn move_to_active_or_backoff(&mut self, uids: Vec<String>, now: Instant) {
        for uid in uids {
            if let Some(e) = self.unlink(&uid) {
                let expiry = Self::backoff_expiry(&e.pod);
                let place = if expiry > now { Place::Backoff(expiry) } else { Place::Active };
                self.place(e.pod, place);
            }
        }
    }

    /// The cluster changed in a way that may let unschedulable pods fit (upstream's
    /// `MoveAllToActiveOrBackoffQueue`).
    pub fn move_all_to_active_or_backoff(&mut self, now: Instant) {
        let uids: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Unschedulable(_)))
            .map(|(uid, _)| uid.clone())
            .collect();
        self.move_to_active_or_backoff(uids, now);
        self.move_request_cycle = self.scheduling_cycle;
    }

    /// When something will next become due without any event.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let backoff = self.backoff.first().map(|(at, _, _)| *at);
        let stale = self
            .entries
            .values()
            .filter_map(|e| match e.place {
                Place::Unschedulable(since) => Some(since + POD_MAX_IN_UNSCHEDULABLE),
                _ => None,
            })
            .min();
        backoff.into_iter().chain(stale).min()
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for e in self.entries.values() {
            match e.place {
                Place::Active => c.active += 1,
                Place::Backoff(_) => c.backoff += 1,
                Place::Unschedulable(_) => c.unschedulable += 1,
                Place::InFlight => c.in_flight += 1,
            }
        }
        c
    }
}

/// The queue shared by the informers (producers) and the scheduling loop (the consumer).
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    inner: Mutex<Queue>,
    wake: Notify,
}

impl SchedulingQueue {
    /// The state, for one short critical section; notifies the consumer afterwards.
    pub fn with<T>(&self, f: impl FnOnce(&mut Queue, Instant) -> T) -> T {
        let out = f(&mut self.lock(), Instant::now());
        self.wake.notify_one();
        out
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding the lock leaves the queue consistent enough to keep going.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for the next pod to schedule; `None` once `stop` is cancelled.
    pub async fn pop(&self, stop: &CancellationToken) -> Option<QueuedPod> {
        loop {
            let wakeup = {
                let mut q = self.lock();
                if let Some(p) = q.pop(Instant::now()) {
                    return Some(p);
                }
                q.next_wakeup()
            };
            let sleep = async {
                match wakeup {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return None,
                () = self.wake.notified() => {}
                () = sleep => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::pod;

    fn p(name: &str) -> Arc<Pod> {
        Arc::new(pod(name, "", ""))
    }

    fn prio(name: &str, priority: i32) -> Arc<Pod> {
        let mut p = pod(name, "", "");
        p.spec.get_or_insert_default().priority = Some(priority);
        Arc::new(p)
    }

    #[test]
    fn backoff_doubles_from_one_second_to_ten() {
        let secs: Vec<u64> = (1..=6).map(|a| backoff_duration(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 10, 10]);
    }

    #[tokio::test(start_paused = true)]
    async fn active_pods_pop_by_priority_then_age() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.add(p("old"), t0);
        q.add(prio("urgent", 100), t0 + Duration::from_millis(2));
        q.add(p("young"), t0 + Duration::from_millis(1));
        let order: Vec<String> = std::iter::from_fn(|| q.pop(t0 + Duration::from_millis(3)))
            .map(|p| p.info.key)
            .collect();
        assert_eq!(order, vec!["default/urgent", "default/old", "default/young"]);
        assert_eq!(q.counts().in_flight, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn unschedulable_pods_wait_for_a_cluster_change_then_their_backoff() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.add(p("a"), t0);
        let a = q.pop(t0).expect("a");
        q.requeue_unschedulable(&a.info.uid, t0);
        assert_eq!(q.counts().unschedulable, 1);
        assert!(q.pop(t0 + Duration::from_secs(60)).is_none(), "no change, no retry");

        // A node arrives 0.5 s later: the pod's 1 s backoff has not run out.
        q.move_all_to_active_or_backoff(t0 + Duration::from_millis(500));
        assert_eq!(q.counts().backoff, 1);
        assert_eq!(q.next_wakeup(), Some(t0 + Duration::from_secs(1)));
        assert!(q.pop(t0 + Duration::from_millis(999)).is_none());
        let again = q.pop(t0 + Duration::from_secs(1)).expect("after its backoff");
        assert_eq!(again.attempts, 2);

        // Second failure: 2 s backoff; a change long after it moves the pod straight to active.
        q.requeue_unschedulable(&again.info.uid, t0 + Duration::from_secs(1));
        q.move_all_to_active_or_backoff(t0 + Duration::from_secs(10));
        assert_eq!(q.counts().active, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_during_the_cycle_sends_the_failed_pod_to_backoff_not_unschedulable() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.add(p("a"), t0);
        let a = q.pop(t0).expect("a");
        q.move_all_to_active_or_backoff(t0); // a node was added while `a` was being scheduled
        q.requeue_unschedulable(&a.info.uid, t0);
        assert_eq!(q.counts().backoff, 1);
        assert!(q.pop(t0 + POD_INITIAL_BACKOFF).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn unschedulable_pods_are_retried_after_five_minutes_anyway() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.add(p("a"), t0);
        let a = q.pop(t0).expect("a");
        q.requeue_unschedulable(&a.info.uid, t0);
        assert_eq!(q.next_wakeup(), Some(t0 + POD_MAX_IN_UNSCHEDULABLE));
        assert!(q.pop(t0 + POD_MAX_IN_UNSCHEDULABLE).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn updates_move_unschedulable_pods_only_when_the_spec_changes() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.add(p("a"), t0);
        let a = q.pop(t0).expect("a");
        q.requeue_unschedulable(&a.info.uid, t0);

        let mut status_only = pod("a", "", "");
        status_only.metadata.resource_version = Some("9".into());
        q.add(Arc::new(status_only), t0 + Duration::from_secs(5));
        assert_eq!(q.counts().unschedulable, 1, "our own status patch must not retry it");

        let mut relabelled = pod("a", "", "");
        relabelled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        q.add(Arc::new(relabelled), t0 + Duration::from_secs(5));
        assert_eq!(q.counts().active, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn deleted_pods_leave_and_are_not_requeued() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        q.add(p("a"), t0);
        q.add(p("b"), t0);
        let a = q.pop(t0).expect("a");
        q.delete(&a.info.uid);
        q.requeue_unschedulable(&a.info.uid, t0);
        q.retain(&HashSet::new());
        assert_eq!(q.counts(), Counts::default());

        q.readd_after_bind_failure(a, t0);
        assert_eq!(q.counts().backoff, 1, "a failed binding comes back with backoff");
    }

    #[tokio::test(start_paused = true)]
    async fn pop_waits_for_an_add_or_a_backoff_and_stops_on_cancel() {
        let q = Arc::new(SchedulingQueue::default());
        let stop = CancellationToken::new();
        let waiter = {
            let (q, stop) = (q.clone(), stop.clone());
            tokio::spawn(async move { q.pop(&stop).await.map(|p| p.info.key) })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        q.with(|q, now| q.add(p("late"), now));
        assert_eq!(waiter.await.ok().flatten().as_deref(), Some("default/late"));

        let uid = "uid-late".to_string();
        q.with(|q, now| q.requeue_backoff(&uid, now));
        let start = Instant::now();
        let again = q.pop(&stop).await.expect("after backoff");
        assert_eq!(again.attempts, 2);
        assert_eq!(Instant::now() - start, backoff_duration(1), "woke exactly at the expiry");

        let waiter = {
            let (q, stop) = (q.clone(), stop.clone());
            tokio::spawn(async move { q.pop(&stop).await.is_none() })
        };
        tokio::task::yield_now().await;
        stop.cancel();
        assert!(waiter.await.unwrap_or(false));
    }
}
