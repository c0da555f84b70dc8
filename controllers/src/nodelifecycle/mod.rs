//! The node lifecycle controller, as upstream's `pkg/controller/nodelifecycle`: every
//! `--node-monitor-period` ([`NodeLifecycleController::monitor`]) it looks at each node's
//! heartbeats (its Lease in `kube-node-lease` renewed, or, for a node without a Lease, its
//! Ready condition's `lastHeartbeatTime`); a node silent for longer than
//! `--node-monitor-grace-period` (`--node-startup-grace-period` before it ever posted Ready)
//! gets its kubelet conditions set `Unknown` ([`conditions::mark_unknown`]). A node leaving
//! Ready gets a `NodeNotReady` event and its pods' Ready conditions set False.
//!
//! Taints follow the conditions: the `NoSchedule` ones at once (upstream's
//! `TaintNodesByCondition`), and `node.kubernetes.io/not-ready` (Ready False) or
//! `node.kubernetes.io/unreachable` (Unknown) `NoExecute` at the zone's rate ([`zones`]),
//! removed at once when the node is Ready again. The taint-eviction controller
//! ([`crate::tainteviction`]) evicts the pods that do not tolerate them.
//!
//! Heartbeat ages are measured on the monotonic clock from when this controller saw them
//! change (as upstream's `probeTimestamp`), so clock skew with the kubelet does not matter.

pub mod conditions;
pub mod zones;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::events::{EventType, Recorder, reference};
use crate::informers::Cache;
use crate::nodeapi::NodeApi;
use conditions::Readiness;

pub const NAME: &str = "node-lifecycle";
/// The `source.component` of its events.
pub const COMPONENT: &str = "node-controller";
/// Where kubelets keep their Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Upstream's flags.
#[derive(Debug, Clone)]
pub struct Config {
    pub monitor_period: Duration,
    pub grace_period: Duration,
    pub startup_grace_period: Duration,
    pub eviction_rate: f64,
    pub secondary_eviction_rate: f64,
    pub large_cluster_threshold: usize,
    pub unhealthy_zone_threshold: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            monitor_period: Duration::from_secs(5),
            grace_period: Duration::from_secs(40),
            startup_grace_period: Duration::from_secs(60),
            eviction_rate: 0.1,
            secondary_eviction_rate: 0.01,
            large_cluster_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        }
    }
}

/// What the controller remembers of a node (upstream's `nodeHealthData`).
#[derive(Debug)]
struct Health {
    /// When a heartbeat was last seen to change.
    probe: Instant,
    heartbeat: Option<jiff::Timestamp>,
    renewed: Option<jiff::Timestamp>,
    readiness: Readiness,
}

pub struct NodeLifecycleController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub nodes: Arc<Cache<Node>>,
    pub leases: Arc<Cache<Lease>>,
    pub pods: Arc<Cache<Pod>>,
    pub config: Config,
    /// The wall clock for the timestamps written; tests set it.
    pub now: fn() -> jiff::Timestamp,
    health: Mutex<HashMap<String, Health>>,
    buckets: Mutex<HashMap<String, zones::Bucket>>,
}

