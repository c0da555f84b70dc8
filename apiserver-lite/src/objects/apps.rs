//! Deployments, ReplicaSets and DaemonSets as upstream's apps/v1 defaults and strategies
//! treat them.

use std::collections::BTreeMap;

use api::keys::DAEMONSET_TEMPLATE_GENERATION;
use k8s_openapi::api::apps::v1::{
    DaemonSet, Deployment, ReplicaSet, RollingUpdateDaemonSet, RollingUpdateDeployment,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::default_template;

/// Upstream's `SetDefaults_Deployment`.
pub(super) fn default_deployment(d: &mut Deployment) {
    let spec = d.spec.get_or_insert_with(Default::default);
    spec.replicas.get_or_insert(1);
    let strategy = spec.strategy.get_or_insert_with(Default::default);
    let kind = strategy.type_.get_or_insert_with(|| "RollingUpdate".into());
    if kind == "RollingUpdate" {
        let ru = strategy.rolling_update.get_or_insert_with(RollingUpdateDeployment::default);
        ru.max_unavailable.get_or_insert_with(|| IntOrString::String("25%".into()));
        ru.max_surge.get_or_insert_with(|| IntOrString::String("25%".into()));
    }
    spec.revision_history_limit.get_or_insert(10);
    spec.progress_deadline_seconds.get_or_insert(600);
    default_template(&mut spec.template);
}

/// Upstream's `SetDefaults_ReplicaSet`.
pub(super) fn default_replica_set(rs: &mut ReplicaSet) {
    let spec = rs.spec.get_or_insert_with(Default::default);
    spec.replicas.get_or_insert(1);
    default_template(spec.template.get_or_insert_with(Default::default));
}

/// Upstream's `SetDefaults_DaemonSet`.
pub(super) fn default_daemon_set(ds: &mut DaemonSet) {
    let spec = ds.spec.get_or_insert_with(Default::default);
    let strategy = spec.update_strategy.get_or_insert_with(Default::default);
    let kind = strategy.type_.get_or_insert_with(|| "RollingUpdate".into());
    if kind == "RollingUpdate" {
        let ru = strategy.rolling_update.get_or_insert_with(RollingUpdateDaemonSet::default);
        ru.max_unavailable.get_or_insert(IntOrString::Int(1));
        ru.max_surge.get_or_insert(IntOrString::Int(0));
    }
    spec.revision_history_limit.get_or_insert(10);
    default_template(&mut spec.template);
}

/// A new DaemonSet has no status and template generation 1.
pub(super) fn prepare_daemon_set_create(ds: &mut DaemonSet) {
    ds.status = None;
    ds.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DAEMONSET_TEMPLATE_GENERATION.into(), "1".into());
}

/// The template generation goes up by one when the template changes, and only then.
pub(super) fn bump_template_generation(old: &Value, new: &mut Value) {
    let current = old["metadata"]["annotations"][DAEMONSET_TEMPLATE_GENERATION]
        .as_str()
        .and_then(|g| g.parse::<i64>().ok())
        .unwrap_or(0);
    let changed = old["spec"]["template"] != new["spec"]["template"];
    let generation = if changed { current + 1 } else { current };
    if generation == 0 {
        return;
    }
    if !new["metadata"]["annotations"].is_object() {
        new["metadata"]["annotations"] = json!({});
    }
    new["metadata"]["annotations"][DAEMONSET_TEMPLATE_GENERATION] = json!(generation.to_string());
}
