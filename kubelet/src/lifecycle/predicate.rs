//! Upstream's `predicateAdmitHandler.Admit` and `generalFilter`, pure: a new pod against the
//! node (its labels, taints and allocatable) and the pods already admitted to it.

use std::collections::BTreeMap;

use api::resources::{self, Resource};
use api::scheduling::{self, HostPort};
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};

use super::eviction::is_critical;
use super::preemption::{self, Requirement};
use crate::config::Source;
use crate::status::manager::source_of;

/// Why a pod was not admitted: the pod status's `reason` and the message after
/// `Pod was rejected: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

impl Rejection {
    fn new(reason: &str, message: impl Into<String>) -> Self {
        Self { reason: reason.to_string(), message: message.into() }
    }
}

/// One failed check, as upstream's `PredicateFailureReason`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// Upstream's `InsufficientResourceError`: cpu in millicores, the rest in units.
    Insufficient { resource: String, requested: i64, used: i64, capacity: i64 },
    /// Upstream's `PredicateFailureError`: the scheduler plugin's name and reason.
    Predicate { name: &'static str, desc: &'static str },
}

impl Failure {
    /// What the pod lacks of a resource (upstream's `GetInsufficientAmount`); `None` for a
    /// failure preemption cannot mend.
    fn requirement(&self) -> Option<Requirement> {
        match self {
            Failure::Insufficient { resource, requested, used, capacity } => Some(Requirement {
                resource: resource.clone(),
                quantity: requested.saturating_sub(capacity.saturating_sub(*used)),
            }),
            Failure::Predicate { .. } => None,
        }
    }

    fn rejection(&self) -> Rejection {
        match self {
            Failure::Insufficient { resource, requested, used, capacity } => Rejection {
                reason: format!("OutOf{resource}"),
                message: format!(
                    "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
                ),
            },
            Failure::Predicate { name, desc } => {
                Rejection::new(name, format!("Predicate {name} failed: {desc}"))
            }
        }
    }
}

/// Extended resources (a domain-prefixed name outside `kubernetes.io/`) the node does not
/// advertise are cluster-level ones, not counted here, as upstream's
/// `removeMissingExtendedResources`.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/")
}

/// Upstream's `noderesources.Fits` (with every failure): one more pod must be allowed, and each
/// resource the pod requests must fit in allocatable less what the admitted pods request.
fn fits(want: &Resource, admitted: &[&Pod], node: &Node) -> Vec<Failure> {
    let empty = BTreeMap::new();
    let alloc_list = node.status.as_ref().and_then(|s| s.allocatable.as_ref()).unwrap_or(&empty);
    let alloc = Resource::from_list(Some(alloc_list));
    let allowed = resources::allowed_pods(Some(alloc_list));
    let mut used = Resource::default();
    for p in admitted {
        if let Some(spec) = &p.spec {
            used.add(&resources::pod_requests(spec));
        }
    }
    let mut failures = Vec::new();
    let count = i64::try_from(admitted.len()).unwrap_or(i64::MAX);
    if count.saturating_add(1) > allowed {
        failures.push(Failure::Insufficient {
            resource: "pods".into(),
            requested: 1,
            used: count,
            capacity: allowed,
        });
    }
    let mut check = |resource: &str, want: i64, used: i64, capacity: i64| {
        if want > 0 && want > capacity.saturating_sub(used) {
            failures.push(Failure::Insufficient {
                resource: resource.to_string(),
                requested: want,
                used,
                capacity,
            });
        }
    };
    check(resources::CPU, want.milli_cpu, used.milli_cpu, alloc.milli_cpu);
    check(resources::MEMORY, want.memory, used.memory, alloc.memory);
    check(
        resources::EPHEMERAL_STORAGE,
        want.ephemeral_storage,
        used.ephemeral_storage,
        alloc.ephemeral_storage,
    );
    for (name, amount) in &want.scalar {
        let Some(have) = alloc.scalar.get(name) else {
            if !is_extended(name) {
                check(name, *amount, 0, 0);
            }
            continue;
        };
        check(name, *amount, used.scalar.get(name).copied().unwrap_or(0), *have);
    }
    failures
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// Upstream's `IsStaticPod`: from a source other than the apiserver.
fn is_static(pod: &Pod) -> bool {
    source_of(pod).is_some_and(Source::is_static)
}

/// Upstream's `generalFilter`: `AdmissionCheck` with every failure, then untolerated
/// `NoExecute` taints for all but static pods.
fn general_filter(pod: &Pod, spec: &PodSpec, admitted: &[&Pod], node: &Node) -> Vec<Failure> {
    let mut failures = fits(&resources::pod_requests(spec), admitted, node);
    if !scheduling::node_affinity_matches(spec, node) {
        failures.push(Failure::Predicate {
            name: "NodeAffinity",
            desc: "node(s) didn't match Pod's node affinity/selector",
        });
    }
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty() && n != node_name(node)) {
        failures.push(Failure::Predicate {
            name: "NodeName",
            desc: "node(s) didn't match the requested node name",
        });
    }
    let wanted = scheduling::host_ports(spec);
    if !wanted.is_empty() {
        let used: Vec<HostPort> = admitted
            .iter()
            .filter_map(|p| p.spec.as_ref())
            .flat_map(scheduling::host_ports)
            .collect();
        if wanted.iter().any(|w| used.iter().any(|u| u.conflicts(w))) {
            failures.push(Failure::Predicate {
                name: "NodePorts",
                desc: "node(s) didn't have free ports for the requested pod ports",
            });
        }
    }
    if !is_static(pod) {
        let tolerations = spec.tolerations.as_deref().unwrap_or_default();
        if scheduling::untolerated_taint(node, tolerations, &["NoExecute"]).is_some() {
            failures.push(Failure::Predicate {
                name: "TaintToleration",
                desc: "node(s) had untolerated taint(s)",
            });
        }
    }
    failures
}

/// Whether `pod` may run on `node` beside the `admitted` pods; the first failure decides the
/// rejection, as upstream's. A critical pod short of resources alone is admitted with the
/// admitted pods (their indexes) to preempt for it ([`super::preemption`]).
pub fn admit(pod: &Pod, admitted: &[&Pod], node: &Node) -> Result<Vec<usize>, Rejection> {
    let os_label = |labels: Option<&BTreeMap<String, String>>| {
        labels.and_then(|l| l.get(api::keys::LABEL_OS)).cloned()
    };
    let node_os = os_label(node.metadata.labels.as_ref()).unwrap_or_else(|| "linux".into());
    if os_label(pod.metadata.labels.as_ref()).is_some_and(|os| os != node_os) {
        return Err(Rejection::new(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        ));
    }
    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    if spec.os.as_ref().is_some_and(|os| os.name != "linux") {
        return Err(Rejection::new(
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS",
        ));
    }
    let failures = general_filter(pod, spec, admitted, node);
    let Some(first) = failures.first() else { return Ok(Vec::new()) };
    if !is_critical(pod) {
        return Err(first.rejection());
    }
    // A critical pod is not refused for resources: its other failures decide, else pods are
    // preempted for it (upstream's `HandleAdmissionFailure`).
    if let Some(other) = failures.iter().find(|f| f.requirement().is_none()) {
        return Err(other.rejection());
    }
    let reqs: Vec<Requirement> = failures.iter().filter_map(Failure::requirement).collect();
    preemption::pods_to_preempt(pod, admitted, &reqs).map_err(|e| {
        Rejection::new(
            "UnexpectedAdmissionError",
            format!("Unexpected error while attempting to recover from admission failure: {e}"),
        )
    })
}

#[cfg(test)]
mod tests;
