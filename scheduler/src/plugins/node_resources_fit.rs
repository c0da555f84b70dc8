//! `NodeResourcesFit`: the filter (the pod's requests must fit in allocatable minus what the
//! node's bound and assumed pods request, and one more pod must be allowed) and its default
//! `LeastAllocated` score (the emptier the node, the higher).

use std::borrow::Cow;

use super::{FilterResult, MAX_NODE_SCORE, Rejection};
use crate::cache::{NodeInfo, PodInfo};

pub const NAME: &str = "NodeResourcesFit";
pub const TOO_MANY_PODS: &str = "Too many pods";

/// Upstream's `fitsRequest`: every shortage is a reason, so one node can count as both
/// `Insufficient cpu` and `Insufficient memory`.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> FilterResult {
    let mut reasons: Vec<Cow<'static, str>> = Vec::new();
    let pods = i64::try_from(node.pods.len()).unwrap_or(i64::MAX);
    if pods.saturating_add(1) > node.allowed_pods {
        reasons.push(Cow::Borrowed(TOO_MANY_PODS));
    }
    let want = &pod.requests;
    let (alloc, used) = (&node.allocatable, &node.requested);
    if want.milli_cpu > 0 && want.milli_cpu > alloc.milli_cpu.saturating_sub(used.milli_cpu) {
        reasons.push(Cow::Borrowed("Insufficient cpu"));
    }
    if want.memory > 0 && want.memory > alloc.memory.saturating_sub(used.memory) {
        reasons.push(Cow::Borrowed("Insufficient memory"));
    }
    if want.ephemeral_storage > 0
        && want.ephemeral_storage > alloc.ephemeral_storage.saturating_sub(used.ephemeral_storage)
    {
        reasons.push(Cow::Borrowed("Insufficient ephemeral-storage"));
    }
    for (name, amount) in want.scalar.iter().filter(|(_, v)| **v > 0) {
        let have = alloc.scalar.get(name).copied().unwrap_or(0);
        let taken = used.scalar.get(name).copied().unwrap_or(0);
        if *amount > have.saturating_sub(taken) {
            reasons.push(Cow::Owned(format!("Insufficient {name}")));
        }
    }
    if reasons.is_empty() { Ok(()) } else { Err(Rejection { plugin: NAME, reasons }) }
}

/// Upstream's `leastRequestedScore`: the free share of `capacity` after `requested`, 0–100.
pub fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// `LeastAllocated` over cpu and memory (weight 1 each), with non-zero requests: the node's
/// pods' plus this pod's. Resources the node has none of are left out.
pub fn least_allocated_score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let pairs = [
        (
            node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu,
            node.allocatable.milli_cpu,
        ),
        (node.non_zero_requested.memory + pod.non_zero_requests.memory, node.allocatable.memory),
    ];
    let (mut score, mut weights) = (0, 0);
    for (requested, capacity) in pairs.into_iter().filter(|(_, c)| *c != 0) {
        score += least_requested(requested, capacity);
        weights += 1;
    }
    if weights == 0 { 0 } else { score / weights }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::tests::{node, pod};

    fn node_with(cpu: &str, mem: &str, pods: &str, bound: &[(&str, &str)]) -> NodeInfo {
        let mut info = NodeInfo::with_node(Arc::new(node("n", cpu, mem, pods)));
        for (i, (c, m)) in bound.iter().enumerate() {
            info.add_pod(PodInfo::new(Arc::new(pod(&format!("b{i}"), c, m))));
        }
        info
    }

    #[test]
    fn requests_must_fit_in_allocatable_minus_bound_pods() {
        let p = |c, m| PodInfo::new(Arc::new(pod("p", c, m)));
        let cases: Vec<(&str, NodeInfo, PodInfo, Vec<&str>)> = vec![
            ("fits", node_with("2", "2Gi", "10", &[("1", "1Gi")]), p("1", "1Gi"), vec![]),
            (
                "cpu short",
                node_with("2", "2Gi", "10", &[("1500m", "")]),
                p("1", "1Gi"),
                vec!["Insufficient cpu"],
            ),
            (
                "both short",
                node_with("2", "2Gi", "10", &[("1500m", "1500Mi")]),
                p("1", "1Gi"),
                vec!["Insufficient cpu", "Insufficient memory"],
            ),
            ("pod limit", node_with("8", "8Gi", "1", &[("", "")]), p("", ""), vec![TOO_MANY_PODS]),
            ("no pods allowed", node_with("8", "8Gi", "0", &[]), p("", ""), vec![TOO_MANY_PODS]),
            (
                "zero requests fit a full node",
                node_with("1", "1Gi", "10", &[("1", "1Gi")]),
                p("", ""),
                vec![],
            ),
        ];
        for (what, n, p, want) in cases {
            let got = filter(&p, &n).err().map(|r| r.reasons).unwrap_or_default();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn extended_resources_are_checked_by_name() {
        let mut n = NodeInfo::with_node(Arc::new(node("n", "1", "1Gi", "10")));
        n.allocatable.scalar.insert("example.com/gpu".into(), 1);
        let mut p = PodInfo::new(Arc::new(pod("p", "", "")));
        p.requests.scalar.insert("example.com/gpu".into(), 2);
        let got = filter(&p, &n).err().map(|r| r.reasons).unwrap_or_default();
        assert_eq!(got, vec!["Insufficient example.com/gpu"]);
    }

    #[test]
    fn least_allocated_prefers_emptier_nodes() {
        let p = PodInfo::new(Arc::new(pod("p", "1", "1Gi")));
        let cases = [
            // (cpu 4, 4Gi): after the pod 3/4 free of each: 75.
            (node_with("4", "4Gi", "10", &[]), 75),
            // 2 cores (and the default 200Mi) already requested: cpu 25, memory (4096-1224)/4096 → 70.
            (node_with("4", "4Gi", "10", &[("2", "")]), (25 + 70) / 2),
            (node_with("1", "1Gi", "10", &[("1", "1Gi")]), 0),
        ];
        for (n, want) in cases {
            assert_eq!(least_allocated_score(&p, &n), want, "{:?}", n.non_zero_requested);
        }
        assert_eq!(least_requested(0, 0), 0);
        assert_eq!(least_requested(5, 4), 0);
        assert_eq!(least_requested(1, 4), 75);
    }
}
