//! The pure parts, and rounds against the fake runtime with the node read from a temp dir.

use std::collections::BTreeMap;

use fake_cri::{FakeCriServer, Usage};
use k8s_openapi::api::core::v1::PodStatus;
use proto::{ClientOptions, CriClient, cri};

use super::*;
use crate::eviction::ThresholdValue;
use crate::eviction::config::Threshold;
use crate::runtime::images::gc::ImageGcPolicy;
use crate::test_cri::put;

const IMAGE: &str = "busybox:1.35";

fn pod(name: &str, source: &str, memory_request: Option<&str>) -> Pod {
    let mut container = serde_json::json!({"name": "c", "image": IMAGE});
    if let Some(m) = memory_request {
        container["resources"] = serde_json::json!({"requests": {"memory": m}});
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "annotations": {"kubernetes.io/config.source": source}},
        "spec": {"containers": [container]},
    }))
    .unwrap()
}

#[test]
fn memory_is_acted_on_first_then_the_disks_in_order() {
    use Signal::*;
    assert_eq!(signal_to_act_on(&[ImageFsAvailable, MemoryAvailable]), Some(MemoryAvailable));
    assert_eq!(signal_to_act_on(&[PidAvailable, ImageFsAvailable]), Some(ImageFsAvailable));
    assert_eq!(signal_to_act_on(&[]), None);
    assert_eq!(resource(NodeFsInodesFree), "inodes");
    assert_eq!(resource(PidAvailable), "pids");
}

#[test]
fn the_message_names_the_resource_the_threshold_and_containers_beyond_their_requests() {
    let p = pod("web", "api", Some("64Mi"));
    let observed = Observation { available: 50 << 20, capacity: 4 << 30 };
    let over = [ContainerUse { name: "c".into(), usage: 100 << 20 }];
    assert_eq!(
        message(Signal::MemoryAvailable, 100 << 20, observed, &p, &over),
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 100Mi, request is 64Mi, has larger consumption of memory. "
    );
    let under = [ContainerUse { name: "c".into(), usage: 1 << 20 }];
    assert_eq!(
        message(Signal::MemoryAvailable, 100 << 20, observed, &p, &under),
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
    );
    let inodes = Observation { available: 12, capacity: 1000 };
    assert_eq!(
        message(Signal::NodeFsInodesFree, 50, inodes, &p, &over),
        "The node was low on resource: inodes. Threshold quantity: 50, available: 12. "
    );
}

struct Rig {
    dir: tempfile::TempDir,
    fake: FakeCriServer,
    cri: CriClient,
    statuses: Arc<StatusManager>,
}

