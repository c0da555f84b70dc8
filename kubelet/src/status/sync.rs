//! Writes pod statuses to the apiserver, as upstream's status manager `syncPod`/`syncBatch`:
//! a status is posted when its version moved since the last post, and every
//! [`RECONCILE_PERIOD`] any pod whose status in the apiserver differs from ours is posted again
//! (which is also how statuses catch up after an apiserver outage). A pod whose worker has
//! terminated is deleted for good (grace 0, UID precondition): the kubelet confirms the
//! graceful deletion the apiserver started.
//!
//! The patch replaces the status fields the kubelet owns and leaves the others (conditions set
//! by other components, `nominatedNodeName`) alone. A static pod's status is written to its
//! mirror pod (the one that reflects the current manifest), as upstream translates the UID.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::manager::{PodSyncState, StatusManager, source_of};
use crate::config::Source;
use crate::mirror::{MirrorView, full_name, is_mirror_of};

/// How often statuses are compared with the apiserver's and posted again where they differ.
pub const RECONCILE_PERIOD: Duration = Duration::from_secs(10);

/// The status fields the kubelet owns: the patch sets or clears each of them.
const OWNED: [&str; 13] = [
    "phase",
    "conditions",
    "message",
    "reason",
    "hostIP",
    "hostIPs",
    "podIP",
    "podIPs",
    "startTime",
    "initContainerStatuses",
    "containerStatuses",
    "ephemeralContainerStatuses",
    "qosClass",
];

fn to_map(status: Option<&PodStatus>) -> Map<String, Value> {
    match status.map(serde_json::to_value) {
        Some(Ok(Value::Object(m))) => m,
        _ => Map::new(),
    }
}

/// The merge patch that makes the apiserver's status ours in the owned fields. Conditions of
/// types the kubelet does not generate are kept from the apiserver's copy.
pub fn status_patch(uid: &str, ours: &PodStatus, theirs: Option<&PodStatus>) -> Value {
    let ours_map = to_map(Some(ours));
    let mut status = Map::new();
    for key in OWNED {
        status.insert(key.to_string(), ours_map.get(key).cloned().unwrap_or(Value::Null));
    }
    let ours_types: Vec<&str> =
        ours.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
    let foreign: Vec<Value> = theirs
        .and_then(|t| t.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| !ours_types.contains(&c.type_.as_str()))
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    if !foreign.is_empty() {
        let mut all =
            ours_map.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        all.extend(foreign);
        status.insert("conditions".into(), Value::Array(all));
    }
    json!({ "metadata": { "uid": uid }, "status": status })
}

/// Whether the apiserver's status already says what `patch` would write.
pub fn in_sync(patch: &Value, theirs: Option<&PodStatus>) -> bool {
    let theirs = to_map(theirs);
    let Some(fields) = patch["status"].as_object() else { return true };
    fields.iter().all(|(k, v)| theirs.get(k).unwrap_or(&Value::Null) == v)
}

pub struct StatusSync {
    pub manager: Arc<StatusManager>,
    pub client: Client,
    /// The mirror pods bound here, for the statuses of static pods.
    pub mirrors: watch::Receiver<MirrorView>,
}

/// The API object a pod's status goes to: the pod itself, or a static pod's mirror.
#[derive(Debug, Clone, Copy)]
struct Target<'a> {
    uid: &'a str,
    status: Option<&'a PodStatus>,
}

