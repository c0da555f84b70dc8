//! The pod garbage collector, as upstream's `pkg/controller/podgc`, every 20 s
//! ([`PodGc::pass`]), force-deleting (grace 0):
//! - finished pods (`Succeeded`/`Failed`) beyond `--terminated-pod-gc-threshold` (0: never),
//!   evicted ones first, then oldest first;
//! - terminating pods on a not-ready node with the `node.kubernetes.io/out-of-service` taint;
//! - pods bound to a node that no longer exists, once the node has been missing from the cache
//!   for the quarantine (40 s) and an uncached read confirms it is gone (a `DisruptionTarget`
//!   condition, reason `DeletionByPodGC`, is added first);
//! - terminating pods that were never scheduled.
//!
//! A pod not yet finished is first set `Failed` (upstream's `markFailedAndDeletePod`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::informers::Cache;
use crate::nodeapi::NodeApi;
use crate::nodelifecycle::conditions::{self, Readiness};
use crate::pods;

pub const NAME: &str = "pod-garbage-collector";
/// Upstream's `gcCheckPeriod`.
pub const PERIOD: Duration = Duration::from_secs(20);
/// Upstream's `quarantineTime`: how long a node must be missing before its pods are orphans.
pub const QUARANTINE: Duration = Duration::from_secs(40);
pub const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

pub struct PodGc<C> {
    pub client: Arc<C>,
    pub nodes: Arc<Cache<Node>>,
    pub pods: Arc<Cache<Pod>>,
    /// `--terminated-pod-gc-threshold`; 0 disables that part.
    pub threshold: usize,
    pub quarantine: Duration,
    /// Nodes missing from the cache, since when.
    missing: Mutex<HashMap<String, Instant>>,
}

impl<C> std::fmt::Debug for PodGc<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodGc").field("threshold", &self.threshold).finish_non_exhaustive()
    }
}

fn is_terminated(p: &Pod) -> bool {
    matches!(pods::phase(p), "Succeeded" | "Failed")
}

fn evicted(p: &Pod) -> bool {
    pods::phase(p) == "Failed"
        && p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
}

impl<C: NodeApi + Client<Pod>> PodGc<C> {
    pub fn new(
        client: Arc<C>,
        nodes: Arc<Cache<Node>>,
        pods: Arc<Cache<Pod>>,
        threshold: usize,
    ) -> Self {
        Self { client, nodes, pods, threshold, quarantine: QUARANTINE, missing: Mutex::default() }
    }

