//! The taint-eviction controller, as upstream's `pkg/controller/tainteviction`: a pod bound to a
//! node with `NoExecute` taints is deleted at once when a taint is not tolerated, after the
//! smallest `tolerationSeconds` of the tolerations that match when all are (counted from when
//! this controller first saw the pod under the taints), and never when a matching toleration
//! has no `tolerationSeconds`. Before deleting it adds upstream's `DisruptionTarget` condition
//! (reason `DeletionByTaintManager`). A pass ([`TaintEvictionController::pass`]) runs at each
//! node or pod change and at the next deadline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use scheduler::plugins::taint_toleration::tolerates;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::events::{EventType, Recorder, reference};
use crate::informers::{Cache, Informer};
use crate::key::Key;
use crate::pods;

pub const NAME: &str = "taint-eviction-controller";
/// The `source.component` of its events (upstream's).
pub const COMPONENT: &str = "taint-eviction-controller";
/// How long a pass waits when nothing is due (a safety net; changes wake it earlier).
const IDLE: Duration = Duration::from_secs(10);

/// What happens to one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No NoExecute taints, or every matching toleration is forever.
    Stay,
    Evict,
    /// Tolerated for this long.
    After(Duration),
}

/// The pure decision (upstream's `processPodOnNode` with `getMinTolerationTime`).
pub fn verdict(tolerations: &[Toleration], taints: &[Taint]) -> Verdict {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == "NoExecute").collect();
    if no_execute.is_empty() {
        return Verdict::Stay;
    }
    let mut min: Option<Duration> = None;
    for taint in no_execute {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Verdict::Evict;
        }
        for t in matching {
            if let Some(s) = t.toleration_seconds {
                let d = Duration::from_secs(u64::try_from(s).unwrap_or(0));
                min = Some(min.map_or(d, |m| m.min(d)));
            }
        }
    }
    match min {
        None => Verdict::Stay,
        Some(d) if d.is_zero() => Verdict::Evict,
        Some(d) => Verdict::After(d),
    }
}

pub struct TaintEvictionController<C> {
    pub client: Arc<C>,
    pub recorder: Arc<dyn Recorder>,
    pub nodes: Arc<Cache<Node>>,
    pub pods: Arc<Cache<Pod>>,
    /// Pods under taints: their UID and when they were first seen so.
    pending: Mutex<HashMap<Key, (String, Instant)>>,
    wake: Notify,
}

impl<C> std::fmt::Debug for TaintEvictionController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaintEvictionController").finish_non_exhaustive()
    }
}

impl<C: Client<Pod>> TaintEvictionController<C> {
    pub fn new(
        client: Arc<C>,
        recorder: Arc<dyn Recorder>,
        nodes: Arc<Cache<Node>>,
        pods: Arc<Cache<Pod>>,
    ) -> Self {
        Self { client, recorder, nodes, pods, pending: Mutex::default(), wake: Notify::new() }
    }

    /// Node and pod changes wake a pass.
    pub fn register(self: &Arc<Self>, nodes: &Informer<Node>, pods: &Informer<Pod>) {
        let me = self.clone();
        nodes.on_change(move |_| me.wake.notify_one());
        let me = self.clone();
        pods.on_change(move |_| me.wake.notify_one());
    }

    pub async fn run(
        self: Arc<Self>,
        metrics: crate::metrics::QueueMetrics,
        stop: CancellationToken,
    ) {
        tracing::info!(controller = NAME, "starting controller");
        loop {
            let started = std::time::Instant::now();
            let next = self.pass().await;
            metrics.observe_pass(NAME, started);
            let sleep = next.unwrap_or_else(|| Instant::now() + IDLE);
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep_until(sleep) => {}
                () = self.wake.notified() => {}
            }
        }
        tracing::info!(controller = NAME, "shut down controller");
    }

    /// Evicts what is due; the next deadline.
    pub async fn pass(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut due = Vec::new();
        {
            let mut pending =
                self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut still = HashMap::new();
            for pod in self.pods.list_all() {
                let node = pods::node_name(&pod);
                if node.is_empty() || pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let taints = self
                    .nodes
                    .get("", node)
                    .and_then(|n| n.spec.as_ref()?.taints.clone())
                    .unwrap_or_default();
                let tolerations =
                    pod.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
                let key = Key::of(pod.as_ref());
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                match verdict(&tolerations, &taints) {
                    Verdict::Stay => {}
                    Verdict::Evict => due.push(pod),
                    Verdict::After(d) => {
                        let since = match pending.get(&key) {
                            Some((u, at)) if *u == uid => *at,
                            _ => now,
                        };
                        still.insert(key, (uid, since));
                        let at = since + d;
                        if at <= now {
                            due.push(pod);
                        } else {
                            next = Some(next.map_or(at, |n| n.min(at)));
                        }
                    }
                }
            }
            *pending = still;
        }
        for pod in due {
            self.evict(&pod).await;
        }
        next
    }

    async fn evict(&self, pod: &Pod) {
        let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.recorder.record(
            reference(pod),
            EventType::Normal,
            "TaintManagerEviction",
            format!("Marking for deletion Pod {ns}/{name}"),
        );
        let mut p = pod.clone();
        let conditions = p.status.get_or_insert_default().conditions.get_or_insert_default();
        conditions.retain(|c| c.type_ != "DisruptionTarget");
        conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("DeletionByTaintManager".into()),
            message: Some("Taint manager: deleting due to NoExecute taint".into()),
            last_transition_time: Some(Time(jiff::Timestamp::now())),
            ..Default::default()
        });
        if let Err(e) = Client::<Pod>::replace_status(self.client.as_ref(), &p).await {
            tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "adding DisruptionTarget");
        }
        match Client::<Pod>::delete(self.client.as_ref(), &ns, &name, pod.metadata.uid.as_deref())
            .await
        {
            Ok(()) => {
                tracing::info!(pod = %format!("{ns}/{name}"), "evicted for a NoExecute taint")
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "evicting"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str) -> Taint {
        Taint { key: key.into(), effect: "NoExecute".into(), ..Default::default() }
    }

    fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: seconds,
            ..Default::default()
        }
    }

    #[test]
    fn the_smallest_toleration_wins_and_forever_never_evicts() {
        let unreachable = [taint("node.kubernetes.io/unreachable")];
        assert_eq!(verdict(&[], &unreachable), Verdict::Evict);
        assert_eq!(
            verdict(&[toleration("node.kubernetes.io/unreachable", None)], &unreachable),
            Verdict::Stay
        );
        assert_eq!(
            verdict(
                &[
                    toleration("node.kubernetes.io/unreachable", Some(300)),
                    toleration("", Some(30)),
                ],
                &unreachable
            ),
            Verdict::After(Duration::from_secs(30))
        );
        assert_eq!(
            verdict(&[toleration("node.kubernetes.io/unreachable", Some(-5))], &unreachable),
            Verdict::Evict
        );
        let no_schedule = Taint { effect: "NoSchedule".into(), ..taint("x") };
        assert_eq!(verdict(&[], &[no_schedule]), Verdict::Stay);
    }
}
