//! Pure rules on a node's conditions and the taints they imply, as upstream's
//! `tryUpdateNodeHealth` (conditions go `Unknown` when the kubelet stops posting) and
//! `doNoScheduleTaintingPass` / `doNoExecuteTaintingPass` (upstream's `TaintNodesByCondition`
//! and taint-based eviction).

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::daemon::util::{
    TAINT_DISK_PRESSURE, TAINT_MEMORY_PRESSURE, TAINT_NETWORK_UNAVAILABLE, TAINT_NOT_READY,
    TAINT_PID_PRESSURE, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE,
};

/// The conditions the controller sets `Unknown` (upstream's `nodeConditionsToUpdate` after
/// Ready).
const KUBELET_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

pub const REASON_UNKNOWN: &str = "NodeStatusUnknown";
pub const MESSAGE_UNKNOWN: &str = "Kubelet stopped posting node status.";
pub const REASON_NEVER: &str = "NodeStatusNeverUpdated";
pub const MESSAGE_NEVER: &str = "Kubelet never posted node status.";

/// A node's readiness as its Ready condition says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady,
    Unknown,
}

pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// `Unknown` also for a node that never posted a Ready condition, as upstream treats it.
pub fn readiness(node: &Node) -> Readiness {
    match condition(node, "Ready").map(|c| c.status.as_str()) {
        Some("True") => Readiness::Ready,
        Some("False") => Readiness::NotReady,
        _ => Readiness::Unknown,
    }
}

/// The Ready condition's `lastHeartbeatTime` (what a kubelet without a Lease renews).
pub fn heartbeat(node: &Node) -> Option<jiff::Timestamp> {
    condition(node, "Ready")?.last_heartbeat_time.as_ref().map(|t| t.0)
}

/// Sets the kubelet's conditions `Unknown` (added, as never updated, when missing); whether
/// anything changed. The heartbeat times stay: they are the kubelet's.
pub fn mark_unknown(node: &mut Node, now: jiff::Timestamp) -> bool {
    let created = node.metadata.creation_timestamp.clone();
    let conditions = node.status.get_or_insert_default().conditions.get_or_insert_default();
    let mut changed = false;
    for type_ in KUBELET_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some(REASON_UNKNOWN.into());
                c.message = Some(MESSAGE_UNKNOWN.into());
                c.last_transition_time = Some(Time(now));
                changed = true;
            }
            None => {
                conditions.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some(REASON_NEVER.into()),
                    message: Some(MESSAGE_NEVER.into()),
                    last_heartbeat_time: created.clone(),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
        }
    }
    changed
}

/// The `NoSchedule` taints the node's conditions call for (upstream's
/// `nodeConditionToTaintKeyStatusMap`, plus `unschedulable` for a cordoned node).
pub fn no_schedule_wanted(node: &Node) -> Vec<&'static str> {
    let is = |type_: &str, status: &str| condition(node, type_).is_some_and(|c| c.status == status);
    let mut keys = Vec::new();
    match readiness(node) {
        Readiness::NotReady => keys.push(TAINT_NOT_READY),
        Readiness::Unknown if condition(node, "Ready").is_some() => keys.push(TAINT_UNREACHABLE),
        _ => {}
    }
    for (type_, key) in [
        ("MemoryPressure", TAINT_MEMORY_PRESSURE),
        ("DiskPressure", TAINT_DISK_PRESSURE),
        ("PIDPressure", TAINT_PID_PRESSURE),
        ("NetworkUnavailable", TAINT_NETWORK_UNAVAILABLE),
    ] {
        if is(type_, "True") {
            keys.push(key);
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        keys.push(TAINT_UNSCHEDULABLE);
    }
    keys
}

/// The `NoExecute` taint a node's readiness calls for.
pub fn no_execute_wanted(r: Readiness) -> Option<&'static str> {
    match r {
        Readiness::Ready => None,
        Readiness::NotReady => Some(TAINT_NOT_READY),
        Readiness::Unknown => Some(TAINT_UNREACHABLE),
    }
}

