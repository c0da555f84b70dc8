//! The DaemonSet controller, as upstream's `pkg/controller/daemon`: one pod of each DaemonSet
//! on every node that should run it.
//!
//! A sync ([`DaemonSetController::sync`]): read the DaemonSet, the nodes and the namespace's
//! pods from the caches; decide per node whether it should run the pod ([`util::placement`]:
//! node selector, required node affinity, taints against the template's tolerations plus the
//! daemon ones); claim the pods ([`controller_ref`](crate::controller_ref)) and group them by
//! the node they are for; then, once the expectations of the last round are met, create and
//! delete what [`plan::manage`] says (a pod where one is missing, surplus and failed pods, pods
//! on nodes that should not run them), and, when that left nothing pending and the strategy is
//! `RollingUpdate`, what [`plan::rolling_update`] says (`OnDelete`: old pods are replaced only
//! once a user deletes them). Last the status counts ([`status`]).
//!
//! Placement is upstream's since 1.12: each pod gets a required node affinity
//! `metadata.name In [node]` ([`util::pin_to_node`]) and the scheduler binds it. Pods are named
//! `<ds>-` plus the apiserver's five random characters and carry `controller-revision-hash`
//! (the template's hash, as the Deployment controller computes it) and
//! `pod-template-generation` labels. A pod that keeps failing on a node is replaced at most
//! once per [`backoff`] period. Each template is a ControllerRevision ([`history`]).

pub mod backoff;
pub mod history;
pub mod plan;
pub mod status;
pub mod util;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::controller_ref::{self, ClaimError, Owner};
use crate::events::{EventType, Recorder, reference};
use crate::expectations::Expectations;
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::pods::{self, controller_of, pod_key};
use crate::selector::Selector;
use crate::slow_start::slow_start_batch;
use crate::workqueue::WorkQueue;
use plan::{NodePods, Plan};

pub const NAME: &str = "daemonset";
/// The `source.component` of its events.
pub const COMPONENT: &str = "daemonset-controller";
/// Upstream's `BurstReplicas` for DaemonSets: creates or deletes per sync at most.
pub const BURST_REPLICAS: usize = 250;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error("DaemonSet {key}: {message}")]
    Strategy { key: Key, message: String },
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The DaemonSet controller; `C` makes its API calls.
pub struct DaemonSetController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub daemon_sets: Arc<Cache<DaemonSet>>,
    pub nodes: Arc<Cache<Node>>,
    pub pods: Arc<Cache<Pod>>,
    pub revisions: Arc<Cache<ControllerRevision>>,
    pub queue: Arc<WorkQueue<Key>>,
    pub expectations: Arc<Expectations>,
    pub burst_replicas: usize,
    /// The wall clock (availability after `minReadySeconds`); tests set it.
    pub now: fn() -> jiff::Timestamp,
    /// Deletions of failed pods per DaemonSet, generation and node.
    pub failed_pods_backoff: backoff::Backoff,
}

impl<C> std::fmt::Debug for DaemonSetController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSetController").finish_non_exhaustive()
    }
}

fn selector_of(ds: &DaemonSet) -> Option<Selector> {
    ds.spec.as_ref().and_then(|s| Selector::new(&s.selector).ok())
}

fn resolve(cache: &Cache<DaemonSet>, ns: &str, r: &OwnerReference) -> Option<Arc<DaemonSet>> {
    if r.kind != "DaemonSet" {
        return None;
    }
    cache.get(ns, &r.name).filter(|d| d.metadata.uid.as_deref() == Some(r.uid.as_str()))
}

fn is_rolling(ds: &DaemonSet) -> bool {
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate"
}

/// Whether a node change can change where daemon pods run (upstream's `shouldIgnoreNodeUpdate`
/// ignores status-only updates).
fn placement_may_change(old: &Node, new: &Node) -> bool {
    old.metadata.labels != new.metadata.labels || old.spec != new.spec
}

