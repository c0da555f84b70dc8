//! [`StatusManager`]: the desired pods and their latest statuses, shared by the sync loop and
//! pod workers (which write), the server (which reads) and [`sync`](super::sync) (which writes
//! them to the apiserver). Each status change bumps a version, so the syncer posts only what
//! changed; a pod whose worker finished is kept, marked terminated, until its deletion is
//! confirmed to the apiserver.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use tokio::sync::watch;

use super::now_time;
use crate::config::Source;

#[derive(Debug)]
struct Entry {
    pod: Arc<Pod>,
    status: Option<PodStatus>,
    version: u64,
    terminated: bool,
}

/// One pod as the syncer sees it.
#[derive(Debug, Clone)]
pub struct PodSyncState {
    pub uid: String,
    /// The pod as its source last delivered it (for API pods: with the apiserver's status).
    pub pod: Arc<Pod>,
    pub status: Option<PodStatus>,
    /// Increases with every change of `status`.
    pub version: u64,
    /// Its worker has stopped everything: the apiserver may now remove the object.
    pub terminated: bool,
}

#[derive(Debug)]
pub struct StatusManager {
    pods: RwLock<BTreeMap<String, Entry>>,
    /// Marked changed for every subscriber whenever a pod, its status or its state changes.
    changed: watch::Sender<()>,
}

impl Default for StatusManager {
    fn default() -> Self {
        Self { pods: RwLock::default(), changed: watch::Sender::new(()) }
    }
}

/// The source a pod came from (`kubernetes.io/config.source`).
pub fn source_of(pod: &Pod) -> Option<Source> {
    Source::parse(pod.metadata.annotations.as_ref()?.get(api::keys::CONFIG_SOURCE)?)
}