const NO_SCHEDULE_KEYS: [&str; 7] = [
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    TAINT_MEMORY_PRESSURE,
    TAINT_DISK_PRESSURE,
    TAINT_PID_PRESSURE,
    TAINT_NETWORK_UNAVAILABLE,
    TAINT_UNSCHEDULABLE,
];

pub fn has_taint(node: &Node, key: &str, effect: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key && t.effect == effect))
}

/// Makes the controller's taints on `node` exactly `no_schedule` (`NoSchedule`) and
/// `no_execute` (`NoExecute`, only `not-ready`/`unreachable`); other taints stay. New taints
/// get `timeAdded`. Whether anything changed.
pub fn set_taints(
    node: &mut Node,
    no_schedule: &[&str],
    no_execute: Option<&str>,
    now: jiff::Timestamp,
) -> bool {
    let taints = node.spec.get_or_insert_default().taints.get_or_insert_default();
    let before = taints.clone();
    taints.retain(|t| match t.effect.as_str() {
        "NoSchedule" => {
            !NO_SCHEDULE_KEYS.contains(&t.key.as_str()) || no_schedule.contains(&t.key.as_str())
        }
        "NoExecute" => {
            !(t.key == TAINT_NOT_READY || t.key == TAINT_UNREACHABLE)
                || no_execute == Some(t.key.as_str())
        }
        _ => true,
    });
    let wanted =
        no_schedule.iter().map(|k| (*k, "NoSchedule")).chain(no_execute.map(|k| (k, "NoExecute")));
    for (key, effect) in wanted {
        if !taints.iter().any(|t| t.key == key && t.effect == effect) {
            taints.push(Taint {
                key: key.into(),
                effect: effect.into(),
                value: None,
                time_added: Some(Time(now)),
            });
        }
    }
    *taints != before
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};

    use super::*;

    fn node(conditions: &[(&str, &str)]) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| NodeCondition {
                            type_: (*t).into(),
                            status: (*s).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn unknown_marks_every_kubelet_condition_once() {
        let mut n = node(&[("Ready", "True"), ("MemoryPressure", "False")]);
        let now = jiff::Timestamp::UNIX_EPOCH;
        assert!(mark_unknown(&mut n, now));
        let ready = condition(&n, "Ready").cloned().unwrap_or_default();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref(), ready.message.as_deref()),
            ("Unknown", Some(REASON_UNKNOWN), Some(MESSAGE_UNKNOWN))
        );
        let pid = condition(&n, "PIDPressure").cloned().unwrap_or_default();
        assert_eq!(pid.reason.as_deref(), Some(REASON_NEVER));
        assert!(!mark_unknown(&mut n, now), "already unknown: nothing to write");
    }

    #[test]
    fn taints_follow_conditions_and_keep_foreign_ones() {
        let mut n = node(&[("Ready", "False"), ("DiskPressure", "True")]);
        n.spec = Some(NodeSpec {
            unschedulable: Some(true),
            taints: Some(vec![Taint {
                key: "mine".into(),
                effect: "NoExecute".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let wanted = no_schedule_wanted(&n);
        assert_eq!(wanted, [TAINT_NOT_READY, TAINT_DISK_PRESSURE, TAINT_UNSCHEDULABLE]);
        let now = jiff::Timestamp::UNIX_EPOCH;
        let no_execute = no_execute_wanted(readiness(&n));
        assert!(set_taints(&mut n, &wanted, no_execute, now));
        assert!(has_taint(&n, TAINT_NOT_READY, "NoExecute") && has_taint(&n, "mine", "NoExecute"));
        assert!(!set_taints(&mut n, &wanted, Some(TAINT_NOT_READY), now), "idempotent");
        assert!(set_taints(&mut n, &[], None, now));
        let keys: Vec<_> =
            n.spec.and_then(|s| s.taints).unwrap_or_default().into_iter().map(|t| t.key).collect();
        assert_eq!(keys, ["mine"]);
    }
}