impl<C: Client<Pod> + Client<DaemonSet> + Client<ControllerRevision>> DaemonSetController<C> {
    /// Registers the informer handlers that feed the queue.
    pub fn register(
        self: &Arc<Self>,
        daemon_sets: &Informer<DaemonSet>,
        nodes: &Informer<Node>,
        pods: &Informer<Pod>,
    ) {
        let me = self.clone();
        daemon_sets.on_change(move |c| match c {
            Change::Added(d) | Change::Updated { new: d, .. } => me.queue.add(Key::of(d.as_ref())),
            Change::Deleted(d) => {
                let key = Key::of(d.as_ref());
                me.expectations.delete(&key);
                me.queue.add(key);
            }
        });
        let me = self.clone();
        nodes.on_change(move |c| {
            let relevant = match c {
                Change::Updated { old, new } => placement_may_change(old, new),
                Change::Added(_) | Change::Deleted(_) => true,
            };
            if relevant {
                for d in me.daemon_sets.list_all() {
                    me.queue.add(Key::of(d.as_ref()));
                }
            }
        });
        let me = self.clone();
        pods.on_change(move |c| match c {
            Change::Added(p) => me.pod_added(p),
            Change::Updated { old, new } => me.pod_updated(old, new),
            Change::Deleted(p) => me.pod_deleted(p),
        });
    }

    fn matching(&self, pod: &Pod) -> Vec<Arc<DaemonSet>> {
        let ns = pod.namespace().unwrap_or_default();
        self.daemon_sets
            .list(&ns)
            .into_iter()
            .filter(|d| selector_of(d).is_some_and(|s| s.matches(pod.metadata.labels.as_ref())))
            .collect()
    }

