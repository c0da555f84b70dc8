//! The CronJob controller, as upstream's `pkg/controller/cronjob` (the v2 controller): creates
//! a Job at each scheduled time.
//!
//! A sync ([`CronJobController::sync`]): reconcile `status.active` with the Jobs it owns
//! (finished ones leave it, `lastSuccessfulTime` advances); delete finished Jobs beyond
//! `successfulJobsHistoryLimit`/`failedJobsHistoryLimit`; unless suspended or being deleted,
//! find the most recent due time ([`schedule`], in `timeZone`), skip it when past
//! `startingDeadlineSeconds` (`MissSchedule`), warn on more than 100 missed times
//! (`TooManyMissedTimes`), apply `concurrencyPolicy` (Forbid skips, Replace deletes the active
//! Jobs), and create `<cronjob>-<scheduled minutes since the epoch>` with the
//! `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation; then requeue for the next
//! time. Time comes from a [`Clock`](crate::clock::Clock), so tests drive it.

pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;

use crate::client::{ApiError, Client, Propagation};
use crate::clock::Clock;
use crate::events::{EventType, Recorder, reference};
use crate::informers::{Cache, Change, Informer};
use crate::job::plan::is_finished;
use crate::key::Key;
use crate::pods::{self, controller_of};
use crate::workqueue::WorkQueue;

pub const NAME: &str = "cronjob";
/// The `source.component` of its events.
pub const COMPONENT: &str = "cronjob-controller";
/// The annotation naming the time a Job was scheduled for (RFC 3339, in the CronJob's zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Upstream requeues a little after the next time, so the clock has passed it.
const NEXT_DELTA: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("CronJob {key}: {source}")]
    Api { key: Key, source: ApiError },
}

pub struct CronJobController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub cron_jobs: Arc<Cache<CronJob>>,
    pub jobs: Arc<Cache<Job>>,
    pub queue: Arc<WorkQueue<Key>>,
    pub clock: Arc<dyn Clock>,
}

impl<C> std::fmt::Debug for CronJobController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronJobController").finish_non_exhaustive()
    }
}

/// Upstream's `getJobName`: the scheduled time in minutes since the epoch.
pub fn job_name(cron_job: &str, scheduled: jiff::Timestamp) -> String {
    format!("{cron_job}-{}", scheduled.as_second().div_euclid(60))
}