impl<C> std::fmt::Debug for NodeLifecycleController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLifecycleController").field("config", &self.config).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<C: NodeApi + Client<Pod>> NodeLifecycleController<C> {
    pub fn new(
        client: Arc<C>,
        recorder: Arc<dyn Recorder>,
        nodes: Arc<Cache<Node>>,
        leases: Arc<Cache<Lease>>,
        pods: Arc<Cache<Pod>>,
        config: Config,
        now: fn() -> jiff::Timestamp,
    ) -> Self {
        Self {
            client,
            recorder,
            nodes,
            leases,
            pods,
            config,
            now,
            health: Mutex::default(),
            buckets: Mutex::default(),
        }
    }

    /// Monitors every `--node-monitor-period` until `stop`.
    pub async fn run(
        self: Arc<Self>,
        metrics: crate::metrics::QueueMetrics,
        stop: CancellationToken,
    ) {
        tracing::info!(controller = NAME, period = ?self.config.monitor_period, "starting controller");
        let mut tick = tokio::time::interval(self.config.monitor_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {
                    let started = std::time::Instant::now();
                    self.monitor().await;
                    metrics.observe_pass(NAME, started);
                }
            }
        }
        tracing::info!(controller = NAME, "shut down controller");
    }

    /// One pass over every node (upstream's `monitorNodeHealth`).
    pub async fn monitor(&self) {
        let now = Instant::now();
        let nodes = self.nodes.list_all();
        let names: std::collections::HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        lock(&self.health).retain(|n, _| names.contains(n));
        let mut seen = Vec::new();
        for node in nodes {
            match self.check_health(&node, now).await {
                Some(n) => seen.push(n),
                None => seen.push((*node).clone()),
            }
        }
        let mut zone_counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for n in &seen {
            let c = zone_counts.entry(zones::zone_key(n)).or_default();
            if conditions::readiness(n) == Readiness::Ready {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        let states: BTreeMap<String, zones::ZoneState> = zone_counts
            .iter()
            .map(|(z, (r, nr))| {
                (z.clone(), zones::state(*r, *nr, self.config.unhealthy_zone_threshold))
            })
            .collect();
        let all_disrupted =
            !states.is_empty() && states.values().all(|s| *s == zones::ZoneState::FullDisruption);
        if all_disrupted {
            tracing::warn!(
                "every node is not ready; tainting nothing for NoExecute (disruption mode)"
            );
        }
        for n in seen {
            let zone = zones::zone_key(&n);
            let (state, size) = (
                states.get(&zone).copied().unwrap_or(zones::ZoneState::Normal),
                zone_counts.get(&zone).map_or(0, |(r, nr)| r + nr),
            );
            self.reconcile_taints(n, &zone, state, size, all_disrupted, now).await;
        }
    }

    /// Updates what is known of the node's heartbeats and marks it Unknown past its grace; the
    /// node as written, if it was.
    async fn check_health(&self, node: &Node, now: Instant) -> Option<Node> {
        let name = node.name_any();
        let heartbeat = conditions::heartbeat(node);
        let renewed = self
            .leases
            .get(LEASE_NAMESPACE, &name)
            .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
        let readiness = conditions::readiness(node);
        let (probe, previous) = {
            let mut health = lock(&self.health);
            let h = health.entry(name.clone()).or_insert(Health {
                probe: now,
                heartbeat,
                renewed,
                readiness,
            });
            if h.heartbeat != heartbeat || h.renewed != renewed {
                h.probe = now;
                h.heartbeat = heartbeat;
                h.renewed = renewed;
            }
            let previous = h.readiness;
            h.readiness = readiness;
            (h.probe, previous)
        };
        let grace = if conditions::condition(node, "Ready").is_none() {
            self.config.startup_grace_period
        } else {
            self.config.grace_period
        };
        let mut written = None;
        if now.saturating_duration_since(probe) > grace {
            let mut marked = node.clone();
            if conditions::mark_unknown(&mut marked, (self.now)()) {
                tracing::info!(node = %name, "node stopped posting status; conditions Unknown");
                match self.client.replace_node_status(&marked).await {
                    Ok(n) => {
                        lock(&self.health).entry(name.clone()).and_modify(|h| {
                            h.readiness = conditions::readiness(&n);
                        });
                        written = Some(n);
                    }
                    Err(e) => tracing::warn!(node = %name, error = %e, "marking the node Unknown"),
                }
            }
        }
        let current = written.as_ref().map_or(readiness, conditions::readiness);
        if previous == Readiness::Ready && current != Readiness::Ready {
            self.recorder.record(
                reference(node),
                EventType::Normal,
                "NodeNotReady",
                format!("Node {name} status is now: NodeNotReady"),
            );
            self.mark_pods_not_ready(&name).await;
        } else if previous != Readiness::Ready && current == Readiness::Ready {
            self.recorder.record(
                reference(node),
                EventType::Normal,
                "NodeReady",
                format!("Node {name} status is now: NodeReady"),
            );
        }
        written
    }

    /// Upstream's `MarkPodsNotReady`: the node's pods' Ready condition goes False.
    async fn mark_pods_not_ready(&self, node: &str) {
        for pod in self.pods.list_all() {
            if crate::pods::node_name(&pod) != node || !crate::pods::is_ready(&pod) {
                continue;
            }
            let mut p = (*pod).clone();
            for c in p.status.get_or_insert_default().conditions.get_or_insert_default() {
                if c.type_ == "Ready" {
                    *c = PodCondition {
                        status: "False".into(),
                        last_transition_time: Some(Time((self.now)())),
                        ..c.clone()
                    };
                }
            }
            match Client::<Pod>::replace_status(self.client.as_ref(), &p).await {
                Ok(_) => self.recorder.record(
                    reference(&p),
                    EventType::Warning,
                    "NodeNotReady",
                    "Node is not ready".into(),
                ),
                Err(e) => {
                    tracing::warn!(pod = %crate::pods::pod_key(&p), error = %e, "marking the pod not ready")
                }
            }
        }
    }

    /// Sets the taints the node's conditions call for; adding a `NoExecute` one waits for a
    /// token of the node's zone.
    async fn reconcile_taints(
        &self,
        node: Node,
        zone: &str,
        state: zones::ZoneState,
        size: usize,
        all_disrupted: bool,
        now: Instant,
    ) {
        let name = node.name_any();
        let no_schedule = conditions::no_schedule_wanted(&node);
        let wanted = if all_disrupted {
            None
        } else {
            conditions::no_execute_wanted(conditions::readiness(&node))
        };
        let present =
            [crate::daemon::util::TAINT_NOT_READY, crate::daemon::util::TAINT_UNREACHABLE]
                .into_iter()
                .find(|k| conditions::has_taint(&node, k, "NoExecute"));
        let no_execute = match (wanted, present) {
            (None, _) => None,
            // Swapping not-ready and unreachable is not rate-limited (upstream's
            // `SwapNodeControllerTaint`).
            (Some(w), Some(_)) => Some(w),
            (Some(w), None) => {
                let c = &self.config;
                let qps = zones::rate(
                    state,
                    size,
                    c.eviction_rate,
                    c.secondary_eviction_rate,
                    c.large_cluster_threshold,
                );
                let mut buckets = lock(&self.buckets);
                let bucket =
                    buckets.entry(zone.to_string()).or_insert_with(|| zones::Bucket::new(now));
                bucket.try_take(qps, now).then_some(w)
            }
        };
        let mut updated = node.clone();
        if !conditions::set_taints(&mut updated, &no_schedule, no_execute, (self.now)()) {
            return;
        }
        match self.client.replace_node(&updated).await {
            Ok(_) => tracing::info!(node = %name, ?no_schedule, ?no_execute, "node taints updated"),
            Err(e) => tracing::warn!(node = %name, error = %e, "updating the node's taints"),
        }
    }
}

#[cfg(test)]
mod tests;
