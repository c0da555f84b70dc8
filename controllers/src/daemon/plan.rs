//! What a sync does, pure: which nodes get a pod and which pods go, as upstream's
//! `podsShouldBeOnNode` ([`manage`]) and `rollingUpdate` in `update.go` ([`rolling_update`]).
//! The controller executes a [`Plan`] with the API; nothing here talks to it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::util::{self, Placement};
use crate::deployment::util::scaled_value;
use crate::pods;

/// Pods of one DaemonSet by the node they are for.
pub type NodePods = BTreeMap<String, Vec<Arc<Pod>>>;

/// What to create and delete.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// Nodes that get a new pod.
    pub create_on: Vec<String>,
    /// Pods to delete (names), in the order decided.
    pub delete: Vec<String>,
    /// Failed pods among `delete` (an event each), as (pod, node).
    pub failed: Vec<(String, String)>,
}

fn creation(p: &Pod) -> Option<jiff::Timestamp> {
    p.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Oldest first; equal times: running before pending (upstream's
/// `podByCreationTimestampAndPhase`), then by name so the order is stable.
fn by_age(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| {
        let phase = |p: &Pod| u8::from(pods::phase(p) != "Running");
        creation(a)
            .cmp(&creation(b))
            .then(phase(a).cmp(&phase(b)))
            .then(a.metadata.name.cmp(&b.metadata.name))
    });
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// Upstream's `podsShouldBeOnNode` over every node, and the unscheduled pods whose node is gone
/// (`getUnscheduledPodsWithoutNode`).
pub fn manage(
    placements: &BTreeMap<String, Placement>,
    node_pods: &NodePods,
    hash: &str,
    surge: bool,
    min_ready: i32,
    now: jiff::Timestamp,
) -> Plan {
    let mut plan = Plan::default();
    for (node, placement) in placements {
        let pods = node_pods.get(node).map(Vec::as_slice).unwrap_or_default();
        let exists = !pods.is_empty();
        if placement.should_run && !exists {
            plan.create_on.push(node.clone());
        } else if placement.should_continue_running {
            let mut running = Vec::new();
            for p in pods {
                if p.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                if pods::phase(p) == "Failed" {
                    plan.delete.push(name(p));
                    plan.failed.push((name(p), node.clone()));
                    continue;
                }
                running.push(p.clone());
            }
            // A failed pod's replacement is created on a later sync, once it is gone.
            by_age(&mut running);
            if !surge {
                plan.delete.extend(running.iter().skip(1).map(|p| name(p)));
                continue;
            }
            let (mut newest, mut oldest_old) = (None, None);
            for p in &running {
                let is_new = p
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(util::REVISION_HASH_LABEL))
                    .is_some_and(|h| h == hash);
                let slot = if is_new { &mut newest } else { &mut oldest_old };
                if slot.is_none() {
                    *slot = Some(p.clone());
                } else {
                    plan.delete.push(name(p));
                }
            }
            if let (Some(new), Some(old)) = (newest, oldest_old)
                && (!pods::is_ready(&old) || pods::is_available(&new, min_ready, now))
            {
                plan.delete.push(name(&old));
            }
        } else if exists {
            plan.delete.extend(
                pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).map(|p| name(p)),
            );
        }
    }
    for (node, pods) in node_pods {
        if placements.contains_key(node) {
            continue;
        }
        plan.delete.extend(
            pods.iter()
                .filter(|p| {
                    pods::node_name(p).is_empty() && p.metadata.deletion_timestamp.is_none()
                })
                .map(|p| name(p)),
        );
    }
    plan
}

/// `maxSurge` and `maxUnavailable` scaled to the number of nodes that should run the pod
/// (upstream's `updatedDesiredNodeCounts`: both rounded up; both zero means one unavailable).
pub fn limits(ds: &DaemonSet, desired: i32) -> Result<(i32, i32), String> {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let surge = ru.and_then(|r| r.max_surge.clone()).unwrap_or(IntOrString::Int(0));
    let unavailable = ru.and_then(|r| r.max_unavailable.clone()).unwrap_or(IntOrString::Int(1));
    let surge = scaled_value(&surge, desired, true)?;
    let unavailable = scaled_value(&unavailable, desired, true)?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

/// The up-to-date and the old pod on one node.
type NewOld = (Option<Arc<Pod>>, Option<Arc<Pod>>);

/// The new and the old pod on a node (upstream's `findUpdatedPodsOnNode`); `None` when there
/// is more than one of either, which the manage step resolves first.
fn new_and_old(pods: &[Arc<Pod>], hash: &str, generation: Option<i64>) -> Option<NewOld> {
    let (mut new, mut old) = (None, None);
    for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let slot = if util::is_updated(p, hash, generation) { &mut new } else { &mut old };
        if slot.is_some() {
            return None;
        }
        *slot = Some(p.clone());
    }
    Some((new, old))
}

/// The update step of a `RollingUpdate` DaemonSet, upstream's `rollingUpdate`: without surge,
/// old pods are deleted while at most `max_unavailable` nodes lack an available new pod (an old
/// pod that is not available is always replaceable); with surge, new pods are created beside
/// available old ones on at most `max_surge` nodes at a time, and an old pod goes once the new
/// one beside it is available.
pub fn rolling_update(
    placements: &BTreeMap<String, Placement>,
    node_pods: &NodePods,
    hash: &str,
    generation: Option<i64>,
    (max_surge, max_unavailable): (i32, i32),
    min_ready: i32,
    now: jiff::Timestamp,
) -> Plan {
    let available = |p: &Pod| pods::is_available(p, min_ready, now);
    let mut plan = Plan::default();
    if max_surge == 0 {
        let (mut unavailable, mut replace, mut candidates) = (0, Vec::new(), Vec::new());
        for pods in node_pods.values() {
            match new_and_old(pods, hash, generation) {
                None | Some((None, None) | (Some(_), Some(_))) => unavailable += 1,
                Some((Some(new), None)) => unavailable += i32::from(!available(&new)),
                Some((None, Some(old))) => {
                    if !available(&old) {
                        replace.push(name(&old));
                    } else if unavailable < max_unavailable {
                        candidates.push(name(&old));
                    }
                }
            }
        }
        let room = usize::try_from((max_unavailable - unavailable).max(0)).unwrap_or(0);
        plan.delete = replace;
        plan.delete.extend(candidates.into_iter().take(room));
        return plan;
    }
    let (mut surged, mut allowed, mut candidates, mut not_wanted) = (0, vec![], vec![], vec![]);
    for (node, pods) in node_pods {
        let Some((new, old)) = new_and_old(pods, hash, generation) else {
            surged += 1;
            continue;
        };
        let should_run = placements.get(node).is_some_and(|p| p.should_run);
        match (new, old) {
            (None, Some(old)) if !should_run => not_wanted.push(name(&old)),
            (_, None) => {}
            (None, Some(old)) => {
                if !available(&old) {
                    allowed.push(node.clone());
                } else if surged < max_surge {
                    candidates.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(&new) {
                    plan.delete.push(name(&old));
                } else {
                    surged += 1;
                }
            }
        }
    }
    let room = usize::try_from((max_surge - surged).max(0)).unwrap_or(0);
    plan.create_on = allowed;
    plan.create_on.extend(candidates.into_iter().take(room));
    plan.delete.extend(not_wanted);
    plan
}
