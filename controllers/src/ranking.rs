//! Which pods to delete first when there are too many, upstream's `ActivePodsWithRanks` order
//! (the least valuable first):
//!
//! 1. unassigned before assigned;
//! 2. `Pending` before `Unknown` before `Running`;
//! 3. not ready before ready;
//! 4. lower `controller.kubernetes.io/pod-deletion-cost` before higher;
//! 5. higher rank (more related pods on the same node) before lower;
//! 6. both ready: ready for less time before longer (on a logarithmic scale, as upstream's
//!    `LogarithmicScaleDown`; a missing time first);
//! 7. more container restarts before fewer;
//! 8. newer before older (logarithmic too), then by UID so equals are spread pseudorandomly.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pods::{self, is_ready, node_name};

pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

fn phase_ordinal(pod: &Pod) -> u8 {
    match pods::phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// Upstream's `logarithmicRankDiff`: ⌊log₂(age in ns)⌋ of each, compared.
fn log_rank(t: &jiff::Timestamp, now: jiff::Timestamp) -> i64 {
    let age = now.as_nanosecond() - t.as_nanosecond();
    if age > 0 {
        // ⌊log₂ age⌋ exactly, by the bit length (upstream rounds a float log down).
        i64::from(127 - age.leading_zeros())
    } else {
        -1
    }
}

/// Newer (or missing) first; equal log ranks by UID. `None` when both times are equal.
fn newer_first(
    a: Option<&Time>,
    b: Option<&Time>,
    pa: &Pod,
    pb: &Pod,
    now: jiff::Timestamp,
) -> Option<Ordering> {
    if a == b {
        return None;
    }
    match (a, b) {
        (None, _) => Some(Ordering::Less),
        (_, None) => Some(Ordering::Greater),
        (Some(a), Some(b)) => {
            let diff = log_rank(&a.0, now) - log_rank(&b.0, now);
            Some(match diff.cmp(&0) {
                Ordering::Equal => pa.metadata.uid.cmp(&pb.metadata.uid),
                o => o,
            })
        }
    }
}

/// `Less` for pods `a` and `b` with their ranks.
pub fn compare(a: &Pod, ra: usize, b: &Pod, rb: usize, now: jiff::Timestamp) -> Ordering {
    let (na, nb) = (node_name(a), node_name(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return if na.is_empty() { Ordering::Less } else { Ordering::Greater };
    }
    let by = |x: Ordering| (x != Ordering::Equal).then_some(x);
    if let Some(o) = by(phase_ordinal(a).cmp(&phase_ordinal(b))) {
        return o;
    }
    if let Some(o) = by(is_ready(a).cmp(&is_ready(b))) {
        return o;
    }
    if let Some(o) = by(deletion_cost(a).cmp(&deletion_cost(b))) {
        return o;
    }
    if let Some(o) = by(rb.cmp(&ra)) {
        return o;
    }
    if is_ready(a) && is_ready(b) {
        let (ta, tb) = (pods::ready_since(a).flatten(), pods::ready_since(b).flatten());
        if let Some(o) = newer_first(ta, tb, a, b, now) {
            return o;
        }
    }
    if let Some(o) = by(max_restarts(b).cmp(&max_restarts(a))) {
        return o;
    }
    let (ca, cb) = (a.metadata.creation_timestamp.as_ref(), b.metadata.creation_timestamp.as_ref());
    newer_first(ca, cb, a, b, now).unwrap_or(Ordering::Equal)
}

/// The `n` pods of `pods` to delete first; ranks count the active `related` pods (the owner's
/// siblings' pods too) on each pod's node.
pub fn to_delete(
    pods: &[Arc<Pod>],
    related: &[Arc<Pod>],
    n: usize,
    now: jiff::Timestamp,
) -> Vec<Arc<Pod>> {
    if n >= pods.len() {
        return pods.to_vec();
    }
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| pods::is_active(p)) {
        *on_node.entry(node_name(p)).or_default() += 1;
    }
    let mut ranked: Vec<(Arc<Pod>, usize)> =
        pods.iter().map(|p| (p.clone(), on_node.get(node_name(p)).copied().unwrap_or(0))).collect();
    ranked.sort_by(|(a, ra), (b, rb)| compare(a, *ra, b, *rb, now));
    ranked.into_iter().take(n).map(|(p, _)| p).collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ContainerStatus;

    use super::*;
    use crate::pods::tests::pod;

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
    }

    #[test]
    fn the_least_valuable_pods_go_first_in_upstreams_order() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap_or_default();
        let mut restarted = pod("ready-old-restarts", "n2", "Running", Some(10));
        restarted.status.get_or_insert_default().container_statuses =
            Some(vec![ContainerStatus { restart_count: 3, ..Default::default() }]);
        let mut costly = pod("unready-costly", "n1", "Running", None);
        costly.metadata.annotations = Some([(DELETION_COST.to_string(), "100".to_string())].into());
        let mut newer = pod("ready-old-newer", "n2", "Running", Some(10));
        newer.metadata.creation_timestamp =
            Some(Time(jiff::Timestamp::from_second(500).unwrap_or_default()));
        let mut older = pod("ready-old-older", "n2", "Running", Some(10));
        older.metadata.creation_timestamp =
            Some(Time(jiff::Timestamp::from_second(1).unwrap_or_default()));
        let pods: Vec<Arc<Pod>> = [
            older,
            pod("ready-recent", "n2", "Running", Some(999_990)),
            newer,
            restarted,
            costly,
            pod("unready", "n1", "Running", None),
            pod("unknown", "n1", "Unknown", None),
            pod("pending", "n1", "Pending", None),
            pod("unassigned", "", "Pending", None),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let order = to_delete(&pods, &pods, pods.len() - 1, now);
        assert_eq!(
            names(&order),
            [
                "unassigned",
                "pending",
                "unknown",
                "unready",
                "unready-costly",
                "ready-recent",
                "ready-old-restarts",
                "ready-old-newer",
            ]
        );
    }

    #[test]
    fn pods_doubled_up_on_a_node_go_before_lone_ones() {
        let now = jiff::Timestamp::from_second(1000).unwrap_or_default();
        let pods: Vec<Arc<Pod>> = [
            pod("alone", "n1", "Running", Some(10)),
            pod("crowded-1", "n2", "Running", Some(10)),
            pod("crowded-2", "n2", "Running", Some(10)),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let first = to_delete(&pods, &pods, 1, now);
        assert!(names(&first)[0].starts_with("crowded"), "{:?}", names(&first));
        assert_eq!(to_delete(&pods, &pods, 5, now).len(), 3, "all of them when asked for more");
    }
}
