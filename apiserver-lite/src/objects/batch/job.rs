//! A Job's validation (`ValidateJob`, `ValidateJobUpdate`): metadata, the generated selector,
//! the spec, and what may not change once created.

use std::collections::BTreeMap;

use api::keys::{JOB_CONTROLLER_UID, JOB_NAME, LEGACY_JOB_CONTROLLER_UID, LEGACY_JOB_NAME};
use api::validation::pod::validate_object_meta;
use api::validation::selector::{Selector, validate_label_selector};
use api::validation::{ErrorList, FieldError, Path, names, validate_immutable};
use k8s_openapi::api::batch::v1::{Job, JobSpec};

use super::spec::validate_job_spec;
use super::template_labels;

/// `ValidateHasLabel`.
fn has_label(labels: &BTreeMap<String, String>, key: &str, want: &str, errs: &mut ErrorList) {
    let path = Path::root("spec").child("template").child("metadata").child("labels").key(key);
    match labels.get(key) {
        None => errs.push(FieldError::required(&path, want)),
        Some(v) if v != want => {
            let rendered = serde_json::to_value(labels).unwrap_or_default();
            errs.push(FieldError::invalid(&path, &rendered, format!("must be '{want}'")));
        }
        Some(_) => {}
    }
}

/// `validateGeneratedSelector`: a generated selector must select the Job's own pods.
fn validate_generated_selector(job: &Job, require_prefixed: bool, errs: &mut ErrorList) {
    let Some(spec) = &job.spec else { return };
    if spec.manual_selector == Some(true) || spec.selector.is_none() {
        return;
    }
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    let name = job.metadata.name.as_deref().unwrap_or_default();
    if uid.is_empty() {
        errs.push(FieldError::required(&Path::root("metadata").child("uid"), ""));
    }
    let labels = template_labels(&spec.template);
    has_label(&labels, LEGACY_JOB_CONTROLLER_UID, uid, errs);
    has_label(&labels, LEGACY_JOB_NAME, name, errs);
    let mut expected = BTreeMap::new();
    if require_prefixed {
        has_label(&labels, JOB_CONTROLLER_UID, uid, errs);
        has_label(&labels, JOB_NAME, name, errs);
        expected.insert(JOB_CONTROLLER_UID.to_string(), uid.to_string());
        expected.insert(JOB_NAME.to_string(), name.to_string());
    }
    expected.insert(LEGACY_JOB_CONTROLLER_UID.to_string(), uid.to_string());
    expected.insert(LEGACY_JOB_NAME.to_string(), name.to_string());
    if let Ok(sel) = Selector::from_label_selector(spec.selector.as_ref())
        && !sel.matches(&expected)
    {
        let rendered = serde_json::to_value(&spec.selector).unwrap_or_default();
        errs.push(FieldError::invalid(
            &Path::root("spec").child("selector"),
            &rendered,
            "`selector` not auto-generated",
        ));
    }
}

