//! Core kinds' rules: pod defaults, a pod's initial status, what a pod update may change;
//! service defaults.

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use serde_json::{Value, json};

use crate::errors::ApiError;

/// Upstream's pod defaults, plus the priority its admission sets. The deprecated
/// `serviceAccount` names the account when `serviceAccountName` does not, as upstream's
/// conversion reads it (the `ServiceAccount` admission plugin fills in `default`).
pub(crate) fn default_pod(pod: &mut Pod) {
    api::defaults::default_pod(pod);
    if let Some(spec) = pod.spec.as_mut() {
        if spec.service_account_name.as_deref().unwrap_or_default().is_empty()
            && let Some(old) = spec.service_account.clone().filter(|s| !s.is_empty())
        {
            spec.service_account_name = Some(old);
        }
        spec.priority.get_or_insert(0);
    }
}

pub(crate) fn default_service(obj: &mut Value) {
    super::set_default(obj, &["spec", "type"], json!("ClusterIP"));
    super::set_default(obj, &["spec", "sessionAffinity"], json!("None"));
    if let Some(ports) = obj["spec"]["ports"].as_array_mut() {
        for p in ports {
            if p["protocol"].is_null() {
                p["protocol"] = json!("TCP");
            }
            if p["targetPort"].is_null() {
                p["targetPort"] = p["port"].clone();
            }
        }
    }
}

/// A new pod is Pending, with its QoS class.
pub(crate) fn prepare_pod_create(obj: &mut Value) -> Result<(), ApiError> {
    let spec: PodSpec = serde::Deserialize::deserialize(&obj["spec"]).unwrap_or_default();
    obj["status"] = json!({ "phase": "Pending", "qosClass": api::qos::pod_qos(&spec).as_str() });
    Ok(())
}

/// Upstream's `ValidatePodUpdate`: the pod's own rules, and a spec that may change only in
/// container images, `activeDeadlineSeconds`, added tolerations and
/// `terminationGracePeriodSeconds` (and `nodeName` once, by a binding).
pub(crate) fn validate_pod_update(status: bool, old: &Pod, new: &Pod) -> ErrorList {
    let mut errs = api::validation::validate_pod(new).err().unwrap_or_default();
    if status {
        return errs;
    }
    let strip = |spec: &Option<PodSpec>| {
        let mut s = spec.clone().unwrap_or_default();
        for c in s.containers.iter_mut().chain(s.init_containers.iter_mut().flatten()) {
            c.image = None;
        }
        s.active_deadline_seconds = None;
        s.tolerations = None;
        s.termination_grace_period_seconds = None;
        // The scheduler's binding sets nodeName once.
        if old.spec.as_ref().is_none_or(|o| o.node_name.is_none()) {
            s.node_name = None;
        }
        s
    };
    if strip(&old.spec) != strip(&new.spec) {
        errs.push(FieldError::forbidden(
            &Path::root("spec"),
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
    errs
}
