//! The ReplicaSet controller, as upstream's `pkg/controller/replicaset`: keeps
//! `spec.replicas` active pods for each ReplicaSet.
//!
//! A sync ([`ReplicaSetController::sync`]): read the ReplicaSet and the namespace's pods from
//! the caches, keep the active ones, claim them ([`controller_ref`](crate::controller_ref):
//! adopt matching orphans, release pods that stopped matching), then, if the expectations of
//! its last round are met, create the shortfall in slow-start batches or delete the surplus
//! least valuable first ([`ranking`](crate::ranking)), at most `burstReplicas` (500) per sync;
//! then write the status ([`status`]). Pods are named by `generateName` `<rs>-`, so the
//! apiserver adds 5 random characters.
//!
//! The informer handlers ([`ReplicaSetController::register`]) map pod changes to the
//! ReplicaSet controlling them (and record observed creates and deletes in the expectations),
//! or for an orphan to every ReplicaSet whose selector matches it.

pub mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::controller_ref::{self, ClaimError, Owner};
use crate::events::{EventType, Recorder, reference};
use crate::expectations::Expectations;
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::pod_control::delete_pod;
use crate::pods::{self, controller_of, pod_key};
use crate::ranking;
use crate::selector::Selector;
use crate::slow_start::slow_start_batch;
use crate::workqueue::WorkQueue;
use status::ManageFailure;

pub const NAME: &str = "replicaset";
/// The `source.component` of its events.
pub const COMPONENT: &str = "replicaset-controller";
/// Upstream's `BurstReplicas`: creates or deletes per sync at most.
pub const BURST_REPLICAS: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("{0}")]
    Manage(String),
    #[error("updating the status of ReplicaSet {key}: {source}")]
    Status { key: Key, source: ApiError },
}

/// The pod a ReplicaSet creates from its template (upstream's `GetPodFromTemplate`).
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    owner_name: &str,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    // Upstream's prefix: `<owner>-` when that is a valid name prefix, the apiserver adding five
    // random characters.
    let prefix =
        if owner_name.len() < 253 { format!("{owner_name}-") } else { owner_name.to_string() };
    Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            generate_name: Some(prefix),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The ReplicaSet controller; `C` makes its API calls.
pub struct ReplicaSetController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub replica_sets: Arc<Cache<ReplicaSet>>,
    pub pods: Arc<Cache<Pod>>,
    pub queue: Arc<WorkQueue<Key>>,
    pub expectations: Arc<Expectations>,
    pub burst_replicas: usize,
    /// The wall clock (availability after `minReadySeconds`); tests set it.
    pub now: fn() -> jiff::Timestamp,
}

impl<C> std::fmt::Debug for ReplicaSetController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetController").finish_non_exhaustive()
    }
}

fn selector_of(rs: &ReplicaSet) -> Option<Selector> {
    rs.spec.as_ref().and_then(|s| Selector::new(&s.selector).ok())
}

/// The ReplicaSet a controller reference names, if it is in the cache with that UID.
fn resolve(cache: &Cache<ReplicaSet>, ns: &str, r: &OwnerReference) -> Option<Arc<ReplicaSet>> {
    if r.kind != "ReplicaSet" {
        return None;
    }
    cache.get(ns, &r.name).filter(|rs| rs.metadata.uid.as_deref() == Some(r.uid.as_str()))
}

/// ReplicaSets in the pod's namespace whose selector matches it.
fn matching(cache: &Cache<ReplicaSet>, pod: &Pod) -> Vec<Arc<ReplicaSet>> {
    let ns = pod.namespace().unwrap_or_default();
    let found: Vec<_> = cache
        .list(&ns)
        .into_iter()
        .filter(|rs| selector_of(rs).is_some_and(|s| s.matches(pod.metadata.labels.as_ref())))
        .collect();
    if found.len() > 1 {
        tracing::warn!(pod = %pod_key(pod), "user error: more than one ReplicaSet selects this pod's labels");
    }
    found
}

impl<C: Client<Pod> + Client<ReplicaSet>> ReplicaSetController<C> {
    /// Registers the informer handlers that feed the queue.
    pub fn register(self: &Arc<Self>, replica_sets: &Informer<ReplicaSet>, pods: &Informer<Pod>) {
        let me = self.clone();
        replica_sets.on_change(move |c| match c {
            Change::Added(rs) => me.queue.add(Key::of(rs.as_ref())),
            Change::Updated { old, new } => {
                if old.metadata.uid != new.metadata.uid {
                    me.expectations.delete(&Key::of(old.as_ref()));
                }
                me.queue.add(Key::of(new.as_ref()));
            }
            Change::Deleted(rs) => {
                let key = Key::of(rs.as_ref());
                me.expectations.delete(&key);
                me.queue.add(key);
            }
        });
        let me = self.clone();
        pods.on_change(move |c| match c {
            Change::Added(p) => me.pod_added(p),
            Change::Updated { old, new } => me.pod_updated(old, new),
            Change::Deleted(p) => me.pod_deleted(p),
        });
    }

