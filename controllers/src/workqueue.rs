//! A rate-limited work queue, as client-go's `workqueue.TypedRateLimitingInterface`:
//!
//! - a key added while it waits is not added twice (the `dirty` set);
//! - a key being processed is handed to no other worker: added meanwhile, it is queued again
//!   only when [`WorkQueue::done`] is called, so one key never syncs concurrently;
//! - [`WorkQueue::add_after`] delays an add (the earliest of several wins);
//!   [`WorkQueue::add_rate_limited`] delays by the [`RateLimiter`]; [`WorkQueue::forget`] resets
//!   a key's backoff;
//! - [`WorkQueue::shut_down`] makes [`WorkQueue::get`] return `None` once nothing is left to
//!   hand out.
//!
//! Every step is counted in the `workqueue_*` metrics with the queue's name. Delayed adds are
//! moved into the queue by [`WorkQueue::run_delays`], a task the controller owns.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{QueueLabels, QueueMetrics, Refresh};
use crate::rate_limiter::RateLimiter;

#[derive(Debug)]
struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashMap<K, Instant>,
    added_at: HashMap<K, Instant>,
    waiting: HashMap<K, Instant>,
    delays: BinaryHeap<Reverse<(Instant, u64, K)>>,
    seq: u64,
    limiter: RateLimiter<K>,
    shutting_down: bool,
}

impl<K: Eq + Hash + Clone> Default for State<K> {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashMap::new(),
            added_at: HashMap::new(),
            waiting: HashMap::new(),
            delays: BinaryHeap::new(),
            seq: 0,
            limiter: RateLimiter::default(),
            shutting_down: false,
        }
    }
}

pub struct WorkQueue<K> {
    name: String,
    state: Mutex<State<K>>,
    ready: Notify,
    delayed: Notify,
    metrics: QueueMetrics,
    labels: QueueLabels,
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").field("name", &self.name).finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone + Ord + Send + 'static> WorkQueue<K> {
    /// A queue whose metrics exist (at zero) from the start, as upstream's.
    pub fn new(name: &str, metrics: QueueMetrics) -> Arc<Self> {
        let labels = QueueLabels { name: name.to_string() };
        drop(metrics.depth.get_or_create(&labels));
        drop(metrics.adds.get_or_create(&labels));
        drop(metrics.retries.get_or_create(&labels));
        drop(metrics.queue_duration.get_or_create(&labels));
        drop(metrics.work_duration.get_or_create(&labels));
        drop(metrics.unfinished_work.get_or_create(&labels));
        drop(metrics.longest_running.get_or_create(&labels));
        Arc::new(Self {
            name: name.to_string(),
            state: Mutex::new(State::default()),
            ready: Notify::new(),
            delayed: Notify::new(),
            metrics,
            labels: QueueLabels { name: name.to_string() },
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.shutting_down || s.dirty.contains(&key) {
            return;
        }
        self.metrics.adds.get_or_create(&self.labels).inc();
        self.metrics.depth.get_or_create(&self.labels).inc();
        s.added_at.entry(key.clone()).or_insert_with(Instant::now);
        s.dirty.insert(key.clone());
        if s.processing.contains_key(&key) {
            return;
        }
        s.queue.push_back(key);
        drop(s);
        self.ready.notify_one();
    }

    /// Queues `key` after `delay` (at once when zero).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = Instant::now() + delay;
        let mut s = self.lock();
        if s.shutting_down {
            return;
        }
        if s.waiting.get(&key).is_some_and(|t| *t <= at) {
            return;
        }
        s.waiting.insert(key.clone(), at);
        s.seq += 1;
        let seq = s.seq;
        s.delays.push(Reverse((at, seq, key)));
        drop(s);
        self.delayed.notify_one();
    }

    /// Queues `key` after its backoff (a failed sync).
    pub fn add_rate_limited(&self, key: K) {
        let delay = self.lock().limiter.when(&key, Instant::now());
        self.metrics.retries.get_or_create(&self.labels).inc();
        self.add_after(key, delay);
    }

    /// Resets `key`'s backoff (a successful sync).
    pub fn forget(&self, key: &K) {
        self.lock().limiter.forget(key);
    }

    pub fn retries(&self, key: &K) -> u32 {
        self.lock().limiter.retries(key)
    }

    /// The next key to process, waiting for one; `None` once shut down and drained.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.ready.notified();
            {
                let mut s = self.lock();
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    let now = Instant::now();
                    s.processing.insert(key.clone(), now);
                    self.metrics.depth.get_or_create(&self.labels).dec();
                    if let Some(added) = s.added_at.remove(&key) {
                        self.metrics
                            .queue_duration
                            .get_or_create(&self.labels)
                            .observe(now.saturating_duration_since(added).as_secs_f64());
                    }
                    return Some(key);
                }
                if s.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// `key` is processed; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.lock();
        if let Some(started) = s.processing.remove(key) {
            self.metrics
                .work_duration
                .get_or_create(&self.labels)
                .observe(started.elapsed().as_secs_f64());
        }
        if s.dirty.contains(key) && !s.shutting_down {
            s.queue.push_back(key.clone());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// No more adds; waiting [`get`](Self::get)s return `None`.
    pub fn shut_down(&self) {
        let mut s = self.lock();
        s.shutting_down = true;
        s.queue.clear();
        s.dirty.clear();
        s.delays.clear();
        s.waiting.clear();
        drop(s);
        self.ready.notify_waiters();
        self.delayed.notify_waiters();
    }

    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting in the queue, in order (for tests and debugging).
    pub fn queued(&self) -> Vec<K> {
        self.lock().queue.iter().cloned().collect()
    }

    /// Moves delayed keys into the queue when their time comes, until `stop` or shutdown.
    pub async fn run_delays(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let notified = self.delayed.notified();
            let next = {
                let mut s = self.lock();
                if s.shutting_down {
                    return;
                }
                let now = Instant::now();
                let mut due = Vec::new();
                while let Some(Reverse((at, _, key))) = s.delays.peek().cloned() {
                    if at > now {
                        break;
                    }
                    s.delays.pop();
                    if s.waiting.get(&key) == Some(&at) {
                        s.waiting.remove(&key);
                        due.push(key);
                    }
                }
                let next = s.delays.peek().map(|Reverse((at, _, _))| *at);
                drop(s);
                for key in due {
                    self.add(key);
                }
                next
            };
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = notified => {}
                () = sleep => {}
            }
        }
    }
}

