//! The eviction manager's admission check (upstream's `managerImpl.Admit`), pure: while the node
//! is under pressure, new pods are turned away with reason `Evicted` and
//! `The node had condition: [<conditions>]. ` — under memory pressure alone only BestEffort
//! pods (unless they tolerate the `node.kubernetes.io/memory-pressure` taint), under disk or
//! PID pressure every pod. Critical pods are always admitted: static and mirror pods, and pods
//! at or above the `system-cluster-critical` priority (upstream's `IsCriticalPod`).
//!
//! The pressure is the eviction manager's (`crate::eviction::manager`): none until its first
//! round, which waits for the sources' first pods, so the pods a restarted kubelet finds are
//! admitted again as before.

use api::qos::{QosClass, pod_qos};
use k8s_openapi::api::core::v1::{Pod, PodSpec, Taint};

use super::Rejection;
use crate::config::Source;
use crate::eviction::Pressure;
use crate::status::manager::source_of;

/// The status reason of a pod the node turned away or evicted.
pub const REASON: &str = "Evicted";
/// The `DisruptionTarget` condition's reason on a pod the eviction manager evicts (upstream's
/// `PodReasonTerminationByKubelet`).
pub const DISRUPTION_REASON: &str = "TerminationByKubelet";
/// Upstream's `scheduling.SystemCriticalPriority`.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Upstream's `IsCriticalPod`: a static or mirror pod, or one of critical priority.
pub fn is_critical(pod: &Pod) -> bool {
    let static_pod = source_of(pod).is_some_and(|s| s != Source::Api);
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    static_pod || crate::mirror::is_mirror(pod) || priority >= SYSTEM_CRITICAL_PRIORITY
}

/// Whether the node's `pressures` (as the eviction manager last saw them) let `pod` in.
pub fn admit(pod: &Pod, pressures: &[Pressure]) -> Result<(), Rejection> {
    if pressures.is_empty() || is_critical(pod) {
        return Ok(());
    }
    if pressures == [Pressure::Memory] {
        let empty = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        if pod_qos(spec) != QosClass::BestEffort {
            return Ok(());
        }
        let taint = Taint {
            key: api::keys::TAINT_MEMORY_PRESSURE.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        let tolerations = spec.tolerations.as_deref().unwrap_or_default();
        if tolerations.iter().any(|t| api::scheduling::tolerates(t, &taint)) {
            return Ok(());
        }
    }
    Err(Rejection {
        reason: REASON.into(),
        message: format!(
            "The node had condition: [{}]. ",
            pressures.iter().map(|p| p.condition()).collect::<Vec<_>>().join(" ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut spec = serde_json::json!({"containers": [{"name": "c", "image": "i"}]});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn memory_pressure_turns_away_best_effort_pods_unless_they_tolerate_it() {
        let best_effort = pod(serde_json::json!({}));
        let burstable = pod(serde_json::json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"memory": "8Mi"}}}]}));
        let tolerating = pod(serde_json::json!({"tolerations": [{"key":
            "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}]}));
        let memory = [Pressure::Memory];
        assert_eq!(
            admit(&best_effort, &memory),
            Err(Rejection {
                reason: "Evicted".into(),
                message: "The node had condition: [MemoryPressure]. ".into()
            })
        );
        assert_eq!(admit(&burstable, &memory), Ok(()));
        assert_eq!(admit(&tolerating, &memory), Ok(()));
        assert_eq!(admit(&best_effort, &[]), Ok(()), "no pressure");
    }

    #[test]
    fn disk_or_pid_pressure_turns_away_every_pod_but_critical_ones() {
        let burstable = pod(serde_json::json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"memory": "8Mi"}}}]}));
        let both = [Pressure::Memory, Pressure::Disk];
        assert_eq!(
            admit(&burstable, &both).unwrap_err().message,
            "The node had condition: [MemoryPressure DiskPressure]. "
        );
        assert!(admit(&burstable, &[Pressure::Pid]).is_err());
        let critical = pod(serde_json::json!({"priority": 2_000_000_000}));
        assert_eq!(admit(&critical, &both), Ok(()));
        let mut mirror = pod(serde_json::json!({}));
        mirror.metadata.annotations =
            Some([(api::keys::CONFIG_MIRROR.to_string(), "h".to_string())].into());
        assert_eq!(admit(&mirror, &both), Ok(()));
    }
}