    fn pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            return self.pod_deleted(pod);
        }
        let ns = pod.namespace().unwrap_or_default();
        if let Some(r) = controller_of(&pod.metadata) {
            if let Some(rs) = resolve(&self.replica_sets, &ns, r) {
                let key = Key::of(rs.as_ref());
                self.expectations.creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        for rs in matching(&self.replica_sets, pod) {
            self.queue.add(Key::of(rs.as_ref()));
        }
    }

    fn pod_updated(&self, old: &Pod, new: &Pod) {
        let label_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            self.pod_deleted(new);
            if label_changed {
                self.pod_deleted(old);
            }
            return;
        }
        let ns = new.namespace().unwrap_or_default();
        let (old_ref, new_ref) = (controller_of(&old.metadata), controller_of(&new.metadata));
        let ref_changed = old_ref != new_ref;
        if ref_changed
            && let Some(r) = old_ref
            && let Some(rs) = resolve(&self.replica_sets, &ns, r)
        {
            self.queue.add(Key::of(rs.as_ref()));
        }
        if let Some(r) = new_ref {
            if let Some(rs) = resolve(&self.replica_sets, &ns, r) {
                let key = Key::of(rs.as_ref());
                self.queue.add(key.clone());
                let min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
                if !pods::is_ready(old) && pods::is_ready(new) && min_ready > 0 {
                    let secs = u64::try_from(min_ready).unwrap_or(0) + 1;
                    self.queue.add_after(key, Duration::from_secs(secs));
                }
            }
            return;
        }
        if label_changed || ref_changed {
            for rs in matching(&self.replica_sets, new) {
                self.queue.add(Key::of(rs.as_ref()));
            }
        }
    }

    fn pod_deleted(&self, pod: &Pod) {
        let Some(r) = controller_of(&pod.metadata) else { return };
        let ns = pod.namespace().unwrap_or_default();
        if let Some(rs) = resolve(&self.replica_sets, &ns, r) {
            let key = Key::of(rs.as_ref());
            self.expectations.deletion_observed(&key, &pod_key(pod));
            self.queue.add(key);
        }
    }

    /// Upstream's `syncReplicaSet`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let Some(rs) = self.replica_sets.get_key(key) else {
            self.expectations.delete(key);
            return Ok(());
        };
        let needs_sync = self.expectations.satisfied(key);
        let Some(selector) = selector_of(&rs) else {
            tracing::warn!(replicaset = %key, "invalid selector; nothing to do");
            return Ok(());
        };
        let active: Vec<Arc<Pod>> =
            self.pods.list(&key.namespace).into_iter().filter(|p| pods::is_active(p)).collect();
        let mut owned = self.claim(&rs, &selector, active).await?;
        owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let failure = if needs_sync && rs.metadata.deletion_timestamp.is_none() {
            self.manage(&rs, key, &owned).await.err()
        } else {
            None
        };
        let now = (self.now)();
        let status = status::calculate(&rs, &owned, failure.as_ref(), now);
        let updated = self.update_status(&rs, status).await?;
        let spec = updated.spec.as_ref();
        let (min_ready, desired) = (
            spec.and_then(|s| s.min_ready_seconds).unwrap_or(0),
            spec.and_then(|s| s.replicas).unwrap_or(1),
        );
        let st = updated.status.clone().unwrap_or_default();
        if failure.is_none()
            && min_ready > 0
            && st.ready_replicas.unwrap_or(0) == desired
            && st.available_replicas.unwrap_or(0) != desired
        {
            self.queue
                .add_after(key.clone(), Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)));
        }
        match failure {
            Some(f) => Err(SyncError::Manage(f.message)),
            None => Ok(()),
        }
    }

    async fn claim(
        &self,
        rs: &ReplicaSet,
        selector: &Selector,
        pods: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>, ClaimError> {
        let owner = Owner {
            meta: &rs.metadata,
            reference: pods::controller_ref(&rs.metadata, "apps/v1", "ReplicaSet"),
            selector,
        };
        let (ns, name) = (rs.namespace().unwrap_or_default(), rs.name_any());
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let client = self.client.clone();
        let recheck = async move {
            let fresh: ReplicaSet = Client::<ReplicaSet>::get(client.as_ref(), &ns, &name).await?;
            controller_ref::recheck(&fresh.metadata, &uid, "ReplicaSet", &format!("{ns}/{name}"))
        };
        controller_ref::claim::<Pod, C, _>(self.client.as_ref(), &owner, pods, recheck).await
    }

    /// Upstream's `manageReplicas`: create or delete toward `spec.replicas`.
    async fn manage(
        &self,
        rs: &ReplicaSet,
        key: &Key,
        pods: &[Arc<Pod>],
    ) -> Result<(), ManageFailure> {
        let desired =
            usize::try_from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)).unwrap_or(0);
        let about = reference(rs);
        if pods.len() < desired {
            let diff = (desired - pods.len()).min(self.burst_replicas);
            self.expectations.expect_creations(key, diff);
            tracing::debug!(replicaset = %key, need = desired, creating = diff, "too few replicas");
            let Some(template) = rs.spec.as_ref().and_then(|s| s.template.clone()) else {
                return Err(ManageFailure { message: "the ReplicaSet has no pod template".into() });
            };
            let pod = pod_from_template(
                &template,
                &key.namespace,
                &key.name,
                pods::controller_ref(&rs.metadata, "apps/v1", "ReplicaSet"),
            );
            let (created, err) = slow_start_batch(diff, || {
                let (pod, about) = (pod.clone(), about.clone());
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
            for _ in created..diff {
                self.expectations.creation_observed(key);
            }
            return err.map_or(Ok(()), |e| Err(ManageFailure { message: e.to_string() }));
        }
        if pods.len() > desired {
            let diff = (pods.len() - desired).min(self.burst_replicas);
            let related = self.related_pods(rs);
            let victims = ranking::to_delete(pods, &related, diff, (self.now)());
            self.expectations.expect_deletions(key, victims.iter().map(|p| pod_key(p)).collect());
            tracing::debug!(replicaset = %key, need = desired, deleting = diff, "too many replicas");
            let results = futures::future::join_all(victims.iter().map(|p| {
                let (client, recorder) = (self.client.as_ref(), self.recorder.as_ref());
                delete_pod(client, recorder, &self.expectations, key, p, about.clone())
            }))
            .await;
            if let Some(e) = results.into_iter().find_map(Result::err) {
                return Err(ManageFailure { message: e.to_string() });
            }
        }
        Ok(())
    }

    /// Pods of every ReplicaSet with the same controller (upstream's
    /// `getIndirectlyRelatedPods`), for the co-location rank.
    fn related_pods(&self, rs: &ReplicaSet) -> Vec<Arc<Pod>> {
        let ns = rs.namespace().unwrap_or_default();
        let siblings: Vec<Arc<ReplicaSet>> = match controller_of(&rs.metadata) {
            Some(owner) => self
                .replica_sets
                .list(&ns)
                .into_iter()
                .filter(|o| controller_of(&o.metadata).is_some_and(|r| r.uid == owner.uid))
                .collect(),
            None => self.replica_sets.get(&ns, &rs.name_any()).into_iter().collect(),
        };
        let mut seen = BTreeMap::new();
        for sibling in siblings {
            let Some(sel) = selector_of(&sibling) else { continue };
            for p in self.pods.list(&ns) {
                if sel.matches(p.metadata.labels.as_ref()) {
                    seen.entry(p.metadata.uid.clone().unwrap_or_default()).or_insert(p);
                }
            }
        }
        seen.into_values().collect()
    }

    /// Writes the status when it changed (upstream retries once after a fresh read).
    async fn update_status(
        &self,
        rs: &ReplicaSet,
        status: k8s_openapi::api::apps::v1::ReplicaSetStatus,
    ) -> Result<ReplicaSet, SyncError> {
        if !status::needs_update(rs, &status) {
            return Ok(rs.clone());
        }
        let key = Key::of(rs);
        let mut status = status;
        status.observed_generation = rs.metadata.generation;
        let mut current = rs.clone();
        for attempt in 0..2 {
            current.status = Some(status.clone());
            match Client::<ReplicaSet>::replace_status(self.client.as_ref(), &current).await {
                Ok(updated) => return Ok(updated),
                Err(e) if attempt == 0 && e.is_conflict() => {
                    current =
                        Client::<ReplicaSet>::get(self.client.as_ref(), &key.namespace, &key.name)
                            .await
                            .map_err(|source| SyncError::Status { key: key.clone(), source })?;
                }
                Err(source) => return Err(SyncError::Status { key, source }),
            }
        }
        Ok(current)
    }
}

impl<C: Client<Pod> + Client<ReplicaSet>> crate::worker::Reconcile for ReplicaSetController<C> {
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        ReplicaSetController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests;