fn job_condition(job: &Job, type_: &str) -> Option<jiff::Timestamp> {
    let c = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    Some(c.last_transition_time.as_ref().map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0))
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The Job for the time `scheduled` (upstream's `getJobFromTemplate2`).
pub fn job_for(cj: &CronJob, scheduled: &jiff::Zoned) -> Job {
    let spec = cj.spec.clone().unwrap_or_default();
    let template = spec.job_template;
    let tmeta = template.metadata.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP.into(),
        scheduled
            .timestamp()
            .to_zoned(scheduled.time_zone().clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string(),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(&cj.name_any(), scheduled.timestamp())),
            namespace: cj.namespace(),
            labels: tmeta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![pods::controller_ref(&cj.metadata, "batch/v1", "CronJob")]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

impl<C: Client<CronJob> + Client<Job>> CronJobController<C> {
    pub fn register(self: &Arc<Self>, cron_jobs: &Informer<CronJob>, jobs: &Informer<Job>) {
        let me = self.clone();
        cron_jobs.on_change(move |c| match c {
            Change::Added(cj) | Change::Updated { new: cj, .. } | Change::Deleted(cj) => {
                me.queue.add(Key::of(cj.as_ref()));
            }
        });
        let me = self.clone();
        jobs.on_change(move |c| {
            let (old, new) = match c {
                Change::Added(j) | Change::Deleted(j) => (None, j),
                Change::Updated { old, new } => (Some(old), new),
            };
            for j in old.into_iter().chain(Some(new)) {
                if let Some(r) = controller_of(&j.metadata).filter(|r| r.kind == "CronJob") {
                    me.queue.add(Key::new(&j.namespace().unwrap_or_default(), &r.name));
                }
            }
        });
    }

    fn owned_jobs(&self, cj: &CronJob) -> Vec<Arc<Job>> {
        let uid = cj.metadata.uid.as_deref().unwrap_or_default();
        self.jobs
            .list(&cj.namespace().unwrap_or_default())
            .into_iter()
            .filter(|j| controller_of(&j.metadata).is_some_and(|r| r.uid == uid))
            .collect()
    }

    /// Upstream's `sync` + `syncCronJob` + `cleanupFinishedJobs`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let api = |source| SyncError::Api { key: key.clone(), source };
        let Some(cj) = self.cron_jobs.get_key(key) else { return Ok(()) };
        let now = self.clock.now();
        let about = reference(cj.as_ref());
        let jobs = self.owned_jobs(&cj);
        let spec = cj.spec.clone().unwrap_or_default();
        let mut status = cj.status.clone().unwrap_or_default();

        // Active list ← the Jobs that exist and have not finished.
        let mut active: Vec<ObjectReference> = Vec::new();
        for j in &jobs {
            let listed = status.active.iter().flatten().any(|r| r.uid == j.metadata.uid);
            if is_finished(j) {
                if listed {
                    let how =
                        if job_condition(j, "Complete").is_some() { "Complete" } else { "Failed" };
                    self.recorder.record(
                        about.clone(),
                        EventType::Normal,
                        "SawCompletedJob",
                        format!("Saw completed job: {}, condition: {how}", j.name_any()),
                    );
                }
                if let Some(t) = job_condition(j, "Complete") {
                    let t = j
                        .status
                        .as_ref()
                        .and_then(|s| s.completion_time.as_ref())
                        .map_or(t, |c| c.0);
                    if status.last_successful_time.as_ref().is_none_or(|l| l.0 < t) {
                        status.last_successful_time = Some(Time(t));
                    }
                }
            } else if j.metadata.deletion_timestamp.is_none() {
                active.push(job_ref(j));
            }
        }
        for r in status.active.iter().flatten() {
            if !jobs.iter().any(|j| j.metadata.uid == r.uid) {
                let name = r.name.clone().unwrap_or_default();
                // Created moments ago and not seen yet: kept while the API still has it.
                match Client::<Job>::get(self.client.as_ref(), &key.namespace, &name).await {
                    Ok(j) if j.metadata.uid == r.uid && !is_finished(&j) => active.push(r.clone()),
                    Ok(_) | Err(ApiError::NotFound { .. }) => {
                        self.recorder.record(
                            about.clone(),
                            EventType::Normal,
                            "MissingJob",
                            format!("Active job went missing: {name}"),
                        );
                    }
                    Err(e) => return Err(api(e)),
                }
            }
        }
        active.sort_by(|a, b| a.name.cmp(&b.name));
        status.active = (!active.is_empty()).then_some(active);

        let (requeue, _created) = if cj.metadata.deletion_timestamp.is_some() {
            (None, None)
        } else {
            self.schedule(&cj, key, &mut status, now, &about).await.map_err(api)?
        };
        if cj.status.as_ref() != Some(&status) {
            let mut next = cj.as_ref().clone();
            next.status = Some(status);
            Client::<CronJob>::replace_status(self.client.as_ref(), &next).await.map_err(api)?;
        }
        if cj.metadata.deletion_timestamp.is_none() {
            self.cleanup(
                &cj,
                &jobs,
                spec.successful_jobs_history_limit.unwrap_or(3),
                spec.failed_jobs_history_limit.unwrap_or(1),
            )
            .await
            .map_err(api)?;
        }
        if let Some(after) = requeue {
            self.queue.add_after(key.clone(), after);
        }
        Ok(())
    }

    /// The scheduling half: what is due, and whether to start it. The requeue delay, and the
    /// name of a Job created.
    async fn schedule(
        &self,
        cj: &CronJob,
        key: &Key,
        status: &mut CronJobStatus,
        now: jiff::Timestamp,
        about: &ObjectReference,
    ) -> Result<(Option<Duration>, Option<String>), ApiError> {
        let spec = cj.spec.clone().unwrap_or_default();
        let Some(zone) = schedule::zone(spec.time_zone.as_deref()) else {
            let tz = spec.time_zone.unwrap_or_default();
            self.recorder.record(
                about.clone(),
                EventType::Warning,
                "UnknownTimeZone",
                format!("invalid timeZone: {tz:?}: unknown time zone {tz}"),
            );
            return Ok((None, None));
        };
        let sched = match schedule::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                self.recorder.record(
                    about.clone(),
                    EventType::Warning,
                    "UnparseableSchedule",
                    format!("unparseable schedule: {:?} : {e}", spec.schedule),
                );
                return Ok((None, None));
            }
        };
        if spec.suspend == Some(true) {
            return Ok((None, None));
        }
        let created_at = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
        let earliest = status.last_schedule_time.as_ref().map_or(created_at, |t| t.0);
        // The due time is found from the last run; the missed runs that count toward the
        // warning only within startingDeadlineSeconds (upstream's two uses of
        // `mostRecentScheduleTime`).
        let due = schedule::due(&sched, &zone, earliest, now);
        let requeue = due.next.map(|n| {
            Duration::try_from(n.duration_since(now)).unwrap_or(Duration::ZERO) + NEXT_DELTA
        });
        let missed = match spec.starting_deadline_seconds {
            Some(sds) => {
                let floor = now.checked_sub(jiff::SignedDuration::from_secs(sds)).unwrap_or(now);
                schedule::due(&sched, &zone, earliest.max(floor), now).missed
            }
            None => due.missed,
        };
        if missed > schedule::TOO_MANY_MISSED {
            self.recorder.record(about.clone(), EventType::Warning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into());
        }
        let Some(scheduled) = due.most_recent else { return Ok((requeue, None)) };
        if let Some(sds) = spec.starting_deadline_seconds
            && scheduled.checked_add(jiff::SignedDuration::from_secs(sds)).is_ok_and(|d| d < now)
        {
            self.recorder.record(
                about.clone(),
                EventType::Warning,
                "MissSchedule",
                format!(
                    "Missed scheduled time to start a job: {}",
                    scheduled.to_zoned(zone.clone()).strftime("%Y-%m-%dT%H:%M:%S%:z")
                ),
            );
            return Ok((requeue, None));
        }
        let name = job_name(&key.name, scheduled);
        let already =
            status.active.iter().flatten().any(|r| r.name.as_deref() == Some(name.as_str()))
                || status.last_schedule_time.as_ref().is_some_and(|t| t.0 == scheduled);
        if already {
            return Ok((requeue, None));
        }
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        let running: Vec<ObjectReference> = status.active.clone().unwrap_or_default();
        if policy == "Forbid" && !running.is_empty() {
            tracing::debug!(cronjob = %key, "not starting: a prior run is active and concurrencyPolicy is Forbid");
            self.recorder.record(about.clone(), EventType::Normal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid".into());
            return Ok((requeue, None));
        }
        if policy == "Replace" {
            for r in &running {
                let (n, uid) =
                    (r.name.clone().unwrap_or_default(), r.uid.clone().unwrap_or_default());
                match Client::<Job>::delete_propagating(
                    self.client.as_ref(),
                    &key.namespace,
                    &n,
                    &uid,
                    Propagation::Background,
                )
                .await
                {
                    Ok(()) | Err(ApiError::NotFound { .. }) => {
                        self.recorder.record(
                            about.clone(),
                            EventType::Normal,
                            "SuccessfulDelete",
                            format!("Deleted job {n}"),
                        );
                    }
                    Err(e) => {
                        self.recorder.record(
                            about.clone(),
                            EventType::Warning,
                            "FailedDelete",
                            format!("Deleted job: {e}"),
                        );
                        return Err(e);
                    }
                }
            }
            status.active = None;
        }
        let job = job_for(cj, &scheduled.to_zoned(zone));
        let created = match Client::<Job>::create(self.client.as_ref(), &job).await {
            Ok(j) => {
                self.recorder.record(
                    about.clone(),
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created job {name}"),
                );
                j
            }
            Err(e) if e.is_already_exists() => {
                // Made by an earlier sync whose status write was lost: ours if we control it.
                let existing =
                    Client::<Job>::get(self.client.as_ref(), &key.namespace, &name).await?;
                if controller_of(&existing.metadata)
                    .is_none_or(|r| Some(&r.uid) != cj.metadata.uid.as_ref())
                {
                    return Ok((requeue, None));
                }
                existing
            }
            Err(e) => {
                self.recorder.record(
                    about.clone(),
                    EventType::Warning,
                    "FailedCreate",
                    format!("Error creating job: {e}"),
                );
                return Err(e);
            }
        };
        let refs = status.active.get_or_insert_default();
        if !refs.iter().any(|r| r.uid == created.metadata.uid) {
            refs.push(job_ref(&created));
        }
        status.last_schedule_time = Some(Time(scheduled));
        Ok((requeue, Some(name)))
    }

    /// Finished Jobs beyond the history limits go, oldest first.
    async fn cleanup(
        &self,
        cj: &CronJob,
        jobs: &[Arc<Job>],
        successful: i32,
        failed: i32,
    ) -> Result<(), ApiError> {
        let about = reference(cj);
        for (keep, want_complete) in [(successful, true), (failed, false)] {
            let mut done: Vec<&Arc<Job>> = jobs
                .iter()
                .filter(|j| is_finished(j) && j.metadata.deletion_timestamp.is_none())
                .filter(|j| job_condition(j, "Complete").is_some() == want_complete)
                .collect();
            let keep = usize::try_from(keep).unwrap_or(0);
            if done.len() <= keep {
                continue;
            }
            done.sort_by_key(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.start_time.clone())
                    .or(j.metadata.creation_timestamp.clone())
                    .map(|t| t.0)
            });
            let n = done.len() - keep;
            for j in done.into_iter().take(n) {
                let (name, uid) = (j.name_any(), j.metadata.uid.clone().unwrap_or_default());
                match Client::<Job>::delete_propagating(
                    self.client.as_ref(),
                    &j.namespace().unwrap_or_default(),
                    &name,
                    &uid,
                    Propagation::Background,
                )
                .await
                {
                    Ok(()) => self.recorder.record(
                        about.clone(),
                        EventType::Normal,
                        "SuccessfulDelete",
                        format!("Deleted job {name}"),
                    ),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

impl<C: Client<CronJob> + Client<Job>> crate::worker::Reconcile for CronJobController<C> {
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        CronJobController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests;
