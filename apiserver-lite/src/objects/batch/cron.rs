//! CronJobs: `ValidateCronJobCreate` and `ValidateCronJobUpdate`, schedules and time zones.

use api::cron::Schedule;
use api::validation::pod::validate_object_meta;
use api::validation::{ErrorList, FieldError, Path, validate_nonnegative};
use k8s_openapi::api::batch::v1::CronJob;

use super::spec::validate_job_spec;

/// A CronJob's Jobs are named `<cronjob>-<minutes since the epoch>` (11 more characters).
const MAX_CRON_JOB_NAME: usize = 52;

/// The time zone database the server reads: the host's (`/usr/share/zoneinfo`), else the copy
/// built into the binary, as Go's `time.LoadLocation` with `time/tzdata`.
pub fn time_zone(name: &str) -> Option<jiff::tz::TimeZone> {
    jiff::tz::db().get(name).ok()
}

/// `validateTimeZone`.
fn validate_time_zone(tz: &str, path: &Path, errs: &mut ErrorList) {
    if tz.is_empty() {
        errs.push(FieldError::invalid(path, tz, "timeZone must be nil or non-empty string"));
        return;
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.bytes().all(|c| c.is_ascii_alphanumeric() || b".-_+".contains(&c))
    };
    if !tz.split('/').all(part_ok) {
        errs.push(FieldError::invalid(path, tz, format!("unknown time zone {tz}")));
        return;
    }
    if tz.eq_ignore_ascii_case("Local") {
        errs.push(FieldError::invalid(
            path,
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if time_zone(tz).is_none() {
        errs.push(FieldError::invalid(path, tz, format!("unknown time zone {tz}")));
    }
}

/// Upstream's `ValidateCronJobCreate`, and with the stored CronJob, `ValidateCronJobUpdate`.
pub(crate) fn validate_cron_job(cj: &CronJob, old: Option<&CronJob>) -> ErrorList {
    let mut errs = validate_object_meta(&cj.metadata, &Path::root("metadata"));
    let empty = Default::default();
    let spec = cj.spec.as_ref().unwrap_or(&empty);
    let old_spec = old.and_then(|o| o.spec.as_ref());
    let path = Path::root("spec");
    let sp = path.child("schedule");
    if spec.schedule.is_empty() {
        errs.push(FieldError::required(&sp, ""));
    } else {
        if let Err(e) = Schedule::parse_with_zones(&spec.schedule, time_zone) {
            errs.push(FieldError::invalid(&sp, &spec.schedule, e.to_string()));
        }
        let tz_in_schedule = spec.schedule.contains("TZ");
        let allowed = old_spec.is_some_and(|o| o.schedule.contains("TZ"));
        if allowed && tz_in_schedule && spec.time_zone.is_some() {
            errs.push(FieldError::invalid(
                &sp,
                &spec.schedule,
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !allowed && tz_in_schedule {
            errs.push(FieldError::invalid(
                &sp,
                &spec.schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    if let Some(d) = spec.starting_deadline_seconds {
        validate_nonnegative(d, &path.child("startingDeadlineSeconds"), &mut errs);
    }
    if old_spec.is_none_or(|o| o.time_zone != spec.time_zone)
        && let Some(tz) = &spec.time_zone
    {
        validate_time_zone(tz, &path.child("timeZone"), &mut errs);
    }
    let cp = path.child("concurrencyPolicy");
    match spec.concurrency_policy.as_deref().unwrap_or_default() {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required(&cp, "")),
        other => errs.push(FieldError::not_supported(&cp, other, &["Allow", "Forbid", "Replace"])),
    }
    let jt = path.child("jobTemplate").child("spec");
    let job_spec = spec.job_template.spec.clone().unwrap_or_default();
    validate_job_spec(&job_spec, &jt, &mut errs);
    if let Some(s) = &job_spec.selector {
        let rendered = serde_json::to_value(s).unwrap_or_default();
        errs.push(FieldError::invalid(
            &jt.child("selector"),
            &rendered,
            "`selector` will be auto-generated",
        ));
    }
    if job_spec.manual_selector == Some(true) {
        errs.push(FieldError::not_supported(&jt.child("manualSelector"), true, &["nil", "false"]));
    }
    for (field, v) in [
        ("successfulJobsHistoryLimit", spec.successful_jobs_history_limit),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
    ] {
        if let Some(v) = v {
            validate_nonnegative(i64::from(v), &path.child(field), &mut errs);
        }
    }
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    if old.is_none() && name.len() > MAX_CRON_JOB_NAME {
        errs.push(FieldError::invalid(
            &Path::root("metadata").child("name"),
            name,
            format!("must be no more than {MAX_CRON_JOB_NAME} characters"),
        ));
    }
    errs
}