impl Rig {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().add_image(IMAGE).unwrap();
        fake.runtime().add_image("nginx:1.8").unwrap();
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        let root = dir.path().join("root");
        // 10 KiB of memory available.
        put(&root, "proc/meminfo", "MemTotal: 4194304 kB\nMemFree: 10 kB\nMemAvailable: 10 kB\n");
        put(&root, "proc/stat", "cpu 1 2 3\nbtime 1700000000\n");
        put(&root, "proc/loadavg", "0.1 0.2 0.3 1/42 999\n");
        Self { dir, fake, cri, statuses: Arc::default() }
    }

    /// A pod as the kubelet admitted it, running one container `c` that uses `memory` bytes.
    async fn running(&self, pod: Pod, memory: u64) -> String {
        let meta = &pod.metadata;
        let name = meta.name.clone().unwrap();
        let sandbox = crate::test_cri::sandbox(&self.cri, &name, None).await;
        let id = crate::test_cri::container(&self.cri, &sandbox, "c", IMAGE, true).await;
        let usage = Usage { memory_working_set_bytes: memory, ..Default::default() };
        assert!(self.fake.runtime().set_usage(&id, usage));
        let uid = meta.uid.clone().unwrap();
        self.statuses.set_pod(Arc::new(pod));
        let running = PodStatus { phase: Some("Running".into()), ..Default::default() };
        self.statuses.set_status(&uid, running, SystemTime::now());
        sandbox
    }

    async fn container(&self, sandbox: &str, name: &str, image: &str) -> String {
        crate::test_cri::container(&self.cri, sandbox, name, image, false).await
    }

    /// Sets the memory the node has available, in KiB.
    fn memory_available(&self, kib: u64) {
        let text = format!("MemTotal: 4194304 kB\nMemFree: {kib} kB\nMemAvailable: {kib} kB\n");
        put(&self.dir.path().join("root"), "proc/meminfo", &text);
    }

    fn manager(
        &self,
        thresholds: BTreeMap<Signal, ThresholdValue>,
    ) -> (EvictionManager, mpsc::Receiver<Eviction>) {
        self.manager_with(EvictionConfig::hard(&crate::eviction::Thresholds::from_map(thresholds)))
    }

    fn manager_with(&self, config: EvictionConfig) -> (EvictionManager, mpsc::Receiver<Eviction>) {
        let root = self.dir.path().join("root");
        let readings = ReadingSource {
            root: root.clone(),
            kubelet_dir: self.dir.path().to_path_buf(),
            image_fs_dir: None,
        };
        let stats = Arc::new(StatsProvider::new(
            self.cri.clone(),
            "node-a".into(),
            readings.clone(),
            self.dir.path().join("pods"),
        ));
        let image_gc = Arc::new(ImageGcManager {
            cri: self.cri.clone(),
            policy: ImageGcPolicy { min_age: Duration::ZERO, ..ImageGcPolicy::default() },
            image_fs_dir: None,
            recorder: Recorder::default(),
            node: "node-a".into(),
            records: Default::default(),
        });
        let (tx, rx) = mpsc::channel(4);
        let manager = EvictionManager {
            config,
            state: Mutex::default(),
            readings,
            stats,
            statuses: self.statuses.clone(),
            cri: self.cri.clone(),
            image_gc,
            root_dir: root,
            evictions: tx,
            recorder: Recorder::default(),
            node: "node-a".into(),
            metrics: Arc::new(KubeletMetrics::new("node-a")),
            pressures: watch::channel(Vec::new()).0,
            sources_ready: Arc::new(SourcesReady::new(Vec::new())),
        };
        (manager, rx)
    }
}

