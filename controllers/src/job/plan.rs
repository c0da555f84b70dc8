//! The pure half of a Job's sync (upstream's `syncJob` decisions, without I/O): from the Job,
//! the pods it owns, the clock and its back-off record, [`plan`] computes the next status
//! (newly finished pods recorded in `uncountedTerminatedPods`, counts, indexes, conditions), the
//! pods whose tracking finalizer goes, the pods to delete, the pods to create, and when to look
//! again. [`super::JobController::sync`] executes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::backoff::Record;
use super::policy::{self, Action};
use super::{COMPLETION_INDEX, INDEX_FAILURE_COUNT, TRACKING_FINALIZER, indexes};
use crate::pods;

/// Why a Job is finishing (the `FailureTarget` / `SuccessCriteriaMet` condition's reason and
/// message, repeated on the final `Failed` / `Complete`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub success: bool,
    pub reason: String,
    pub message: String,
}

impl Finish {
    fn fail(reason: &str, message: &str) -> Self {
        Self { success: false, reason: reason.into(), message: message.into() }
    }
    fn succeed(reason: &str, message: String) -> Self {
        Self { success: true, reason: reason.into(), message }
    }
    /// The interim condition's type (upstream 1.31+ sets it first).
    pub fn interim(&self) -> &'static str {
        if self.success { "SuccessCriteriaMet" } else { "FailureTarget" }
    }
    /// The terminal condition's type.
    pub fn terminal(&self) -> &'static str {
        if self.success { "Complete" } else { "Failed" }
    }
}

/// What to create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Creates {
    /// NonIndexed: how many.
    pub count: usize,
    /// Indexed: which indexes, each with its index's failure count so far.
    pub indexes: Vec<(i32, i32)>,
}

impl Creates {
    pub fn len(&self) -> usize {
        self.count + self.indexes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The plan for one sync.
#[derive(Debug, Default)]
pub struct Plan {
    /// The status with newly finished pods in `uncountedTerminatedPods` (written first).
    pub status: JobStatus,
    /// Pods whose tracking finalizer to remove once `status` is written.
    pub unfinalize: Vec<Arc<Pod>>,
    pub delete: Vec<Arc<Pod>>,
    pub create: Creates,
    /// Set when the Job is finishing (now or already).
    pub finish: Option<Finish>,
    /// A condition newly added this sync (for the event).
    pub newly_finishing: bool,
    pub suspended_now: Option<bool>,
    /// The back-off record after this sync's finished pods.
    pub backoff: Record,
    pub requeue_after: Option<Duration>,
}

pub fn spec_parallelism(spec: &JobSpec) -> i32 {
    spec.parallelism.unwrap_or(1).max(0)
}

pub fn is_indexed(spec: &JobSpec) -> bool {
    spec.completion_mode.as_deref() == Some("Indexed")
}

fn has_condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has its `Complete` or `Failed` condition.
pub fn is_finished(job: &Job) -> bool {
    job.status.as_ref().is_some_and(|s| {
        has_condition(s, "Complete").is_some() || has_condition(s, "Failed").is_some()
    })
}

/// Sets (or updates) a condition; the transition time moves only when the status changes.
pub fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) {
    let conditions = status.conditions.get_or_insert_default();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == value && c.reason.as_deref() == Some(reason) => {}
        Some(c) => {
            if c.status != value {
                c.last_transition_time = Some(Time(now));
            }
            c.status = value.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_probe_time = Some(Time(now));
        }
        None => conditions.push(JobCondition {
            type_: type_.into(),
            status: value.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_probe_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        }),
    }
}

/// A pod's completion index, if it has a valid one.
pub fn index_of(pod: &Pod, completions: i32) -> Option<i32> {
    let v = pod.metadata.annotations.as_ref()?.get(COMPLETION_INDEX)?;
    v.parse::<i32>().ok().filter(|i| (0..completions).contains(i))
}

fn failure_count(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INDEX_FAILURE_COUNT))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata.finalizers.iter().flatten().any(|f| f == TRACKING_FINALIZER)
}

