//! Mirror pods: the apiserver's view of static pods, as upstream's mirror client and the pod
//! manager's mirror bookkeeping. Each static pod the kubelet runs has a mirror pod of the same
//! name (`<name>-<node>`) in the apiserver, annotated `kubernetes.io/config.mirror` with the
//! static pod's hash and owned by the Node. The mirror only reflects: deleting it never stops
//! the static pod, and the kubelet creates it again.
//!
//! A static pod's references to node-local ConfigMaps and Secrets are left out of its mirror
//! and recorded in an annotation of ours ([`references`]), since the apiserver refuses mirror
//! pods that reference ConfigMaps or Secrets.
//!
//! [`plan`] is the pure part: from the static pods running here and the mirror pods the
//! apiserver has, the creations and deletions that bring them in step. [`MirrorSync`] runs it
//! whenever either side changes and on a housekeeping tick; mirrors whose static pod is gone
//! are deleted only on that tick, once every source has delivered its pods (so a restarting
//! kubelet does not delete and recreate mirrors it is about to run again).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Source;
use crate::config::mux::SourcesReady;
use crate::status::StatusManager;
use crate::status::manager::source_of;

pub mod references;

/// The mirror pods bound to this node, by `namespace/name`; `None` until the first list.
pub type MirrorView = Option<BTreeMap<String, Pod>>;

/// How often orphaned mirrors are looked for and failed creations retried (upstream's
/// housekeeping period).
pub const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(2);

/// Whether `pod` is a mirror pod.
pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(api::keys::CONFIG_MIRROR))
}

/// `namespace/name` of a pod.
pub fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether `mirror` reflects this version of `static_pod` and is not being deleted: it names
/// the static pod's UID (`config.hash`) and its content, which changes with an edit that keeps
/// the UID ([`crate::config::identity`]).
pub fn is_mirror_of(mirror: &Pod, static_pod: &Pod) -> bool {
    mirror.metadata.deletion_timestamp.is_none()
        && annotation(mirror, api::keys::CONFIG_MIRROR).is_some()
        && annotation(mirror, api::keys::CONFIG_MIRROR)
            == annotation(static_pod, api::keys::CONFIG_HASH)
        && annotation(mirror, api::keys::STATIC_CONTENT)
            == annotation(static_pod, api::keys::STATIC_CONTENT)
}

/// Why a mirror pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its static pod is gone.
    Orphaned,
    /// It mirrors an older version of the manifest.
    Outdated,
    /// Someone deleted it through the API; the kubelet confirms and creates it again.
    DeletedThroughApi,
    /// Its owner is a Node that was deleted (the Node of this name now has another UID).
    OwnerGone,
}

/// One step that brings the mirrors in step with the static pods.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorAction {
    Delete {
        namespace: String,
        name: String,
        uid: String,
        reason: DeleteReason,
    },
    /// Create the mirror of this static pod.
    Create(Arc<Pod>),
}

/// Whether this reconcile may delete mirrors whose static pod is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orphans {
    Delete,
    Keep,
}

/// Whether `mirror` is owned by the Node of UID `node_uid` (any, while it is unknown).
fn owned_by(mirror: &Pod, node_uid: Option<&str>) -> bool {
    let Some(uid) = node_uid else { return true };
    mirror.metadata.owner_references.iter().flatten().any(|o| o.kind == "Node" && o.uid == uid)
}

/// The deletions (first) and creations that make `mirrors` reflect `static_pods`, each owned
/// by the Node of UID `node_uid` (when known).
pub fn plan(
    static_pods: &[Arc<Pod>],
    mirrors: &BTreeMap<String, Pod>,
    orphans: Orphans,
    node_uid: Option<&str>,
) -> Vec<MirrorAction> {
    let mut deletes = Vec::new();
    let mut creates = Vec::new();
    let delete = |m: &Pod, reason| MirrorAction::Delete {
        namespace: m.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        name: m.metadata.name.clone().unwrap_or_default(),
        uid: m.metadata.uid.clone().unwrap_or_default(),
        reason,
    };
    let wanted: HashSet<String> = static_pods.iter().map(|p| full_name(p)).collect();
    for pod in static_pods {
        match mirrors.get(&full_name(pod)) {
            Some(m) if is_mirror_of(m, pod) && owned_by(m, node_uid) => {}
            Some(m) => {
                let reason = if m.metadata.deletion_timestamp.is_some() {
                    DeleteReason::DeletedThroughApi
                } else if is_mirror_of(m, pod) {
                    DeleteReason::OwnerGone
                } else {
                    DeleteReason::Outdated
                };
                deletes.push(delete(m, reason));
                creates.push(MirrorAction::Create(pod.clone()));
            }
            None => creates.push(MirrorAction::Create(pod.clone())),
        }
    }
    if orphans == Orphans::Delete {
        for (name, m) in mirrors {
            if !wanted.contains(name) {
                deletes.push(delete(m, DeleteReason::Orphaned));
            }
        }
    }
    deletes.extend(creates);
    deletes
}

