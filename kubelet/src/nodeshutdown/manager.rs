//! The shutdown manager, as upstream's `managerImpl` on Linux: takes logind's delay lock (first
//! raising `InhibitDelayMaxSec` to `shutdownGracePeriod` through the `logind.conf.d` override
//! where logind allows less), then waits for `PrepareForShutdown`. On `true` it marks the node
//! shutting down (NotReady, admission closed), hands each running pod's failure to the sync loop
//! group by group (lowest priority first), waits for each group's pods to finish or its period to
//! pass, and releases the lock. On `false` (a cancelled shutdown) it takes the lock again. When
//! the bus connection ends, it starts over a second later, as upstream.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::groups::{Group, group_by_priority};
use super::logind::{InhibitLock, Logind, LogindError, override_inhibit_delay};
use super::{MESSAGE, REASON, ShutdownConfig};
use crate::events::{ObjectRef, Recorder};
use crate::eviction::manager::Eviction;
use crate::lifecycle::eviction::DISRUPTION_REASON;
use crate::status::{PodFailure, StatusManager};

/// How soon the watch is started again after the bus connection ended (upstream's
/// `dbusReconnectPeriod`).
const RECONNECT: Duration = Duration::from_secs(1);
/// How often a group's pods are looked at while they stop.
const POLL: Duration = Duration::from_millis(100);

/// Why watching for shutdowns could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Logind(#[from] LogindError),
    #[error(
        "node shutdown manager was unable to update logind InhibitDelayMaxSec to {wanted:?} (ShutdownGracePeriod), current value of InhibitDelayMaxSec ({current:?}) is less than requested ShutdownGracePeriod"
    )]
    DelayTooShort { wanted: Duration, current: Duration },
}

/// Holds logind's lock and stops the pods when the node shuts down.
#[derive(Debug)]
pub struct ShutdownManager {
    pub config: ShutdownConfig,
    pub logind: Arc<dyn Logind>,
    /// Where the `InhibitDelayMaxSec` override goes (`/etc/systemd/logind.conf.d`).
    pub logind_conf_dir: PathBuf,
    pub statuses: Arc<StatusManager>,
    /// The sync loop's failures, as the eviction manager sends them.
    pub evictions: mpsc::Sender<Eviction>,
    pub recorder: Recorder,
    pub node: String,
    pub shutting_down: watch::Sender<bool>,
}

impl ShutdownManager {
    /// Checks the delay logind allows (raising it if short) and takes the lock: what must work
    /// for graceful shutdown to be on.
    pub async fn start(&self) -> Result<InhibitLock, StartError> {
        let wanted = self.config.grace_period;
        let current = self.logind.inhibit_delay_max().await?;
        if wanted > current {
            override_inhibit_delay(&self.logind_conf_dir, wanted)?;
            self.logind.reload().await?;
            let current = self.logind.inhibit_delay_max().await?;
            if wanted > current {
                return Err(StartError::DelayTooShort { wanted, current });
            }
        }
        Ok(self.logind.inhibit().await?)
    }

    /// Watches for shutdowns until `stop`, from a lock [`Self::start`] took.
    pub async fn run(self, lock: InhibitLock, stop: CancellationToken) {
        let mut lock = Some(lock);
        loop {
            let events = tokio::select! {
                () = stop.cancelled() => return,
                events = self.logind.shutdown_events() => events,
            };
            match events {
                Ok(mut events) => loop {
                    let event = tokio::select! {
                        () = stop.cancelled() => return,
                        event = events.next() => event,
                    };
                    match event {
                        Some(true) => self.shut_down(lock.take()).await,
                        Some(false) => lock = self.cancelled(lock.take()).await,
                        None => break,
                    }
                },
                Err(e) => tracing::warn!(error = %e, "watching for node shutdown"),
            }
            tracing::warn!("the watch for node shutdown ended; starting it again");
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RECONNECT) => {}
            }
            if lock.is_none() {
                match self.start().await {
                    Ok(l) => lock = Some(l),
                    Err(e) => tracing::warn!(error = %e, "taking logind's shutdown lock again"),
                }
            }
        }
    }

    /// A cancelled shutdown: the node is back, and holds a lock again.
    async fn cancelled(&self, lock: Option<InhibitLock>) -> Option<InhibitLock> {
        self.recorder.normal(
            &ObjectRef::Node(self.node.clone()),
            "NodeShutdown",
            "Shutdown manager detected shutdown cancellation",
        );
        self.shutting_down.send_replace(false);
        if lock.is_some() {
            return lock;
        }
        match self.logind.inhibit().await {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::error!(error = %e, "taking logind's shutdown lock after a cancelled shutdown");
                None
            }
        }
    }

    /// Stops every running pod, group by group, then lets the machine go.
    async fn shut_down(&self, lock: Option<InhibitLock>) {
        tracing::info!("the node is shutting down: stopping its pods");
        self.recorder.normal(
            &ObjectRef::Node(self.node.clone()),
            "NodeShutdown",
            "Shutdown manager detected shutdown event",
        );
        self.shutting_down.send_replace(true);
        let pods = self.active_pods();
        for group in group_by_priority(&self.config, &pods) {
            if group.pods.is_empty() {
                continue;
            }
            self.stop_group(&group).await;
        }
        drop(lock);
        tracing::info!("pods stopped for the node's shutdown; released logind's lock");
    }

    async fn stop_group(&self, group: &Group) {
        for (uid, grace) in &group.pods {
            let failure = PodFailure {
                reason: REASON.to_string(),
                message: MESSAGE.to_string(),
                disruption: Some(DISRUPTION_REASON.to_string()),
            };
            let eviction = Eviction { uid: uid.clone(), failure, grace: *grace };
            if self.evictions.send(eviction).await.is_err() {
                return; // the kubelet is stopping
            }
        }
        let deadline = Instant::now() + group.period;
        while Instant::now() < deadline && !group.pods.iter().all(|(uid, _)| self.finished(uid)) {
            tokio::time::sleep(POLL).await;
        }
        if !group.pods.iter().all(|(uid, _)| self.finished(uid)) {
            tracing::warn!(priority = group.priority, period = ?group.period, "pods still stopping at the end of their shutdown period");
        }
    }

    fn finished(&self, uid: &str) -> bool {
        self.statuses.finished(uid) || self.statuses.pod(uid).is_none()
    }

    fn active_pods(&self) -> Vec<Pod> {
        self.statuses.active_pods()
    }
}

#[cfg(test)]
mod tests;
