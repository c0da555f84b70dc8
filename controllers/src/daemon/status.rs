//! A DaemonSet's status counts, pure, as upstream's `updateDaemonSetStatus`: per node that
//! should run the pod, its oldest pod counts as scheduled, ready, available (after
//! `minReadySeconds`) and updated (current hash or template generation); a pod on a node that
//! should not run it counts as misscheduled.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};

use super::plan::NodePods;
use super::util::{self, Placement};
use crate::pods;

pub fn calculate(
    ds: &DaemonSet,
    placements: &BTreeMap<String, Placement>,
    node_pods: &NodePods,
    hash: &str,
    now: jiff::Timestamp,
) -> DaemonSetStatus {
    let min_ready = ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let generation = util::template_generation(ds);
    let mut s = DaemonSetStatus {
        collision_count: ds.status.as_ref().and_then(|s| s.collision_count),
        conditions: ds.status.as_ref().and_then(|s| s.conditions.clone()),
        observed_generation: ds.metadata.generation,
        ..Default::default()
    };
    let (mut desired, mut current, mut mis, mut ready, mut available, mut updated) =
        (0, 0, 0, 0, 0, 0);
    for (node, placement) in placements {
        // Terminal pods being deleted no longer count (upstream's includeDeletedTerminal=false).
        let mut on_node: Vec<_> = node_pods
            .get(node)
            .into_iter()
            .flatten()
            .filter(|p| {
                !(p.metadata.deletion_timestamp.is_some()
                    && matches!(pods::phase(p), "Succeeded" | "Failed"))
            })
            .collect();
        let scheduled = !on_node.is_empty();
        if !placement.should_run {
            mis += i32::from(scheduled);
            continue;
        }
        desired += 1;
        if !scheduled {
            continue;
        }
        current += 1;
        on_node.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let oldest = on_node[0];
        ready += i32::from(pods::is_ready(oldest));
        available += i32::from(pods::is_available(oldest, min_ready, now));
        updated += i32::from(util::is_updated(oldest, hash, generation));
    }
    s.desired_number_scheduled = desired;
    s.current_number_scheduled = current;
    s.number_misscheduled = mis;
    s.number_ready = ready;
    s.number_available = Some(available);
    s.updated_number_scheduled = Some(updated);
    s.number_unavailable = Some(desired - available);
    s
}

/// Whether the stored status differs from `status` (so a write is needed).
pub fn needs_update(ds: &DaemonSet, status: &DaemonSetStatus) -> bool {
    ds.status.as_ref() != Some(status)
}
