//! `NodeResourcesBalancedAllocation`: prefers nodes whose cpu and memory would be used in equal
//! shares after placing the pod: `(1 - std) × 100` over the requested fractions, as upstream.
//! It counts real requests (not the non-zero defaults) and skips best-effort pods (score 0
//! everywhere), as upstream's PreScore does.

use super::MAX_NODE_SCORE;
use crate::cache::{NodeInfo, PodInfo};

pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// Upstream's `balancedResourceScorer` for cpu and memory.
pub fn balanced(requested: &[i64], allocatable: &[i64]) -> i64 {
    // Fractions of the resources the node has, capped at 1, without allocating (this runs for
    // every feasible node of every cycle).
    let fractions = || {
        requested
            .iter()
            .zip(allocatable)
            .filter(|(_, a)| **a != 0)
            .map(|(r, a)| (*r as f64 / *a as f64).min(1.0))
    };
    let n = fractions().count();
    let std = match n {
        2 => {
            let mut f = fractions();
            let (a, b) = (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        n if n > 2 => {
            let mean = fractions().sum::<f64>() / n as f64;
            (fractions().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    if pod.requests.milli_cpu == 0 && pod.requests.memory == 0 {
        return 0;
    }
    balanced(
        &[
            node.requested.milli_cpu + pod.requests.milli_cpu,
            node.requested.memory + pod.requests.memory,
        ],
        &[node.allocatable.milli_cpu, node.allocatable.memory],
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::tests::{node, pod};

    #[test]
    fn equal_shares_score_highest() {
        assert_eq!(balanced(&[1000, 1 << 30], &[4000, 4 << 30]), 100);
        assert_eq!(balanced(&[4000, 0], &[4000, 4 << 30]), 50);
        assert_eq!(balanced(&[2000, 1 << 30], &[4000, 4 << 30]), 87, "std 0.125");
        assert_eq!(balanced(&[8000, 0], &[4000, 4 << 30]), 50, "fractions cap at 1");
        assert_eq!(balanced(&[1, 1], &[0, 0]), 100, "nothing to compare");
    }

    #[test]
    fn best_effort_pods_score_zero_and_others_see_bound_pods() {
        let n = NodeInfo::with_node(Arc::new(node("n", "4", "4Gi", "10")));
        assert_eq!(score(&PodInfo::new(Arc::new(pod("p", "", ""))), &n), 0);
        assert_eq!(score(&PodInfo::new(Arc::new(pod("p", "1", "1Gi"))), &n), 100);
        let mut loaded = n.clone();
        loaded.add_pod(PodInfo::new(Arc::new(pod("b", "2", ""))));
        assert_eq!(score(&PodInfo::new(Arc::new(pod("p", "1", "1Gi"))), &loaded), 75);
    }
}
