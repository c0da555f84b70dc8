//! The node's heartbeat: a Lease named after the node in `kube-node-lease`, renewed every
//! quarter of its duration (10 s by default), owned by the Node so it goes with it, as
//! upstream's node lease controller.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

pub const NAMESPACE: &str = "kube-node-lease";

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("renewing lease {NAMESPACE}/{node}: {source}")]
    Renew { node: String, source: kube::Error },
    #[error("creating lease {NAMESPACE}/{node}: node not registered yet: {source}")]
    NoNode { node: String, source: kube::Error },
}

#[derive(Debug)]
pub struct LeaseController {
    pub leases: Api<Lease>,
    pub nodes: Api<Node>,
    pub node: String,
    pub duration_seconds: u32,
}

fn micro_now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// The lease as this node holds it.
pub fn desired(node: &str, duration_seconds: u32, owner_uid: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                uid: owner_uid.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(i32::try_from(duration_seconds).unwrap_or(i32::MAX)),
            renew_time: Some(micro_now()),
            ..Default::default()
        }),
    }
}

impl LeaseController {
    /// The interval between renewals.
    pub fn interval(&self) -> Duration {
        Duration::from_secs(u64::from(self.duration_seconds)) / 4
    }

    async fn renew(&self) -> Result<(), LeaseError> {
        let err = |source| LeaseError::Renew { node: self.node.clone(), source };
        match self.leases.get_opt(&self.node).await.map_err(err)? {
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_with(Default::default);
                spec.holder_identity = Some(self.node.clone());
                spec.lease_duration_seconds =
                    Some(i32::try_from(self.duration_seconds).unwrap_or(i32::MAX));
                spec.renew_time = Some(micro_now());
                // A replace carrying the resourceVersion read: a conflict retries next time.
                self.leases
                    .replace(&self.node, &PostParams::default(), &lease)
                    .await
                    .map_err(err)?;
            }
            None => {
                let node = self
                    .nodes
                    .get(&self.node)
                    .await
                    .map_err(|source| LeaseError::NoNode { node: self.node.clone(), source })?;
                let uid = node.metadata.uid.unwrap_or_default();
                let lease = desired(&self.node, self.duration_seconds, &uid);
                self.leases.create(&PostParams::default(), &lease).await.map_err(err)?;
                tracing::info!(node = %self.node, "created the node lease");
            }
        }
        Ok(())
    }

    /// Renews until `stop`; a failed renewal is retried with a short backoff (up to 7 s, as
    /// upstream), so one apiserver hiccup does not let the lease lapse.
    pub async fn run(self, stop: CancellationToken) {
        let mut retry = Duration::from_millis(200);
        loop {
            let wait = match self.renew().await {
                Ok(()) => {
                    retry = Duration::from_millis(200);
                    self.interval()
                }
                Err(e) => {
                    tracing::warn!(error = %e, "retrying in {retry:?}");
                    let wait = retry;
                    retry = (retry * 2).min(Duration::from_secs(7));
                    wait
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