impl std::fmt::Debug for StatusSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusSync").field("pods", &self.manager.len()).finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("pod {namespace}/{name}: writing status: {source}")]
    Status { namespace: String, name: String, source: kube::Error },
    #[error("pod {namespace}/{name}: confirming deletion: {source}")]
    Delete { namespace: String, name: String, source: kube::Error },
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn name_of(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl StatusSync {
    /// Posts until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        // The status version last posted, by the UID of the API object it went to.
        let mut posted: HashMap<String, u64> = HashMap::new();
        let mut changes = self.manager.subscribe();
        let mut ticker = tokio::time::interval(RECONCILE_PERIOD);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut mirrors_open = true;
        loop {
            let reconcile = tokio::select! {
                () = stop.cancelled() => return,
                _ = changes.changed() => false,
                r = self.mirrors.changed(), if mirrors_open => {
                    mirrors_open = r.is_ok();
                    false
                }
                _ = ticker.tick() => true,
            };
            let pods = self.manager.snapshot();
            let mirrors = self.mirrors.borrow_and_update().clone().unwrap_or_default();
            let targets: Vec<(&PodSyncState, Target<'_>)> = pods
                .iter()
                .filter_map(|p| match source_of(&p.pod) {
                    Some(Source::Api) => {
                        Some((p, Target { uid: &p.uid, status: p.pod.status.as_ref() }))
                    }
                    Some(Source::File | Source::Http) => mirrors
                        .get(&full_name(&p.pod))
                        .filter(|m| is_mirror_of(m, &p.pod))
                        .and_then(|m| Some((m.metadata.uid.as_deref()?, m.status.as_ref())))
                        .map(|(uid, status)| (p, Target { uid, status })),
                    _ => None,
                })
                .collect();
            let live: HashSet<&str> = targets.iter().map(|(_, t)| t.uid).collect();
            posted.retain(|uid, _| live.contains(uid.as_str()));
            for (p, target) in targets {
                if let Err(e) = self.sync_pod(p, target, reconcile, &mut posted).await {
                    tracing::warn!(error = %e, "will retry");
                }
            }
        }
    }

    async fn sync_pod(
        &self,
        p: &PodSyncState,
        target: Target<'_>,
        reconcile: bool,
        posted: &mut HashMap<String, u64>,
    ) -> Result<(), SyncError> {
        let (namespace, name) = name_of(&p.pod);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        if p.terminated {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(p.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            return match api.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(pod = %format!("{namespace}/{name}"), "deletion confirmed");
                    self.manager.forget(&p.uid);
                    Ok(())
                }
                Err(e) if is_not_found(&e) => {
                    self.manager.forget(&p.uid);
                    Ok(())
                }
                // A conflict means the UID is another pod's now: ours is gone.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    self.manager.forget(&p.uid);
                    Ok(())
                }
                Err(source) => Err(SyncError::Delete { namespace, name, source }),
            };
        }
        let Some(status) = &p.status else { return Ok(()) };
        let theirs = target.status;
        let patch = status_patch(target.uid, status, theirs);
        let changed = posted.get(target.uid) != Some(&p.version);
        let drifted = reconcile && !in_sync(&patch, theirs);
        if !changed && !drifted {
            return Ok(());
        }
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                posted.insert(target.uid.to_string(), p.version);
                Ok(())
            }
            // Gone from the apiserver: its source will remove it.
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(SyncError::Status { namespace, name, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodCondition;

    use super::*;

    fn cond(t: &str, s: &str) -> PodCondition {
        PodCondition { type_: t.into(), status: s.into(), ..Default::default() }
    }

    #[test]
    fn the_patch_sets_owned_fields_clears_stale_ones_and_keeps_foreign_conditions() {
        let ours = PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![cond("Ready", "True")]),
            pod_ip: Some("10.0.0.2".into()),
            ..Default::default()
        };
        let theirs = PodStatus {
            phase: Some("Pending".into()),
            message: Some("old".into()),
            nominated_node_name: Some("n1".into()),
            conditions: Some(vec![cond("Ready", "False"), cond("example.com/Gate", "True")]),
            ..Default::default()
        };
        let p = status_patch("u1", &ours, Some(&theirs));
        assert_eq!(p["metadata"]["uid"], "u1");
        assert_eq!(p["status"]["phase"], "Running");
        assert_eq!(p["status"]["message"], Value::Null, "a stale message is cleared");
        assert!(p["status"].get("nominatedNodeName").is_none(), "not ours: left alone");
        let types: Vec<&str> = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Ready", "example.com/Gate"]);
        assert!(!in_sync(&p, Some(&theirs)));
    }

    #[test]
    fn a_status_the_apiserver_already_has_is_in_sync() {
        let ours = PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![cond("Ready", "True")]),
            ..Default::default()
        };
        let mut theirs = ours.clone();
        theirs.nominated_node_name = Some("n1".into());
        assert!(in_sync(&status_patch("u", &ours, Some(&theirs)), Some(&theirs)));
        assert!(!in_sync(&status_patch("u", &ours, None), None));
    }
}
