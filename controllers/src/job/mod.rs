//! The Job controller, as upstream's `pkg/controller/job`: runs a Job's pods to completion.
//!
//! A sync ([`JobController::sync`]): read the Job and claim its pods (controller reference and
//! selector, [`controller_ref`](crate::controller_ref)); compute the [`plan`] (pure); write the
//! status with newly finished pods in `uncountedTerminatedPods`; remove those pods'
//! `batch.kubernetes.io/job-tracking` finalizer; move them into `succeeded`/`failed` and, once a
//! finishing Job has no pods left running, add `Complete`/`Failed` after the interim
//! `SuccessCriteriaMet`/`FailureTarget`; delete and create pods (slow-start batches,
//! expectations, [`backoff`] after failures). `suspend`, `activeDeadlineSeconds`, Indexed
//! completion ([`indexes`]), `backoffLimitPerIndex`, the pod failure policy ([`policy`]), the
//! success policy and `podReplacementPolicy` are in the plan.

pub mod backoff;
pub mod indexes;
pub mod plan;
pub mod policy;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::clock::Clock;
use crate::controller_ref::{self, ClaimError, Owner};
use crate::events::{EventType, Recorder, reference};
use crate::expectations::Expectations;
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::pod_control::delete_pod;
use crate::pods::{self, controller_of, pod_key};
use crate::selector::Selector;
use crate::slow_start::slow_start_batch;
use crate::workqueue::WorkQueue;

pub const NAME: &str = "job";
/// The `source.component` of its events.
pub const COMPONENT: &str = "job-controller";
/// The finalizer that keeps a finished pod until the Job has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// An Indexed Job's pod's index (annotation and label).
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// How often an index failed before this pod (`backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// `spec.managedBy` when this controller manages the Job.
pub const MANAGED_BY: &str = "kubernetes.io/job-controller";
/// Upstream's `MaxPodCreateDeletePerSync`.
pub const MAX_CREATE_DELETE: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("Job {key}: {source}")]
    Api { key: Key, source: ApiError },
}

/// The Job controller; `C` makes its API calls.
pub struct JobController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub jobs: Arc<Cache<Job>>,
    pub pods: Arc<Cache<Pod>>,
    pub queue: Arc<WorkQueue<Key>>,
    pub expectations: Arc<Expectations>,
    pub clock: Arc<dyn Clock>,
    /// Upstream's backoff store: failures since the last success, per Job.
    pub backoff: Mutex<HashMap<Key, backoff::Record>>,
}

impl<C> std::fmt::Debug for JobController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobController").finish_non_exhaustive()
    }
}

fn selector_of(job: &Job) -> Option<Selector> {
    job.spec.as_ref().and_then(|s| s.selector.as_ref()).and_then(|s| Selector::new(s).ok())
}

/// The pod for one create: the template, the tracking finalizer, the controller reference;
/// for an Indexed Job the index as annotation, label, hostname and `JOB_COMPLETION_INDEX`.
pub fn pod_for(job: &Job, index: Option<(i32, i32)>) -> Pod {
    let spec = job.spec.clone().unwrap_or_default();
    let name = job.name_any();
    let prefix = match index {
        Some((i, _)) => format!("{name}-{i}"),
        None => name.clone(),
    };
    let mut pod = crate::replicaset::pod_from_template(
        &spec.template,
        &job.namespace().unwrap_or_default(),
        &prefix,
        pods::controller_ref(&job.metadata, "batch/v1", "Job"),
    );
    pod.metadata.finalizers.get_or_insert_default().push(TRACKING_FINALIZER.into());
    if let Some((i, failures)) = index {
        let meta = &mut pod.metadata;
        meta.annotations.get_or_insert_default().insert(COMPLETION_INDEX.into(), i.to_string());
        meta.labels.get_or_insert_default().insert(COMPLETION_INDEX.into(), i.to_string());
        if spec.backoff_limit_per_index.is_some() {
            meta.annotations
                .get_or_insert_default()
                .insert(INDEX_FAILURE_COUNT.into(), failures.to_string());
        }
        let podspec = pod.spec.get_or_insert_default();
        if podspec.hostname.is_none() {
            podspec.hostname = Some(format!("{name}-{i}"));
        }
        let env = EnvVar {
            name: "JOB_COMPLETION_INDEX".into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                }),
                ..Default::default()
            }),
        };
        for c in podspec.containers.iter_mut().chain(podspec.init_containers.iter_mut().flatten()) {
            let vars = c.env.get_or_insert_default();
            if !vars.iter().any(|v| v.name == env.name) {
                vars.push(env.clone());
            }
        }
    }
    pod
}

