//! Critical pod admission, as upstream's `pkg/kubelet/preemption`, pure: a critical pod (static,
//! mirror, or priority ≥ 2000000000) that fails admission for resources alone is admitted by
//! preempting pods it may preempt (not critical, or of lower priority), the fewest that free what
//! it lacks: every BestEffort and Burstable pod counted before any Guaranteed one is chosen, then
//! Burstable before BestEffort, and within a class the pod closest to the remaining need
//! (upstream's `getPodsToPreempt` and `getPodsToPreemptByDistance`). The victims fail with reason
//! `Preempting`; when no set of pods frees enough, the pod is rejected with
//! `UnexpectedAdmissionError`, in upstream's words.

use api::qos::QosClass;
use api::resources::{self, Resource};
use k8s_openapi::api::core::v1::Pod;

use super::eviction::is_critical;

/// Upstream's reason and message for a preempted pod.
pub const REASON: &str = "Preempting";
pub const MESSAGE: &str = "Preempted in order to admit critical pod";

/// What the pod lacks of one resource (upstream's `admissionRequirement`): cpu in millicores,
/// `pods` in pods, the rest in units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub resource: String,
    pub quantity: i64,
}

/// No set of pods frees what the critical pod needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: {}", show(.0))]
pub struct NoVictims(pub Vec<Requirement>);

fn show(reqs: &[Requirement]) -> String {
    let items: String =
        reqs.iter().map(|r| format!("(res: {}, q: {}), ", r.resource, r.quantity)).collect();
    format!("[{items}]")
}

/// Upstream's `Preemptable`: a critical pod may preempt any pod that is not; otherwise only a
/// higher priority preempts a lower one.
pub fn preemptable(preemptor: &Pod, preemptee: &Pod) -> bool {
    if is_critical(preemptor) && !is_critical(preemptee) {
        return true;
    }
    let priority = |p: &Pod| p.spec.as_ref().and_then(|s| s.priority);
    matches!((priority(preemptor), priority(preemptee)), (Some(a), Some(b)) if a > b)
}

/// What a pod frees of `resource` when it goes (upstream's `GetResourceRequest`).
fn request(requests: &Resource, resource: &str) -> i64 {
    match resource {
        resources::PODS => 1,
        resources::CPU => requests.milli_cpu,
        resources::MEMORY => requests.memory,
        resources::EPHEMERAL_STORAGE => requests.ephemeral_storage,
        other => requests.scalar.get(other).copied().unwrap_or(0),
    }
}

/// A candidate: its index among the admitted pods and its requests.
#[derive(Debug, Clone)]
struct Candidate {
    index: usize,
    requests: Resource,
}

/// What remains of `reqs` once `pods` are gone.
fn subtract<'a>(
    reqs: &[Requirement],
    pods: impl Iterator<Item = &'a Candidate> + Clone,
) -> Vec<Requirement> {
    reqs.iter()
        .filter_map(|r| {
            let mut left = r.quantity;
            for p in pods.clone() {
                left = left.saturating_sub(request(&p.requests, &r.resource));
                if left <= 0 {
                    break;
                }
            }
            (left > 0).then(|| Requirement { resource: r.resource.clone(), quantity: left })
        })
        .collect()
}

/// How far a pod's requests are from the requirements: each requirement's unmet fraction,
/// squared, summed (upstream's `distance`).
fn distance(reqs: &[Requirement], pod: &Candidate) -> f64 {
    reqs.iter()
        .map(|r| {
            let left = r.quantity.saturating_sub(request(&pod.requests, &r.resource));
            if left > 0 { (left as f64 / r.quantity as f64).powi(2) } else { 0.0 }
        })
        .sum()
}

/// Upstream's `smallerResourceRequest`: memory, then cpu; equal counts as smaller.
fn smaller(a: &Candidate, b: &Candidate) -> bool {
    for (x, y) in
        [(a.requests.memory, b.requests.memory), (a.requests.milli_cpu, b.requests.milli_cpu)]
    {
        if x != y {
            return x < y;
        }
    }
    true
}

fn by_distance(
    mut pods: Vec<Candidate>,
    mut reqs: Vec<Requirement>,
) -> Result<Vec<Candidate>, NoVictims> {
    let mut chosen = Vec::new();
    while !reqs.is_empty() {
        if pods.is_empty() {
            return Err(NoVictims(reqs));
        }
        let mut best = 0;
        let mut best_distance = reqs.len() as f64 + 1.0;
        for (i, p) in pods.iter().enumerate() {
            let d = distance(&reqs, p);
            if d < best_distance || (d == best_distance && smaller(p, &pods[best])) {
                best_distance = d;
                best = i;
            }
        }
        let pod = pods.swap_remove(best);
        reqs = subtract(&reqs, std::iter::once(&pod));
        chosen.push(pod);
    }
    Ok(chosen)
}

