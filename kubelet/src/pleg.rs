//! PLEG, the pod lifecycle event generator: relists the runtime every period (1 s) and turns
//! differences into per-pod events that wake the pod's worker. Where the runtime streams CRI
//! container events (`GetContainerEvents`), those wake workers at once; the relist stays as the
//! safety net. A runtime without the stream (containerd 1.6) is relisted only.
//!
//! [`timeline`]: when each pod was last seen changing, which tells whether a pod's runtime
//! status read earlier still holds.

pub mod timeline;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use api::keys;
use proto::brief::{self, Text};
use proto::{CriClient, cri};
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::metrics::KubeletMetrics;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    ContainerChanged,
    SandboxChanged,
}

/// Something changed in the runtime for pod `uid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLifecycleEvent {
    pub uid: String,
    pub kind: EventKind,
    /// The container or sandbox id.
    pub id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Sandbox(i32),
    Container(i32),
}

/// What the last relist saw: id → (pod uid, item and state), slices of the runtime's answers
/// ([`brief::Text`]) until the next relist replaces them.
type Snapshot = HashMap<Text, (Text, Item)>;

/// The pods the runtime holds, as of the last relist (housekeeping compares it to the desired
/// pods).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimePods {
    pub uids: BTreeSet<String>,
    pub relisted: bool,
}

/// The time of the last successful relist, for `/healthz` (upstream: unhealthy after 3 min).
#[derive(Debug, Default)]
pub struct PlegHealth {
    last_relist_unix_ms: AtomicU64,
}

pub const RELIST_THRESHOLD: Duration = Duration::from_secs(180);

impl PlegHealth {
    fn mark(&self) {
        let ms =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        self.last_relist_unix_ms.store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// `Err` with the reason when the last relist is too old.
    pub fn check(&self) -> Result<(), String> {
        let last = self.last_relist_unix_ms.load(Ordering::Relaxed);
        if last == 0 {
            return Err("PLEG has not relisted yet".into());
        }
        let now =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let age =
            Duration::from_millis(u64::try_from(now).unwrap_or(u64::MAX).saturating_sub(last));
        if age > RELIST_THRESHOLD {
            return Err(format!(
                "PLEG is not healthy: pleg was last seen active {age:?} ago; threshold is {RELIST_THRESHOLD:?}"
            ));
        }
        Ok(())
    }
}

fn uid_of(labels: &HashMap<String, String>) -> Option<String> {
    labels.get(keys::POD_UID).cloned()
}

/// What a relist saw: the kubelet's sandboxes (those labelled with their pod's UID) and their
/// containers. A container's pod is its sandbox's (containers are listed without their labels);
/// one whose sandbox is not in this list (the two lists are made at once, so a pod made or
/// removed between them) keeps the pod the last relist gave it, and a new one waits for the
/// next relist.
fn snapshot(
    sandboxes: Vec<brief::Sandbox>,
    containers: Vec<brief::Container>,
    last: &Snapshot,
) -> Snapshot {
    let mut snap = Snapshot::new();
    for s in sandboxes {
        if let Some(uid) = s.pod_uid_label {
            snap.insert(s.id, (uid, Item::Sandbox(s.state)));
        }
    }
    for c in containers {
        let sandbox = snap.get(&c.pod_sandbox_id).filter(|(_, i)| matches!(i, Item::Sandbox(_)));
        let uid = match sandbox.or_else(|| last.get(&c.id)) {
            Some((uid, _)) => uid.clone(),
            None => continue,
        };
        snap.insert(c.id, (uid, Item::Container(c.state)));
    }
    snap
}

/// The events that turn `old` into `new`.
fn diff(old: &Snapshot, new: &Snapshot) -> Vec<PodLifecycleEvent> {
    let mut events = Vec::new();
    for (id, (uid, item)) in new {
        if old.get(id).map(|(_, i)| i) == Some(item) {
            continue;
        }
        let kind = match item {
            Item::Sandbox(_) => EventKind::SandboxChanged,
            Item::Container(s) if *s == cri::ContainerState::ContainerRunning as i32 => {
                EventKind::ContainerStarted
            }
            Item::Container(s) if *s == cri::ContainerState::ContainerExited as i32 => {
                EventKind::ContainerDied
            }
            Item::Container(_) => EventKind::ContainerChanged,
        };
        events.push(PodLifecycleEvent { uid: uid.into(), kind, id: id.into() });
    }
    for (id, (uid, item)) in old {
        if !new.contains_key(id) {
            let kind = if matches!(item, Item::Sandbox(_)) {
                EventKind::SandboxChanged
            } else {
                EventKind::ContainerRemoved
            };
            events.push(PodLifecycleEvent { uid: uid.into(), kind, id: id.into() });
        }
    }
    events
}

#[derive(Debug)]
pub struct Pleg {
    pub cri: CriClient,
    pub period: Duration,
    pub events: mpsc::Sender<PodLifecycleEvent>,
    pub pods: watch::Sender<RuntimePods>,
    pub health: Arc<PlegHealth>,
    pub metrics: Arc<KubeletMetrics>,
    pub timeline: Arc<timeline::PodTimeline>,
}

/// What upstream's relist counts for its metrics: pods with a ready sandbox, containers by
/// state (`CONTAINER_STATES`' order).
fn running_counts(snap: &Snapshot) -> (usize, [usize; 4]) {
    let ready = cri::PodSandboxState::SandboxReady as i32;
    let mut pods = BTreeSet::new();
    let mut containers = [0; 4];
    for (uid, item) in snap.values() {
        match item {
            Item::Sandbox(s) if *s == ready => {
                pods.insert(uid);
            }
            Item::Sandbox(_) => {}
            Item::Container(s) => {
                let i = match cri::ContainerState::try_from(*s) {
                    Ok(cri::ContainerState::ContainerCreated) => 0,
                    Ok(cri::ContainerState::ContainerRunning) => 1,
                    Ok(cri::ContainerState::ContainerExited) => 2,
                    _ => 3,
                };
                containers[i] += 1;
            }
        }
    }
    (pods.len(), containers)
}

impl Pleg {
    /// The runtime's sandboxes and containers now, briefly listed ([`proto::brief`]).
    async fn relist(&self, last: &Snapshot) -> Result<Snapshot, proto::CallError> {
        let (sandboxes, containers) = tokio::try_join!(
            self.cri.list_pod_sandbox_brief(cri::ListPodSandboxRequest { filter: None }),
            self.cri.list_containers_brief(cri::ListContainersRequest { filter: None }),
        )?;
        Ok(snapshot(sandboxes, containers, last))
    }