impl<C: Client<Pod> + Client<Job>> JobController<C> {
    /// Registers the informer handlers that feed the queue.
    pub fn register(self: &Arc<Self>, jobs: &Informer<Job>, pods: &Informer<Pod>) {
        let me = self.clone();
        jobs.on_change(move |c| match c {
            Change::Added(j) => me.queue.add(Key::of(j.as_ref())),
            Change::Updated { old, new } => {
                if old.metadata.uid != new.metadata.uid {
                    me.expectations.delete(&Key::of(old.as_ref()));
                }
                me.queue.add(Key::of(new.as_ref()));
            }
            Change::Deleted(j) => {
                let key = Key::of(j.as_ref());
                me.expectations.delete(&key);
                me.queue.add(key);
            }
        });
        let me = self.clone();
        pods.on_change(move |c| match c {
            Change::Added(p) => me.pod_changed(None, p, false),
            Change::Updated { old, new } => me.pod_changed(Some(old), new, false),
            Change::Deleted(p) => me.pod_changed(None, p, true),
        });
    }

    /// The Job a pod's controller reference names (a `Job` key even when the Job is gone, so
    /// the sync releases the pod's finalizer).
    fn owner_key(pod: &Pod) -> Option<Key> {
        let r = controller_of(&pod.metadata)?;
        (r.kind == "Job").then(|| Key::new(&pod.namespace().unwrap_or_default(), &r.name))
    }

    fn pod_changed(&self, old: Option<&Pod>, pod: &Pod, deleted: bool) {
        if let Some(old) = old
            && let Some(k) = Self::owner_key(old)
            && Self::owner_key(pod).as_ref() != Some(&k)
        {
            self.queue.add(k);
        }
        let Some(key) = Self::owner_key(pod) else {
            // An orphan: the Jobs whose selector matches may adopt it.
            let ns = pod.namespace().unwrap_or_default();
            for j in self.jobs.list(&ns) {
                if selector_of(&j).is_some_and(|s| s.matches(pod.metadata.labels.as_ref())) {
                    self.queue.add(Key::of(j.as_ref()));
                }
            }
            return;
        };
        let was_deleting = old.is_some_and(|o| o.metadata.deletion_timestamp.is_some());
        if deleted || (pod.metadata.deletion_timestamp.is_some() && !was_deleting) {
            self.expectations.deletion_observed(&key, &pod_key(pod));
        } else if old.is_none() {
            self.expectations.creation_observed(&key);
        }
        self.queue.add(key);
    }

    /// Upstream's `syncJob`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let api = |source| SyncError::Api { key: key.clone(), source };
        let Some(job) = self.jobs.get_key(key) else {
            self.expectations.delete(key);
            self.lock_backoff().remove(key);
            return self.release_orphans(key).await.map_err(api);
        };
        let spec = job.spec.clone().unwrap_or_default();
        if spec.managed_by.as_deref().is_some_and(|m| m != MANAGED_BY) {
            tracing::debug!(job = %key, managed_by = ?spec.managed_by, "managed by another controller");
            return Ok(());
        }
        let Some(selector) = selector_of(&job) else {
            tracing::warn!(job = %key, "invalid selector; nothing to do");
            return Ok(());
        };
        let all = self.pods.list(&key.namespace);
        let mut owned = self.claim(&job, &selector, all).await?;
        owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if plan::is_finished(&job) {
            // Whatever is left keeps no finalizer.
            for p in owned.iter().filter(|p| has_tracking(p)) {
                self.unfinalize(p).await.map_err(api)?;
            }
            return Ok(());
        }
        let now = self.clock.now();
        let record = self.lock_backoff().get(key).copied().unwrap_or_default();
        let satisfied = self.expectations.satisfied(key);
        let plan = plan::plan(&job, &owned, now, record, satisfied);
        self.lock_backoff().insert(key.clone(), plan.backoff);

