//! The scrape loop, as metrics-server's scraper: every resolution, every node is read at once
//! (each with a timeout of nine tenths of the resolution, at most 10 s, metrics-server's
//! `--kubelet-request-timeout`), the answers decoded and merged into one [`Batch`] that
//! replaces the stored one. A node that fails is logged (quietly when it is not Ready) and
//! simply absent from the batch, so its points are dropped.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Metrics;
use super::decode::{DecodeError, decode};
use super::storage::Batch;
use crate::registry::{ListOptions, Registry};
use crate::resources;

/// Why one node could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("node {node}: {message}")]
    Unreachable { node: String, message: String },
    #[error("node {node}: request failed, status: {status:?}")]
    Status { node: String, status: String },
    #[error("node {node}: timeout to access kubelet after {timeout:?}")]
    Timeout { node: String, timeout: Duration },
    #[error("node {node}: {source}")]
    Decode { node: String, source: DecodeError },
}

/// Where a node's resource metrics come from: its kubelet, or a fake in tests.
pub trait Source: Send + Sync + 'static {
    /// The body of the node's `/metrics/resource`.
    fn resource_metrics(
        &self,
        node: &Value,
    ) -> impl Future<Output = Result<String, ScrapeError>> + Send;
}

/// The scrape timeout for a resolution.
pub fn timeout(resolution: Duration) -> Duration {
    (resolution * 9 / 10).min(Duration::from_secs(10))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .unwrap_or(0)
}

fn is_ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .is_some_and(|c| c["status"] == "True")
}

/// One node: read and decoded, within the timeout.
async fn scrape_node<S: Source>(
    source: &S,
    node: &Value,
    limit: Duration,
) -> Result<Batch, ScrapeError> {
    let name = node["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let at = now_ms();
    let text = tokio::time::timeout(limit, source.resource_metrics(node))
        .await
        .map_err(|_| ScrapeError::Timeout { node: name.clone(), timeout: limit })??;
    decode(&text, &name, at).map_err(|source| ScrapeError::Decode { node: name, source })
}

/// Every node, at once; the merged batch.
pub async fn scrape<S: Source>(source: &S, nodes: &[Value], limit: Duration) -> Batch {
    let results =
        futures::future::join_all(nodes.iter().map(|n| scrape_node(source, n, limit))).await;
    let mut batch = Batch::default();
    for (node, result) in nodes.iter().zip(results) {
        match result {
            Ok(b) => batch.merge(b),
            Err(e) if !is_ready(node) => {
                tracing::debug!(error = %e, "failed to scrape node, node is not ready");
            }
            Err(e) => tracing::warn!(error = %e, "failed to scrape node"),
        }
    }
    batch
}

fn nodes(registry: &Registry) -> Vec<Value> {
    match registry.list(&resources::NODES, None, &ListOptions::default()) {
        Ok(page) => page.items.iter().filter_map(|b| serde_json::from_slice(b).ok()).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "failed to list nodes");
            Vec::new()
        }
    }
}

/// Scrapes every resolution until `stop`.
pub async fn run<S: Source>(
    metrics: Arc<Metrics>,
    registry: Arc<Registry>,
    source: S,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(metrics.resolution);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let limit = timeout(metrics.resolution);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let nodes = nodes(&registry);
        let batch = tokio::select! {
            () = stop.cancelled() => return,
            b = scrape(&source, &nodes, limit) => b,
        };
        tracing::debug!(nodes = batch.nodes.len(), pods = batch.pods.len(), "scrape finished");
        metrics.store(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Answers each node by name: a body, an error, or never.
    struct Fake;

    impl Source for Fake {
        async fn resource_metrics(&self, node: &Value) -> Result<String, ScrapeError> {
            let name = node["metadata"]["name"].as_str().unwrap_or_default().to_string();
            match name.as_str() {
                "down" => Err(ScrapeError::Unreachable { node: name, message: "refused".into() }),
                "slow" => std::future::pending().await,
                "garbage" => Ok("not prometheus {".into()),
                _ => Ok(format!(
                    "node_cpu_usage_seconds_total 1 5\nnode_memory_working_set_bytes 2 5\n\
                     container_cpu_usage_seconds_total{{container=\"c\",namespace=\"d\",pod=\"{name}-pod\"}} 1 5\n\
                     container_memory_working_set_bytes{{container=\"c\",namespace=\"d\",pod=\"{name}-pod\"}} 1 5\n"
                )),
            }
        }
    }

    fn node(name: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[tokio::test(start_paused = true)]
    async fn every_answering_node_is_in_the_batch_and_the_others_are_not() {
        let nodes: Vec<Value> =
            ["a", "down", "slow", "garbage", "b"].into_iter().map(node).collect();
        let b = scrape(&Fake, &nodes, Duration::from_secs(1)).await;
        assert_eq!(b.nodes.keys().collect::<Vec<_>>(), ["a", "b"]);
        let pods: Vec<&str> = b.pods.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(pods, ["a-pod", "b-pod"]);
    }

    #[test]
    fn the_timeout_stays_below_the_resolution_and_at_most_ten_seconds() {
        assert_eq!(timeout(Duration::from_secs(1)), Duration::from_millis(900));
        assert_eq!(timeout(Duration::from_secs(60)), Duration::from_secs(10));
    }
}
