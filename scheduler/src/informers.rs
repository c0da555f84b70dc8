//! The scheduler's informers: kube-rs reflectors over nodes and pods, whose events feed the
//! cache and the queue as upstream's event handlers do.
//!
//! - Nodes go to the cache; an added node, or a change to what filters read (labels, taints,
//!   `unschedulable`, allocatable), moves unschedulable pods back to be retried.
//! - A pod with `spec.nodeName` is bound: it goes to the cache (confirming an assumed pod), and
//!   leaves the queue; finished (`Succeeded`/`Failed`) or deleted pods leave the cache, which
//!   frees capacity and also moves unschedulable pods.
//! - A pod without `spec.nodeName`, for `default-scheduler` (or no scheduler name) and not being
//!   deleted, is queued, unless it is assumed (its binding is in flight).
//! - After a relist, whatever the list no longer holds is dropped.
//!
//! [`on_pod`] and [`on_node`] are the pure handlers; [`run_pods`] and [`run_nodes`] drive them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::{self, Event, watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cache::{Cache, PodInfo, pod_uid};
use crate::queue::{Queue, SchedulingQueue};

/// Whether this scheduler schedules the pod (`spec.schedulerName`).
pub fn responsible(pod: &Pod, scheduler_name: &str) -> bool {
    match pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) {
        None | Some("") => scheduler_name == api::defaults::DEFAULT_SCHEDULER,
        Some(name) => name == scheduler_name,
    }
}

fn assigned_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