    pub async fn run(
        self: Arc<Self>,
        metrics: crate::metrics::QueueMetrics,
        stop: CancellationToken,
    ) {
        tracing::info!(controller = NAME, "starting controller");
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {
                    let started = std::time::Instant::now();
                    self.pass().await;
                    metrics.observe_pass(NAME, started);
                }
            }
        }
        tracing::info!(controller = NAME, "shut down controller");
    }

    /// One collection (upstream's `gc`).
    pub async fn pass(&self) {
        let all = self.pods.list_all();
        let mut deleted = HashSet::new();
        if self.threshold > 0 {
            let mut done: Vec<_> = all.iter().filter(|p| is_terminated(p)).cloned().collect();
            if done.len() > self.threshold {
                done.sort_by(|a, b| {
                    evicted(b)
                        .cmp(&evicted(a))
                        .then(
                            a.metadata
                                .creation_timestamp
                                .as_ref()
                                .map(|t| t.0)
                                .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0)),
                        )
                        .then(a.metadata.name.cmp(&b.metadata.name))
                });
                let excess = done.len() - self.threshold;
                tracing::info!(
                    controller = NAME,
                    excess,
                    "deleting terminated pods over the threshold"
                );
                for p in done.iter().take(excess) {
                    self.delete(p, None).await;
                    deleted.insert(pods::pod_key(p));
                }
            }
        }
        for p in all.iter().filter(|p| p.metadata.deletion_timestamp.is_some()) {
            let node = pods::node_name(p);
            let out_of_service = !node.is_empty()
                && self.nodes.get("", node).is_some_and(|n| {
                    conditions::readiness(&n) != Readiness::Ready
                        && conditions::has_taint(&n, TAINT_OUT_OF_SERVICE, "NoExecute")
                });
            if (out_of_service || node.is_empty()) && deleted.insert(pods::pod_key(p)) {
                self.delete(p, None).await;
            }
        }
        self.orphans(&all, &mut deleted).await;
    }

    /// Pods bound to nodes that are gone, after the quarantine.
    async fn orphans(&self, all: &[Arc<Pod>], deleted: &mut HashSet<String>) {
        let now = Instant::now();
        let absent: HashSet<String> = all
            .iter()
            .map(|p| pods::node_name(p).to_string())
            .filter(|n| !n.is_empty() && self.nodes.get("", n).is_none())
            .collect();
        let due: Vec<String> = {
            let mut missing =
                self.missing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            missing.retain(|n, _| absent.contains(n));
            absent
                .iter()
                .filter(|n| {
                    let since = *missing.entry((*n).clone()).or_insert(now);
                    now.saturating_duration_since(since) >= self.quarantine
                })
                .cloned()
                .collect()
        };
        for node in due {
            match self.client.get_node(&node).await {
                Err(e) if e.is_not_found() => {}
                Ok(_) => {
                    self.forget(&node);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(controller = NAME, %node, error = %e, "checking whether the node exists");
                    continue;
                }
            }
            let condition = PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("DeletionByPodGC".into()),
                message: Some("PodGC: node no longer exists".into()),
                last_transition_time: Some(Time(jiff::Timestamp::now())),
                ..Default::default()
            };
            for p in all.iter().filter(|p| pods::node_name(p) == node) {
                if deleted.insert(pods::pod_key(p)) {
                    tracing::info!(controller = NAME, pod = %pods::pod_key(p), %node, "deleting an orphaned pod");
                    self.delete(p, Some(condition.clone())).await;
                }
            }
            self.forget(&node);
        }
    }

    fn forget(&self, node: &str) {
        self.missing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(node);
    }

    /// Upstream's `markFailedAndDeletePod[WithCondition]`.
    async fn delete(&self, pod: &Pod, condition: Option<PodCondition>) {
        let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        if !is_terminated(pod) {
            let mut p = pod.clone();
            let status = p.status.get_or_insert_default();
            status.phase = Some("Failed".into());
            if let Some(c) = condition {
                let conditions = status.conditions.get_or_insert_default();
                conditions.retain(|o| o.type_ != c.type_);
                conditions.push(c);
            }
            if let Err(e) = Client::<Pod>::replace_status(self.client.as_ref(), &p).await {
                tracing::debug!(controller = NAME, pod = %format!("{ns}/{name}"), error = %e, "marking the pod Failed");
            }
        }
        match self.client.force_delete_pod(&ns, &name).await {
            Ok(()) => {
                tracing::info!(controller = NAME, pod = %format!("{ns}/{name}"), "force-deleted")
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                tracing::warn!(controller = NAME, pod = %format!("{ns}/{name}"), error = %e, "deleting")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::{NodeSpec, PodSpec, PodStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::fake::FakeApi;
    use crate::informers::Informer;

    struct Harness {
        api: Arc<FakeApi>,
        nodes: Arc<Informer<Node>>,
        pods: Arc<Informer<Pod>>,
        gc: PodGc<FakeApi>,
    }

    impl Harness {
        fn new(threshold: usize) -> Self {
            let api = Arc::new(FakeApi::default());
            let (nodes, pods) = (Arc::new(Informer::default()), Arc::new(Informer::default()));
            let gc = PodGc::new(api.clone(), nodes.cache(), pods.cache(), threshold);
            Self { api, nodes, pods, gc }
        }

        async fn pass(&self) {
            self.api.deliver(&self.nodes);
            self.api.deliver(&self.pods);
            self.gc.pass().await;
        }

        fn pod(&self, name: &str, node: &str, phase: &str, created: i64) {
            self.api.put(&Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("ns".into()),
                    creation_timestamp: Some(Time(jiff::Timestamp::from_second(created).unwrap())),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    node_name: (!node.is_empty()).then(|| node.into()),
                    ..Default::default()
                }),
                status: Some(PodStatus { phase: Some(phase.into()), ..Default::default() }),
            });
        }

        fn node(&self, name: &str) {
            self.api.put(&Node {
                metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
                ..Default::default()
            });
        }

        fn names(&self) -> Vec<String> {
            let mut v: Vec<_> = self.api.list::<Pod>().iter().map(|p| p.name_any()).collect();
            v.sort();
            v
        }
    }

    #[tokio::test(start_paused = true)]
    async fn terminated_pods_beyond_the_threshold_go_oldest_first() {
        let h = Harness::new(2);
        h.node("n");
        h.pod("done-1", "n", "Succeeded", 100);
        h.pod("done-2", "n", "Failed", 200);
        h.pod("done-3", "n", "Succeeded", 300);
        h.pod("done-4", "n", "Succeeded", 50);
        h.pod("running", "n", "Running", 10);
        h.pass().await;
        assert_eq!(h.names(), ["done-2", "done-3", "running"]);
        h.pass().await;
        assert_eq!(h.names(), ["done-2", "done-3", "running"], "at the threshold: nothing more");
        let h = Harness::new(0);
        h.node("n");
        h.pod("done", "n", "Succeeded", 1);
        h.pass().await;
        assert_eq!(h.names(), ["done"], "threshold 0 keeps every finished pod");
    }

    #[tokio::test(start_paused = true)]
    async fn pods_of_a_vanished_node_go_after_the_quarantine() {
        let h = Harness::new(100);
        h.node("kept");
        h.pod("orphan", "gone", "Running", 1);
        h.pod("fine", "kept", "Running", 1);
        h.pass().await;
        tokio::time::advance(Duration::from_secs(39)).await;
        h.pass().await;
        assert_eq!(h.names(), ["fine", "orphan"], "still in quarantine");
        // A node the cache lacks but the apiserver has is not gone.
        h.pod("lagging", "new", "Running", 1);
        h.pass().await;
        tokio::time::advance(Duration::from_secs(1)).await;
        h.api.deliver(&h.pods);
        h.gc.pass().await;
        assert_eq!(h.names(), ["fine", "lagging"]);
        h.node("new");
        tokio::time::advance(Duration::from_secs(40)).await;
        h.gc.pass().await;
        assert_eq!(h.names(), ["fine", "lagging"], "confirmed by an uncached read");
        let actions = h.api.take_actions();
        assert!(actions.iter().any(|a| a == "update status of Pod ns/orphan"), "{actions:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn terminating_pods_never_scheduled_or_on_out_of_service_nodes_are_forced() {
        let h = Harness::new(100);
        h.api.put(&Node {
            metadata: ObjectMeta { name: Some("down".into()), ..Default::default() },
            spec: Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: TAINT_OUT_OF_SERVICE.into(),
                    effect: "NoExecute".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        });
        h.node("up");
        for (name, node) in [("unscheduled", ""), ("on-down", "down"), ("on-up", "up")] {
            h.pod(name, node, "Running", 1);
            h.api.edit::<Pod>("ns", name, |p| {
                p.metadata.deletion_timestamp =
                    Some(Time(jiff::Timestamp::from_second(5).unwrap()));
            });
        }
        h.pod("pending", "", "Pending", 1);
        h.pass().await;
        assert_eq!(h.names(), ["on-up", "pending"]);
    }
}
