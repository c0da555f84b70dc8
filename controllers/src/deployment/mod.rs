//! The Deployment controller, as upstream's `pkg/controller/deployment`: keeps a ReplicaSet per
//! pod template (`<deployment>-<pod-template-hash>`) and moves replicas from the old ones to
//! the new one by the strategy.
//!
//! A sync ([`DeploymentController::sync`]): claim the ReplicaSets (adopt matching orphans,
//! release those that stopped matching); a deployment being deleted only gets its status; a
//! paused one gets the `DeploymentPaused` condition and is only scaled; a change of
//! `spec.replicas` is a scaling event ([`sync`]: proportional scaling across the active
//! ReplicaSets); otherwise the rollout runs: [`rolling`] (`RollingUpdate`, bounded by maxSurge
//! and maxUnavailable) or [`recreate`] (old pods gone before new ones start). Then the status
//! and the `Progressing`/`Available` conditions ([`progress`]); old ReplicaSets beyond
//! `revisionHistoryLimit` are deleted once the rollout is complete.
//!
//! Rollback is `kubectl rollout undo`: kubectl copies an old ReplicaSet's template into the
//! Deployment, the controller finds that ReplicaSet equal to the template and makes it the new
//! one again, with the next revision (its former revisions kept in `revision-history`).

pub mod progress;
pub mod recreate;
pub mod rolling;
pub mod sync;
pub mod util;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::controller_ref::{self, ClaimError, Owner};
use crate::events::{EventType, Recorder, reference};
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::pods::controller_of;
use crate::selector::Selector;
use crate::workqueue::WorkQueue;

pub const NAME: &str = "deployment";
pub const COMPONENT: &str = "deployment-controller";

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("deployment {key}: {message}")]
    Invalid { key: Key, message: String },
}

pub struct DeploymentController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub deployments: Arc<Cache<Deployment>>,
    pub replica_sets: Arc<Cache<ReplicaSet>>,
    pub pods: Arc<Cache<Pod>>,
    pub queue: Arc<WorkQueue<Key>>,
    pub now: fn() -> jiff::Timestamp,
}

impl<C> std::fmt::Debug for DeploymentController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentController").finish_non_exhaustive()
    }
}

pub fn selector_of(d: &Deployment) -> Option<Selector> {
    d.spec.as_ref().and_then(|s| Selector::new(&s.selector).ok()).filter(|s| !s.is_empty())
}

fn resolve(cache: &Cache<Deployment>, ns: &str, r: &OwnerReference) -> Option<Arc<Deployment>> {
    if r.kind != "Deployment" {
        return None;
    }
    cache.get(ns, &r.name).filter(|d| d.metadata.uid.as_deref() == Some(r.uid.as_str()))
}

impl<C: Client<Deployment> + Client<ReplicaSet>> DeploymentController<C> {
    pub fn register(
        self: &Arc<Self>,
        deployments: &Informer<Deployment>,
        replica_sets: &Informer<ReplicaSet>,
        pods: &Informer<Pod>,
    ) {
        let me = self.clone();
        deployments.on_change(move |c| match c {
            Change::Added(d) | Change::Updated { new: d, .. } | Change::Deleted(d) => {
                me.queue.add(Key::of(d.as_ref()))
            }
        });
        let me = self.clone();
        replica_sets.on_change(move |c| match c {
            Change::Added(rs) => me.rs_changed(None, rs),
            Change::Updated { old, new } => me.rs_changed(Some(old), new),
            Change::Deleted(rs) => {
                me.owner_of(rs).into_iter().for_each(|d| me.queue.add(Key::of(d.as_ref())))
            }
        });
        let me = self.clone();
        pods.on_change(move |c| {
            // Recreate waits for old pods to be gone: each deletion may unblock it.
            if let Change::Deleted(pod) = c {
                let ns = pod.namespace().unwrap_or_default();
                let rs =
                    controller_of(&pod.metadata).and_then(|r| me.replica_sets.get(&ns, &r.name));
                if let Some(d) = rs.and_then(|rs| me.owner_of(&rs))
                    && util::is_recreate(&d)
                {
                    me.queue.add(Key::of(d.as_ref()));
                }
            }
        });
    }

    fn owner_of(&self, rs: &ReplicaSet) -> Option<Arc<Deployment>> {
        let r = controller_of(&rs.metadata)?;
        resolve(&self.deployments, &rs.namespace().unwrap_or_default(), r)
    }

