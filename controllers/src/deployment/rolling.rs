//! `RollingUpdate`, as upstream's `rolling.go`: grow the new ReplicaSet while the total stays
//! within `replicas + maxSurge`; shrink old ones while the available pods stay at least
//! `replicas - maxUnavailable` (old ReplicaSets' unavailable pods go first, since removing them
//! costs no availability). One step per sync; the ReplicaSets' status changes bring the next.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::sync::{Sets, new_rs_new_replicas};
use super::util::{self, desired, replicas};
use super::{DeploymentController, SyncError};
use crate::client::Client;

/// How many old pods may go now (upstream's `maxScaledDown`): all pods minus the minimum
/// available minus the new ReplicaSet's pods that are not available yet.
pub fn max_scaled_down(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new: &ReplicaSet,
) -> Result<i32, String> {
    let min_available = desired(d) - util::max_unavailable(d)?;
    let new_unavailable =
        replicas(new) - new.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
    Ok(util::replica_count(all) - min_available - new_unavailable)
}

/// Upstream's `cleanupUnhealthyReplicas` as a plan: (old ReplicaSet, new size), oldest first,
/// removing only pods that are not available, at most `max` in all.
pub fn unhealthy_cleanup(old: &[Arc<ReplicaSet>], max: i32) -> Vec<(Arc<ReplicaSet>, i32)> {
    let mut old = old.to_vec();
    old.sort_by(|a, b| util::by_creation(a, b));
    let mut total = 0;
    let mut plan = Vec::new();
    for rs in old {
        if total >= max {
            break;
        }
        let available = rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
        if replicas(&rs) == 0 || replicas(&rs) == available {
            continue;
        }
        let n = (max - total).min(replicas(&rs) - available);
        total += n;
        plan.push((rs.clone(), replicas(&rs) - n));
    }
    plan
}

/// Upstream's `scaleDownOldReplicaSetsForRollingUpdate` as a plan: scale old ReplicaSets down,
/// oldest first, by as many as the available pods exceed `replicas - maxUnavailable`.
pub fn old_scale_down(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    old: &[Arc<ReplicaSet>],
) -> Result<Vec<(Arc<ReplicaSet>, i32)>, String> {
    let min_available = desired(d) - util::max_unavailable(d)?;
    let available = util::available_count(all);
    if available <= min_available {
        return Ok(Vec::new());
    }
    let mut old = old.to_vec();
    old.sort_by(|a, b| util::by_creation(a, b));
    let (budget, mut total) = (available - min_available, 0);
    let mut plan = Vec::new();
    for rs in old {
        if total >= budget {
            break;
        }
        if replicas(&rs) == 0 {
            continue;
        }
        let n = replicas(&rs).min(budget - total);
        total += n;
        plan.push((rs.clone(), replicas(&rs) - n));
    }
    Ok(plan)
}

impl<C: Client<Deployment> + Client<ReplicaSet>> DeploymentController<C> {
    /// Upstream's `rolloutRolling`.
    pub(crate) async fn rollout_rolling(
        &self,
        d: &mut Deployment,
        rss: &[Arc<ReplicaSet>],
    ) -> Result<(), SyncError> {
        let sets = self.sets(d, rss, true).await?;
        let Some(new) = sets.new.clone() else { return self.sync_rollout_status(d, &sets).await };
        let all = sets.all();
        if self.reconcile_new(d, &all, &new).await? {
            let sets = self.sets(d, &self.claimed(d), false).await?;
            return self.sync_rollout_status(d, &sets).await;
        }
        if self.reconcile_old(d, &all, &util::active(&sets.old), &new).await? {
            let sets = self.sets(d, &self.claimed(d), false).await?;
            return self.sync_rollout_status(d, &sets).await;
        }
        if util::complete(d, d.status.as_ref().unwrap_or(&Default::default())) {
            self.cleanup(d, &sets.old).await?;
        }
        self.sync_rollout_status(d, &sets).await
    }

    /// Upstream's `reconcileNewReplicaSet`: whether the new ReplicaSet was scaled.
    async fn reconcile_new(
        &self,
        d: &Deployment,
        all: &[Arc<ReplicaSet>],
        new: &ReplicaSet,
    ) -> Result<bool, SyncError> {
        let n = replicas(new);
        if n == desired(d) {
            return Ok(false);
        }
        let to = if n > desired(d) {
            desired(d)
        } else {
            new_rs_new_replicas(d, all, n).map_err(|m| self.invalid(d, m))?
        };
        Ok(self.scale_and_record(new, to, d).await?.0)
    }

    /// Upstream's `reconcileOldReplicaSets`: whether any old ReplicaSet was scaled down.
    async fn reconcile_old(
        &self,
        d: &Deployment,
        all: &[Arc<ReplicaSet>],
        old: &[Arc<ReplicaSet>],
        new: &ReplicaSet,
    ) -> Result<bool, SyncError> {
        if util::replica_count(old) == 0 {
            return Ok(false);
        }
        let max = max_scaled_down(d, all, new).map_err(|m| self.invalid(d, m))?;
        if max <= 0 {
            return Ok(false);
        }
        let mut scaled = 0;
        let mut old: Vec<Arc<ReplicaSet>> = old.to_vec();
        for (rs, to) in unhealthy_cleanup(&old, max) {
            let (_, updated) = self.scale_and_record(&rs, to, d).await?;
            scaled += replicas(&rs) - to;
            for o in old.iter_mut() {
                if o.metadata.uid == updated.metadata.uid {
                    *o = updated.clone();
                }
            }
        }
        let mut all = old.clone();
        all.push(Arc::new(new.clone()));
        for (rs, to) in old_scale_down(d, &all, &old).map_err(|m| self.invalid(d, m))? {
            self.scale_and_record(&rs, to, d).await?;
            scaled += replicas(&rs) - to;
        }
        Ok(scaled > 0)
    }
}

/// The sets after a step, for tests.
pub fn total(sets: &Sets) -> i32 {
    util::replica_count(&sets.all())
}
