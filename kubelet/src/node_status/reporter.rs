//! Registers the node with the apiserver and keeps its status current: computed every
//! `nodeStatusUpdateFrequency`, posted when it changed or when `nodeStatusReportFrequency` has
//! passed since the last post, as upstream's `syncNodeStatus`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::machine::ReadingSource;
use super::{MachineInfo, NodeFacts};
use crate::eviction::Pressure;
use crate::pleg::PlegHealth;

/// Why a registration or status post failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeStatusError {
    #[error("registering node {node}: {source}")]
    Register { node: String, source: kube::Error },
    #[error("posting the status of node {node}: {source}")]
    Post { node: String, source: kube::Error },
}

#[derive(Debug)]
pub struct NodeStatusReporter {
    pub nodes: Api<Node>,
    pub facts: NodeFacts,
    pub machine: MachineInfo,
    pub readings: ReadingSource,
    pub pleg: Arc<PlegHealth>,
    /// The pressure conditions the eviction manager published.
    pub pressures: watch::Receiver<Vec<Pressure>>,
    /// Whether the node is shutting down (Ready is then false, posted at once).
    pub shutting_down: watch::Receiver<bool>,
    pub update_frequency: Duration,
    pub report_frequency: Duration,
    /// The Node as the apiserver last answered it (labels and taints others set included),
    /// for admission.
    pub node: watch::Sender<Arc<Node>>,
}

pub fn now() -> Time {
    Time(jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_default())
}

impl NodeStatusReporter {
    fn current(&self, previous: Option<&NodeStatus>) -> NodeStatus {
        let health = if *self.shutting_down.borrow() {
            Err(crate::nodeshutdown::NOT_READY.to_string())
        } else {
            self.pleg.check()
        };
        let readings = self.readings.read(health, self.pressures.borrow().clone());
        super::status(&self.facts, &self.machine, &readings, previous, now())
    }

    /// Creates the Node, or adopts the one already there (a restart, or a re-install).
    async fn register(&self) -> Result<(), NodeStatusError> {
        let node = super::node(&self.facts, &self.machine, self.current(None));
        let err = |source| NodeStatusError::Register { node: self.facts.name.clone(), source };
        match self.nodes.create(&PostParams::default(), &node).await {
            Ok(created) => {
                self.node.send_replace(Arc::new(created));
                tracing::info!(node = %self.facts.name, "registered the node");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Keep the labels we own current on the existing object.
                let labels = serde_json::json!({"metadata": {"labels": node.metadata.labels}});
                let adopted = self
                    .nodes
                    .patch(&self.facts.name, &PatchParams::default(), &Patch::Merge(&labels))
                    .await
                    .map_err(err)?;
                self.node.send_replace(Arc::new(adopted));
                tracing::info!(node = %self.facts.name, "node already registered; adopted it");
                Ok(())
            }
            Err(e) => Err(err(e)),
        }
    }

    async fn post(&self, status: &NodeStatus) -> Result<(), NodeStatusError> {
        let body = serde_json::json!({ "status": status });
        self.nodes
            .patch_status(&self.facts.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map(|node| {
                self.node.send_replace(Arc::new(node));
            })
            .map_err(|source| NodeStatusError::Post { node: self.facts.name.clone(), source })
    }

    /// Registers (retrying until it succeeds), then keeps the status current until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let mut delay = Duration::from_millis(200);
        loop {
            match self.register().await {
                Ok(()) => break,
                Err(e) => tracing::warn!(error = %e, "retrying in {delay:?}"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(7));
        }
        let mut posted: Option<(NodeStatus, Instant)> = None;
        let mut ticker = tokio::time::interval(self.update_frequency);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = self.shutting_down.clone();
        let mut shutdown_open = true;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
                // A shutdown starting (or cancelled) is posted at once, as upstream's.
                changed = shutdown.changed(), if shutdown_open => shutdown_open = changed.is_ok(),
            }
            let status = self.current(posted.as_ref().map(|(s, _)| s));
            let due = match &posted {
                None => true,
                Some((last, at)) => {
                    super::changed(last, &status) || at.elapsed() >= self.report_frequency
                }
            };
            if !due {
                // Looked at every update, as upstream reads its Node each time: one deleted
                // through the API is registered again without waiting for a status change.
                match self.nodes.get_metadata_opt(&self.facts.name).await {
                    Ok(None) => {
                        tracing::warn!(node = %self.facts.name, "the node was deleted; registering it again");
                        if let Err(e) = self.register().await {
                            tracing::warn!(error = %e, "will retry at the next update");
                        }
                        posted = None;
                    }
                    Ok(Some(_)) => {}
                    Err(e) => tracing::debug!(error = %e, "reading the node"),
                }
                continue;
            }
            match self.post(&status).await {
                Ok(()) => posted = Some((status, Instant::now())),
                // Deleted through the API: registered again, as upstream's kubelet does (a new
                // UID, which the mirror pods follow).
                Err(NodeStatusError::Post { source: kube::Error::Api(s), .. }) if s.code == 404 => {
                    tracing::warn!(node = %self.facts.name, "the node was deleted; registering it again");
                    match self.register().await {
                        Ok(()) => posted = None,
                        Err(e) => tracing::warn!(error = %e, "will retry at the next update"),
                    }
                }
                Err(e) => tracing::warn!(error = %e, "will retry at the next update"),
            }
        }
    }
}
