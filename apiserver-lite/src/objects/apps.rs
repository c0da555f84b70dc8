//! Deployments, ReplicaSets and DaemonSets as upstream's apps/v1 defaults, strategies and
//! validation treat them: a selector that is required, non-empty, matches the template and
//! never changes; rolling-update parameters as integers or percentages; the template rules a
//! workload that restarts its pods forever needs; and status counters that add up.
//!
//! A selector sent as `{}` cannot be told from a missing one once decoded (the typed field is
//! not optional), so both are answered `Required value`.

use std::collections::BTreeMap;

use api::keys::DAEMONSET_TEMPLATE_GENERATION;
use api::validation::pod::{validate_object_meta, validate_pod_template_spec};
use api::validation::selector::{Selector, validate_label_selector};
use api::validation::{ErrorList, FieldError, Path, validate_immutable, validate_nonnegative};
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetStatus, Deployment, DeploymentStatus, ReplicaSet, RollingUpdateDaemonSet,
    RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::default_template;

/// Upstream's `SetDefaults_Deployment`.
pub(crate) fn default_deployment(d: &mut Deployment) {
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
pub(crate) fn default_replica_set(rs: &mut ReplicaSet) {
    let spec = rs.spec.get_or_insert_with(Default::default);
    spec.replicas.get_or_insert(1);
    default_template(spec.template.get_or_insert_with(Default::default));
}

/// Upstream's `SetDefaults_DaemonSet`.
pub(crate) fn default_daemon_set(ds: &mut DaemonSet) {
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
pub(crate) fn prepare_daemon_set_create(ds: &mut DaemonSet) {
    ds.status = None;
    ds.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DAEMONSET_TEMPLATE_GENERATION.into(), "1".into());
}

/// The template generation goes up by one when the template changes, and only then.
pub(crate) fn bump_template_generation(old: &Value, new: &mut Value) {
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

fn labels_of(t: &PodTemplateSpec) -> BTreeMap<String, String> {
    t.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default()
}

fn is_unset(s: &LabelSelector) -> bool {
    s.match_labels.is_none() && s.match_expressions.is_none()
}

/// The selector rules the three kinds share: required, valid, non-empty, matching the
/// template's labels; the selector it converts to, if it does.
fn validate_selector(
    selector: &LabelSelector,
    template: &PodTemplateSpec,
    kind: &str,
    spec: &Path,
    errs: &mut ErrorList,
) {
    let path = spec.child("selector");
    let given = if is_unset(selector) {
        errs.push(FieldError::required(&path, ""));
        None
    } else {
        errs.extend(validate_label_selector(Some(selector), &path));
        let count = selector.match_labels.as_ref().map_or(0, BTreeMap::len)
            + selector.match_expressions.as_ref().map_or(0, Vec::len);
        if count == 0 {
            let rendered = serde_json::to_value(selector).unwrap_or_default();
            errs.push(FieldError::invalid(
                &path,
                &rendered,
                format!("empty selector is invalid for {kind}"),
            ));
        }
        Some(selector)
    };
    match Selector::from_label_selector(given) {
        Err(_) => {
            let rendered = serde_json::to_value(selector).unwrap_or_default();
            errs.push(FieldError::invalid(&path, &rendered, "invalid label selector"));
        }
        Ok(sel) if !sel.is_empty() && !sel.matches(&labels_of(template)) => {
            let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
            let rendered = serde_json::to_value(labels).unwrap_or_default();
            errs.push(FieldError::invalid(
                &spec.child("template").child("metadata").child("labels"),
                &rendered,
                "`selector` does not match template `labels`",
            ));
        }
        Ok(_) => {}
    }
}

/// `ValidatePodTemplateSpecForReplicaSet` minus the selector: the template's rules, restarting
/// `Always`, no `activeDeadlineSeconds`.
fn validate_template(template: &PodTemplateSpec, kind: &str, path: &Path, errs: &mut ErrorList) {
    errs.extend(validate_pod_template_spec(template, path));
    let pod = template.spec.clone().unwrap_or_default();
    let restart = pod.restart_policy.as_deref().unwrap_or_default();
    if restart != "Always" {
        errs.push(FieldError::not_supported(
            &path.child("spec").child("restartPolicy"),
            restart,
            &["Always"],
        ));
    }
    if pod.active_deadline_seconds.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("spec").child("activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

fn nonnegative(v: Option<i32>, path: &Path, errs: &mut ErrorList) {
    validate_nonnegative(i64::from(v.unwrap_or(0)), path, errs);
}

/// `IsValidPercent`'s message.
const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

fn percent(s: &str) -> Option<i64> {
    let digits = s.strip_suffix('%')?;
    (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()))
        .then(|| digits.parse().unwrap_or(i64::MAX))
}

/// The number an int-or-percent stands for, as upstream's `getIntOrPercentValue` reads it.
fn int_or_percent(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(i) => i64::from(*i),
        IntOrString::String(s) => percent(s).unwrap_or(0),
    }
}

fn render(v: &IntOrString) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent` (when `cap`).
fn validate_int_or_percent(v: &IntOrString, cap: bool, path: &Path, errs: &mut ErrorList) {
    match v {
        IntOrString::String(s) => match percent(s) {
            None => errs.push(FieldError::invalid(path, &render(v), PERCENT_MSG)),
            Some(p) if cap && p > 100 => {
                errs.push(FieldError::invalid(path, &render(v), "must not be greater than 100%"));
            }
            Some(_) => {}
        },
        IntOrString::Int(i) => validate_nonnegative(i64::from(*i), path, errs),
    }
}

/// Upstream's `ValidateDeployment`, and with the stored one, `ValidateDeploymentUpdate` and
/// the selector's immutability.
pub(crate) fn validate_deployment(d: &Deployment, old: Option<&Deployment>) -> ErrorList {
    let mut errs = validate_object_meta(&d.metadata, &Path::root("metadata"));
    let spec = d.spec.clone().unwrap_or_default();
    let path = Path::root("spec");
    nonnegative(spec.replicas, &path.child("replicas"), &mut errs);
    validate_selector(&spec.selector, &spec.template, "deployment", &path, &mut errs);
    validate_template(&spec.template, "ReplicaSet", &path.child("template"), &mut errs);
    let strategy = spec.strategy.clone().unwrap_or_default();
    let sp = path.child("strategy");
    match strategy.type_.as_deref().unwrap_or_default() {
        "Recreate" => {
            if strategy.rolling_update.is_some() {
                errs.push(FieldError::forbidden(
                    &sp.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match &strategy.rolling_update {
            None => errs.push(FieldError::required(
                &sp.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
            Some(ru) => {
                let rp = sp.child("rollingUpdate");
                let zero = IntOrString::Int(0);
                let unavailable = ru.max_unavailable.as_ref().unwrap_or(&zero);
                let surge = ru.max_surge.as_ref().unwrap_or(&zero);
                validate_int_or_percent(unavailable, false, &rp.child("maxUnavailable"), &mut errs);
                validate_int_or_percent(surge, false, &rp.child("maxSurge"), &mut errs);
                if int_or_percent(unavailable) == 0 && int_or_percent(surge) == 0 {
                    errs.push(FieldError::invalid(
                        &rp.child("maxUnavailable"),
                        &render(unavailable),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
                if let IntOrString::String(s) = unavailable
                    && percent(s).is_some_and(|p| p > 100)
                {
                    errs.push(FieldError::invalid(
                        &rp.child("maxUnavailable"),
                        &render(unavailable),
                        "must not be greater than 100%",
                    ));
                }
            }
        },
        _ => {
            let rendered = serde_json::to_value(&strategy).unwrap_or_default();
            errs.push(FieldError::not_supported(&sp, &rendered, &["Recreate", "RollingUpdate"]));
        }
    }
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    nonnegative(spec.min_ready_seconds, &path.child("minReadySeconds"), &mut errs);
    if let Some(limit) = spec.revision_history_limit {
        validate_nonnegative(i64::from(limit), &path.child("revisionHistoryLimit"), &mut errs);
    }
    if let Some(deadline) = spec.progress_deadline_seconds {
        let dp = path.child("progressDeadlineSeconds");
        validate_nonnegative(i64::from(deadline), &dp, &mut errs);
        if deadline <= min_ready {
            errs.push(FieldError::invalid(&dp, deadline, "must be greater than minReadySeconds"));
        }
    }
    if let Some(old) = old {
        let old_selector = old.spec.as_ref().map(|s| &s.selector);
        validate_immutable(
            &Some(&spec.selector),
            &old_selector,
            &path.child("selector"),
            &mut errs,
        );
    }
    errs
}

/// Upstream's `ValidateReplicaSet` (and on update, the selector's immutability).
pub(crate) fn validate_replica_set(rs: &ReplicaSet, old: Option<&ReplicaSet>) -> ErrorList {
    let mut errs = validate_object_meta(&rs.metadata, &Path::root("metadata"));
    let spec = rs.spec.clone().unwrap_or_default();
    let path = Path::root("spec");
    nonnegative(spec.replicas, &path.child("replicas"), &mut errs);
    nonnegative(spec.min_ready_seconds, &path.child("minReadySeconds"), &mut errs);
    let template = spec.template.clone().unwrap_or_default();
    // Upstream's message names deployments here too.
    validate_selector(&spec.selector, &template, "deployment", &path, &mut errs);
    validate_template(&template, "ReplicaSet", &path.child("template"), &mut errs);
    if let Some(old) = old {
        let old_selector = old.spec.as_ref().map(|s| &s.selector);
        validate_immutable(
            &Some(&spec.selector),
            &old_selector,
            &path.child("selector"),
            &mut errs,
        );
    }
    errs
}

/// Upstream's `ValidateDaemonSet` (and on update, the selector's immutability).
pub(crate) fn validate_daemon_set(ds: &DaemonSet, old: Option<&DaemonSet>) -> ErrorList {
    let mut errs = validate_object_meta(&ds.metadata, &Path::root("metadata"));
    let spec = ds.spec.clone().unwrap_or_default();
    let path = Path::root("spec");
    validate_selector(&spec.selector, &spec.template, "daemonset", &path, &mut errs);
    validate_template(&spec.template, "DaemonSet", &path.child("template"), &mut errs);
    nonnegative(spec.min_ready_seconds, &path.child("minReadySeconds"), &mut errs);
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let sp = path.child("updateStrategy");
    match strategy.type_.as_deref().unwrap_or_default() {
        "OnDelete" => {}
        "RollingUpdate" => match &strategy.rolling_update {
            None => errs.push(FieldError::required(&sp.child("rollingUpdate"), "")),
            Some(ru) => {
                let rp = sp.child("rollingUpdate");
                let zero = IntOrString::Int(0);
                let unavailable = ru.max_unavailable.as_ref().unwrap_or(&zero);
                let surge = ru.max_surge.as_ref().unwrap_or(&zero);
                validate_int_or_percent(unavailable, true, &rp.child("maxUnavailable"), &mut errs);
                validate_int_or_percent(surge, true, &rp.child("maxSurge"), &mut errs);
                match (int_or_percent(unavailable) != 0, int_or_percent(surge) != 0) {
                    (true, true) => errs.push(FieldError::invalid(
                        &rp.child("maxSurge"),
                        &render(surge),
                        "may not be set when maxUnavailable is non-zero",
                    )),
                    (false, false) => errs.push(FieldError::required(
                        &rp.child("maxUnavailable"),
                        "cannot be 0 when maxSurge is 0",
                    )),
                    _ => {}
                }
            }
        },
        _ => {
            let rendered = serde_json::to_value(&strategy).unwrap_or_default();
            errs.push(FieldError::not_supported(&sp, &rendered, &["RollingUpdate", "OnDelete"]));
        }
    }
    if let Some(limit) = spec.revision_history_limit {
        validate_nonnegative(i64::from(limit), &path.child("revisionHistoryLimit"), &mut errs);
    }
    if let Some(old) = old {
        let old_selector = old.spec.as_ref().map(|s| &s.selector);
        validate_immutable(
            &Some(&spec.selector),
            &old_selector,
            &path.child("selector"),
            &mut errs,
        );
    }
    errs
}

fn counters(values: &[(&str, Option<i64>)], path: &Path, errs: &mut ErrorList) {
    for (field, v) in values {
        validate_nonnegative(v.unwrap_or(0), &path.child(field), errs);
    }
}

/// The "cannot be greater than" rules Deployment and ReplicaSet statuses share.
fn not_above(v: i64, field: &str, max: i64, what: &str, path: &Path, errs: &mut ErrorList) {
    if v > max {
        errs.push(FieldError::invalid(
            &path.child(field),
            v,
            format!("cannot be greater than {what}"),
        ));
    }
}

fn collision_not_decremented(new: Option<i32>, old: Option<i32>, errs: &mut ErrorList) {
    if let Some(o) = old
        && new.is_none_or(|n| n < o)
    {
        errs.push(FieldError::invalid(
            &Path::root("status").child("collisionCount"),
            new.unwrap_or(0),
            "cannot be decremented",
        ));
    }
}

/// Upstream's `ValidateDeploymentStatusUpdate`.
pub(crate) fn validate_deployment_status(d: &Deployment, old: &Deployment) -> ErrorList {
    let mut errs = validate_object_meta(&d.metadata, &Path::root("metadata"));
    let s: DeploymentStatus = d.status.clone().unwrap_or_default();
    let path = Path::root("status");
    let n = |v: Option<i32>| i64::from(v.unwrap_or(0));
    counters(
        &[
            ("observedGeneration", s.observed_generation),
            ("replicas", Some(n(s.replicas))),
            ("updatedReplicas", Some(n(s.updated_replicas))),
            ("readyReplicas", Some(n(s.ready_replicas))),
            ("availableReplicas", Some(n(s.available_replicas))),
            ("unavailableReplicas", Some(n(s.unavailable_replicas))),
            ("collisionCount", Some(n(s.collision_count))),
        ],
        &path,
        &mut errs,
    );
    let replicas = n(s.replicas);
    let total = "status.replicas";
    not_above(n(s.updated_replicas), "updatedReplicas", replicas, total, &path, &mut errs);
    not_above(n(s.ready_replicas), "readyReplicas", replicas, total, &path, &mut errs);
    not_above(n(s.available_replicas), "availableReplicas", replicas, total, &path, &mut errs);
    let ready = n(s.ready_replicas);
    not_above(
        n(s.available_replicas),
        "availableReplicas",
        ready,
        "readyReplicas",
        &path,
        &mut errs,
    );
    let old_count = old.status.as_ref().and_then(|s| s.collision_count);
    collision_not_decremented(s.collision_count, old_count, &mut errs);
    errs
}

/// Upstream's `ValidateReplicaSetStatusUpdate`.
pub(crate) fn validate_replica_set_status(rs: &ReplicaSet) -> ErrorList {
    let mut errs = validate_object_meta(&rs.metadata, &Path::root("metadata"));
    let s = rs.status.clone().unwrap_or_default();
    let path = Path::root("status");
    let n = |v: Option<i32>| i64::from(v.unwrap_or(0));
    let replicas = i64::from(s.replicas);
    counters(
        &[
            ("replicas", Some(replicas)),
            ("fullyLabeledReplicas", Some(n(s.fully_labeled_replicas))),
            ("readyReplicas", Some(n(s.ready_replicas))),
            ("availableReplicas", Some(n(s.available_replicas))),
            ("observedGeneration", s.observed_generation),
        ],
        &path,
        &mut errs,
    );
    let total = "status.replicas";
    not_above(
        n(s.fully_labeled_replicas),
        "fullyLabeledReplicas",
        replicas,
        total,
        &path,
        &mut errs,
    );
    not_above(n(s.ready_replicas), "readyReplicas", replicas, total, &path, &mut errs);
    not_above(n(s.available_replicas), "availableReplicas", replicas, total, &path, &mut errs);
    let ready = n(s.ready_replicas);
    not_above(
        n(s.available_replicas),
        "availableReplicas",
        ready,
        "readyReplicas",
        &path,
        &mut errs,
    );
    errs
}

/// Upstream's `ValidateDaemonSetStatusUpdate`.
pub(crate) fn validate_daemon_set_status(ds: &DaemonSet, old: &DaemonSet) -> ErrorList {
    let mut errs = validate_object_meta(&ds.metadata, &Path::root("metadata"));
    let s: DaemonSetStatus = ds.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| i64::from(v.unwrap_or(0));
    counters(
        &[
            ("currentNumberScheduled", Some(i64::from(s.current_number_scheduled))),
            ("numberMisscheduled", Some(i64::from(s.number_misscheduled))),
            ("desiredNumberScheduled", Some(i64::from(s.desired_number_scheduled))),
            ("numberReady", Some(i64::from(s.number_ready))),
            ("observedGeneration", s.observed_generation),
            ("updatedNumberScheduled", Some(n(s.updated_number_scheduled))),
            ("numberAvailable", Some(n(s.number_available))),
            ("numberUnavailable", Some(n(s.number_unavailable))),
            ("collisionCount", Some(n(s.collision_count))),
        ],
        &Path::root("status"),
        &mut errs,
    );
    let old_count = old.status.as_ref().and_then(|s| s.collision_count);
    collision_not_decremented(s.collision_count, old_count, &mut errs);
    errs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn deployment(spec: Value) -> Deployment {
        let mut d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}
        }))
        .unwrap();
        let extra: Deployment = serde_json::from_value(json!({"spec": spec})).unwrap();
        let (base, more) = (d.spec.as_mut().unwrap(), extra.spec.unwrap());
        base.strategy = more.strategy.or(base.strategy.take());
        base.min_ready_seconds = more.min_ready_seconds;
        base.progress_deadline_seconds = more.progress_deadline_seconds;
        default_deployment(&mut d);
        d
    }

    fn messages(errs: ErrorList) -> Vec<String> {
        errs.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rolling_update_parameters_are_integers_or_percentages() {
        assert!(validate_deployment(&deployment(json!({})), None).is_empty());
        let bad = deployment(json!({"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "1.5%", "maxUnavailable": "150%"}}}));
        assert_eq!(
            messages(validate_deployment(&bad, None)),
            [
                format!("spec.strategy.rollingUpdate.maxSurge: Invalid value: \"1.5%\": {PERCENT_MSG}"),
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%".to_string(),
            ]
        );
        let recreate =
            deployment(json!({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}));
        assert_eq!(
            messages(validate_deployment(&recreate, None)),
            [
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
            ]
        );
        let slow = deployment(json!({"minReadySeconds": 600, "progressDeadlineSeconds": 600}));
        assert_eq!(
            messages(validate_deployment(&slow, None)),
            [
                "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds"
            ]
        );
    }

    #[test]
    fn a_daemon_set_surges_or_goes_unavailable_not_both() {
        let mut ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}},
                     "template": {"metadata": {"labels": {"app": "a"}},
                                  "spec": {"containers": [{"name": "c", "image": "x:1"}]}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 1}}}
        }))
        .unwrap();
        default_daemon_set(&mut ds);
        assert_eq!(
            messages(validate_daemon_set(&ds, None)),
            [
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"10%\": may not be set when maxUnavailable is non-zero"
            ]
        );
        let ru = ds
            .spec
            .as_mut()
            .unwrap()
            .update_strategy
            .as_mut()
            .unwrap()
            .rolling_update
            .as_mut()
            .unwrap();
        ru.max_surge = Some(IntOrString::Int(0));
        ru.max_unavailable = Some(IntOrString::String("0%".into()));
        assert_eq!(
            messages(validate_daemon_set(&ds, None)),
            [
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
            ]
        );
    }
}