/// The mirror pod of `static_pod`: a copy with the mirror annotation, owned by the Node, with
/// what the apiserver assigns (UID, resourceVersion, timestamps, status) left out, and its
/// node-local ConfigMap and Secret references moved into the [`api::keys::STATIC_CONFIG`]
/// annotation ([`references`]).
pub fn mirror_pod(static_pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let mut annotations = static_pod.metadata.annotations.clone().unwrap_or_default();
    let hash = annotations.get(api::keys::CONFIG_HASH).cloned().unwrap_or_default();
    annotations.insert(api::keys::CONFIG_MIRROR.into(), hash);
    annotations.remove(api::keys::STATIC_CONFIG);
    let mut spec = static_pod.spec.clone();
    if let Some(taken) = spec.as_mut().and_then(references::take_node_local) {
        annotations.insert(api::keys::STATIC_CONFIG.into(), taken);
    }
    Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: static_pod.metadata.namespace.clone(),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node_name.into(),
                uid: node_uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// A failure to create or delete a mirror pod; retried on the next housekeeping tick.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("node {node}: not registered yet, mirror pods wait for it: {source}")]
    Node { node: String, source: kube::Error },
    #[error("mirror pod {pod}: creating: {source}")]
    Create { pod: String, source: kube::Error },
    #[error("mirror pod {pod}: a pod of that name exists and is not a mirror; not replacing it")]
    NameTaken { pod: String },
    #[error("mirror pod {pod}: deleting: {source}")]
    Delete { pod: String, source: kube::Error },
}

/// Keeps the mirror pods in step with the static pods the kubelet runs.
pub struct MirrorSync {
    pub statuses: Arc<StatusManager>,
    pub mirrors: watch::Receiver<MirrorView>,
    pub client: Client,
    pub node_name: String,
    /// The Node as last registered or posted: mirrors must be owned by its UID.
    pub node: watch::Receiver<Arc<Node>>,
    pub sources_ready: Arc<SourcesReady>,
}

impl std::fmt::Debug for MirrorSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorSync").field("node_name", &self.node_name).finish_non_exhaustive()
    }
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

impl MirrorSync {
    /// Reconciles until `stop`.
    pub async fn run(mut self, stop: CancellationToken) {
        let mut changes = self.statuses.subscribe();
        let mut ticker = tokio::time::interval(HOUSEKEEPING_PERIOD);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Static pods whose mirror could not be created: retried on the tick, warned once.
        let mut failing: HashSet<String> = HashSet::new();
        let mut view_open = true;
        let mut node_open = true;
        loop {
            let housekeeping = tokio::select! {
                () = stop.cancelled() => return,
                _ = changes.changed() => false,
                r = self.node.changed(), if node_open => {
                    node_open = r.is_ok();
                    false
                }
                r = self.mirrors.changed(), if view_open => {
                    view_open = r.is_ok();
                    false
                }
                _ = ticker.tick() => true,
            };
            let Some(mirrors) = self.mirrors.borrow_and_update().clone() else { continue };
            let static_pods: Vec<Arc<Pod>> = self
                .statuses
                .snapshot()
                .into_iter()
                .filter(|p| !p.terminated && source_of(&p.pod).is_some_and(Source::is_static))
                .map(|p| p.pod)
                .collect();
            let orphans = if housekeeping && self.sources_ready.pods_handled() {
                Orphans::Delete
            } else {
                Orphans::Keep
            };
            let node_uid = self.node.borrow_and_update().metadata.uid.clone();
            for action in plan(&static_pods, &mirrors, orphans, node_uid.as_deref()) {
                let key = match &action {
                    MirrorAction::Create(p) => p.metadata.uid.clone().unwrap_or_default(),
                    MirrorAction::Delete { .. } => String::new(),
                };
                if !housekeeping && failing.contains(&key) {
                    continue;
                }
                match self.apply(action).await {
                    Ok(()) => {
                        failing.remove(&key);
                    }
                    Err(e) if key.is_empty() || failing.insert(key) => {
                        tracing::warn!(error = %e, "mirror pods: will retry")
                    }
                    Err(e) => tracing::debug!(error = %e, "mirror pods: still failing"),
                }
            }
        }
    }

    async fn apply(&self, action: MirrorAction) -> Result<(), MirrorError> {
        match action {
            MirrorAction::Delete { namespace, name, uid, reason } => {
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
                let params = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                    ..DeleteParams::default()
                };
                let pod = format!("{namespace}/{name}");
                match pods.delete(&name, &params).await {
                    Ok(_) => {
                        tracing::info!(%pod, ?reason, "deleted mirror pod");
                        Ok(())
                    }
                    // Already gone, or the name is another object's now.
                    Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
                    Err(source) => Err(MirrorError::Delete { pod, source }),
                }
            }
            MirrorAction::Create(static_pod) => {
                // Read each time, as upstream does: a Node deleted and registered again has a
                // new UID, and mirrors must be owned by the Node that exists.
                let nodes: Api<Node> = Api::all(self.client.clone());
                let node = nodes
                    .get(&self.node_name)
                    .await
                    .map_err(|source| MirrorError::Node { node: self.node_name.clone(), source })?;
                let uid = node.metadata.uid.unwrap_or_default();
                let mirror = mirror_pod(&static_pod, &self.node_name, &uid);
                let pod = full_name(&mirror);
                let namespace = mirror.metadata.namespace.as_deref().unwrap_or("default");
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
                match pods.create(&PostParams::default(), &mirror).await {
                    Ok(_) => {
                        tracing::info!(%pod, "created mirror pod");
                        Ok(())
                    }
                    Err(e) if status_code(&e) == Some(409) => {
                        let name = mirror.metadata.name.as_deref().unwrap_or_default();
                        match pods.get_opt(name).await {
                            // Ours already (the view had not caught up), or an outdated
                            // mirror the next reconcile replaces.
                            Ok(Some(existing)) if is_mirror(&existing) => Ok(()),
                            Ok(Some(_)) => Err(MirrorError::NameTaken { pod }),
                            Ok(None) => Ok(()),
                            Err(source) => Err(MirrorError::Create { pod, source }),
                        }
                    }
                    Err(source) => Err(MirrorError::Create { pod, source }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
