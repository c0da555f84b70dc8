//! Pods: upstream's pod defaults, a Pending status with the QoS class on create, a spec that
//! changes only where upstream lets it, graceful deletion, and the pod field selectors.

use api::validation::ErrorList;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::{Deletion, Strategy};
use crate::errors::ApiError;
use crate::objects::{self, core, typed};
use crate::resources::ResourceType;
use crate::selectors::Source::{Bool, Str};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<Pod>(r, obj, core::default_pod),
    schema: Some(crate::openapi::schema_of::<Pod>),
    prepare_for_create: core::prepare_pod_create,
    validate,
    validate_update: |_, old, new| Ok(core::validate_pod_update(false, &typed(old)?, &typed(new)?)),
    validate_status_update: |_, old, new| {
        Ok(core::validate_pod_update(true, &typed(old)?, &typed(new)?))
    },
    fields: &[
        ("spec.nodeName", Str("spec.nodeName")),
        ("spec.restartPolicy", Str("spec.restartPolicy")),
        ("spec.schedulerName", Str("spec.schedulerName")),
        ("spec.serviceAccountName", Str("spec.serviceAccountName")),
        ("spec.hostNetwork", Bool("spec.hostNetwork")),
        ("status.phase", Str("status.phase")),
        ("status.podIP", Str("status.podIP")),
        ("status.nominatedNodeName", Str("status.nominatedNodeName")),
    ],
    printer: printers::pod,
    deletion: Deletion::Graceful(grace_period),
    returns_deleted_object: true,
    ..Strategy::PLAIN
};

fn validate(_: &ResourceType, obj: &Value) -> Result<ErrorList, ApiError> {
    let pod: Pod = typed(obj)?;
    Ok(api::validation::validate_pod(&pod).err().unwrap_or_default())
}

/// Pods' `CheckGracefulDelete`: the requested period, else the pod's own; zero for a pod on no
/// node or already finished. Negative periods count as one second.
fn grace_period(obj: &Value, requested: Option<i64>) -> i64 {
    let mut period =
        requested.or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64()).unwrap_or(0);
    let unscheduled = obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
    let finished = matches!(obj["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if unscheduled || finished {
        period = 0;
    }
    period
}
