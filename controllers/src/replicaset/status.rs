//! The ReplicaSet's status, as upstream's `calculateStatus`: `replicas` (active pods it owns),
//! `fullyLabeledReplicas` (those also carrying every template label), `readyReplicas`,
//! `availableReplicas` (ready for `minReadySeconds`), and the `ReplicaFailure` condition
//! (`FailedCreate`/`FailedDelete` with the error) while creating or deleting fails.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pods::{is_available, is_ready};

pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// What a failed `manageReplicas` leaves in the condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManageFailure {
    pub message: String,
}

pub fn calculate(
    rs: &ReplicaSet,
    pods: &[Arc<Pod>],
    failure: Option<&ManageFailure>,
    now: jiff::Timestamp,
) -> ReplicaSetStatus {
    let mut status = rs.status.clone().unwrap_or_default();
    let spec = rs.spec.as_ref();
    let template_labels = spec
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let (mut labeled, mut ready, mut available) = (0, 0, 0);
    for pod in pods {
        let labels = pod.metadata.labels.as_ref();
        if template_labels.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)) {
            labeled += 1;
        }
        if is_ready(pod) {
            ready += 1;
            if is_available(pod, min_ready, now) {
                available += 1;
            }
        }
    }
    let has_failure = status.conditions.iter().flatten().any(|c| c.type_ == REPLICA_FAILURE);
    match failure {
        Some(f) if !has_failure => {
            let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
            let diff = i64::try_from(pods.len()).unwrap_or(i64::MAX) - i64::from(desired);
            let reason = match diff {
                d if d < 0 => "FailedCreate",
                d if d > 0 => "FailedDelete",
                _ => "",
            };
            status.conditions.get_or_insert_default().push(ReplicaSetCondition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(f.message.clone()),
                last_transition_time: Some(Time(now)),
            });
        }
        None if has_failure => {
            if let Some(c) = status.conditions.as_mut() {
                c.retain(|c| c.type_ != REPLICA_FAILURE);
            }
            if status.conditions.as_ref().is_some_and(Vec::is_empty) {
                status.conditions = None;
            }
        }
        _ => {}
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    status.replicas = count(pods.len());
    status.fully_labeled_replicas = Some(count(labeled));
    status.ready_replicas = Some(count(ready));
    status.available_replicas = Some(count(available));
    status
}

/// Whether `new` differs from the stored status in what upstream compares (counts, conditions,
/// and an observedGeneration behind the generation).
pub fn needs_update(rs: &ReplicaSet, new: &ReplicaSetStatus) -> bool {
    let old = rs.status.clone().unwrap_or_default();
    let zero = |v: Option<i32>| v.unwrap_or(0);
    old.replicas != new.replicas
        || zero(old.fully_labeled_replicas) != zero(new.fully_labeled_replicas)
        || zero(old.ready_replicas) != zero(new.ready_replicas)
        || zero(old.available_replicas) != zero(new.available_replicas)
        || rs.metadata.generation != old.observed_generation
        || old.conditions != new.conditions
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::pods::tests::pod;

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        ReplicaSet {
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: Some(min_ready),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(
                            [("app".to_string(), "web".to_string()), ("v".into(), "1".into())]
                                .into(),
                        ),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn counts_ready_available_and_fully_labeled_pods() {
        let now = jiff::Timestamp::from_second(100).unwrap_or_default();
        let mut labeled = pod("a", "n", "Running", Some(50));
        labeled.metadata.labels =
            Some([("app".to_string(), "web".to_string()), ("v".into(), "1".into())].into());
        let pods: Vec<Arc<Pod>> =
            [labeled, pod("b", "n", "Running", Some(95)), pod("c", "n", "Pending", None)]
                .into_iter()
                .map(Arc::new)
                .collect();
        let s = calculate(&rs(3, 10), &pods, None, now);
        assert_eq!(
            (s.replicas, s.fully_labeled_replicas, s.ready_replicas, s.available_replicas),
            (3, Some(1), Some(2), Some(1))
        );
    }

    #[test]
    fn a_failed_create_sets_replica_failure_until_a_sync_succeeds() {
        let now = jiff::Timestamp::from_second(100).unwrap_or_default();
        let mut r = rs(3, 0);
        let f = ManageFailure { message: "pods \"web-\" is forbidden: exceeded quota".into() };
        let s = calculate(&r, &[], Some(&f), now);
        let c = &s.conditions.clone().unwrap_or_default()[0];
        assert_eq!(
            (c.type_.as_str(), c.reason.as_deref()),
            (REPLICA_FAILURE, Some("FailedCreate"))
        );
        r.status = Some(s);
        let s = calculate(&r, &[], None, now);
        assert_eq!(s.conditions, None);
    }
}
