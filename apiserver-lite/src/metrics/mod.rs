//! `metrics.k8s.io/v1beta1` served in process, as metrics-server serves it (★: upstream needs
//! metrics-server deployed): a scrape loop reads every node's kubelet `/metrics/resource`
//! each `--metric-resolution`, and `nodes` (NodeMetrics) and `pods` (PodMetrics) are answered
//! from the last two scrapes.
//!
//! - [`decode`]: the Prometheus text → one node's points.
//! - [`storage`]: the last two scrapes, usage as the rate between them, nothing else kept.
//! - [`scraper`]: the loop, behind the [`scraper::Source`] trait (the kubelets, or a fake).
//! - [`render`]: NodeMetrics and PodMetrics objects and lists as metrics-server writes them.

pub mod decode;
pub mod render;
pub mod scraper;
pub mod storage;

use std::sync::Mutex;
use std::time::Duration;

use storage::{Batch, Storage};

/// metrics-server's deployed default (`--metric-resolution=15s`).
pub const DEFAULT_RESOLUTION: Duration = Duration::from_secs(15);

/// The metrics the API answers from, shared by the scrape loop and the handlers.
#[derive(Debug)]
pub struct Metrics {
    storage: Mutex<Storage>,
    pub resolution: Duration,
}

impl Metrics {
    pub fn new(resolution: Duration) -> Metrics {
        Metrics { storage: Mutex::new(Storage::new(resolution)), resolution }
    }

    /// Stores one scrape of every node.
    pub fn store(&self, batch: Batch) {
        self.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner).store(batch);
    }

    /// Reads the storage.
    pub fn read<R>(&self, f: impl FnOnce(&Storage) -> R) -> R {
        f(&self.storage.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}