/// The admitted pods (indexes into `admitted`) to preempt so that `preemptor` gets `reqs`.
pub fn pods_to_preempt(
    preemptor: &Pod,
    admitted: &[&Pod],
    reqs: &[Requirement],
) -> Result<Vec<usize>, NoVictims> {
    let (mut best_effort, mut burstable, mut guaranteed) = (Vec::new(), Vec::new(), Vec::new());
    for (index, pod) in admitted.iter().enumerate() {
        let Some(spec) = pod.spec.as_ref().filter(|_| preemptable(preemptor, pod)) else {
            continue;
        };
        let c = Candidate { index, requests: resources::pod_requests(spec) };
        match api::qos::pod_qos(spec) {
            QosClass::BestEffort => best_effort.push(c),
            QosClass::Burstable => burstable.push(c),
            QosClass::Guaranteed => guaranteed.push(c),
        }
    }
    let all = best_effort.iter().chain(&burstable).chain(&guaranteed);
    let unmet = subtract(reqs, all);
    if !unmet.is_empty() {
        return Err(NoVictims(unmet));
    }
    let guaranteed_out =
        by_distance(guaranteed, subtract(reqs, best_effort.iter().chain(&burstable)))?;
    let burstable_out =
        by_distance(burstable, subtract(reqs, best_effort.iter().chain(&guaranteed_out)))?;
    let best_effort_out =
        by_distance(best_effort, subtract(reqs, burstable_out.iter().chain(&guaranteed_out)))?;
    Ok(best_effort_out
        .iter()
        .chain(&burstable_out)
        .chain(&guaranteed_out)
        .map(|c| c.index)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use crate::test_cri::resources_spec;

    fn pod(
        name: &str,
        priority: Option<i32>,
        requests: &[(&str, &str)],
        limits: &[(&str, &str)],
    ) -> Pod {
        let mut spec = resources_spec(requests, limits);
        spec.priority = priority;
        Pod {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn cpu(q: i64) -> Vec<Requirement> {
        vec![Requirement { resource: "cpu".into(), quantity: q }]
    }

    #[test]
    fn a_critical_pod_preempts_non_critical_pods_and_priority_orders_the_rest() {
        let critical = pod("crit", Some(2_000_001_000), &[], &[]);
        let low = pod("low", Some(10), &[], &[]);
        let high = pod("high", Some(20), &[], &[]);
        let same = pod("dns", Some(2_000_001_000), &[], &[]);
        let lower_critical = pod("agent", Some(2_000_000_000), &[], &[]);
        assert!(preemptable(&critical, &low));
        assert!(!preemptable(&critical, &same), "a critical pod of the same priority stays");
        assert!(preemptable(&critical, &lower_critical), "a lower priority goes, as upstream's");
        assert!(preemptable(&high, &low) && !preemptable(&low, &high));
        assert!(!preemptable(&low, &pod("none", None, &[], &[])), "no priority: no preemption");
    }

    #[test]
    fn burstable_and_best_effort_pods_go_before_any_guaranteed_one_fewest_first() {
        let critical = pod("crit", Some(2_000_000_000), &[], &[]);
        let g =
            pod("g", None, &[("cpu", "1"), ("memory", "1Gi")], &[("cpu", "1"), ("memory", "1Gi")]);
        let b_small = pod("b-small", None, &[("cpu", "100m")], &[]);
        let b_big = pod("b-big", None, &[("cpu", "600m")], &[]);
        let e = pod("e", None, &[], &[]);
        let admitted = [&g, &b_small, &b_big, &e];
        // 500m: the big Burstable pod alone suffices; nothing Guaranteed goes.
        assert_eq!(pods_to_preempt(&critical, &admitted, &cpu(500)).unwrap(), vec![2]);
        // 700m: both Burstable pods free it.
        let mut v = pods_to_preempt(&critical, &admitted, &cpu(700)).unwrap();
        v.sort();
        assert_eq!(v, vec![1, 2]);
        // 1200m: the Guaranteed pod must go too, and then the big Burstable one suffices.
        let mut v = pods_to_preempt(&critical, &admitted, &cpu(1200)).unwrap();
        v.sort();
        assert_eq!(v, vec![0, 2]);
        // A pod slot: any one pod, the smallest first (BestEffort).
        let slot = vec![Requirement { resource: "pods".into(), quantity: 1 }];
        assert_eq!(pods_to_preempt(&critical, &admitted, &slot).unwrap(), vec![3]);
    }

    #[test]
    fn when_nothing_frees_enough_the_error_says_what_is_missing_in_upstreams_words() {
        let critical = pod("crit", Some(2_000_000_000), &[], &[]);
        let dns = pod("dns", Some(2_000_000_000), &[("cpu", "2")], &[]);
        let small = pod("small", None, &[("cpu", "100m")], &[]);
        let err = pods_to_preempt(&critical, &[&dns, &small], &cpu(500)).unwrap_err();
        assert_eq!(err, NoVictims(cpu(400)));
        assert_eq!(
            err.to_string(),
            "preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 400), ]"
        );
    }
}
