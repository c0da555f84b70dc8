//! What controllers read from pods and owner references, as upstream's `podutil` and
//! `metav1.GetControllerOf`: readiness, availability after `minReadySeconds`, activeness, the
//! controlling owner, and the owner reference a controller writes.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// The Ready condition's `lastTransitionTime` when the pod is Ready.
pub fn ready_since(pod: &Pod) -> Option<Option<&Time>> {
    let c = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    (c.status == "True").then_some(c.last_transition_time.as_ref())
}

pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for at least `min_ready_seconds` (upstream's `IsPodAvailable`).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(t)) => {
            t.0.checked_add(jiff::SignedDuration::from_secs(i64::from(min_ready_seconds)))
                .is_ok_and(|at| at < now)
        }
    }
}

pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// Not finished and not being deleted (upstream's `IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

pub fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("")
}

/// `namespace/name`, upstream's `PodKey`.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The owner reference with `controller: true`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// The reference a controller writes on what it owns (upstream's `NewControllerRef`).
pub fn controller_ref(owner: &ObjectMeta, api_version: &str, kind: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[cfg(test)]
pub mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};

    use super::*;

    /// A pod for tests: running on `node` (empty: unscheduled), Ready since `ready_at`.
    pub fn pod(name: &str, node: &str, phase: &str, ready_at: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.to_string()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready_at.map(|t| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(
                            jiff::Timestamp::from_second(t).unwrap_or_default(),
                        )),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let p = pod("p", "n", "Running", Some(100));
        let at = |s| jiff::Timestamp::from_second(s).unwrap_or_default();
        assert!(is_available(&p, 0, at(100)));
        assert!(!is_available(&p, 10, at(110)));
        assert!(is_available(&p, 10, at(111)));
        assert!(!is_available(&pod("q", "n", "Running", None), 0, at(200)));
    }

    #[test]
    fn finished_and_terminating_pods_are_not_active() {
        assert!(is_active(&pod("p", "n", "Running", None)));
        assert!(!is_active(&pod("p", "n", "Succeeded", None)));
        let mut deleting = pod("p", "n", "Running", None);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(!is_active(&deleting));
    }
}