    fn rs_changed(&self, old: Option<&ReplicaSet>, new: &ReplicaSet) {
        let ns = new.namespace().unwrap_or_default();
        let (old_ref, new_ref) =
            (old.and_then(|o| controller_of(&o.metadata)), controller_of(&new.metadata));
        if old.is_some()
            && old_ref != new_ref
            && let Some(d) = old_ref.and_then(|r| resolve(&self.deployments, &ns, r))
        {
            self.queue.add(Key::of(d.as_ref()));
        }
        if let Some(r) = new_ref {
            if let Some(d) = resolve(&self.deployments, &ns, r) {
                self.queue.add(Key::of(d.as_ref()));
            }
            return;
        }
        let labels_changed = old.is_none_or(|o| o.metadata.labels != new.metadata.labels);
        if labels_changed || old_ref != new_ref {
            for d in self.deployments.list(&ns) {
                if selector_of(&d).is_some_and(|s| s.matches(new.metadata.labels.as_ref())) {
                    self.queue.add(Key::of(d.as_ref()));
                }
            }
        }
    }

    /// Upstream's `syncDeployment`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let Some(cached) = self.deployments.get_key(key) else { return Ok(()) };
        let mut d = (*cached).clone();
        let Some(selector) = selector_of(&d) else {
            self.recorder.record(
                reference(&d),
                EventType::Warning,
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.".into(),
            );
            let st = d.status.get_or_insert_default();
            if st.observed_generation.unwrap_or(0) < d.metadata.generation.unwrap_or(0) {
                st.observed_generation = d.metadata.generation;
                Client::<Deployment>::replace_status(self.client.as_ref(), &d).await?;
            }
            return Ok(());
        };
        let rss = self.claim(&d, &selector).await?;
        if d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only(&mut d, &rss).await;
        }
        self.check_paused_conditions(&mut d).await?;
        if d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false) {
            return self.sync_scale(&mut d, &rss).await;
        }
        if self.is_scaling_event(&mut d, &rss).await? {
            return self.sync_scale(&mut d, &rss).await;
        }
        if util::is_recreate(&d) {
            let pods = self.pod_map(&d, &selector, &rss);
            self.rollout_recreate(&mut d, &rss, &pods).await
        } else {
            self.rollout_rolling(&mut d, &rss).await
        }
    }

    async fn claim(
        &self,
        d: &Deployment,
        selector: &Selector,
    ) -> Result<Vec<Arc<ReplicaSet>>, ClaimError> {
        let (ns, name) = (d.namespace().unwrap_or_default(), d.name_any());
        let owner = Owner {
            meta: &d.metadata,
            reference: crate::pods::controller_ref(&d.metadata, "apps/v1", "Deployment"),
            selector,
        };
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let client = self.client.clone();
        let (ns2, name2) = (ns.clone(), name.clone());
        let recheck = async move {
            let fresh: Deployment =
                Client::<Deployment>::get(client.as_ref(), &ns2, &name2).await?;
            controller_ref::recheck(&fresh.metadata, &uid, "Deployment", &format!("{ns2}/{name2}"))
        };
        let mut rss = controller_ref::claim::<ReplicaSet, C, _>(
            self.client.as_ref(),
            &owner,
            self.replica_sets.list(&ns),
            recheck,
        )
        .await?;
        rss.sort_by(|a, b| util::by_creation(a, b));
        Ok(rss)
    }

    /// Pods of the deployment's ReplicaSets, by ReplicaSet UID.
    fn pod_map(
        &self,
        d: &Deployment,
        selector: &Selector,
        rss: &[Arc<ReplicaSet>],
    ) -> HashMap<String, Vec<Arc<Pod>>> {
        let mut map: HashMap<String, Vec<Arc<Pod>>> =
            rss.iter().map(|r| (r.metadata.uid.clone().unwrap_or_default(), Vec::new())).collect();
        for p in self.pods.list(&d.namespace().unwrap_or_default()) {
            if !selector.matches(p.metadata.labels.as_ref()) {
                continue;
            }
            if let Some(r) = controller_of(&p.metadata)
                && let Some(list) = map.get_mut(&r.uid)
            {
                list.push(p.clone());
            }
        }
        map
    }

    /// Writes the deployment's status and keeps the working copy current.
    async fn write_status(&self, d: &mut Deployment) -> Result<(), SyncError> {
        let updated = Client::<Deployment>::replace_status(self.client.as_ref(), d).await?;
        *d = updated;
        Ok(())
    }
}

impl<C: Client<Deployment> + Client<ReplicaSet>> crate::worker::Reconcile
    for DeploymentController<C>
{
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        DeploymentController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests;
