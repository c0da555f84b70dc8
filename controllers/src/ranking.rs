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
//!
//! Times compare by log rank at each level ([`Key`]), so the order is total.

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

/// Where a pod sorts: the criteria above as one lexicographic key, so the order is total.
/// Upstream compares ready times and creation times pairwise (exactly when equal, by log rank
/// otherwise, and by UID when the ranks tie), which is not transitive (Go's sort does not
/// notice; Rust's does); here each time is its log rank (a missing time first), compared
/// level by level, and the UID breaks the last tie.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key<'a> {
    assigned: bool,
    phase: u8,
    ready: bool,
    cost: i32,
    fewer_related: std::cmp::Reverse<usize>,
    ready_rank: Option<i64>,
    fewer_restarts: std::cmp::Reverse<i32>,
    created_rank: Option<i64>,
    uid: Option<&'a str>,
}

fn key(pod: &Pod, rank: usize, now: jiff::Timestamp) -> Key<'_> {
    let ready = is_ready(pod);
    let rank_of = |t: Option<&Time>| t.map(|t| log_rank(&t.0, now));
    Key {
        assigned: !node_name(pod).is_empty(),
        phase: phase_ordinal(pod),
        ready,
        cost: deletion_cost(pod),
        fewer_related: std::cmp::Reverse(rank),
        ready_rank: if ready { rank_of(pods::ready_since(pod).flatten()) } else { None },
        fewer_restarts: std::cmp::Reverse(max_restarts(pod)),
        created_rank: rank_of(pod.metadata.creation_timestamp.as_ref()),
        uid: pod.metadata.uid.as_deref(),
    }
}

/// `Less` for pods `a` and `b` with their ranks.
pub fn compare(a: &Pod, ra: usize, b: &Pod, rb: usize, now: jiff::Timestamp) -> Ordering {
    key(a, ra, now).cmp(&key(b, rb, now))
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
    fn the_order_is_total_when_ready_times_share_a_log_rank() {
        // Upstream's pairwise rule (exact ready times, else log rank, else UID) made a cycle
        // here, and sorting a Deployment's 23 surplus pods panicked.
        let now = jiff::Timestamp::from_second(1_000_000).unwrap_or_default();
        let pods: Vec<Arc<Pod>> = (0..40)
            .map(|i| {
                let mut p =
                    pod(&format!("p{:02}", (i * 7) % 40), "n1", "Running", Some(999_000 + i % 3));
                p.status.get_or_insert_default().container_statuses = Some(vec![ContainerStatus {
                    restart_count: i32::try_from(i % 4).unwrap_or(0),
                    ..Default::default()
                }]);
                p.metadata.creation_timestamp =
                    Some(Time(jiff::Timestamp::from_second(990_000 + i % 5).unwrap_or_default()));
                Arc::new(p)
            })
            .collect();
        for a in &pods {
            for b in &pods {
                for c in &pods {
                    let (ab, bc) = (compare(a, 0, b, 0, now), compare(b, 0, c, 0, now));
                    if ab != Ordering::Greater && bc != Ordering::Greater {
                        assert_ne!(compare(a, 0, c, 0, now), Ordering::Greater);
                    }
                }
            }
        }
        assert_eq!(to_delete(&pods, &pods, 23, now).len(), 23);
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