#[tokio::test]
async fn under_memory_pressure_the_best_effort_pod_beyond_its_request_goes_and_critical_ones_never()
{
    let rig = Rig::new().await;
    rig.running(pod("static", "file", None), 10 << 20).await;
    rig.running(pod("burstable", "api", Some("1Mi")), 512 << 10).await;
    rig.running(pod("best-effort", "api", None), 2 << 20).await;
    let limit = BTreeMap::from([(Signal::MemoryAvailable, ThresholdValue::Quantity(100 << 10))]);
    let (manager, mut evicted) = rig.manager(limit);

    let round = manager.synchronize().await;
    assert_eq!(
        round,
        Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-best-effort".into() }
    );
    assert_eq!(*manager.pressures.borrow(), [Pressure::Memory], "published for admission");
    let e = evicted.recv().await.unwrap();
    assert_eq!(e.grace, HARD_EVICTION_GRACE);
    assert_eq!(e.failure.reason, "Evicted");
    assert_eq!(e.failure.disruption.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(
        e.failure.message,
        "The node was low on resource: memory. Threshold quantity: 100Ki, available: 10Ki. Container c was using 2Mi, request is 0, has larger consumption of memory. "
    );
    let events = manager.recorder.list();
    let seen: Vec<(&str, &str, &str)> =
        events.iter().map(|e| (e.reason.as_str(), e.object.as_str(), e.message.as_str())).collect();
    assert_eq!(seen[0], ("EvictionThresholdMet", "node/node-a", "Attempting to reclaim memory"));
    assert_eq!(seen.last().map(|e| (e.0, e.1)), Some(("Evicted", "pod/default/best-effort")));
    let evictions = manager.metrics.evictions.get(&["memory.available"]).map(|c| c.get());
    assert_eq!(evictions, Some(1));

    // Once it has failed, the burstable pod is next; the static pod never goes.
    let failed = PodStatus { phase: Some("Failed".into()), ..Default::default() };
    rig.statuses.set_status("uid-best-effort", failed.clone(), SystemTime::now());
    let round = manager.synchronize().await;
    assert_eq!(
        round,
        Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-burstable".into() }
    );
    rig.statuses.set_status("uid-burstable", failed, SystemTime::now());
    assert_eq!(manager.synchronize().await, Round::NothingToEvict(Signal::MemoryAvailable));

    // Without pressure nothing happens.
    let (calm, _rx) =
        rig.manager(BTreeMap::from([(Signal::MemoryAvailable, ThresholdValue::Quantity(1))]));
    assert_eq!(calm.synchronize().await, Round::Calm);
}

#[tokio::test]
async fn under_disk_pressure_dead_containers_and_unused_images_are_reclaimed_before_a_pod_goes() {
    let rig = Rig::new().await;
    let sandbox = rig.running(pod("web", "api", None), 1 << 20).await;
    let dead = rig.container(&sandbox, "done", IMAGE).await;
    rig.cri
        .start_container(cri::StartContainerRequest { container_id: dead.clone() })
        .await
        .unwrap();
    assert!(rig.fake.runtime().exit_container(&dead, 0));
    // No filesystem is 99.99 % free: the pressure outlasts the reclaim.
    let full = BTreeMap::from([(Signal::NodeFsAvailable, ThresholdValue::Fraction(0.9999))]);
    let (manager, mut evicted) = rig.manager(full);

    let round = manager.synchronize().await;
    assert_eq!(round, Round::Evicted { signal: Signal::NodeFsAvailable, uid: "uid-web".into() });
    let ids: Vec<String> = rig.fake.runtime().containers().into_iter().map(|c| c.id).collect();
    assert!(!ids.contains(&dead), "the dead container was removed first: {ids:?}");
    let images = rig.cri.list_images(cri::ListImagesRequest { filter: None }).await.unwrap();
    let tags: Vec<String> = images.images.into_iter().flat_map(|i| i.repo_tags).collect();
    assert_eq!(tags, ["docker.io/library/busybox:1.35"], "the unused nginx image was removed");
    let e = evicted.recv().await.unwrap();
    assert!(
        e.failure
            .message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: "),
        "{}",
        e.failure.message
    );
}

fn memory_threshold(kib: u64, grace: Duration, min_reclaim_kib: Option<u64>) -> Threshold {
    Threshold {
        signal: Signal::MemoryAvailable,
        value: ThresholdValue::Quantity(kib << 10),
        grace,
        min_reclaim: min_reclaim_kib.map(|k| ThresholdValue::Quantity(k << 10)),
    }
}

fn config(thresholds: Vec<Threshold>, max_pod_grace_period_seconds: i64) -> EvictionConfig {
    EvictionConfig {
        thresholds,
        pressure_transition_period: Duration::from_secs(300),
        max_pod_grace_period_seconds,
    }
}

fn with_grace(mut p: Pod, seconds: i64) -> Pod {
    p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(seconds);
    p
}

#[tokio::test]
async fn a_soft_threshold_evicts_only_after_its_grace_period_with_the_pods_grace_capped() {
    let rig = Rig::new().await;
    rig.running(with_grace(pod("patient", "api", None), 60), 2 << 20).await;
    let grace = Duration::from_secs(30);
    let (manager, mut evicted) =
        rig.manager_with(config(vec![memory_threshold(100, grace, None)], 20));
    let t0 = Instant::now();
    assert_eq!(manager.synchronize_at(t0).await, Round::Calm, "the grace period has not passed");
    assert_eq!(*manager.pressures.borrow(), [Pressure::Memory], "the condition shows at once");
    assert_eq!(manager.synchronize_at(t0 + grace / 2).await, Round::Calm);
    let round = manager.synchronize_at(t0 + grace).await;
    assert_eq!(
        round,
        Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-patient".into() }
    );
    let e = evicted.recv().await.unwrap();
    assert_eq!(
        e.grace,
        Duration::from_secs(20),
        "the pod's 60 s, capped at evictionMaxPodGracePeriod"
    );
    assert!(
        e.failure
            .message
            .starts_with("The node was low on resource: memory. Threshold quantity: 100Ki")
    );
}

#[tokio::test]
async fn a_hard_threshold_met_with_a_soft_one_evicts_at_once_with_the_hard_grace() {
    let rig = Rig::new().await;
    rig.running(with_grace(pod("web", "api", None), 60), 2 << 20).await;
    let soft = memory_threshold(200, Duration::from_secs(60), None);
    let hard = memory_threshold(100, Duration::ZERO, None);
    let (manager, mut evicted) = rig.manager_with(config(vec![hard, soft], 20));
    let round = manager.synchronize_at(Instant::now()).await;
    assert_eq!(round, Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-web".into() });
    assert_eq!(evicted.recv().await.unwrap().grace, HARD_EVICTION_GRACE);
}

#[test]
fn a_soft_eviction_gives_the_pods_grace_at_most_the_maximum_and_never_under_a_second() {
    let p = |seconds| with_grace(pod("p", "api", None), seconds);
    assert_eq!(soft_eviction_grace(&p(5), 20), Duration::from_secs(5), "the pod's own, shorter");
    assert_eq!(soft_eviction_grace(&p(60), 20), Duration::from_secs(20));
    // Unset (0) or negative: as 0, which the pod workers raise to their 1 s floor.
    assert_eq!(soft_eviction_grace(&p(60), 0), Duration::from_secs(1));
    assert_eq!(soft_eviction_grace(&p(60), -5), Duration::from_secs(1));
    assert_eq!(
        soft_eviction_grace(&pod("q", "api", None), 300),
        Duration::from_secs(30),
        "the API's default 30 s"
    );
}

#[tokio::test]
async fn a_met_threshold_keeps_evicting_until_its_minimum_reclaim_is_free_and_the_condition_outlasts_it()
 {
    let rig = Rig::new().await;
    rig.running(pod("first", "api", None), 3 << 20).await;
    rig.running(pod("second", "api", None), 2 << 20).await;
    let (manager, mut evicted) =
        rig.manager_with(config(vec![memory_threshold(100, Duration::ZERO, Some(50))], 0));
    let t0 = Instant::now();
    let round = manager.synchronize_at(t0).await;
    assert_eq!(round, Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-first".into() });
    evicted.recv().await.unwrap();
    let failed = PodStatus { phase: Some("Failed".into()), ..Default::default() };
    rig.statuses.set_status("uid-first", failed, SystemTime::now());
    // 120Ki free: above the threshold, below threshold + minimum reclaim (150Ki).
    rig.memory_available(120);
    let round = manager.synchronize_at(t0 + MONITORING_INTERVAL).await;
    assert_eq!(round, Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-second".into() });
    rig.memory_available(150);
    assert_eq!(manager.synchronize_at(t0 + MONITORING_INTERVAL * 2).await, Round::Calm);
    assert_eq!(*manager.pressures.borrow(), [Pressure::Memory], "within the transition period");
    manager.synchronize_at(t0 + MONITORING_INTERVAL + Duration::from_secs(300)).await;
    assert_eq!(*manager.pressures.borrow(), [], "5 min after it was last seen");
}

#[test]
fn after_reclaiming_the_pressure_counts_as_relieved_only_with_every_minimum_reclaim_free() {
    let t = Threshold {
        signal: Signal::NodeFsAvailable,
        value: ThresholdValue::Quantity(100),
        grace: Duration::ZERO,
        min_reclaim: Some(ThresholdValue::Quantity(50)),
    };
    let nodefs = |available| {
        crate::eviction::Observations(BTreeMap::from([(
            Signal::NodeFsAvailable,
            Observation { available, capacity: 1000 },
        )]))
    };
    assert!(!relieved(&[t], &nodefs(120)), "above the threshold, short of its reclaim");
    assert!(relieved(&[t], &nodefs(150)));
}

#[tokio::test]
async fn a_pod_whose_deletion_was_requested_is_not_evicted_again() {
    let rig = Rig::new().await;
    let mut leaving = pod("leaving", "api", None);
    leaving.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
    rig.running(leaving, 50 << 20).await;
    rig.running(pod("staying", "api", None), 1 << 20).await;
    let limit = BTreeMap::from([(Signal::MemoryAvailable, ThresholdValue::Quantity(100 << 10))]);
    let (manager, _rx) = rig.manager(limit);
    let round = manager.synchronize().await;
    assert_eq!(
        round,
        Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-staying".into() }
    );
}

#[tokio::test]
async fn under_pid_pressure_the_pod_running_the_most_processes_goes_first() {
    let rig = Rig::new().await;
    let root = rig.dir.path().join("root");
    put(&root, "proc/sys/kernel/pid_max", "1000\n");
    put(&root, "proc/loadavg", "0.1 0.2 0.3 1/990 999\n");
    for (name, processes) in [("few", 3), ("many", 40), ("some", 10)] {
        let sandbox = rig.running(pod(name, "api", None), 1 << 20).await;
        let containers = rig.fake.runtime().containers();
        let id = containers.into_iter().find(|c| c.pod_sandbox_id == sandbox).unwrap().id;
        let usage = Usage { memory_working_set_bytes: 1 << 20, processes, ..Default::default() };
        assert!(rig.fake.runtime().set_usage(&id, usage));
    }
    let limit = BTreeMap::from([(Signal::PidAvailable, ThresholdValue::Quantity(100))]);
    let (manager, mut evicted) = rig.manager(limit);
    let round = manager.synchronize().await;
    assert_eq!(round, Round::Evicted { signal: Signal::PidAvailable, uid: "uid-many".into() });
    assert_eq!(
        evicted.recv().await.unwrap().failure.message,
        "The node was low on resource: pids. Threshold quantity: 100, available: 10. "
    );
}

#[tokio::test]
async fn a_pod_evicted_at_an_earlier_round_and_still_stopping_is_not_evicted_again() {
    let rig = Rig::new().await;
    rig.running(with_grace(pod("slow", "api", None), 60), 3 << 20).await;
    rig.running(pod("next", "api", None), 1 << 20).await;
    let soft = memory_threshold(100, Duration::from_secs(10), None);
    let (manager, mut evicted) = rig.manager_with(config(vec![soft], 60));
    let t0 = Instant::now();
    manager.synchronize_at(t0).await;
    let round = manager.synchronize_at(t0 + MONITORING_INTERVAL).await;
    assert_eq!(round, Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-slow".into() });
    assert_eq!(evicted.recv().await.unwrap().grace, Duration::from_secs(60));
    // Its 60 s are not up at the next round: it still runs, and the next pod goes instead.
    let round = manager.synchronize_at(t0 + MONITORING_INTERVAL * 2).await;
    assert_eq!(round, Round::Evicted { signal: Signal::MemoryAvailable, uid: "uid-next".into() });
    assert_eq!(manager.metrics.evictions.get(&["memory.available"]).map(|c| c.get()), Some(2));
    // Once both are finished, nothing is left to evict, and nothing is remembered of them.
    let failed = PodStatus { phase: Some("Failed".into()), ..Default::default() };
    for uid in ["uid-slow", "uid-next"] {
        rig.statuses.set_status(uid, failed.clone(), SystemTime::now());
    }
    let round = manager.synchronize_at(t0 + MONITORING_INTERVAL * 3).await;
    assert_eq!(round, Round::NothingToEvict(Signal::MemoryAvailable));
    assert!(manager.lock_state().evicted.is_empty());
}
