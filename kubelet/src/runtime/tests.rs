//! `sync_pod` against the fake runtime, for what a sync reads: the status kept between syncs.

use std::collections::BTreeSet;

use fake_cri::{FakeCriServer, Rpc};
use proto::ClientOptions;

use super::*;
use crate::cm::node_config::NodeConfig;
use crate::fieldpath::Allocatable;
use crate::objects::ObjectSources;
use crate::prober::results::ProbeResults;

struct Rig {
    _dir: tempfile::TempDir,
    fake: FakeCriServer,
    runtime: RuntimeManager,
    timeline: Arc<PodTimeline>,
}

impl Rig {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().add_image("busybox:1.35").unwrap();
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        let mut node = NodeConfig::default();
        node.layout.per_qos = false;
        let cm = crate::test_cri::container_manager(&dir.path().join("cgroup"), node);
        let volumes = VolumeManager {
            root_dir: dir.path().join("root"),
            mounter: Arc::new(crate::volume::mount::fake::FakeMounter::default()),
            objects: ObjectSources { api: None, local: None },
            tokens: None,
            allocatable: Allocatable { cpu_millis: 1000, memory_bytes: 1 << 30 },
        };
        let config = RuntimeConfig {
            pod_logs_dir: dir.path().join("logs"),
            root_dir: dir.path().join("root"),
            resolv_conf: String::new(),
            memory_capacity: 1 << 30,
            host_ip: None,
            restart_backoff_max: Duration::from_secs(300),
        };
        let timeline = Arc::new(PodTimeline::default());
        let runtime = RuntimeManager::new(
            cri,
            config,
            Arc::new(cm),
            Recorder::default(),
            volumes,
            None,
            Arc::new(KubeletMetrics::new("n1")),
        )
        .with_timeline(timeline.clone(), Duration::from_secs(1));
        Self { _dir: dir, fake, runtime, timeline }
    }

    /// A relist that began now and saw nothing of the pod change.
    fn relisted_unchanged(&self, uid: &str) {
        let now = Instant::now();
        self.timeline.relisted(now, now, [], &BTreeSet::from([uid.to_string()]));
    }

    /// One sync, which must go without an error.
    async fn sync(&self, pod: &Pod) {
        let probes = ProbeResults::default();
        let out = self.runtime.sync_pod(pod, &probes, &mut |_| {}).await.unwrap();
        assert_eq!(out.error, None);
    }
}

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn a_sync_that_changed_the_pod_leaves_the_next_one_to_read_afresh() {
    let rig = Rig::new().await;
    let pod = pod();
    rig.sync(&pod).await;
    assert_eq!(rig.fake.runtime().calls(Rpc::RunPodSandbox), 1);
    // A relist that began after the first sync's read but listed before it acted: the read
    // (no sandbox) must not be taken for the truth.
    rig.relisted_unchanged("u1");
    rig.sync(&pod).await;
    assert_eq!(rig.fake.runtime().calls(Rpc::RunPodSandbox), 1, "no second sandbox");
    assert_eq!(rig.fake.runtime().calls(Rpc::CreateContainer), 1, "no second container");

    // Nothing changes now: once a relist saw that, a resync asks the runtime nothing.
    rig.relisted_unchanged("u1");
    let reads = || rig.fake.runtime().calls(Rpc::PodSandboxStatus);
    let before = reads();
    rig.sync(&pod).await;
    assert_eq!(reads(), before, "planned from the status kept");
    // A pod killed is read afresh, whatever the PLEG has seen.
    let opts = KillOptions { pod: Some(&pod), grace: Some(Duration::ZERO), hooks: false };
    rig.runtime.kill_pod("u1", &opts).await.unwrap();
    rig.sync(&pod).await;
    assert!(reads() > before);
}