    /// Relists until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let mut last = Snapshot::new();
        let mut counts = running_counts(&last);
        let mut last_relist: Option<Instant> = None;
        let mut ticker = tokio::time::interval(self.period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let started = Instant::now();
            if let Some(previous) = last_relist.replace(started) {
                self.metrics.pleg_relist_interval.observe_duration(started - previous);
            }
            let snap = match self.relist(&last).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "PLEG relist failed");
                    continue;
                }
            };
            let ended = Instant::now();
            self.health.mark();
            let events = diff(&last, &snap);
            if events.is_empty() && self.pods.borrow().relisted {
                // Nothing changed (every relist at idle): the counts, the pods the runtime
                // holds and the timeline's pods stand as the last relist left them.
                self.metrics.relisted(counts.0, counts.1);
                self.timeline.relisted_unchanged(started);
                last = snap;
                self.metrics.pleg_relist_duration.observe_duration(started.elapsed());
                continue;
            }
            counts = running_counts(&snap);
            self.metrics.relisted(counts.0, counts.1);
            let uids: BTreeSet<String> = snap.values().map(|(u, _)| u.into()).collect();
            // Recorded before the events wake the workers, so their syncs read afresh.
            let changed = events.iter().map(|e| e.uid.as_str());
            self.timeline.relisted(started, ended, changed, &uids);
            for event in events {
                if self.events.send(event).await.is_err() {
                    return;
                }
            }
            self.pods.send_if_modified(|p| {
                let changed = p.uids != uids || !p.relisted;
                *p = RuntimePods { uids, relisted: true };
                changed
            });
            last = snap;
            self.metrics.pleg_relist_duration.observe_duration(started.elapsed());
            tracing::trace!(took = ?started.elapsed(), "relisted");
        }
    }
}

