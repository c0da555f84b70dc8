//! The `apps/v1` kinds: Deployment (`kubectl create deployment`), ReplicaSet, DaemonSet (spec,
//! update strategy and status) and ControllerRevision.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use super::meta::{int_or_string, label_selector, object_meta, time};
use super::pod::pod_template;
use super::{R, done, flag, list, nested, number, obj, plain, ptr};
use crate::errors::ApiError;

use std::mem::take;

pub(super) fn deployment(mut d: apps::Deployment) -> R {
    let spec = nested(d.spec.take(), |mut s| {
        let strategy = nested(s.strategy.take(), |mut st| {
            let ru = nested(st.rolling_update.take(), |mut r| {
                Ok(obj([
                    ("maxUnavailable", int_or_string(r.max_unavailable.take())),
                    ("maxSurge", int_or_string(r.max_surge.take())),
                ]))
            })?;
            let v = obj([("type", plain(st.r#type.take())), ("rollingUpdate", ru)]);
            done(&st, "DeploymentStrategy")?;
            Ok(v)
        })?;
        let v = obj([
            ("replicas", ptr(s.replicas.take())),
            ("selector", label_selector(s.selector.take())?),
            ("template", pod_template(s.template.take())?),
            ("strategy", strategy),
            ("minReadySeconds", number(s.min_ready_seconds.take())),
            ("revisionHistoryLimit", ptr(s.revision_history_limit.take())),
            ("paused", flag(s.paused.take())),
            ("progressDeadlineSeconds", ptr(s.progress_deadline_seconds.take())),
        ]);
        done(&s, "DeploymentSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(d.metadata.take())?), ("spec", spec)]);
    d.status = None;
    done(&d, "Deployment")?;
    Ok(v)
}

/// A workload condition (`ReplicaSetCondition`, `DaemonSetCondition`: the same five fields).
fn condition(
    kind: Option<String>,
    status: Option<String>,
    last_transition_time: Option<meta::Time>,
    reason: Option<String>,
    message: Option<String>,
) -> Value {
    obj([
        ("type", plain(kind)),
        ("status", plain(status)),
        ("lastTransitionTime", time(last_transition_time)),
        ("reason", plain(reason)),
        ("message", plain(message)),
    ])
}

/// A ReplicaSet with its status: a create resets it (the JSON path does the same), a write of
/// the `status` subresource keeps it.
pub(super) fn replica_set(mut r: apps::ReplicaSet) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let v = obj([
            ("replicas", ptr(s.replicas.take())),
            ("minReadySeconds", number(s.min_ready_seconds.take())),
            ("selector", label_selector(s.selector.take())?),
            ("template", pod_template(s.template.take())?),
        ]);
        done(&s, "ReplicaSetSpec")?;
        Ok(v)
    })?;
    let status = nested(r.status.take(), |mut s| {
        let conditions = list(take(&mut s.conditions), |mut c| {
            let v = condition(
                c.r#type.take(),
                c.status.take(),
                c.last_transition_time.take(),
                c.reason.take(),
                c.message.take(),
            );
            done(&c, "ReplicaSetCondition")?;
            Ok(v)
        })?;
        let v = obj([
            // Required: Go writes it even when zero.
            ("replicas", ptr(s.replicas.take())),
            ("fullyLabeledReplicas", number(s.fully_labeled_replicas.take())),
            ("readyReplicas", number(s.ready_replicas.take())),
            ("availableReplicas", number(s.available_replicas.take())),
            ("terminatingReplicas", ptr(s.terminating_replicas.take())),
            ("observedGeneration", number(s.observed_generation.take())),
            ("conditions", conditions),
        ]);
        done(&s, "ReplicaSetStatus")?;
        Ok(v)
    })?;
    let v =
        obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec), ("status", status)]);
    done(&r, "ReplicaSet")?;
    Ok(v)
}

/// A DaemonSet with its update strategy and status (kept as for a ReplicaSet).
pub(super) fn daemon_set(mut d: apps::DaemonSet) -> R {
    let spec = nested(d.spec.take(), |mut s| {
        let strategy = nested(s.update_strategy.take(), |mut st| {
            let rolling = nested(st.rolling_update.take(), |mut r| {
                let v = obj([
                    ("maxUnavailable", int_or_string(r.max_unavailable.take())),
                    ("maxSurge", int_or_string(r.max_surge.take())),
                ]);
                done(&r, "RollingUpdateDaemonSet")?;
                Ok(v)
            })?;
            let v = obj([("type", plain(st.r#type.take())), ("rollingUpdate", rolling)]);
            done(&st, "DaemonSetUpdateStrategy")?;
            Ok(v)
        })?;
        let v = obj([
            ("selector", label_selector(s.selector.take())?),
            ("template", pod_template(s.template.take())?),
            ("updateStrategy", strategy),
            ("minReadySeconds", number(s.min_ready_seconds.take())),
            ("revisionHistoryLimit", ptr(s.revision_history_limit.take())),
        ]);
        done(&s, "DaemonSetSpec")?;
        Ok(v)
    })?;
    let status = nested(d.status.take(), |mut s| {
        let conditions = list(take(&mut s.conditions), |mut c| {
            let v = condition(
                c.r#type.take(),
                c.status.take(),
                c.last_transition_time.take(),
                c.reason.take(),
                c.message.take(),
            );
            done(&c, "DaemonSetCondition")?;
            Ok(v)
        })?;
        let v = obj([
            // The four counts Go always writes.
            ("currentNumberScheduled", ptr(s.current_number_scheduled.take())),
            ("numberMisscheduled", ptr(s.number_misscheduled.take())),
            ("desiredNumberScheduled", ptr(s.desired_number_scheduled.take())),
            ("numberReady", ptr(s.number_ready.take())),
            ("observedGeneration", number(s.observed_generation.take())),
            ("updatedNumberScheduled", number(s.updated_number_scheduled.take())),
            ("numberAvailable", number(s.number_available.take())),
            ("numberUnavailable", number(s.number_unavailable.take())),
            ("collisionCount", ptr(s.collision_count.take())),
            ("conditions", conditions),
        ]);
        done(&s, "DaemonSetStatus")?;
        Ok(v)
    })?;
    let v =
        obj([("metadata", object_meta(d.metadata.take())?), ("spec", spec), ("status", status)]);
    done(&d, "DaemonSet")?;
    Ok(v)
}

/// A ControllerRevision: `data` is a `runtime.RawExtension` whose bytes are JSON (what the
/// DaemonSet and StatefulSet controllers store); bytes that are not JSON are refused.
pub(super) fn controller_revision(mut c: apps::ControllerRevision) -> R {
    let data = nested(c.data.take(), |mut d| {
        let raw = d.raw.take().unwrap_or_default();
        done(&d, "RawExtension")?;
        if raw.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&raw).map_err(|e| {
            ApiError::bad_request(format!(
                "the protobuf ControllerRevision's data is not JSON (only JSON data is read): {e}"
            ))
        })
    })?;
    let v = obj([
        ("metadata", object_meta(c.metadata.take())?),
        ("data", data),
        // Required: Go writes it even when zero.
        ("revision", ptr(c.revision.take())),
    ]);
    done(&c, "ControllerRevision")?;
    Ok(v)
}