fn terminal(pod: &Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// A pod was added or changed.
pub fn on_pod(
    cache: &mut Cache,
    queue: &mut Queue,
    pod: Arc<Pod>,
    scheduler_name: &str,
    now: Instant,
) {
    let uid = pod_uid(&pod);
    if let Some(node) = assigned_node(&pod) {
        queue.delete(&uid);
        if terminal(&pod) {
            if cache.remove_pod(&uid) {
                queue.move_all_to_active_or_backoff(now);
            }
        } else {
            let node = node.to_string();
            cache.add_pod(PodInfo::new(pod), &node);
        }
        return;
    }
    if !responsible(&pod, scheduler_name)
        || pod.metadata.deletion_timestamp.is_some()
        || terminal(&pod)
    {
        queue.delete(&uid);
        return;
    }
    if cache.is_assumed(&uid) {
        return;
    }
    queue.add(pod, now);
}

/// A pod was deleted.
pub fn on_pod_deleted(cache: &mut Cache, queue: &mut Queue, pod: &Pod, now: Instant) {
    let uid = pod_uid(pod);
    queue.delete(&uid);
    if cache.remove_pod(&uid) {
        queue.move_all_to_active_or_backoff(now);
    }
}

/// A node was added or changed.
pub fn on_node(cache: &mut Cache, queue: &mut Queue, node: Arc<Node>, now: Instant) {
    if cache.add_node(node) {
        queue.move_all_to_active_or_backoff(now);
    }
}

fn lock(cache: &Mutex<Cache>) -> std::sync::MutexGuard<'_, Cache> {
    cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The shared state the handlers update.
#[derive(Debug, Clone)]
pub struct Targets {
    pub cache: Arc<Mutex<Cache>>,
    pub queue: Arc<SchedulingQueue>,
    pub scheduler_name: String,
}

/// The reflector's events for `api`, errors logged (the watcher retries with backoff).
fn reflected<K>(api: Api<K>, writer: Writer<K>, what: &'static str) -> BoxStream<'static, Event<K>>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .filter_map(move |e| async move {
            e.inspect_err(|e| tracing::warn!(error = %e, "watching {what}; retrying with backoff"))
                .ok()
        })
        .boxed()
}

/// The next event, or `None` once `stop` is cancelled or the stream ends.
async fn next_event<K>(
    events: &mut BoxStream<'static, Event<K>>,
    stop: &CancellationToken,
) -> Option<Event<K>> {
    tokio::select! {
        () = stop.cancelled() => None,
        e = events.next() => e,
    }
}

/// Watches pods until `stop`; `synced` is cancelled once the first list is handled.
pub async fn run_pods(
    api: Api<Pod>,
    writer: Writer<Pod>,
    targets: Targets,
    synced: CancellationToken,
    stop: CancellationToken,
) {
    let mut events = reflected(api, writer, "pods");
    let mut relisting: Option<HashSet<String>> = None;
    while let Some(event) = next_event(&mut events, &stop).await {
        let mut cache = lock(&targets.cache);
        targets.queue.with(|queue, now| match event {
            Event::Init => relisting = Some(HashSet::new()),
            Event::InitApply(pod) => {
                relisting.get_or_insert_default().insert(pod_uid(&pod));
                on_pod(&mut cache, queue, Arc::new(pod), &targets.scheduler_name, now);
            }
            Event::InitDone => {
                let seen = relisting.take().unwrap_or_default();
                cache.retain_pods(&seen);
                queue.retain(&seen);
                synced.cancel();
            }
            Event::Apply(pod) => {
                on_pod(&mut cache, queue, Arc::new(pod), &targets.scheduler_name, now)
            }
            Event::Delete(pod) => on_pod_deleted(&mut cache, queue, &pod, now),
        });
    }
}

/// Watches nodes until `stop`; `synced` is cancelled once the first list is handled.
pub async fn run_nodes(
    api: Api<Node>,
    writer: Writer<Node>,
    targets: Targets,
    synced: CancellationToken,
    stop: CancellationToken,
) {
    let mut events = reflected(api, writer, "nodes");
    let mut relisting: Option<HashSet<String>> = None;
    while let Some(event) = next_event(&mut events, &stop).await {
        let mut cache = lock(&targets.cache);
        targets.queue.with(|queue, now| match event {
            Event::Init => relisting = Some(HashSet::new()),
            Event::InitApply(node) => {
                relisting
                    .get_or_insert_default()
                    .insert(node.metadata.name.clone().unwrap_or_default());
                on_node(&mut cache, queue, Arc::new(node), now);
            }
            Event::InitDone => {
                cache.retain_nodes(&relisting.take().unwrap_or_default());
                synced.cancel();
            }
            Event::Apply(node) => on_node(&mut cache, queue, Arc::new(node), now),
            Event::Delete(node) => {
                cache.remove_node(node.metadata.name.as_deref().unwrap_or_default())
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::cache::tests::{node, pod};

    const ME: &str = "default-scheduler";

    fn bound(name: &str, node: &str) -> Pod {
        let mut p = pod(name, "1", "");
        p.spec.get_or_insert_default().node_name = Some(node.into());
        p
    }

    #[tokio::test(start_paused = true)]
    async fn pending_pods_for_us_are_queued_and_others_are_not() {
        let (mut c, mut q, now) = (Cache::default(), Queue::default(), Instant::now());
        on_pod(&mut c, &mut q, Arc::new(pod("mine", "", "")), ME, now);
        let mut other = pod("other", "", "");
        other.spec.get_or_insert_default().scheduler_name = Some("my-scheduler".into());
        on_pod(&mut c, &mut q, Arc::new(other), ME, now);
        let mut explicit = pod("explicit", "", "");
        explicit.spec.get_or_insert_default().scheduler_name = Some(ME.into());
        on_pod(&mut c, &mut q, Arc::new(explicit), ME, now);
        let mut deleting = pod("deleting", "", "");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        on_pod(&mut c, &mut q, Arc::new(deleting), ME, now);
        assert!(q.contains("uid-mine") && q.contains("uid-explicit"));
        assert!(!q.contains("uid-other") && !q.contains("uid-deleting"));
    }

    #[tokio::test(start_paused = true)]
    async fn bound_pods_fill_the_cache_and_leave_the_queue() {
        let (mut c, mut q, now) = (Cache::default(), Queue::default(), Instant::now());
        on_node(&mut c, &mut q, Arc::new(node("n1", "4", "8Gi", "110")), now);
        on_pod(&mut c, &mut q, Arc::new(pod("p", "1", "")), ME, now);
        on_pod(&mut c, &mut q, Arc::new(bound("p", "n1")), ME, now);
        assert!(!q.contains("uid-p"));
        assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(1000));

        let mut done = bound("p", "n1");
        done.status = Some(PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
        on_pod(&mut c, &mut q, Arc::new(done), ME, now);
        assert_eq!(
            c.node("n1").map(|n| n.requested.milli_cpu),
            Some(0),
            "finished pods free capacity"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_assumed_pods_updates_do_not_requeue_it() {
        let (mut c, mut q, now) = (Cache::default(), Queue::default(), Instant::now());
        c.add_node(Arc::new(node("n1", "4", "8Gi", "110")));
        c.assume(PodInfo::new(Arc::new(pod("p", "1", ""))), "n1").expect("assume");
        on_pod(&mut c, &mut q, Arc::new(pod("p", "1", "")), ME, now);
        assert!(!q.contains("uid-p"));
    }

    #[tokio::test(start_paused = true)]
    async fn new_nodes_and_freed_capacity_retry_unschedulable_pods() {
        let (mut c, mut q, t0) = (Cache::default(), Queue::default(), Instant::now());
        on_pod(&mut c, &mut q, Arc::new(pod("p", "1", "")), ME, t0);
        let p = q.pop(t0).expect("p");
        q.requeue_unschedulable(&p.info.uid, t0);
        let later = t0 + std::time::Duration::from_secs(30);
        on_node(&mut c, &mut q, Arc::new(node("n1", "4", "8Gi", "110")), later);
        assert_eq!(q.counts().active, 1);

        let p = q.pop(later).expect("p");
        q.requeue_unschedulable(&p.info.uid, later);
        let heartbeat = node("n1", "4", "8Gi", "110");
        on_node(&mut c, &mut q, Arc::new(heartbeat), later);
        assert_eq!(q.counts().unschedulable, 1, "an unchanged node retries nothing");

        on_pod(&mut c, &mut q, Arc::new(bound("big", "n1")), ME, later);
        on_pod_deleted(
            &mut c,
            &mut q,
            &bound("big", "n1"),
            later + std::time::Duration::from_secs(30),
        );
        assert_eq!(q.counts().active, 1, "a deleted bound pod frees capacity");
    }
}