/// Forwards CRI container events as lifecycle events, reconnecting after errors, until `stop`
/// or until the runtime says it does not stream events.
pub async fn run_evented(
    cri: CriClient,
    events: mpsc::Sender<PodLifecycleEvent>,
    timeline: Arc<timeline::PodTimeline>,
    stop: CancellationToken,
) {
    let mut delay = Duration::from_millis(500);
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            s = cri.get_container_events() => s,
        };
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) if e.code() == tonic::Code::Unimplemented => {
                tracing::info!(runtime = %cri.version().runtime_name, "the runtime does not stream container events; PLEG relists only");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "subscribing to container events");
                tokio::select! { () = stop.cancelled() => return, () = tokio::time::sleep(delay) => {} }
                delay = (delay * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        delay = Duration::from_millis(500);
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                n = stream.next() => n,
            };
            let Some(Ok(e)) = next else { break };
            let labels = e.pod_sandbox_status.as_ref().map(|s| &s.labels);
            let Some(uid) = labels.and_then(uid_of) else { continue };
            let kind = match cri::ContainerEventType::try_from(e.container_event_type) {
                Ok(cri::ContainerEventType::ContainerStartedEvent) => EventKind::ContainerStarted,
                Ok(cri::ContainerEventType::ContainerStoppedEvent) => EventKind::ContainerDied,
                Ok(cri::ContainerEventType::ContainerDeletedEvent) => EventKind::ContainerRemoved,
                _ => EventKind::ContainerChanged,
            };
            timeline.changed(&uid, Instant::now());
            if events.send(PodLifecycleEvent { uid, kind, id: e.container_id }).await.is_err() {
                return;
            }
        }
        tracing::debug!("container event stream ended; reconnecting");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_counts_pods_with_a_ready_sandbox_and_containers_by_state() {
        let ready = cri::PodSandboxState::SandboxReady as i32;
        let not_ready = cri::PodSandboxState::SandboxNotready as i32;
        let snap = Snapshot::from([
            (Text::from("s1"), (Text::from("p1"), Item::Sandbox(ready))),
            (Text::from("s2"), (Text::from("p2"), Item::Sandbox(not_ready))),
            (Text::from("s3"), (Text::from("p3"), Item::Sandbox(ready))),
            (Text::from("c1"), c("p1", cri::ContainerState::ContainerRunning)),
            (Text::from("c2"), c("p1", cri::ContainerState::ContainerExited)),
            (Text::from("c3"), c("p3", cri::ContainerState::ContainerCreated)),
            (Text::from("c4"), c("p3", cri::ContainerState::ContainerUnknown)),
        ]);
        assert_eq!(running_counts(&snap), (2, [1, 1, 1, 1]));
    }

    fn run_sandbox(uid: &str) -> cri::RunPodSandboxRequest {
        let config = cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: format!("p-{uid}"),
                uid: uid.into(),
                namespace: "default".into(),
                attempt: 0,
            }),
            labels: HashMap::from([(keys::POD_UID.to_string(), uid.to_string())]),
            ..Default::default()
        };
        cri::RunPodSandboxRequest { config: Some(config), runtime_handler: String::new() }
    }

    #[tokio::test]
    async fn the_relist_loop_records_its_duration_interval_and_what_runs() {
        let dir = tempfile::tempdir().unwrap();
        let fake = fake_cri::FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        let cri = CriClient::connect(fake.endpoint(), Default::default()).await.unwrap();
        cri.run_pod_sandbox(run_sandbox("u1")).await.unwrap();
        let metrics = Arc::new(KubeletMetrics::new("n"));
        let (events, mut events_rx) = mpsc::channel(16);
        let (pods, pods_rx) = watch::channel(RuntimePods::default());
        let pleg = Pleg {
            cri: cri.clone(),
            period: Duration::from_millis(20),
            events,
            pods,
            health: Arc::default(),
            timeline: Arc::default(),
            metrics: metrics.clone(),
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(pleg.run(stop.clone()));
        let relists = |n: u64| {
            let metrics = metrics.clone();
            async move {
                for _ in 0..200 {
                    if metrics.pleg_relist_interval.count() >= n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("fewer than {n} relists");
            }
        };
        relists(3).await;
        // The first relist saw u1 appear, the later ones nothing: what it set stands.
        assert_eq!(events_rx.try_recv().map(|e| e.uid).ok().as_deref(), Some("u1"));
        assert!(events_rx.try_recv().is_err());
        assert_eq!(metrics.running_pods.get(), 1.0);
        let runtime_pods = pods_rx.borrow().clone();
        assert_eq!(runtime_pods, RuntimePods { uids: ["u1".to_string()].into(), relisted: true });
        assert!(metrics.pleg_relist_duration.count() >= 3);
        assert!(metrics.pleg_last_seen.get() > 1.7e9);

        // A change after quiet relists is seen.
        cri.run_pod_sandbox(run_sandbox("u2")).await.unwrap();
        let seen = metrics.pleg_relist_interval.count();
        relists(seen + 2).await;
        assert_eq!(events_rx.try_recv().map(|e| e.uid).ok().as_deref(), Some("u2"));
        assert_eq!(metrics.running_pods.get(), 2.0);
        assert_eq!(pods_rx.borrow().uids, ["u1".to_string(), "u2".to_string()].into());
        stop.cancel();
        task.await.unwrap();
    }

    #[test]
    fn the_label_a_brief_sandbox_keeps_is_the_one_the_kubelet_puts_its_pods_uid_in() {
        assert_eq!(brief::POD_UID_LABEL, keys::POD_UID);
    }

    #[test]
    fn a_container_belongs_to_its_sandboxs_pod_or_else_to_the_pod_it_had() {
        let ready = cri::PodSandboxState::SandboxReady as i32;
        let running = cri::ContainerState::ContainerRunning;
        let sandbox = |id: &str, uid: Option<&str>| brief::Sandbox {
            id: id.into(),
            state: ready,
            pod_uid_label: uid.map(Text::from),
            ..Default::default()
        };
        let container = |id: &str, sandbox: &str| brief::Container {
            id: id.into(),
            pod_sandbox_id: sandbox.into(),
            state: running as i32,
            ..Default::default()
        };
        let last = Snapshot::from([(Text::from("c3"), c("p3", running))]);
        let snap = snapshot(
            vec![sandbox("s1", Some("p1")), sandbox("s9", None)],
            vec![
                container("c1", "s1"),
                container("c3", "s3"), // its sandbox removed meanwhile: the pod it had
                container("c4", "s4"), // its sandbox made meanwhile: the next relist's
                container("c9", "s9"), // not the kubelet's
            ],
            &last,
        );
        assert_eq!(
            snap,
            Snapshot::from([
                (Text::from("s1"), (Text::from("p1"), Item::Sandbox(ready))),
                (Text::from("c1"), c("p1", running)),
                (Text::from("c3"), c("p3", running)),
            ])
        );
    }

    fn c(uid: &str, s: cri::ContainerState) -> (Text, Item) {
        (Text::from(uid), Item::Container(s as i32))
    }

    #[test]
    fn differences_become_events() {
        let old = Snapshot::from([
            (Text::from("c1"), c("p1", cri::ContainerState::ContainerRunning)),
            (Text::from("c2"), c("p2", cri::ContainerState::ContainerRunning)),
            (Text::from("c3"), c("p3", cri::ContainerState::ContainerExited)),
        ]);
        let new = Snapshot::from([
            (Text::from("c1"), c("p1", cri::ContainerState::ContainerRunning)),
            (Text::from("c2"), c("p2", cri::ContainerState::ContainerExited)),
            (Text::from("c4"), c("p4", cri::ContainerState::ContainerRunning)),
        ]);
        let mut events: Vec<(String, EventKind)> =
            diff(&old, &new).into_iter().map(|e| (e.uid, e.kind)).collect();
        events.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            events,
            [
                ("p2".to_string(), EventKind::ContainerDied),
                ("p3".to_string(), EventKind::ContainerRemoved),
                ("p4".to_string(), EventKind::ContainerStarted),
            ]
        );
    }
}