impl<K: Eq + Hash + Clone + Ord + Send + 'static> Refresh for WorkQueue<K> {
    fn refresh(&self) {
        let s = self.lock();
        let now = Instant::now();
        let ages = s.processing.values().map(|t| now.saturating_duration_since(*t).as_secs_f64());
        let (total, longest) = ages.fold((0.0, 0.0f64), |(t, l), a| (t + a, l.max(a)));
        self.metrics.unfinished_work.get_or_create(&self.labels).set(total);
        self.metrics.longest_running.get_or_create(&self.labels).set(longest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Arc<WorkQueue<String>> {
        WorkQueue::new("test", QueueMetrics::default())
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_waiting_is_not_queued_twice() {
        let q = queue();
        q.add("a".into());
        q.add("b".into());
        q.add("a".into());
        assert_eq!(q.queued(), ["a", "b"]);
        assert_eq!(q.metrics.adds.get_or_create(&q.labels).get(), 2);
        assert_eq!(q.metrics.depth.get_or_create(&q.labels).get(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_being_processed_goes_to_no_other_worker_until_done() {
        let q = queue();
        q.add("a".into());
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.add("a".into());
        assert!(q.is_empty(), "held back while processing");
        q.done(&"a".to_string());
        assert_eq!(q.queued(), ["a"], "queued again once done");
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.done(&"a".to_string());
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_arrive_in_time_order_and_the_earliest_wins() {
        let q = queue();
        let stop = CancellationToken::new();
        let task = tokio::spawn(q.clone().run_delays(stop.clone()));
        q.add_after("late".into(), Duration::from_secs(10));
        q.add_after("soon".into(), Duration::from_secs(1));
        q.add_after("late".into(), Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(q.queued(), ["soon"]);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(q.queued(), ["soon", "late"]);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(q.queued(), ["soon", "late"], "the later duplicate was dropped");
        stop.cancel();
        let _ = task.await;
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_count_retries() {
        let q = queue();
        let stop = CancellationToken::new();
        let task = tokio::spawn(q.clone().run_delays(stop.clone()));
        q.add_rate_limited("a".into());
        q.add_rate_limited("a".into());
        assert_eq!(q.retries(&"a".to_string()), 2);
        tokio::time::sleep(Duration::from_millis(6)).await;
        assert_eq!(q.queued(), ["a"]);
        q.forget(&"a".to_string());
        assert_eq!(q.retries(&"a".to_string()), 0);
        assert_eq!(q.metrics.retries.get_or_create(&q.labels).get(), 2);
        stop.cancel();
        let _ = task.await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutting_down_releases_waiting_workers() {
        let q = queue();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.ok().flatten(), None);
        q.add("a".into());
        assert!(q.is_empty(), "no adds after shutdown");
    }
}