impl StatusManager {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.pods.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.pods.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the pod as its source has it now (its status is kept).
    pub fn set_pod(&self, pod: Arc<Pod>) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut pods = self.write();
        match pods.get_mut(&uid) {
            Some(e) => {
                e.pod = pod;
                e.terminated = false;
            }
            None => {
                pods.insert(uid, Entry { pod, status: None, version: 0, terminated: false });
            }
        }
        drop(pods);
        self.changed.send_replace(());
    }

    /// Stores a freshly generated status, keeping `startTime` and the transition times of
    /// conditions that did not change.
    pub fn set_status(&self, uid: &str, mut status: PodStatus, now: SystemTime) {
        let mut pods = self.write();
        let Some(entry) = pods.get_mut(uid) else { return };
        let old = entry.status.as_ref();
        status.start_time = old.and_then(|o| o.start_time.clone()).or_else(|| Some(now_time(now)));
        let old_conditions: HashMap<&str, &PodCondition> = old
            .and_then(|o| o.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c))
            .collect();
        for c in status.conditions.iter_mut().flatten() {
            c.last_transition_time = match old_conditions.get(c.type_.as_str()) {
                Some(o) if o.status == c.status => o.last_transition_time.clone(),
                _ => Some(now_time(now)),
            };
        }
        if entry.status.as_ref() != Some(&status) {
            entry.status = Some(status);
            entry.version += 1;
            drop(pods);
            self.changed.send_replace(());
        }
    }

    /// The pod's worker has finished. A pod from the apiserver stays until the syncer has
    /// confirmed its deletion there ([`forget`](Self::forget)); any other pod goes now.
    pub fn terminated(&self, uid: &str) {
        let mut pods = self.write();
        let Some(entry) = pods.get_mut(uid) else { return };
        if source_of(&entry.pod) == Some(Source::Api) {
            entry.terminated = true;
            drop(pods);
            self.changed.send_replace(());
        } else {
            pods.remove(uid);
            drop(pods);
            self.changed.send_replace(());
        }
    }

    /// Drops a pod that never ran (rejected at admission) or whose deletion is confirmed.
    pub fn remove(&self, uid: &str) {
        if self.write().remove(uid).is_some() {
            self.changed.send_replace(());
        }
    }

    /// Drops a terminated pod once the apiserver no longer needs it; a pod that was started
    /// again meanwhile (same UID back from its source) is kept.
    pub fn forget(&self, uid: &str) {
        let mut pods = self.write();
        if pods.get(uid).is_some_and(|e| e.terminated) {
            pods.remove(uid);
        }
    }

    /// A receiver whose `changed()` completes after each change (several coalesce into one).
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    pub fn snapshot(&self) -> Vec<PodSyncState> {
        self.read()
            .iter()
            .map(|(uid, e)| PodSyncState {
                uid: uid.clone(),
                pod: e.pod.clone(),
                status: e.status.clone(),
                version: e.version,
                terminated: e.terminated,
            })
            .collect()
    }

    /// The pod as its source last delivered it, until its deletion is confirmed.
    pub fn pod(&self, uid: &str) -> Option<Arc<Pod>> {
        self.read().get(uid).map(|e| e.pod.clone())
    }

    /// Whether the pod's status phase is `Succeeded` or `Failed`.
    pub fn finished(&self, uid: &str) -> bool {
        self.read()
            .get(uid)
            .and_then(|e| e.status.as_ref()?.phase.as_deref())
            .is_some_and(|p| matches!(p, "Succeeded" | "Failed"))
    }

    /// The pods admitted and running: not finished, and no deletion requested (upstream's
    /// `filterOutInactivePods`: a pod on its way out is left to its termination): what the
    /// shutdown manager stops.
    pub fn active_pods(&self) -> Vec<Pod> {
        self.pods()
            .into_iter()
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
                    && p.metadata.deletion_timestamp.is_none()
            })
            .collect()
    }

    pub fn status(&self, uid: &str) -> Option<PodStatus> {
        self.read().get(uid).and_then(|e| e.status.clone())
    }

    /// Every pod that has not terminated, with its status, as `/pods` serves them.
    pub fn pods(&self) -> Vec<Pod> {
        self.read()
            .values()
            .filter(|e| !e.terminated)
            .map(|e| {
                let mut p = (*e.pod).clone();
                if let Some(s) = &e.status {
                    p.status = Some(s.clone());
                }
                p
            })
            .collect()
    }

    /// The pods not yet terminated, by namespace and name: whether each is Ready and what it
    /// declares it starts after ([`crate::ordering`]).
    pub fn ordering_view(&self) -> HashMap<crate::ordering::PodName, crate::ordering::Known> {
        self.read()
            .values()
            .filter(|e| !e.terminated)
            .map(|e| {
                let m = &e.pod.metadata;
                let name = (
                    m.namespace.clone().unwrap_or_else(|| "default".into()),
                    m.name.clone().unwrap_or_default(),
                );
                let ready = e
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                (name, crate::ordering::Known { ready, after: crate::ordering::after(&e.pod) })
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, source: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "default", "uid": uid,
                             "annotations": {"kubernetes.io/config.source": source}},
            }))
            .unwrap(),
        )
    }

    fn phase(p: &str) -> PodStatus {
        PodStatus { phase: Some(p.into()), ..Default::default() }
    }

    #[test]
    fn versions_move_only_when_the_status_changes() {
        let m = StatusManager::default();
        m.set_pod(pod("u", "api"));
        let now = SystemTime::UNIX_EPOCH;
        m.set_status("u", phase("Pending"), now);
        m.set_status("u", phase("Pending"), now);
        assert_eq!(m.snapshot()[0].version, 1);
        m.set_status("u", phase("Running"), now);
        assert_eq!(m.snapshot()[0].version, 2);
    }

    #[test]
    fn api_pods_wait_for_the_deletion_to_be_confirmed_and_file_pods_do_not() {
        let m = StatusManager::default();
        m.set_pod(pod("a", "api"));
        m.set_pod(pod("f", "file"));
        m.terminated("a");
        m.terminated("f");
        let left = m.snapshot();
        assert_eq!(left.len(), 1);
        assert!(left[0].terminated && left[0].uid == "a");
        assert!(m.pods().is_empty(), "terminated pods are not served");
        m.forget("a");
        assert!(m.is_empty());
    }
}
