//! Running a controller: `workers` tasks take keys from its queue and call its
//! [`Reconcile::sync`]; success forgets the key's backoff, failure requeues it rate-limited
//! (upstream's `processNextWorkItem`). Each sync's duration goes to
//! `controller_sync_duration_seconds`. On `stop` the queue shuts down and the workers finish the
//! sync they are in.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::key::Key;
use crate::metrics::{QueueMetrics, SyncLabels};
use crate::workqueue::WorkQueue;

/// A controller's sync of one key.
pub trait Reconcile: Send + Sync + 'static {
    type Error: std::fmt::Display + Send;
    fn sync(&self, key: &Key) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Runs `workers` workers and the queue's delay task until `stop`.
pub async fn run<R: Reconcile>(
    name: &'static str,
    queue: Arc<WorkQueue<Key>>,
    reconciler: Arc<R>,
    workers: usize,
    metrics: QueueMetrics,
    stop: CancellationToken,
) {
    tracing::info!(controller = name, workers, "starting controller");
    let tasks = TaskTracker::new();
    tasks.spawn(queue.clone().run_delays(stop.clone()));
    for _ in 0..workers.max(1) {
        let (queue, reconciler, metrics) = (queue.clone(), reconciler.clone(), metrics.clone());
        tasks.spawn(async move {
            while let Some(key) = queue.get().await {
                let started = Instant::now();
                let result = reconciler.sync(&key).await;
                let outcome = if result.is_ok() { "success" } else { "error" };
                metrics
                    .sync_duration
                    .get_or_create(&SyncLabels { controller: name.into(), result: outcome.into() })
                    .observe(started.elapsed().as_secs_f64());
                match result {
                    Ok(()) => queue.forget(&key),
                    Err(e) => {
                        tracing::info!(controller = name, %key, error = %e, "sync failed; requeued with backoff");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        });
    }
    stop.cancelled().await;
    queue.shut_down();
    tasks.close();
    tasks.wait().await;
    tracing::info!(controller = name, "shut down controller");
}
