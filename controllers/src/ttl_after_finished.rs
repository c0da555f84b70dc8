//! The TTL-after-finished controller, as upstream's `pkg/controller/ttlafterfinished`: a Job
//! with `ttlSecondsAfterFinished` is deleted (in the foreground, so its pods go first, with its
//! UID as precondition) that many seconds after its `Complete` or `Failed` condition; before
//! that it is requeued for the moment it expires. The decision is re-checked on a fresh read
//! before deleting, as upstream does, so a TTL changed meanwhile is honoured.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;

use crate::client::{ApiError, Client, Propagation};
use crate::clock::Clock;
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::workqueue::WorkQueue;

pub const NAME: &str = "ttl_jobs_to_delete";

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("Job {key}: {source}")]
    Api { key: Key, source: ApiError },
}

/// When a finished Job with a TTL expires; `None` if it has no TTL or has not finished.
pub fn expires_at(job: &Job) -> Option<jiff::Timestamp> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = job
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?;
    let at = finished.last_transition_time.as_ref().map(|t| t.0)?;
    at.checked_add(jiff::SignedDuration::from_secs(i64::from(ttl))).ok()
}

pub struct TtlAfterFinishedController<C> {
    pub client: Arc<C>,
    pub jobs: Arc<Cache<Job>>,
    pub queue: Arc<WorkQueue<Key>>,
    pub clock: Arc<dyn Clock>,
}

impl<C> std::fmt::Debug for TtlAfterFinishedController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlAfterFinishedController").finish_non_exhaustive()
    }
}

impl<C: Client<Job>> TtlAfterFinishedController<C> {
    pub fn register(self: &Arc<Self>, jobs: &Informer<Job>) {
        let me = self.clone();
        jobs.on_change(move |c| {
            if let Change::Added(j) | Change::Updated { new: j, .. } = c
                && j.metadata.deletion_timestamp.is_none()
                && expires_at(j).is_some()
            {
                me.queue.add(Key::of(j.as_ref()));
            }
        });
    }

    /// How long until `job` expires at `now` (zero: expired).
    fn remaining(job: &Job, now: jiff::Timestamp) -> Option<Duration> {
        let at = expires_at(job)?;
        Some(Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO))
    }

    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let api = |source| SyncError::Api { key: key.clone(), source };
        let Some(job) = self.jobs.get_key(key) else { return Ok(()) };
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let Some(left) = Self::remaining(&job, self.clock.now()) else { return Ok(()) };
        if !left.is_zero() {
            self.queue.add_after(key.clone(), left);
            return Ok(());
        }
        // The cache may be stale: decide again on what the apiserver has now.
        let fresh = match Client::<Job>::get(self.client.as_ref(), &key.namespace, &key.name).await
        {
            Ok(j) => j,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(api(e)),
        };
        match Self::remaining(&fresh, self.clock.now()) {
            Some(left) if left.is_zero() => {}
            Some(left) => {
                self.queue.add_after(key.clone(), left);
                return Ok(());
            }
            None => return Ok(()),
        }
        let uid = fresh.metadata.uid.clone().unwrap_or_default();
        tracing::info!(job = %key, "cleaning up a finished Job past its ttlSecondsAfterFinished");
        match Client::<Job>::delete_propagating(
            self.client.as_ref(),
            &key.namespace,
            &key.name,
            &uid,
            Propagation::Foreground,
        )
        .await
        {
            Err(e) if !e.is_not_found() => Err(api(e)),
            _ => Ok(()),
        }
    }
}

impl<C: Client<Job>> crate::worker::Reconcile for TtlAfterFinishedController<C> {
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        TtlAfterFinishedController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::clock::FakeClock;
    use crate::fake::FakeApi;
    use crate::metrics::QueueMetrics;

    fn job(name: &str, ttl: Option<i32>, finished_at: Option<&str>) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"ttlSecondsAfterFinished": ttl, "template": {}},
            "status": finished_at.map(|t| json!({"conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": t}]})),
        }))
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_job_is_deleted_in_the_foreground_once_its_ttl_has_passed() {
        let api = Arc::new(FakeApi::default());
        let jobs = Arc::new(Informer::<Job>::default());
        let clock = Arc::new(FakeClock::new("2026-01-01T00:00:00Z".parse().unwrap()));
        let ctrl = Arc::new(TtlAfterFinishedController {
            client: api.clone(),
            jobs: jobs.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
            clock: clock.clone(),
        });
        ctrl.register(&jobs);
        api.put(&job("done", Some(100), Some("2026-01-01T00:00:00Z")));
        api.put(&job("running", Some(0), None));
        api.put(&job("keep", None, Some("2025-01-01T00:00:00Z")));
        api.deliver(&jobs);
        assert_eq!(ctrl.queue.queued(), [Key::new("ns", "done")], "only finished Jobs with a TTL");
        for name in ["done", "running", "keep"] {
            ctrl.sync(&Key::new("ns", name)).await.unwrap();
        }
        assert_eq!(api.list::<Job>().len(), 3, "100 s have not passed");
        clock.advance(Duration::from_secs(100));
        ctrl.sync(&Key::new("ns", "done")).await.unwrap();
        let names: Vec<String> =
            api.list::<Job>().into_iter().filter_map(|j| j.metadata.name).collect();
        assert_eq!(names, ["keep", "running"]);
        let actions = api.take_actions();
        assert!(actions.contains(&"delete Job ns/done Foreground".to_string()), "{actions:?}");
    }

    #[test]
    fn expiry_is_the_finish_time_plus_the_ttl() {
        let j = job("j", Some(60), Some("2026-01-01T00:00:00Z"));
        assert_eq!(expires_at(&j), Some("2026-01-01T00:01:00Z".parse().unwrap()));
        assert_eq!(expires_at(&job("j", Some(60), None)), None);
    }
}
