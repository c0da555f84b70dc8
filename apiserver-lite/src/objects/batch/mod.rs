//! Jobs and CronJobs as upstream's batch/v1 defaults, strategies and validation treat them.
//!
//! - this file: defaults, and what a Job's create sets (its generated selector and pod labels);
//! - [`job`]: a Job's validation, and what may change on update;
//! - [`spec`]: the rules a Job and a CronJob's job template share (completions, indexes, the
//!   failure and success policies, the pod template);
//! - [`status`]: the status transitions a controller may make;
//! - [`cron`]: CronJobs: schedules (parsed with [`api::cron`]) and time zones.

mod cron;
mod job;
mod spec;
mod status;

use std::collections::BTreeMap;

use api::keys::{JOB_CONTROLLER_UID, JOB_NAME, LEGACY_JOB_CONTROLLER_UID, LEGACY_JOB_NAME};
use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec, JobStatus, PodFailurePolicy};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::default_template;
pub use cron::time_zone;
pub(crate) use cron::validate_cron_job;
pub(crate) use job::validate_job;
pub(crate) use status::validate_job_status;

/// Upstream's `SetDefaults_Job` (and the pod template's defaults).
pub(crate) fn default_job(job: &mut Job) {
    let spec = job.spec.get_or_insert_with(Default::default);
    default_job_spec(spec);
    if let Some(labels) = spec.template.metadata.as_ref().and_then(|m| m.labels.clone())
        && job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty)
    {
        job.metadata.labels = Some(labels);
    }
}

fn default_job_spec(spec: &mut JobSpec) {
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    let backoff = if spec.backoff_limit_per_index.is_some() { i32::MAX } else { 6 };
    spec.backoff_limit.get_or_insert(backoff);
    spec.completion_mode.get_or_insert_with(|| "NonIndexed".into());
    spec.suspend.get_or_insert(false);
    default_pod_failure_policy(spec.pod_failure_policy.as_mut());
    let replacement =
        if spec.pod_failure_policy.is_some() { "Failed" } else { "TerminatingOrFailed" };
    spec.pod_replacement_policy.get_or_insert_with(|| replacement.into());
    spec.manual_selector.get_or_insert(false);
    default_template(&mut spec.template);
}

fn default_pod_failure_policy(policy: Option<&mut PodFailurePolicy>) {
    for rule in policy.into_iter().flat_map(|p| p.rules.iter_mut()) {
        for pattern in rule.on_pod_conditions.iter_mut().flatten() {
            pattern.status.get_or_insert_with(|| "True".into());
        }
    }
}

/// Upstream's `SetDefaults_CronJob`; the job template's pod spec is defaulted as a pod's, its
/// Job fields are not (the Jobs made from it get them).
pub(crate) fn default_cron_job(cj: &mut CronJob) {
    let spec = cj.spec.get_or_insert_with(Default::default);
    spec.concurrency_policy.get_or_insert_with(|| "Allow".into());
    spec.suspend.get_or_insert(false);
    spec.successful_jobs_history_limit.get_or_insert(3);
    spec.failed_jobs_history_limit.get_or_insert(1);
    let job = spec.job_template.spec.get_or_insert_with(Default::default);
    default_pod_failure_policy(job.pod_failure_policy.as_mut());
    default_template(&mut job.template);
}

/// Upstream's `PrepareForCreate` for Jobs: no status, and unless the selector is manual, the
/// selector and pod labels that tie the Job's pods to its UID (the labels a user set are kept;
/// validation refuses conflicting ones).
pub(crate) fn prepare_job_create(job: &mut Job) {
    job.status = Some(JobStatus::default());
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let Some(spec) = job.spec.as_mut() else { return };
    if spec.manual_selector != Some(true) {
        let labels = spec
            .template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new);
        for key in [LEGACY_JOB_NAME, JOB_NAME] {
            labels.entry(key.into()).or_insert_with(|| name.clone());
        }
        for key in [LEGACY_JOB_CONTROLLER_UID, JOB_CONTROLLER_UID] {
            labels.entry(key.into()).or_insert_with(|| uid.clone());
        }
        let selector = spec.selector.get_or_insert_with(LabelSelector::default);
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .entry(JOB_CONTROLLER_UID.into())
            .or_insert(uid);
    }
    // Read back from storage upstream, the Job then carries its template's labels.
    default_job(job);
}

pub(crate) fn template_labels(t: &PodTemplateSpec) -> BTreeMap<String, String> {
    t.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default()
}