    fn pod_added(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            return self.pod_deleted(pod);
        }
        let ns = pod.namespace().unwrap_or_default();
        if let Some(r) = controller_of(&pod.metadata) {
            if let Some(d) = resolve(&self.daemon_sets, &ns, r) {
                let key = Key::of(d.as_ref());
                self.expectations.creation_observed(&key);
                self.queue.add(key);
            }
            return;
        }
        for d in self.matching(pod) {
            self.queue.add(Key::of(d.as_ref()));
        }
    }

    fn pod_updated(&self, old: &Pod, new: &Pod) {
        if new.metadata.deletion_timestamp.is_some() {
            return self.pod_deleted(new);
        }
        let ns = new.namespace().unwrap_or_default();
        let (old_ref, new_ref) = (controller_of(&old.metadata), controller_of(&new.metadata));
        if old_ref != new_ref
            && let Some(d) = old_ref.and_then(|r| resolve(&self.daemon_sets, &ns, r))
        {
            self.queue.add(Key::of(d.as_ref()));
        }
        if let Some(r) = new_ref {
            if let Some(d) = resolve(&self.daemon_sets, &ns, r) {
                let key = Key::of(d.as_ref());
                let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
                if !pods::is_ready(old) && pods::is_ready(new) && min_ready > 0 {
                    let secs = u64::try_from(min_ready).unwrap_or(0) + 1;
                    self.queue.add_after(key.clone(), Duration::from_secs(secs));
                }
                self.queue.add(key);
            }
            return;
        }
        if old.metadata.labels != new.metadata.labels || old_ref != new_ref {
            for d in self.matching(new) {
                self.queue.add(Key::of(d.as_ref()));
            }
        }
    }

    fn pod_deleted(&self, pod: &Pod) {
        let Some(r) = controller_of(&pod.metadata) else { return };
        let ns = pod.namespace().unwrap_or_default();
        if let Some(d) = resolve(&self.daemon_sets, &ns, r) {
            let key = Key::of(d.as_ref());
            self.expectations.deletion_observed(&key, &pod_key(pod));
            self.queue.add(key);
        }
    }

    /// Upstream's `syncDaemonSet`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let Some(ds) = self.daemon_sets.get_key(key) else {
            self.expectations.delete(key);
            return Ok(());
        };
        let Some(selector) = selector_of(&ds) else {
            tracing::warn!(daemonset = %key, "invalid selector; nothing to do");
            return Ok(());
        };
        if selector.is_empty() {
            self.recorder.record(
                reference(ds.as_ref()),
                EventType::Warning,
                "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.".into(),
            );
            return Ok(());
        }
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let spec = ds.spec.clone().unwrap_or_default();
        let collision = ds.status.as_ref().and_then(|s| s.collision_count);
        let hash = crate::deployment::util::compute_hash(&spec.template, collision);
        let placements: BTreeMap<String, util::Placement> =
            self.nodes.list_all().iter().map(|n| (n.name_any(), util::placement(&ds, n))).collect();
        let node_pods = self.node_pods(&ds, &selector).await?;
        let revisions = history::owned(&ds, self.revisions.list(&key.namespace));
        let current = history::ensure_current(self.client.as_ref(), &ds, &hash, &revisions).await?;
        let (min_ready, now) = (spec.min_ready_seconds.unwrap_or(0), (self.now)());
        let generation = util::template_generation(&ds);
        let desired =
            i32::try_from(placements.values().filter(|p| p.should_run).count()).unwrap_or(i32::MAX);
        let limits = plan::limits(&ds, desired)
            .map_err(|message| SyncError::Strategy { key: key.clone(), message })?;
        let mut failure = None;
        if self.expectations.satisfied(key) {
            let surge = is_rolling(&ds) && limits.0 > 0;
            let manage = plan::manage(&placements, &node_pods, &hash, surge, min_ready, now);
            failure = self.sync_nodes(&ds, key, manage, &hash).await.err();
            if failure.is_none() && self.expectations.satisfied(key) && is_rolling(&ds) {
                let update = plan::rolling_update(
                    &placements,
                    &node_pods,
                    &hash,
                    generation,
                    limits,
                    min_ready,
                    now,
                );
                failure = self.sync_nodes(&ds, key, update, &hash).await.err();
            }
            if failure.is_none() && self.expectations.satisfied(key) {
                let all: Vec<Arc<Pod>> = node_pods.values().flatten().cloned().collect();
                for name in history::to_clean(&ds, &revisions, &current, &all) {
                    match Client::<ControllerRevision>::delete(
                        self.client.as_ref(),
                        &key.namespace,
                        &name,
                        None,
                    )
                    .await
                    {
                        Ok(()) => {
                            tracing::debug!(daemonset = %key, revision = %name, "old revision deleted")
                        }
                        Err(e) if e.is_not_found() => {}
                        Err(e) => failure = Some(e.into()),
                    }
                }
            }
        }
        let st = status::calculate(&ds, &placements, &node_pods, &hash, now);
        if status::needs_update(&ds, &st) {
            self.write_status(&ds, st.clone()).await?;
        }
        if min_ready > 0 && st.number_ready != st.number_available.unwrap_or(0) {
            let secs = u64::try_from(min_ready).unwrap_or(0);
            self.queue.add_after(key.clone(), Duration::from_secs(secs));
        }
        failure.map_or(Ok(()), Err)
    }

    /// The DaemonSet's pods (claimed) by the node they are for.
    async fn node_pods(&self, ds: &DaemonSet, selector: &Selector) -> Result<NodePods, SyncError> {
        let (ns, name) = (ds.namespace().unwrap_or_default(), ds.name_any());
        let owner = Owner {
            meta: &ds.metadata,
            reference: pods::controller_ref(&ds.metadata, "apps/v1", "DaemonSet"),
            selector,
        };
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let client = self.client.clone();
        let (n2, nm2) = (ns.clone(), name.clone());
        let recheck = async move {
            let fresh: DaemonSet = Client::<DaemonSet>::get(client.as_ref(), &n2, &nm2).await?;
            controller_ref::recheck(&fresh.metadata, &uid, "DaemonSet", &format!("{n2}/{nm2}"))
        };
        let claimed = controller_ref::claim::<Pod, C, _>(
            self.client.as_ref(),
            &owner,
            self.pods.list(&ns),
            recheck,
        )
        .await?;
        let mut by_node = NodePods::new();
        for p in claimed {
            match util::target_node(&p) {
                Some(node) => by_node.entry(node).or_default().push(p),
                None => tracing::debug!(pod = %pod_key(&p), "daemon pod names no node"),
            }
        }
        Ok(by_node)
    }

    /// Upstream's `syncNodes`: at most `burstReplicas` creates (slow start) and deletes.
    async fn sync_nodes(
        &self,
        ds: &DaemonSet,
        key: &Key,
        plan: Plan,
        hash: &str,
    ) -> Result<(), SyncError> {
        let ns = key.namespace.clone();
        let about = reference(ds);
        let mut plan = plan;
        let now = tokio::time::Instant::now();
        self.failed_pods_backoff.gc(now);
        for (pod, node) in &plan.failed {
            let backoff_key = format!(
                "{}/{}/{node}",
                ds.metadata.uid.as_deref().unwrap_or_default(),
                ds.metadata.generation.unwrap_or(0)
            );
            if let Some(wait) = self.failed_pods_backoff.remaining(&backoff_key, now) {
                tracing::debug!(daemonset = %key, %node, ?wait, "deleting the failed pod is backing off");
                plan.delete.retain(|p| p != pod);
                self.queue.add_after(key.clone(), wait);
                continue;
            }
            self.failed_pods_backoff.next(&backoff_key, now);
            self.recorder.record(
                about.clone(),
                EventType::Warning,
                "FailedDaemonPod",
                format!("Found failed daemon pod {ns}/{pod} on node {node}, will try to kill it"),
            );
        }
        let create: Vec<String> = plan.create_on.into_iter().take(self.burst_replicas).collect();
        let delete: Vec<String> = plan.delete.into_iter().take(self.burst_replicas).collect();
        if create.is_empty() && delete.is_empty() {
            return Ok(());
        }
        let delete_keys = delete.iter().map(|n| format!("{ns}/{n}")).collect();
        self.expectations.expect(key, create.len(), delete_keys);
        tracing::debug!(daemonset = %key, creating = create.len(), deleting = delete.len(), "syncing nodes");
        let template = util::pod_template(ds, hash);
        let owner = pods::controller_ref(&ds.metadata, "apps/v1", "DaemonSet");
        let base = crate::replicaset::pod_from_template(&template, &ns, &ds.name_any(), owner);
        let total = create.len();
        let nodes = Mutex::new(create.into_iter());
        let (created, create_err) = slow_start_batch(total, || {
            let node = nodes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next();
            let mut pod = base.clone();
            let about = about.clone();
            async move {
                let node = node.unwrap_or_default();
                let spec = pod.spec.get_or_insert_default();
                spec.affinity = Some(util::pin_to_node(spec.affinity.take(), &node));
                match Client::<Pod>::create(self.client.as_ref(), &pod).await {
                    Ok(p) => {
                        let msg = format!("Created pod: {}", p.name_any());
                        self.recorder.record(about, EventType::Normal, "SuccessfulCreate", msg);
                        Ok(())
                    }
                    Err(e) => {
                        let msg = format!("Error creating: {e}");
                        self.recorder.record(about, EventType::Warning, "FailedCreate", msg);
                        Err(e)
                    }
                }
            }
        })
        .await;
        for _ in created..total {
            self.expectations.creation_observed(key);
        }
        let results = futures::future::join_all(delete.iter().map(|name| {
            let (about, ns) = (about.clone(), ns.clone());
            async move {
                match Client::<Pod>::delete(self.client.as_ref(), &ns, name, None).await {
                    Ok(()) => {
                        let msg = format!("Deleted pod: {name}");
                        self.recorder.record(about, EventType::Normal, "SuccessfulDelete", msg);
                        Ok(())
                    }
                    Err(e) => {
                        self.expectations.deletion_observed(key, &format!("{ns}/{name}"));
                        if e.is_not_found() {
                            return Ok(());
                        }
                        let msg = format!("Error deleting: {e}");
                        self.recorder.record(about, EventType::Warning, "FailedDelete", msg);
                        Err(e)
                    }
                }
            }
        }))
        .await;
        if let Some(e) = create_err {
            return Err(e.into());
        }
        results.into_iter().find_map(Result::err).map_or(Ok(()), |e| Err(e.into()))
    }

    /// Writes the status (upstream retries once after a fresh read on a conflict).
    async fn write_status(
        &self,
        ds: &DaemonSet,
        status: k8s_openapi::api::apps::v1::DaemonSetStatus,
    ) -> Result<(), SyncError> {
        let mut current = ds.clone();
        for attempt in 0..2 {
            current.status = Some(status.clone());
            match Client::<DaemonSet>::replace_status(self.client.as_ref(), &current).await {
                Ok(_) => return Ok(()),
                Err(e) if attempt == 0 && e.is_conflict() => {
                    let (ns, name) = (ds.namespace().unwrap_or_default(), ds.name_any());
                    current = Client::<DaemonSet>::get(self.client.as_ref(), &ns, &name).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

impl<C: Client<Pod> + Client<DaemonSet> + Client<ControllerRevision>> crate::worker::Reconcile
    for DaemonSetController<C>
{
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        DaemonSetController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests;
