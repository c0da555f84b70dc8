//! The controller-manager's Prometheus metrics, served on `/metrics`: client-go's work-queue
//! metrics under upstream's names, each labelled with the queue's `name` (`replicaset`,
//! `deployment`, `serviceaccount`, ...):
//!
//! - `workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total`;
//! - `workqueue_queue_duration_seconds` (added → taken) and `workqueue_work_duration_seconds`
//!   (taken → done), histograms with upstream's buckets (10 ns × 10ⁿ);
//! - `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`,
//!   refreshed at each scrape;
//!
//! and one addition, `controller_sync_duration_seconds{controller,result}`: each sync's duration
//! by outcome (`success`, `error`).

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct QueueLabels {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SyncLabels {
    pub controller: String,
    pub result: String,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Work-queue metric families; one set for every queue.
#[derive(Debug, Clone)]
pub struct QueueMetrics {
    pub depth: Family<QueueLabels, Gauge>,
    pub adds: Family<QueueLabels, Counter>,
    pub retries: Family<QueueLabels, Counter>,
    pub queue_duration: Histograms<QueueLabels>,
    pub work_duration: Histograms<QueueLabels>,
    pub unfinished_work: Family<QueueLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub longest_running: Family<QueueLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub sync_duration: Histograms<SyncLabels>,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        Self {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            sync_duration: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl QueueMetrics {
    /// A periodic pass of a controller without a queue (node lifecycle, pod GC), timed as a
    /// successful sync.
    pub fn observe_pass(&self, controller: &str, started: std::time::Instant) {
        self.sync_duration
            .get_or_create(&SyncLabels { controller: controller.into(), result: "success".into() })
            .observe(started.elapsed().as_secs_f64());
    }
}

/// Refreshes gauges that are computed, not counted (unfinished work), before a scrape.
pub trait Refresh: Send + Sync {
    fn refresh(&self);
}

/// The registry and what refreshes before each scrape.
#[derive(Clone)]
pub struct Metrics {
    pub queues: QueueMetrics,
    registry: Arc<Registry>,
    refreshers: Arc<Mutex<Vec<Arc<dyn Refresh>>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let q = QueueMetrics::default();
        let mut r = Registry::default();
        r.register("workqueue_depth", "Current depth of workqueue", q.depth.clone());
        r.register("workqueue_adds", "Total number of adds handled by workqueue", q.adds.clone());
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            q.retries.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            q.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            q.work_duration.clone(),
        );
        r.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases",
            q.unfinished_work.clone(),
        );
        r.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            q.longest_running.clone(),
        );
        r.register(
            "controller_sync_duration_seconds",
            "How long in seconds one sync of a controller's key took, by result",
            q.sync_duration.clone(),
        );
        Self { queues: q, registry: Arc::new(r), refreshers: Arc::default() }
    }
}

impl Metrics {
    pub fn add_refresher(&self, r: Arc<dyn Refresh>) {
        self.refreshers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(r);
    }

    /// The text exposition format, gauges refreshed first.
    pub fn encode(&self) -> String {
        for r in self.refreshers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            r.refresh();
        }
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        out
    }
}