/// When a pod finished: its containers' latest `finishedAt`, else its deletion time, else now.
fn finished_at(pod: &Pod, now: jiff::Timestamp) -> jiff::Timestamp {
    let status = pod.status.as_ref();
    status
        .into_iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref().map(|t| t.0))
        .max()
        .or(pod.metadata.deletion_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now)
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Upstream's success policy: the first rule whose `succeededIndexes` (all of them, or
/// `succeededCount` of them) have succeeded.
fn success_policy_match(
    spec: &JobSpec,
    completed: &BTreeSet<i32>,
    completions: i32,
) -> Option<usize> {
    let rules = &spec.success_policy.as_ref()?.rules;
    rules.iter().position(|r| {
        let wanted: BTreeSet<i32> = match &r.succeeded_indexes {
            Some(t) => indexes::parse(t, completions),
            None => (0..completions).collect(),
        };
        let done = to_i32(wanted.intersection(completed).count());
        match r.succeeded_count {
            Some(n) => done >= n,
            None => r.succeeded_indexes.is_some() && done == to_i32(wanted.len()),
        }
    })
}

/// Computes the sync's plan. `expectations_met`: no creates or deletes are still in flight.
#[allow(clippy::too_many_lines)]
pub fn plan(
    job: &Job,
    owned: &[Arc<Pod>],
    now: jiff::Timestamp,
    backoff: Record,
    expectations_met: bool,
) -> Plan {
    let spec = job.spec.clone().unwrap_or_default();
    let mut status = job.status.clone().unwrap_or_default();
    let mut out = Plan { backoff, ..Default::default() };
    let indexed = is_indexed(&spec);
    let completions = spec.completions.unwrap_or(0);
    let per_index = spec.backoff_limit_per_index;
    let suspended = spec.suspend == Some(true);
    let only_failed = spec.pod_replacement_policy.as_deref() == Some("Failed");

    // The finishing condition set by an earlier sync.
    let mut finish = ["FailureTarget", "SuccessCriteriaMet"].iter().find_map(|t| {
        has_condition(&status, t).map(|c| Finish {
            success: *t == "SuccessCriteriaMet",
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        })
    });

    let mut uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut unc_succeeded: BTreeSet<String> =
        uncounted.succeeded.take().unwrap_or_default().into_iter().collect();
    let mut unc_failed: BTreeSet<String> =
        uncounted.failed.take().unwrap_or_default().into_iter().collect();
    let mut completed = status
        .completed_indexes
        .as_deref()
        .map(|t| indexes::parse(t, completions))
        .unwrap_or_default();
    let mut failed_indexes = status
        .failed_indexes
        .as_deref()
        .map(|t| indexes::parse(t, completions))
        .unwrap_or_default();

    let mut active: Vec<Arc<Pod>> = Vec::new();
    let mut terminating = 0usize;
    let (mut new_succeeded_at, mut new_failed_at) = (Vec::new(), Vec::new());
    let mut fail_job: Option<String> = None;
    // Per index: the failure count the next pod carries.
    let mut index_failures: BTreeMap<i32, i32> = BTreeMap::new();
    for pod in owned {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let phase = pods::phase(pod);
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let terminal = matches!(phase, "Succeeded" | "Failed");
        let index = if indexed { index_of(pod, completions) } else { None };
        if !terminal && !deleting {
            active.push(pod.clone());
            continue;
        }
        if !terminal {
            terminating += 1;
        }
        if phase == "Failed"
            && let Some(i) = index
        {
            let next = failure_count(pod) + 1;
            let e = index_failures.entry(i).or_insert(0);
            *e = (*e).max(next);
        }
        if !has_finalizer(pod) {
            continue;
        }
        if unc_succeeded.contains(&uid) || unc_failed.contains(&uid) {
            out.unfinalize.push(pod.clone());
            continue;
        }
        if phase == "Succeeded" {
            unc_succeeded.insert(uid);
            new_succeeded_at.push(finished_at(pod, now));
            if let Some(i) = index {
                completed.insert(i);
            }
            out.unfinalize.push(pod.clone());
            continue;
        }
        // Failed, or deleted before it finished.
        let failing_job = finish.as_ref().is_some_and(|f| !f.success);
        let counts_as_failed =
            phase == "Failed" || (!only_failed && !suspended && finish.is_none()) || failing_job;
        if !counts_as_failed {
            // Deleted while suspending or succeeding: released without counting. With
            // `podReplacementPolicy: Failed` it is counted once it has failed.
            if suspended || finish.is_some() {
                out.unfinalize.push(pod.clone());
            }
            continue;
        }
        let act = match (&spec.pod_failure_policy, phase) {
            (Some(p), "Failed") => policy::evaluate(p, pod),
            _ => Action::Count,
        };
        match act {
            Action::Ignore => {
                if let Some(i) = index {
                    // An ignored failure does not use up the index's budget.
                    index_failures.insert(i, failure_count(pod));
                }
                out.unfinalize.push(pod.clone());
                continue;
            }
            Action::FailJob(message) => {
                fail_job.get_or_insert(message);
            }
            Action::FailIndex => {
                if let Some(i) = index {
                    failed_indexes.insert(i);
                }
            }
            Action::Count => {
                if let (Some(limit), Some(i)) = (per_index, index)
                    && failure_count(pod) >= limit
                {
                    failed_indexes.insert(i);
                }
            }
        }
        unc_failed.insert(uid);
        new_failed_at.push(finished_at(pod, now));
        out.unfinalize.push(pod.clone());
    }
    out.backoff = backoff.step(&new_succeeded_at, &new_failed_at);

    let succeeded = status.succeeded.unwrap_or(0) + to_i32(unc_succeeded.len());
    let failed = status.failed.unwrap_or(0) + to_i32(unc_failed.len());
    // The counts an index keeps are the pods that succeeded; one index completing twice counts
    // once in completedIndexes.
    failed_indexes.retain(|i| !completed.contains(i));

    // Suspension.
    let was_suspended = has_condition(&status, "Suspended").is_some();
    if finish.is_none() {
        if suspended && !was_suspended {
            set_condition(&mut status, "Suspended", "True", "JobSuspended", "Job suspended", now);
            out.suspended_now = Some(true);
        } else if !suspended && was_suspended {
            set_condition(&mut status, "Suspended", "False", "JobResumed", "Job resumed", now);
            out.suspended_now = Some(false);
        }
    }
    if suspended && finish.is_none() {
        // Upstream clears it while suspended (the apiserver refuses a changed startTime on an
        // unsuspended Job), so the deadline counts from the resume.
        status.start_time = None;
    } else if status.start_time.is_none() {
        status.start_time = Some(Time(now));
    }

    // Finishing: the first reason that applies, as upstream orders them.
    if finish.is_none() {
        let deadline_left = match (spec.active_deadline_seconds, &status.start_time, suspended) {
            (Some(s), Some(start), false) => {
                let end =
                    start.0.checked_add(jiff::SignedDuration::from_secs(s)).unwrap_or(start.0);
                Some(Duration::try_from(end.duration_since(now)).unwrap_or(Duration::ZERO))
            }
            _ => None,
        };
        let backoff_limit = spec.backoff_limit.unwrap_or(6);
        let max_failed = spec.max_failed_indexes;
        finish = if let Some(m) = fail_job {
            Some(Finish::fail("PodFailurePolicy", &m))
        } else if per_index.is_some()
            && max_failed.is_some_and(|m| to_i32(failed_indexes.len()) > m)
        {
            Some(Finish::fail(
                "MaxFailedIndexesExceeded",
                "Job has exceeded the specified maximal number of failed indexes",
            ))
        } else if per_index.is_none() && failed > backoff_limit {
            Some(Finish::fail(
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ))
        } else if deadline_left == Some(Duration::ZERO) {
            Some(Finish::fail("DeadlineExceeded", "Job was active longer than specified deadline"))
        } else if let Some(i) =
            indexed.then(|| success_policy_match(&spec, &completed, completions)).flatten()
        {
            Some(Finish::succeed("SuccessPolicy", format!("Matched rules at index {i}")))
        } else if (indexed && to_i32(completed.len()) >= completions)
            || (!indexed && spec.completions.is_some_and(|c| succeeded >= c))
            || (!indexed && spec.completions.is_none() && succeeded > 0 && active.is_empty())
        {
            Some(Finish::succeed(
                "CompletionsReached",
                "Reached expected number of succeeded pods".into(),
            ))
        } else if indexed
            && !failed_indexes.is_empty()
            && to_i32(completed.len() + failed_indexes.len()) >= completions
        {
            Some(Finish::fail("FailedIndexes", "Job has failed indexes"))
        } else {
            None
        };
        if let Some(f) = &finish {
            set_condition(&mut status, f.interim(), "True", &f.reason, &f.message, now);
            out.newly_finishing = true;
        } else if let Some(left) = deadline_left {
            out.requeue_after = Some(left);
        }
    }

    // Pods to delete or create.
    if finish.is_some() || suspended {
        out.delete.clone_from(&active);
    } else if expectations_met {
        let parallelism = spec_parallelism(&spec);
        let busy = if only_failed { to_i32(terminating) } else { 0 };
        if indexed {
            let mut held: BTreeSet<i32> = BTreeSet::new();
            for p in &active {
                match index_of(p, completions) {
                    Some(i)
                        if !held.contains(&i)
                            && !completed.contains(&i)
                            && !failed_indexes.contains(&i) =>
                    {
                        held.insert(i);
                    }
                    // A duplicate, an index already done, or no valid index: surplus.
                    _ => out.delete.push(p.clone()),
                }
            }
            let room = usize::try_from(parallelism - to_i32(held.len()) - busy).unwrap_or(0);
            out.create.indexes = (0..completions)
                .filter(|i| {
                    !held.contains(i) && !completed.contains(i) && !failed_indexes.contains(i)
                })
                .take(room)
                .map(|i| (i, index_failures.get(&i).copied().unwrap_or(0)))
                .collect();
        } else {
            let want = match spec.completions {
                Some(c) => parallelism.min(c - succeeded),
                None if succeeded > 0 => 0,
                None => parallelism,
            }
            .max(0);
            let have = to_i32(active.len());
            if have > want {
                let mut by_value = active.clone();
                // Not ready first, then newest (upstream's ranking for Jobs, simplified).
                by_value.sort_by_key(|p| {
                    (
                        pods::is_ready(p),
                        std::cmp::Reverse(p.metadata.creation_timestamp.clone().map(|t| t.0)),
                    )
                });
                out.delete =
                    by_value.into_iter().take(usize::try_from(have - want).unwrap_or(0)).collect();
            } else {
                out.create.count = usize::try_from(want - have - busy).unwrap_or(0);
            }
        }
        if !out.create.is_empty() {
            let wait = out.backoff.remaining(now);
            if !wait.is_zero() {
                out.create = Creates::default();
                out.requeue_after = Some(out.requeue_after.map_or(wait, |r| r.min(wait)));
            }
        }
    }

    let deleted: BTreeSet<&str> =
        out.delete.iter().filter_map(|p| p.metadata.uid.as_deref()).collect();
    let still_active: Vec<&Arc<Pod>> = active
        .iter()
        .filter(|p| !deleted.contains(p.metadata.uid.as_deref().unwrap_or_default()))
        .collect();
    status.active = Some(to_i32(still_active.len()));
    status.ready = Some(to_i32(still_active.iter().filter(|p| pods::is_ready(p)).count()));
    status.terminating = Some(to_i32(terminating + deleted.len()));
    if indexed {
        status.completed_indexes = Some(indexes::format(&completed));
        if per_index.is_some() {
            status.failed_indexes = Some(indexes::format(&failed_indexes));
        }
    }
    uncounted.succeeded = Some(unc_succeeded.into_iter().collect());
    uncounted.failed = Some(unc_failed.into_iter().collect());
    status.uncounted_terminated_pods = Some(uncounted);
    status.succeeded.get_or_insert(0);
    status.failed.get_or_insert(0);
    out.status = status;
    out.finish = finish;
    out
}

/// The status after the uncounted pods' finalizers are gone: their counts moved into
/// `succeeded`/`failed`; and, once no pod of a finishing Job is left running, its terminal
/// condition (and `completionTime` on success).
pub fn flush(mut status: JobStatus, finish: Option<&Finish>, now: jiff::Timestamp) -> JobStatus {
    let u = status.uncounted_terminated_pods.take().unwrap_or_default();
    let (s, f) = (u.succeeded.unwrap_or_default().len(), u.failed.unwrap_or_default().len());
    status.succeeded = Some(status.succeeded.unwrap_or(0) + to_i32(s));
    status.failed = Some(status.failed.unwrap_or(0) + to_i32(f));
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
    if let Some(f) = finish
        && status.active.unwrap_or(0) == 0
        && status.terminating.unwrap_or(0) == 0
    {
        set_condition(&mut status, f.terminal(), "True", &f.reason, &f.message, now);
        if f.success {
            status.completion_time.get_or_insert(Time(now));
        }
    }
    status
}