        let about = reference(job.as_ref());
        if let Some(s) = plan.suspended_now {
            let (reason, message) =
                if s { ("Suspended", "Job suspended") } else { ("Resumed", "Job resumed") };
            self.recorder.record(about.clone(), EventType::Normal, reason, message.into());
        }
        // 1. Record the newly finished pods before releasing them, so none is counted twice
        //    or lost.
        let mut current = job.as_ref().clone();
        if !plan.unfinalize.is_empty() {
            current = self.write_status(&current, plan.status.clone()).await.map_err(api)?;
        }
        for p in &plan.unfinalize {
            self.unfinalize(p).await.map_err(api)?;
        }
        // 2. Delete what must go (counted next sync, when their deletion is seen), create what
        //    is missing.
        let deleted = self.delete_pods(&job, key, &plan.delete).await;
        let created = self.create_pods(&current, key, &plan.create).await;
        // 3. Count the released pods; finish when nothing runs any more.
        let mut status = plan.status.clone();
        let n = created.as_ref().map_or_else(|(n, _)| *n, |n| *n);
        status.active = Some(status.active.unwrap_or(0) + i32::try_from(n).unwrap_or(0));
        let flushed = plan::flush(status, plan.finish.as_ref(), now);
        let became_terminal = plan.finish.as_ref().is_some_and(|f| {
            flushed
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == f.terminal() && c.status == "True")
        });
        self.write_status(&current, flushed).await.map_err(api)?;
        if became_terminal && let Some(f) = &plan.finish {
            if f.success {
                self.recorder.record(
                    about.clone(),
                    EventType::Normal,
                    "Completed",
                    "Job completed".into(),
                );
            } else {
                self.recorder.record(
                    about.clone(),
                    EventType::Warning,
                    &f.reason,
                    f.message.clone(),
                );
            }
        }
        if let Some(after) = plan.requeue_after {
            self.queue.add_after(key.clone(), after);
        }
        deleted.map_err(api)?;
        created.map(|_| ()).map_err(|(_, e)| api(e))
    }

    fn lock_backoff(&self) -> std::sync::MutexGuard<'_, HashMap<Key, backoff::Record>> {
        self.backoff.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn claim(
        &self,
        job: &Job,
        selector: &Selector,
        pods: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>, ClaimError> {
        let owner = Owner {
            meta: &job.metadata,
            reference: pods::controller_ref(&job.metadata, "batch/v1", "Job"),
            selector,
        };
        let (ns, name) = (job.namespace().unwrap_or_default(), job.name_any());
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let client = self.client.clone();
        let recheck = async move {
            let fresh: Job = Client::<Job>::get(client.as_ref(), &ns, &name).await?;
            controller_ref::recheck(&fresh.metadata, &uid, "Job", &format!("{ns}/{name}"))
        };
        controller_ref::claim::<Pod, C, _>(self.client.as_ref(), &owner, pods, recheck).await
    }

    /// Pods still carrying the finalizer of a Job that is gone.
    async fn release_orphans(&self, key: &Key) -> Result<(), ApiError> {
        for p in self.pods.list(&key.namespace) {
            if has_tracking(&p) && Self::owner_key(&p).as_ref() == Some(key) {
                self.unfinalize(&p).await?;
            }
        }
        Ok(())
    }

    async fn unfinalize(&self, pod: &Pod) -> Result<(), ApiError> {
        let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        match Client::<Pod>::remove_finalizer(self.client.as_ref(), &ns, &name, TRACKING_FINALIZER)
            .await
        {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Writes the status when it changed; the stored Job.
    async fn write_status(&self, job: &Job, status: JobStatus) -> Result<Job, ApiError> {
        if job.status.as_ref() == Some(&status) {
            return Ok(job.clone());
        }
        let mut next = job.clone();
        next.status = Some(status);
        Client::<Job>::replace_status(self.client.as_ref(), &next).await
    }

    async fn delete_pods(
        &self,
        job: &Job,
        key: &Key,
        victims: &[Arc<Pod>],
    ) -> Result<(), ApiError> {
        if victims.is_empty() {
            return Ok(());
        }
        let victims = &victims[..victims.len().min(MAX_CREATE_DELETE)];
        self.expectations.expect_deletions(key, victims.iter().map(|p| pod_key(p)).collect());
        let about = reference(job);
        let results = futures::future::join_all(victims.iter().map(|p| {
            let (client, recorder) = (self.client.as_ref(), self.recorder.as_ref());
            delete_pod(client, recorder, &self.expectations, key, p, about.clone())
        }))
        .await;
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// Creates the pods; how many were created, and the first error.
    async fn create_pods(
        &self,
        job: &Job,
        key: &Key,
        creates: &plan::Creates,
    ) -> Result<usize, (usize, ApiError)> {
        let n = creates.len().min(MAX_CREATE_DELETE);
        if n == 0 {
            return Ok(0);
        }
        self.expectations.expect_creations(key, n);
        let about = reference(job);
        let indexes = Mutex::new(creates.indexes.iter().copied());
        let (created, err) = slow_start_batch(n, || {
            let next = indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next();
            let pod = pod_for(job, next);
            let about = about.clone();
            async move {
                match Client::<Pod>::create(self.client.as_ref(), &pod).await {
                    Ok(p) => {
                        self.recorder.record(
                            about,
                            EventType::Normal,
                            "SuccessfulCreate",
                            format!("Created pod: {}", p.name_any()),
                        );
                        Ok(())
                    }
                    Err(e) => {
                        self.recorder.record(
                            about,
                            EventType::Warning,
                            "FailedCreate",
                            format!("Error creating: {e}"),
                        );
                        Err(e)
                    }
                }
            }
        })
        .await;
        for _ in created..n {
            self.expectations.creation_observed(key);
        }
        err.map_or(Ok(created), |e| Err((created, e)))
    }
}

fn has_tracking(pod: &Pod) -> bool {
    pod.metadata.finalizers.iter().flatten().any(|f| f == TRACKING_FINALIZER)
}

impl<C: Client<Pod> + Client<Job>> crate::worker::Reconcile for JobController<C> {
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        JobController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests;
