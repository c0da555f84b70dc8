//! One scheduling cycle, as upstream's `scheduleOne`: take the next pod from the queue, filter
//! the nodes, score the feasible ones, pick the highest (ties broken at random), assume the pod
//! on that node in the cache, and bind it asynchronously; a failed binding forgets the
//! assumption and requeues the pod with backoff.
//!
//! Planning ([`find_node`]) is pure over the cache; the effects (binding, events) are at the
//! edges, behind [`Binder`] and [`Reporter`].
//!
//! Like upstream, filtering stops once enough feasible nodes are found
//! (`percentageOfNodesToScore`, adaptive by default: 50 % minus 1 % per 125 nodes, at least 5 %
//! and at least 100 nodes), and the next cycle starts where this one stopped, so every node
//! gets its turn.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use rand::Rng;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::binder::{BindError, Binder};
use crate::cache::{Cache, PodInfo};
use crate::events::{Report, Reporter};
use crate::plugins;
use crate::queue::{QueuedPod, SchedulingQueue};

/// Upstream's `minFeasibleNodesToFind`.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Upstream's `minFeasibleNodesPercentageToFind`.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// Upstream's `numFeasibleNodesToFind`: how many feasible nodes to look for before scoring.
/// `percentage` is `percentageOfNodesToScore` (`None` or 0: adaptive).
pub fn num_feasible_nodes_to_find(all: usize, percentage: Option<u32>) -> usize {
    let percentage = percentage.map(|p| p as usize).filter(|p| *p > 0);
    if all < MIN_FEASIBLE_NODES_TO_FIND || percentage.is_some_and(|p| p >= 100) {
        return all;
    }
    let p = percentage.unwrap_or_else(|| {
        50usize.saturating_sub(all / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    });
    (all * p / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// No node fits: how many nodes rejected the pod for each reason (upstream's `FitError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub reasons: BTreeMap<Cow<'static, str>, usize>,
}

impl fmt::Display for FitError {
    /// Upstream's wording: `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't
    /// match Pod's node affinity/selector.`, entries sorted as strings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        let mut entries: Vec<String> =
            self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        entries.sort();
        if !entries.is_empty() {
            write!(f, " {}.", entries.join(", "))?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Upstream's `ErrNoNodesAvailable`.
    #[error("no nodes available to schedule pods")]
    NoNodes,
    #[error("{0}")]
    Unschedulable(FitError),
}

/// Where the pod goes, and how much of the cluster was looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub evaluated: usize,
    pub feasible: usize,
}

/// Filters nodes starting at `*next_start`, scores the feasible ones and picks the best; moves
/// `*next_start` past the nodes it looked at.
pub fn find_node(
    pod: &PodInfo,
    cache: &Cache,
    next_start: &mut usize,
    percentage: Option<u32>,
    rng: &mut impl Rng,
) -> Result<Placement, ScheduleError> {
    let all = cache.node_count();
    if all == 0 {
        return Err(ScheduleError::NoNodes);
    }
    let wanted = num_feasible_nodes_to_find(all, percentage);
    let start = *next_start % all;
    let mut feasible = Vec::with_capacity(wanted.min(all));
    let mut reasons: BTreeMap<Cow<'static, str>, usize> = BTreeMap::new();
    let mut processed = 0;
    for i in 0..all {
        if feasible.len() >= wanted {
            break;
        }
        processed += 1;
        let Some(info) = cache.node_at((start + i) % all) else { continue };
        match plugins::filter(pod, info) {
            Ok(()) => feasible.push(info),
            Err(rejection) => {
                for r in rejection.reasons {
                    *reasons.entry(r).or_default() += 1;
                }
            }
        }
    }
    *next_start = (start + processed) % all;
    if feasible.is_empty() {
        return Err(ScheduleError::Unschedulable(FitError { num_all_nodes: all, reasons }));
    }
    let n = feasible.len();
    // Upstream's selectHost: the highest total score, a uniform pick among equals.
    let (mut best, mut best_score, mut ties) = (feasible[0], i64::MIN, 0u32);
    if n > 1 {
        for info in &feasible {
            let s = plugins::score(pod, info);
            if s > best_score {
                (best, best_score, ties) = (info, s, 1);
            } else if s == best_score {
                ties += 1;
                if rng.random_range(0..ties) == 0 {
                    best = info;
                }
            }
        }
    }
    Ok(Placement { node: best.name.clone(), evaluated: processed, feasible: n })
}

/// How cycles are run: `percentageOfNodesToScore` and how many bindings may be in flight.
#[derive(Debug, Clone)]
pub struct Options {
    pub percentage_of_nodes_to_score: Option<u32>,
    pub max_bindings_in_flight: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self { percentage_of_nodes_to_score: None, max_bindings_in_flight: 64 }
    }
}

/// The scheduling loop and its binding tasks.
#[derive(Debug)]
pub struct Scheduler<B> {
    pub cache: Arc<Mutex<Cache>>,
    pub queue: Arc<SchedulingQueue>,
    pub binder: Arc<B>,
    pub reporter: Reporter,
    /// The pod reflector's store: a pod gone from it is not scheduled (upstream's
    /// `skipPodSchedule`). `None` in tests without a watch.
    pub pods: Option<Store<Pod>>,
    pub options: Options,
    next_start: usize,
    binds: Arc<Semaphore>,
    tracker: TaskTracker,
}

fn lock(cache: &Mutex<Cache>) -> std::sync::MutexGuard<'_, Cache> {
    cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<B: Binder> Scheduler<B> {
    pub fn new(
        cache: Arc<Mutex<Cache>>,
        queue: Arc<SchedulingQueue>,
        binder: Arc<B>,
        reporter: Reporter,
        options: Options,
    ) -> Self {
        Self {
            binds: Arc::new(Semaphore::new(options.max_bindings_in_flight.max(1))),
            cache,
            queue,
            binder,
            reporter,
            pods: None,
            options,
            next_start: 0,
            tracker: TaskTracker::new(),
        }
    }

    /// Schedules until `stop`, then waits for the bindings in flight.
    pub async fn run(mut self, stop: CancellationToken) {
        while let Some(pod) = self.queue.pop(&stop).await {
            self.schedule_one(pod).await;
        }
        self.tracker.close();
        self.tracker.wait().await;
    }

    fn skip(&self, pod: &Pod) -> bool {
        if pod.metadata.deletion_timestamp.is_some() {
            return true;
        }
        let Some(store) = &self.pods else { return false };
        let key = ObjectRef::new(pod.metadata.name.as_deref().unwrap_or_default())
            .within(pod.metadata.namespace.as_deref().unwrap_or_default());
        match store.get(&key) {
            None => true,
            Some(latest) => latest.metadata.uid != pod.metadata.uid,
        }
    }

    /// One cycle for one pod.
    pub async fn schedule_one(&mut self, queued: QueuedPod) {
        let uid = queued.info.uid.clone();
        if self.skip(&queued.info.pod) {
            self.queue.with(|q, _| q.delete(&uid));
            return;
        }
        // Bound how many bindings are in flight: wait for a slot before taking capacity.
        let Ok(slot) = self.binds.clone().acquire_owned().await else { return };
        let outcome = {
            let mut cache = lock(&self.cache);
            if cache.contains_pod(&uid) {
                drop(cache);
                self.queue.with(|q, _| q.done(&uid));
                return;
            }
            let found = find_node(
                &queued.info,
                &cache,
                &mut self.next_start,
                self.options.percentage_of_nodes_to_score,
                &mut rand::rng(),
            );
            if let Ok(p) = &found
                && let Err(e) = cache.assume(queued.info.clone(), &p.node)
            {
                tracing::warn!(error = %e, "assuming pod");
                drop(cache);
                self.queue.with(|q, _| q.done(&uid));
                return;
            }
            found
        };
        match outcome {
            Ok(placement) => {
                self.queue.with(|q, _| q.done(&uid));
                tracing::trace!(pod = %queued.info.key, node = %placement.node,
                    evaluated = placement.evaluated, feasible = placement.feasible, "assumed");
                let (cache, queue, binder, reporter) = (
                    self.cache.clone(),
                    self.queue.clone(),
                    self.binder.clone(),
                    self.reporter.clone(),
                );
                self.tracker.spawn(async move {
                    let result = binder.bind(&queued.info.pod, &placement.node).await;
                    drop(slot);
                    finish_binding(result, queued, placement.node, &cache, &queue, &reporter);
                });
            }
            Err(e) => {
                drop(slot);
                tracing::debug!(pod = %queued.info.key, reason = %e, "unschedulable");
                self.queue.with(|q, now| q.requeue_unschedulable(&uid, now));
                self.reporter.report(Report::FailedScheduling {
                    pod: queued.info.pod.clone(),
                    message: e.to_string(),
                    unschedulable: true,
                });
            }
        }
    }
}

/// After the binding: report success, or forget the assumption and retry with backoff.
fn finish_binding(
    result: Result<(), BindError>,
    queued: QueuedPod,
    node: String,
    cache: &Mutex<Cache>,
    queue: &SchedulingQueue,
    reporter: &Reporter,
) {
    let pod = queued.info.pod.clone();
    match result {
        Ok(()) => {
            tracing::debug!(pod = %queued.info.key, node = %node, "Successfully bound pod to node");
            reporter.report(Report::Scheduled { pod, node });
        }
        Err(e) => {
            lock(cache).forget(&queued.info.uid);
            let retry = e.is_retriable();
            tracing::warn!(pod = %queued.info.key, node = %node, error = %e, retry, "binding failed");
            queue.with(|q, now| {
                if retry {
                    q.readd_after_bind_failure(queued, now);
                }
                // The capacity it held is free again.
                q.move_all_to_active_or_backoff(now);
            });
            if retry {
                reporter.report(Report::FailedScheduling {
                    pod,
                    message: format!("Binding rejected: {e}"),
                    unschedulable: false,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Taint;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::*;
    use crate::cache::tests::{node, pod};

    fn cache_of(nodes: &[(&str, &str, &str)]) -> Cache {
        let mut c = Cache::default();
        for (name, cpu, mem) in nodes {
            c.add_node(Arc::new(node(name, cpu, mem, "110")));
        }
        c
    }

    fn info(p: Pod) -> PodInfo {
        PodInfo::new(Arc::new(p))
    }

    #[test]
    fn fit_errors_read_as_upstreams() {
        let e = FitError {
            num_all_nodes: 3,
            reasons: [
                (Cow::Borrowed("node(s) didn't match Pod's node affinity/selector"), 2),
                (Cow::Borrowed("Insufficient cpu"), 1),
            ]
            .into(),
        };
        assert_eq!(
            e.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
        );
    }

    #[test]
    fn nodes_to_find_follow_upstreams_adaptive_percentage() {
        let cases = [
            (50, None, 50),
            (100, None, 100),
            (1000, None, 420),
            (5000, None, 500),
            (10_000, None, 500),
            (5000, Some(100), 5000),
            (5000, Some(1), 100),
            (200, None, 100),
        ];
        for (all, pct, want) in cases {
            assert_eq!(num_feasible_nodes_to_find(all, pct), want, "{all} nodes, {pct:?}");
        }
    }

    #[test]
    fn equal_pods_spread_evenly_over_equal_nodes() {
        let mut c = cache_of(&[("n1", "4", "8Gi"), ("n2", "4", "8Gi"), ("n3", "4", "8Gi")]);
        let mut rng = StdRng::seed_from_u64(7);
        let mut next = 0;
        let mut per_node: HashMap<String, usize> = HashMap::new();
        for i in 0..6 {
            let p = info(pod(&format!("p{i}"), "500m", "512Mi"));
            let placed = find_node(&p, &c, &mut next, None, &mut rng).expect("fits");
            c.assume(p, &placed.node).expect("assume");
            *per_node.entry(placed.node).or_default() += 1;
        }
        assert_eq!(per_node.values().copied().collect::<Vec<_>>(), vec![2, 2, 2], "{per_node:?}");
    }

    #[test]
    fn a_loaded_node_gets_the_pod_last() {
        let mut c = cache_of(&[("busy", "4", "8Gi"), ("idle", "4", "8Gi")]);
        c.add_pod(info(pod("load", "3", "6Gi")), "busy");
        let mut next = 0;
        let placed = find_node(
            &info(pod("p", "100m", "128Mi")),
            &c,
            &mut next,
            None,
            &mut StdRng::seed_from_u64(1),
        );
        assert_eq!(placed.map(|p| p.node).ok().as_deref(), Some("idle"));
    }

    #[test]
    fn nothing_fits_counts_each_reason_per_node() {
        let mut c =
            cache_of(&[("small", "1", "1Gi"), ("tainted", "8", "8Gi"), ("labelled", "8", "8Gi")]);
        let mut tainted = node("tainted", "8", "8Gi", "110");
        tainted.spec.get_or_insert_default().taints = Some(vec![Taint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        c.add_node(Arc::new(tainted));
        let mut p = pod("big", "2", "2Gi");
        p.spec.get_or_insert_default().node_selector =
            Some([("disk".to_string(), "ssd".to_string())].into());
        let mut next = 0;
        let err = find_node(&info(p), &c, &mut next, None, &mut StdRng::seed_from_u64(1));
        // "small" fails the node selector first (filters stop at the first rejection).
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector.".to_string())
        );
        let mut c = cache_of(&[("a", "1", "1Gi"), ("b", "1", "4Gi")]);
        c.add_pod(info(pod("x", "", "")), "a");
        let err = find_node(
            &info(pod("p", "2", "2Gi")),
            &c,
            &mut next,
            None,
            &mut StdRng::seed_from_u64(1),
        );
        assert_eq!(
            err.map_err(|e| e.to_string()),
            Err("0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.".to_string())
        );
        assert_eq!(
            find_node(
                &info(pod("p", "", "")),
                &Cache::default(),
                &mut next,
                None,
                &mut StdRng::seed_from_u64(1)
            ),
            Err(ScheduleError::NoNodes)
        );
    }

    #[test]
    fn filtering_stops_early_on_big_clusters_and_resumes_where_it_stopped() {
        let names: Vec<String> = (0..1000).map(|i| format!("n{i}")).collect();
        let specs: Vec<(&str, &str, &str)> =
            names.iter().map(|n| (n.as_str(), "4", "8Gi")).collect();
        let c = cache_of(&specs);
        let mut next = 0;
        let placed =
            find_node(&info(pod("p", "", "")), &c, &mut next, None, &mut StdRng::seed_from_u64(1))
                .expect("fits");
        assert_eq!((placed.evaluated, placed.feasible, next), (420, 420, 420));
        find_node(&info(pod("q", "", "")), &c, &mut next, None, &mut StdRng::seed_from_u64(1))
            .expect("fits");
        assert_eq!(next, 840);
        find_node(&info(pod("r", "", "")), &c, &mut next, None, &mut StdRng::seed_from_u64(1))
            .expect("fits");
        assert_eq!(next, 260, "wraps around");
    }

    #[test]
    fn ties_are_broken_at_random() {
        let c = cache_of(&[("n1", "4", "8Gi"), ("n2", "4", "8Gi"), ("n3", "4", "8Gi")]);
        let mut rng = StdRng::seed_from_u64(3);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let mut next = 0;
            seen.insert(
                find_node(&info(pod("p", "1", "1Gi")), &c, &mut next, None, &mut rng)
                    .map(|p| p.node)
                    .ok(),
            );
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
    }

    /// A binder that records bindings and fails those it is told to.
    #[derive(Debug, Default)]
    struct FakeBinder {
        bound: Mutex<Vec<(String, String)>>,
        fail_first: Mutex<usize>,
    }

    impl Binder for FakeBinder {
        async fn bind(&self, pod: &Pod, node: &str) -> Result<(), BindError> {
            let key = crate::cache::pod_key(pod);
            {
                let mut fail =
                    self.fail_first.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if *fail > 0 {
                    *fail -= 1;
                    return Err(BindError::Rejected {
                        pod: key,
                        node: node.into(),
                        message: "injected".into(),
                    });
                }
            }
            self.bound
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((key, node.to_string()));
            Ok(())
        }
    }

    struct Harness {
        scheduler: Scheduler<FakeBinder>,
        reports: mpsc::Receiver<Report>,
    }

    fn harness(nodes: &[(&str, &str, &str)]) -> Harness {
        let (reporter, reports) = Reporter::channel(100);
        let scheduler = Scheduler::new(
            Arc::new(Mutex::new(cache_of(nodes))),
            Arc::new(SchedulingQueue::default()),
            Arc::new(FakeBinder::default()),
            reporter,
            Options::default(),
        );
        Harness { scheduler, reports }
    }

    impl Harness {
        async fn cycle(&mut self) {
            let stop = CancellationToken::new();
            let p = tokio::time::timeout(Duration::from_secs(30), self.scheduler.queue.pop(&stop))
                .await
                .ok()
                .flatten()
                .expect("a pod to schedule");
            self.scheduler.schedule_one(p).await;
            self.scheduler.tracker.close();
            self.scheduler.tracker.wait().await;
            self.scheduler.tracker.reopen();
        }

        fn add(&self, p: Pod) {
            self.scheduler.queue.with(|q, now| q.add(Arc::new(p), now));
        }

        fn bound(&self) -> Vec<(String, String)> {
            self.scheduler.binder.bound.lock().map(|b| b.clone()).unwrap_or_default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_scheduled_pod_is_assumed_bound_and_reported() {
        let mut h = harness(&[("n1", "4", "8Gi")]);
        h.add(pod("p", "1", "1Gi"));
        h.cycle().await;
        assert_eq!(h.bound(), vec![("default/p".to_string(), "n1".to_string())]);
        assert!(lock(&h.scheduler.cache).is_assumed("uid-p"), "assumed until the watch confirms");
        assert!(matches!(h.reports.try_recv(), Ok(Report::Scheduled { node, .. }) if node == "n1"));
        assert_eq!(h.scheduler.queue.with(|q, _| q.counts()), Default::default());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unschedulable_pod_is_reported_and_retried_when_a_node_fits() {
        let mut h = harness(&[("n1", "1", "1Gi"), ("n2", "1", "1Gi"), ("n3", "1", "1Gi")]);
        h.add(pod("big", "2", "1Gi"));
        h.cycle().await;
        match h.reports.try_recv() {
            Ok(Report::FailedScheduling { message, .. }) => {
                assert_eq!(message, "0/3 nodes are available: 3 Insufficient cpu.");
            }
            other => panic!("expected FailedScheduling, got {other:?}"),
        }
        assert_eq!(h.scheduler.queue.with(|q, _| q.counts().unschedulable), 1);

        // A node that fits arrives: the informer adds it and moves unschedulable pods.
        lock(&h.scheduler.cache).add_node(Arc::new(node("n4", "4", "8Gi", "110")));
        h.scheduler.queue.with(|q, now| q.move_all_to_active_or_backoff(now));
        h.cycle().await;
        assert_eq!(h.bound(), vec![("default/big".to_string(), "n4".to_string())]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_binding_forgets_the_pod_and_retries_after_backoff() {
        let mut h = harness(&[("n1", "4", "8Gi")]);
        *h.scheduler.binder.fail_first.lock().expect("lock") = 1;
        h.add(pod("p", "1", "1Gi"));
        h.cycle().await;
        assert!(h.bound().is_empty());
        assert!(!lock(&h.scheduler.cache).contains_pod("uid-p"), "forgotten");
        assert!(
            matches!(h.reports.try_recv(), Ok(Report::FailedScheduling { message, .. }) if message.starts_with("Binding rejected: "))
        );
        assert_eq!(h.scheduler.queue.with(|q, _| q.counts().backoff), 1);
        let before = Instant::now();
        h.cycle().await;
        assert!(Instant::now() - before >= crate::queue::POD_INITIAL_BACKOFF);
        assert_eq!(h.bound().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_already_in_the_cache_is_not_scheduled_twice() {
        let mut h = harness(&[("n1", "4", "8Gi")]);
        lock(&h.scheduler.cache).add_pod(info(pod("p", "1", "1Gi")), "n1");
        h.add(pod("p", "1", "1Gi"));
        h.cycle().await;
        assert!(h.bound().is_empty());
    }
}