/// Upstream's `ValidateJob`, and with the stored Job, `ValidateJobUpdate`.
pub(crate) fn validate_job(job: &Job, old: Option<&Job>) -> ErrorList {
    let mut errs = validate_object_meta(&job.metadata, &Path::root("metadata"));
    let empty = JobSpec::default();
    let spec = job.spec.as_ref().unwrap_or(&empty);
    // Jobs made before the prefixed labels existed keep validating without them.
    let require_prefixed = old.is_none_or(|o| {
        let labels = o.spec.as_ref().map(|s| template_labels(&s.template)).unwrap_or_default();
        labels.contains_key(JOB_NAME) && labels.contains_key(JOB_CONTROLLER_UID)
    });
    validate_generated_selector(job, require_prefixed, &mut errs);
    let path = Path::root("spec");
    validate_job_spec(spec, &path, &mut errs);
    match &spec.selector {
        None => errs.push(FieldError::required(&path.child("selector"), "")),
        Some(s) => errs.extend(validate_label_selector(Some(s), &path.child("selector"))),
    }
    if let Ok(sel) = Selector::from_label_selector(spec.selector.as_ref()) {
        let labels = template_labels(&spec.template);
        if !sel.matches(&labels) {
            let p = path.child("template").child("metadata").child("labels");
            let rendered = serde_json::to_value(
                spec.template.metadata.as_ref().and_then(|m| m.labels.clone()),
            )
            .unwrap_or_default();
            errs.push(FieldError::invalid(
                &p,
                &rendered,
                "`selector` does not match template `labels`",
            ));
        }
    }
    if spec.completion_mode.as_deref() == Some("Indexed")
        && let Some(c) = spec.completions.filter(|c| *c > 0)
    {
        let name = job.metadata.name.as_deref().unwrap_or_default();
        let hostname = format!("{name}-{}", c - 1);
        if !names::dns1123_label(&hostname).is_empty() {
            errs.push(FieldError::invalid(
                &Path::root("metadata").child("name"),
                name,
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
    if let Some(old) = old {
        let old_spec = old.spec.as_ref().unwrap_or(&empty);
        validate_job_spec_update(spec, old_spec, old, &path, &mut errs);
    }
    errs
}

fn validate_job_spec_update(
    spec: &JobSpec,
    old: &JobSpec,
    old_job: &Job,
    path: &Path,
    errs: &mut ErrorList,
) {
    // Elastic Indexed Jobs: completions may change together with parallelism.
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    if !indexed {
        validate_immutable(&spec.completions, &old.completions, &path.child("completions"), errs);
    } else if spec.completions != old.completions
        && let Some(c) = spec.completions
        && Some(c) != spec.parallelism
    {
        errs.push(FieldError::invalid(
            &path.child("completions"),
            c,
            "can only be modified in tandem with spec.parallelism",
        ));
    }
    validate_immutable(&spec.selector, &old.selector, &path.child("selector"), errs);
    // A suspended Job that never started may still change where its pods go.
    let mut old_template = old.template.clone();
    let suspended = old.suspend == Some(true);
    let started = old_job.status.as_ref().is_some_and(|s| s.start_time.is_some());
    if suspended && !started {
        let (new_spec, old_pod) = (
            spec.template.spec.clone().unwrap_or_default(),
            old_template.spec.get_or_insert_with(Default::default),
        );
        let node_affinity = new_spec.affinity.as_ref().and_then(|a| a.node_affinity.clone());
        match (new_spec.affinity.is_some(), old_pod.affinity.as_mut()) {
            (false, Some(a)) => {
                a.node_affinity = None;
                if *a == Default::default() {
                    old_pod.affinity = None;
                }
            }
            (true, None) => {
                old_pod.affinity = Some(k8s_openapi::api::core::v1::Affinity {
                    node_affinity,
                    ..Default::default()
                });
            }
            (true, Some(a)) => a.node_affinity = node_affinity,
            (false, None) => {}
        }
        old_pod.node_selector = new_spec.node_selector.clone();
        old_pod.tolerations = new_spec.tolerations.clone();
        old_pod.scheduling_gates = new_spec.scheduling_gates.clone();
        let new_meta = spec.template.metadata.clone().unwrap_or_default();
        let meta = old_template.metadata.get_or_insert_with(Default::default);
        meta.annotations = new_meta.annotations;
        meta.labels = new_meta.labels;
    }
    validate_immutable(&spec.template, &old_template, &path.child("template"), errs);
    for (field, new, old) in [
        ("completionMode", &spec.completion_mode, &old.completion_mode),
        ("managedBy", &spec.managed_by, &old.managed_by),
    ] {
        validate_immutable(new, old, &path.child(field), errs);
    }
    validate_immutable(
        &spec.pod_failure_policy,
        &old.pod_failure_policy,
        &path.child("podFailurePolicy"),
        errs,
    );
    validate_immutable(
        &spec.backoff_limit_per_index,
        &old.backoff_limit_per_index,
        &path.child("backoffLimitPerIndex"),
        errs,
    );
    validate_immutable(
        &spec.success_policy,
        &old.success_policy,
        &path.child("successPolicy"),
        errs,
    );
}
