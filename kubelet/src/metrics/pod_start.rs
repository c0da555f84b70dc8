//! Pod startup latency, as upstream's `kubelet_pod_start_duration_seconds` (from the kubelet
//! first seeing a pod, its `kubernetes.io/config.seen` annotation, to its status first being
//! `Running`) and pod startup latency tracker (`kubelet_pod_start_sli_duration_seconds`: from
//! the pod's creation to all its containers running, less the time between its first image
//! pull starting and its last ending; once per pod; `first_with_network` for the first pod
//! not on the host's network).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

/// A pod's image pulls and whether its SLI was recorded.
#[derive(Debug, Default, Clone, Copy)]
struct Tracked {
    first_pull_started: Option<SystemTime>,
    last_pull_finished: Option<SystemTime>,
    recorded: bool,
}

/// Pods between being seen and running (and recorded ones until they are forgotten).
#[derive(Debug, Default)]
pub struct PodStarts {
    pods: Mutex<HashMap<String, Tracked>>,
    first_network_pod_seen: AtomicBool,
}

/// What to observe for a pod status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Seconds since the kubelet first saw the pod, when it just became `Running`.
    pub start: Option<f64>,
    /// The SLI seconds and `first_with_network`, once per pod.
    pub sli: Option<(f64, bool)>,
}

fn seconds_between(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from).map_or(0.0, |d| d.as_secs_f64())
}

fn first_seen(pod: &Pod) -> Option<SystemTime> {
    let seen = pod.metadata.annotations.as_ref()?.get(api::keys::CONFIG_SEEN)?;
    humantime::parse_rfc3339_weak(seen).ok()
}

/// Upstream's `hasPodStartedSLO`: every container running with a start time.
fn all_running(status: &PodStatus) -> bool {
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    !statuses.is_empty()
        && statuses.iter().all(|c| {
            c.state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .is_some_and(|r| r.started_at.is_some())
        })
}

impl PodStarts {
    fn update(&self, uid: &str, f: impl FnOnce(&mut Tracked)) {
        let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        f(pods.entry(uid.to_string()).or_default());
    }

    /// An image pull for pod `uid` starts.
    pub fn pulling(&self, uid: &str, now: SystemTime) {
        self.update(uid, |t| {
            t.first_pull_started.get_or_insert(now);
        });
    }

    /// An image pull for pod `uid` ended.
    pub fn pulled(&self, uid: &str, now: SystemTime) {
        self.update(uid, |t| t.last_pull_finished = Some(now));
    }

    /// The pod is gone.
    pub fn forget(&self, uid: &str) {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
    }

    /// `pod` has a new `status`; `was_pending` whether the one before was absent or `Pending`.
    pub fn observe(
        &self,
        pod: &Pod,
        was_pending: bool,
        status: &PodStatus,
        now: SystemTime,
    ) -> Observed {
        let running = status.phase.as_deref() == Some("Running");
        let start = (was_pending && running)
            .then(|| first_seen(pod))
            .flatten()
            .map(|seen| seconds_between(seen, now));
        let sli = if running && all_running(status) { self.sli(pod, now) } else { None };
        Observed { start, sli }
    }

    fn sli(&self, pod: &Pod, now: SystemTime) -> Option<(f64, bool)> {
        let created = pod.metadata.creation_timestamp.as_ref()?;
        let created = SystemTime::from(created.0);
        let uid = pod.metadata.uid.as_deref()?;
        let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        let tracked = pods.entry(uid.to_string()).or_default();
        if tracked.recorded {
            return None;
        }
        tracked.recorded = true;
        let pulling = match (tracked.first_pull_started, tracked.last_pull_finished) {
            (Some(a), Some(b)) => seconds_between(a, b),
            _ => 0.0,
        };
        let seconds = (seconds_between(created, now) - pulling).max(0.0);
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
        let first_with_network =
            !host_network && !self.first_network_pod_seen.swap(true, Ordering::Relaxed);
        Some((seconds, first_with_network))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pod(uid: &str, created: SystemTime, seen: SystemTime, host_network: bool) -> Pod {
        let created = jiff::Timestamp::try_from(created).unwrap();
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": uid, "uid": uid, "creationTimestamp": created.to_string(),
                "annotations": {"kubernetes.io/config.seen": humantime::format_rfc3339_nanos(seen).to_string()}
            },
            "spec": {"hostNetwork": host_network, "containers": [{"name": "app"}]}
        }))
        .unwrap()
    }

    fn status(phase: &str, running: bool) -> PodStatus {
        let state = if running {
            serde_json::json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
        } else {
            serde_json::json!({"waiting": {"reason": "ContainerCreating"}})
        };
        serde_json::from_value(serde_json::json!({
            "phase": phase,
            "containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}]
        }))
        .unwrap()
    }

    #[test]
    fn the_start_is_measured_from_first_seen_and_the_sli_from_creation_less_the_pulls_once() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let starts = PodStarts::default();
        let p = pod("a", t0, at(2), false);
        starts.pulling("a", at(3));
        starts.pulled("a", at(8));
        assert_eq!(
            starts.observe(&p, true, &status("Pending", false), at(9)),
            Observed { start: None, sli: None }
        );
        assert_eq!(
            starts.observe(&p, true, &status("Running", true), at(10)),
            Observed { start: Some(8.0), sli: Some((5.0, true)) }
        );
        assert_eq!(
            starts.observe(&p, false, &status("Running", true), at(11)),
            Observed { start: None, sli: None },
            "once per pod"
        );
        let b = pod("b", t0, at(1), false);
        assert_eq!(
            starts.observe(&b, true, &status("Running", true), at(4)).sli,
            Some((4.0, false))
        );
        starts.forget("a");
        starts.forget("b");
        assert!(starts.pods.lock().unwrap().is_empty());
    }
}
