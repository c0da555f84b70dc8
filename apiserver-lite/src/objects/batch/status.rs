//! `ValidateJobUpdateStatus` with the options upstream's strategy sets.

use api::validation::pod::validate_object_meta;
use api::validation::{ErrorList, FieldError, Path, validate_nonnegative};
use k8s_openapi::api::batch::v1::{Job, JobStatus};

fn condition_true(status: &JobStatus, kind: &str) -> bool {
    status.conditions.iter().flatten().any(|c| c.type_ == kind && c.status == "True")
}

/// Upstream's `ValidateJobUpdateStatus` with the options its strategy sets: counters never
/// below zero and never decreasing, terminal conditions that stay, and a finished Job whose
/// status is whole (start and completion times, no active pods, the condition it needs first).
pub(crate) fn validate_job_status(job: &Job, old: &Job) -> ErrorList {
    let mut errs = validate_object_meta(&job.metadata, &Path::root("metadata"));
    let (new, prev) =
        (job.status.clone().unwrap_or_default(), old.status.clone().unwrap_or_default());
    let spec = job.spec.clone().unwrap_or_default();
    let path = Path::root("status");
    for (field, v) in [
        ("active", new.active),
        ("succeeded", new.succeeded),
        ("failed", new.failed),
        ("ready", new.ready),
        ("terminating", new.terminating),
    ] {
        if let Some(v) = v {
            validate_nonnegative(i64::from(v), &path.child(field), &mut errs);
        }
    }
    let complete = |s: &JobStatus| condition_true(s, "Complete");
    let failed = |s: &JobStatus| condition_true(s, "Failed");
    let finished = |s: &JobStatus| complete(s) || failed(s);
    let finished_changed = finished(&new) != finished(&prev);
    let complete_changed = complete(&new) != complete(&prev);
    let failed_changed = failed(&new) != failed(&prev);
    let conditions = path.child("conditions");
    if (complete_changed || failed_changed) && complete(&new) && failed(&new) {
        errs.push(FieldError::invalid_omitted(
            &conditions,
            "cannot set Complete=True and Failed=true conditions",
        ));
    }
    let target_changed =
        condition_true(&new, "FailureTarget") != condition_true(&prev, "FailureTarget");
    if (complete_changed || target_changed)
        && complete(&new)
        && condition_true(&new, "FailureTarget")
    {
        errs.push(FieldError::invalid_omitted(
            &conditions,
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    let completion_changed = new.completion_time != prev.completion_time;
    let start_changed = new.start_time != prev.start_time;
    if (complete_changed || completion_changed) && new.completion_time.is_some() && !complete(&new)
    {
        let rendered = serde_json::to_value(&new.completion_time).unwrap_or_default();
        errs.push(FieldError::invalid(
            &path.child("completionTime"),
            &rendered,
            "cannot set completionTime when there is no Complete=True condition",
        ));
    }
    if complete_changed && new.completion_time.is_none() && complete(&new) {
        errs.push(FieldError::required(
            &path.child("completionTime"),
            "completionTime is required for Complete jobs",
        ));
    }
    if (start_changed || completion_changed)
        && let (Some(s), Some(c)) = (&new.start_time, &new.completion_time)
        && c.0 < s.0
    {
        let rendered = serde_json::to_value(&new.completion_time).unwrap_or_default();
        errs.push(FieldError::invalid(
            &path.child("completionTime"),
            &rendered,
            "completionTime cannot be set before startTime",
        ));
    }
    if failed_changed && failed(&new) && !condition_true(&new, "FailureTarget") {
        errs.push(FieldError::invalid_omitted(
            &conditions,
            "cannot set Failed=True condition without the FailureTarget=true condition",
        ));
    }
    if complete_changed && complete(&new) && !condition_true(&new, "SuccessCriteriaMet") {
        errs.push(FieldError::invalid_omitted(
            &conditions,
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        ));
    }
    let active = new.active.unwrap_or(0);
    if (finished_changed || active != prev.active.unwrap_or(0)) && active > 0 && finished(&new) {
        errs.push(FieldError::invalid(
            &path.child("active"),
            active,
            "active>0 is invalid for finished job",
        ));
    }
    let suspended_with_zero = spec.suspend == Some(true) && spec.completions == Some(0);
    if (finished_changed || start_changed)
        && !suspended_with_zero
        && new.start_time.is_none()
        && finished(&new)
    {
        errs.push(FieldError::required(
            &path.child("startTime"),
            "startTime is required for finished job",
        ));
    }
    let uncounted = new.uncounted_terminated_pods.as_ref().map_or(0, |u| {
        u.succeeded.as_ref().map_or(0, Vec::len) + u.failed.as_ref().map_or(0, Vec::len)
    });
    if (finished_changed || new.uncounted_terminated_pods != prev.uncounted_terminated_pods)
        && finished(&new)
        && uncounted > 0
    {
        let rendered = serde_json::to_value(&new.uncounted_terminated_pods).unwrap_or_default();
        errs.push(FieldError::invalid(
            &path.child("uncountedTerminatedPods"),
            &rendered,
            "uncountedTerminatedPods needs to be empty for finished job",
        ));
    }
    let terminating = new.terminating.unwrap_or(0);
    if (finished_changed || new.terminating != prev.terminating)
        && terminating > 0
        && finished(&new)
    {
        errs.push(FieldError::invalid(
            &path.child("terminating"),
            terminating,
            "terminating>0 is invalid for finished job",
        ));
    }
    if (new.ready != prev.ready || new.active != prev.active)
        && let Some(ready) = new.ready.filter(|r| *r > active)
    {
        errs.push(FieldError::invalid(
            &path.child("ready"),
            ready,
            "cannot set more ready pods than active",
        ));
    }
    for kind in ["Failed", "Complete", "FailureTarget"] {
        if condition_true(&prev, kind) && !condition_true(&new, kind) {
            errs.push(FieldError::invalid_omitted(
                &conditions,
                format!("cannot disable the terminal {kind}=True condition"),
            ));
        }
    }
    if new.failed.unwrap_or(0) < prev.failed.unwrap_or(0) {
        errs.push(FieldError::invalid(
            &path.child("failed"),
            new.failed.unwrap_or(0),
            "cannot decrease the failed counter",
        ));
    }
    let scalable =
        spec.completion_mode.as_deref() == Some("Indexed") && spec.completions == spec.parallelism;
    if !scalable && new.succeeded.unwrap_or(0) < prev.succeeded.unwrap_or(0) {
        errs.push(FieldError::invalid(
            &path.child("succeeded"),
            new.succeeded.unwrap_or(0),
            "cannot decrease the succeeded counter",
        ));
    }
    if let (Some(n), Some(o)) = (&new.completion_time, &prev.completion_time)
        && n != o
    {
        let rendered = serde_json::to_value(&new.completion_time).unwrap_or_default();
        errs.push(FieldError::invalid(
            &path.child("completionTime"),
            &rendered,
            "completionTime cannot be mutated",
        ));
    }
    if prev.start_time.is_some() && new.start_time != prev.start_time && spec.suspend != Some(true)
    {
        errs.push(FieldError::required(
            &path.child("startTime"),
            "startTime cannot be removed for unsuspended job",
        ));
    }
    if condition_true(&prev, "SuccessCriteriaMet") && !condition_true(&new, "SuccessCriteriaMet") {
        errs.push(FieldError::invalid_omitted(
            &conditions,
            "cannot disable the SuccessCriteriaMet=True condition",
        ));
    }
    errs
}
