//! The rollout's status and conditions, as upstream's `progress.go`: `Available` (at least
//! `replicas - maxUnavailable` available), `Progressing` with `NewReplicaSetAvailable` once
//! complete, `ReplicaSetUpdated` while pods move (its update time refreshed on every sign of
//! progress), `ProgressDeadlineExceeded` after `progressDeadlineSeconds` without progress; a
//! `ReplicaFailure` of a ReplicaSet is copied. A rollout that is neither complete nor timed out
//! is looked at again when its deadline would pass.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use kube::ResourceExt;

use super::sync::{Sets, calculate_status, same_status};
use super::util::{self, PROGRESSING};
use super::{DeploymentController, SyncError};
use crate::client::Client;
use crate::key::Key;

/// The new status with its conditions, for the stored deployment `d`.
pub fn rollout_status(
    d: &Deployment,
    sets: &Sets,
    now: jiff::Timestamp,
) -> Result<DeploymentStatus, String> {
    let mut s = calculate_status(d, sets, now)?;
    let deadline = util::progress_deadline(d);
    if deadline.is_none() {
        util::remove_condition(&mut s, PROGRESSING);
    }
    let stored = d.status.clone().unwrap_or_default();
    let current = util::condition(&stored, PROGRESSING).cloned();
    let complete_before = s.replicas == s.updated_replicas
        && current.as_ref().is_some_and(|c| c.reason.as_deref() == Some(util::NEW_RS_AVAILABLE));
    let rs_name = sets.new.as_ref().map(|n| n.name_any());
    let subject = |what: &str| match &rs_name {
        Some(n) => format!("ReplicaSet {n:?} {what}"),
        None => format!("Deployment {:?} {what}", d.name_any()),
    };
    if deadline.is_some() && !complete_before {
        if util::complete(d, &s) {
            let c = util::new_condition(
                PROGRESSING,
                "True",
                util::NEW_RS_AVAILABLE,
                subject("has successfully progressed."),
                now,
            );
            util::set_condition(&mut s, c);
        } else if util::progressing(d, &s) {
            let mut c = util::new_condition(
                PROGRESSING,
                "True",
                util::RS_UPDATED,
                subject("is progressing."),
                now,
            );
            if let Some(cur) = &current {
                if cur.status == "True" {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                util::remove_condition(&mut s, PROGRESSING);
            }
            util::set_condition(&mut s, c);
        } else if util::timed_out(d, &s, now) {
            let c = util::new_condition(
                PROGRESSING,
                "False",
                util::TIMED_OUT,
                subject("has timed out progressing."),
                now,
            );
            util::set_condition(&mut s, c);
        }
    }
    match replica_failure(sets) {
        Some(c) => util::set_condition(&mut s, c),
        None => util::remove_condition(&mut s, util::REPLICA_FAILURE),
    }
    if s.conditions.as_ref().is_some_and(Vec::is_empty) {
        s.conditions = None;
    }
    Ok(s)
}

/// The first `ReplicaFailure` of the new, then the old ReplicaSets.
fn replica_failure(sets: &Sets) -> Option<DeploymentCondition> {
    let mut order: Vec<&ReplicaSet> = sets.new.iter().map(|n| n.as_ref()).collect();
    order.extend(sets.old.iter().map(|o| o.as_ref()));
    order.into_iter().find_map(|rs| {
        let c = rs
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == util::REPLICA_FAILURE)?;
        Some(DeploymentCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: c.last_transition_time.clone(),
            last_transition_time: c.last_transition_time.clone(),
        })
    })
}

/// When to look at a stuck rollout again (upstream's `requeueStuckDeployment`).
pub fn requeue_after(
    d: &Deployment,
    new: &DeploymentStatus,
    now: jiff::Timestamp,
) -> Option<Duration> {
    let deadline = util::progress_deadline(d)?;
    let stored = d.status.clone().unwrap_or_default();
    let cond = util::condition(&stored, PROGRESSING)?;
    if util::complete(d, new) || cond.reason.as_deref() == Some(util::TIMED_OUT) {
        return None;
    }
    let from = cond.last_update_time.as_ref()?.0;
    let at = from.checked_add(jiff::SignedDuration::from_secs(i64::from(deadline))).ok()?;
    let left = at.duration_since(now);
    Some(if left < jiff::SignedDuration::from_secs(1) {
        Duration::ZERO
    } else {
        Duration::try_from(left).unwrap_or(Duration::ZERO) + Duration::from_secs(1)
    })
}

impl<C: Client<Deployment> + Client<ReplicaSet>> DeploymentController<C> {
    /// Upstream's `syncRolloutStatus`.
    pub(crate) async fn sync_rollout_status(
        &self,
        d: &mut Deployment,
        sets: &Sets,
    ) -> Result<(), SyncError> {
        let now = (self.now)();
        let status = rollout_status(d, sets, now).map_err(|m| self.invalid(d, m))?;
        if same_status(&d.status.clone().unwrap_or_default(), &status) {
            match requeue_after(d, &status, now) {
                Some(Duration::ZERO) => self.queue.add_rate_limited(Key::of(d)),
                Some(after) => self.queue.add_after(Key::of(d), after),
                None => {}
            }
            return Ok(());
        }
        d.status = Some(status);
        self.write_status(d).await
    }
}
