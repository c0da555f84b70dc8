//! `Recreate`, as upstream's `recreate.go`: scale every old ReplicaSet to 0, wait until none of
//! their pods is left running (terminal pods do not count), and only then create or scale up
//! the new ReplicaSet.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;

use super::util::{self, desired};
use super::{DeploymentController, SyncError};
use crate::client::Client;
use crate::pods;

/// Whether pods of old ReplicaSets may still be running.
pub fn old_pods_running(
    new: Option<&ReplicaSet>,
    old: &[Arc<ReplicaSet>],
    pods: &HashMap<String, Vec<Arc<Pod>>>,
) -> bool {
    if util::actual_count(old) > 0 {
        return true;
    }
    let new_uid = new.and_then(|n| n.metadata.uid.clone());
    pods.iter()
        .filter(|(uid, _)| Some(*uid) != new_uid.as_ref())
        .any(|(_, list)| list.iter().any(|p| !matches!(pods::phase(p), "Failed" | "Succeeded")))
}

impl<C: Client<Deployment> + Client<ReplicaSet>> DeploymentController<C> {
    /// Upstream's `rolloutRecreate`.
    pub(crate) async fn rollout_recreate(
        &self,
        d: &mut Deployment,
        rss: &[Arc<ReplicaSet>],
        pods: &HashMap<String, Vec<Arc<Pod>>>,
    ) -> Result<(), SyncError> {
        let sets = self.sets(d, rss, false).await?;
        let mut scaled_down = false;
        for rs in util::active(&sets.old) {
            scaled_down |= self.scale_and_record(&rs, 0, d).await?.0;
        }
        if scaled_down {
            let sets = self.sets(d, &self.claimed(d), false).await?;
            return self.sync_rollout_status(d, &sets).await;
        }
        if old_pods_running(sets.new.as_deref(), &sets.old, pods) {
            return self.sync_rollout_status(d, &sets).await;
        }
        let sets = match sets.new {
            Some(_) => sets,
            None => self.sets(d, rss, true).await?,
        };
        if let Some(new) = &sets.new {
            self.scale_and_record(new, desired(d), d).await?;
        }
        if util::complete(d, d.status.as_ref().unwrap_or(&Default::default())) {
            self.cleanup(d, &sets.old).await?;
        }
        let sets = self.sets(d, &self.claimed(d), false).await?;
        self.sync_rollout_status(d, &sets).await
    }
}
