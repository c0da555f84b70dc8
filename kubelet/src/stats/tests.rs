//! The provider against the fake runtime over a real socket, the node read from a temp dir.

use fake_cri::{FakeCriServer, Rpc, Usage};
use proto::{ClientOptions, CriClient};

use super::*;
use crate::test_cri::put;
use layers::Want;

const IMAGE: &str = "busybox:1.35";

struct Rig {
    dir: tempfile::TempDir,
    fake: FakeCriServer,
    provider: StatsProvider,
}

impl Rig {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().add_image(IMAGE).unwrap();
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        let root = dir.path().join("root");
        put(&root, "proc/meminfo", "MemTotal: 1000 kB\nMemFree: 300 kB\nMemAvailable: 600 kB\n");
        put(&root, "proc/stat", "cpu 1 2 3\nbtime 1700000000\n");
        put(&root, "proc/loadavg", "0.1 0.2 0.3 1/42 999\n");
        put(&root, "proc/sys/kernel/pid_max", "32768\n");
        put(&root, "proc/sys/kernel/threads-max", "20000\n");
        put(&root, "sys/fs/cgroup/cpuacct/cpuacct.usage", "5000000000\n");
        put(&root, "sys/fs/cgroup/memory/memory.usage_in_bytes", "800000\n");
        put(
            &root,
            "sys/fs/cgroup/memory/memory.stat",
            "total_inactive_file 200000\ntotal_rss 100000\n",
        );
        let readings =
            ReadingSource { root: root.clone(), kubelet_dir: root.clone(), image_fs_dir: None };
        let provider = StatsProvider::new(cri, "node-a".into(), readings, dir.path().join("pods"));
        Self { dir, fake, provider }
    }

    fn cri(&self) -> &CriClient {
        &self.provider.cri
    }

    async fn sandbox(&self, name: &str) -> String {
        let logs = self.dir.path().join("pods").join(format!("default_{name}_uid-{name}"));
        crate::test_cri::sandbox(self.cri(), name, Some(&logs)).await
    }

    async fn container(&self, sandbox: &str, name: &str, start: bool) -> String {
        crate::test_cri::container(self.cri(), sandbox, name, IMAGE, start).await
    }

    fn uses(&self, id: &str, cpu: u64, working_set: u64) {
        let usage = Usage {
            cpu_core_nanos: cpu,
            memory_working_set_bytes: working_set,
            memory_usage_bytes: working_set + 1,
            writable_layer_bytes: 4096,
            processes: 2,
            ..Default::default()
        };
        assert!(self.fake.runtime().set_usage(id, usage));
    }
}

#[tokio::test]
async fn the_summary_carries_the_node_and_every_running_container_with_its_pod() {
    let rig = Rig::new().await;
    let web = rig.sandbox("web").await;
    let nginx = rig.container(&web, "nginx", true).await;
    let sidecar = rig.container(&web, "sidecar", true).await;
    let _created = rig.container(&web, "not-started", false).await;
    rig.uses(&nginx, 3_000, 1 << 20);
    rig.uses(&sidecar, 1_000, 1 << 10);

    let s = rig.provider.summary(Detail::Full(Want::Now)).await.unwrap();
    let n = &s.node;
    assert_eq!((n.node_name.as_str(), n.start_time), ("node-a", Time::from_seconds(1_700_000_000)));
    let cpu = n.cpu.as_ref().unwrap();
    assert_eq!((cpu.usage_core_nano_seconds, cpu.usage_nano_cores), (Some(5_000_000_000), None));
    let mem = n.memory.as_ref().unwrap();
    assert_eq!(
        (mem.usage_bytes, mem.working_set_bytes, mem.rss_bytes, mem.available_bytes),
        (Some(800_000), Some(600_000), Some(100_000), Some(1_024_000 - 600_000))
    );
    assert!(
        n.fs.as_ref().is_some_and(|f| f.capacity_bytes.is_some_and(|c| c > 0)),
        "nodefs: {:?}",
        n.fs
    );
    let image_fs = n.runtime.as_ref().unwrap().image_fs.as_ref().unwrap();
    assert_eq!(image_fs.used_bytes, Some(0));
    assert_eq!(image_fs.capacity_bytes, None, "the fake's image directory is not on this machine");
    let rlimit = n.rlimit.as_ref().unwrap();
    assert_eq!(
        (rlimit.maxpid, rlimit.curproc),
        (Some(20_000), Some(42)),
        "the smaller of pid_max and threads-max"
    );

    assert_eq!(s.pods.len(), 1);
    let p = &s.pods[0];
    assert_eq!((p.pod_ref.name.as_str(), p.pod_ref.uid.as_str()), ("web", "uid-web"));
    let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["nginx", "sidecar"], "running containers only");
    assert_eq!(p.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(4_000));
    assert_eq!(p.memory.as_ref().unwrap().working_set_bytes, Some((1 << 20) + (1 << 10)));
    let processes = p.process_stats.as_ref().and_then(|s| s.process_count);
    assert_eq!(processes, Some(4), "the runtime's count for the pod (CRI ProcessUsage)");
    let json = serde_json::to_value(p).unwrap();
    assert_eq!(json["process_stats"]["process_count"], 4, "upstream's JSON names");
    let c = &p.containers[0];
    assert_eq!(c.memory.as_ref().unwrap().working_set_bytes, Some(1 << 20));
    assert_eq!(c.rootfs.as_ref().unwrap().used_bytes, Some(4096));
    // The fake runtime opened each container's log: the directory and its `0.log`.
    assert_eq!(c.logs.as_ref().unwrap().inodes_used, Some(2));
    std::fs::remove_dir_all(rig.dir.path().join("pods/default_web_uid-web/sidecar")).unwrap();
    let s = rig.provider.summary(Detail::Full(Want::Now)).await.unwrap();
    assert_eq!(s.pods[0].containers[1].logs, None, "no log directory, no figures");
}

#[tokio::test]
async fn cpu_and_memory_only_skips_the_disks_and_the_image_filesystem() {
    let rig = Rig::new().await;
    let web = rig.sandbox("web").await;
    rig.container(&web, "nginx", true).await;
    let s = rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    assert_eq!(rig.fake.runtime().calls(Rpc::ImageFsInfo), 0);
    assert!(s.node.fs.is_none() && s.node.runtime.is_none() && s.node.rlimit.is_none());
    let c = &s.pods[0].containers[0];
    assert!(c.cpu.is_some() && c.memory.is_some() && c.rootfs.is_none() && c.logs.is_none());
}

#[tokio::test]
async fn a_runtime_without_sandbox_stats_is_summed_from_container_stats() {
    let rig = Rig::new().await;
    let web = rig.sandbox("web").await;
    let a = rig.container(&web, "a", true).await;
    let b = rig.container(&web, "b", true).await;
    rig.uses(&a, 10, 100);
    rig.uses(&b, 20, 200);
    let unimplemented = tonic::Status::unimplemented("unknown method ListPodSandboxStats");
    rig.fake.runtime().fail_next(Rpc::ListPodSandboxStats, unimplemented);
    let s = rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    assert_eq!(rig.fake.runtime().calls(Rpc::ListContainerStats), 1);
    let p = &s.pods[0];
    assert_eq!(p.containers.len(), 2);
    assert_eq!(p.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(30));
    assert_eq!(p.memory.as_ref().unwrap().working_set_bytes, Some(300));
}

#[tokio::test]
async fn runtime_errors_are_the_summarys_named_with_the_call() {
    let rig = Rig::new().await;
    let fake = rig.fake.runtime();
    // A sandbox the runtime cannot read: the pods are summed from container stats instead.
    fake.fail_next(Rpc::ListPodSandboxStats, tonic::Status::unknown("cgroups: cgroup deleted"));
    rig.provider.summary(Detail::Full(Want::Now)).await.unwrap();
    assert_eq!(fake.calls(Rpc::ListContainerStats), 1);
    // Both failing: the error is the first call's.
    fake.fail_next(Rpc::ListPodSandboxStats, tonic::Status::unavailable("runtime is restarting"));
    fake.fail_next(Rpc::ListContainerStats, tonic::Status::unavailable("runtime is restarting"));
    let e = rig.provider.summary(Detail::Full(Want::Now)).await.unwrap_err().to_string();
    assert!(
        e.starts_with("failed to list pod stats: CRI ListPodSandboxStats")
            && e.contains("runtime is restarting"),
        "{e}"
    );
    assert_eq!(fake.calls(Rpc::ListContainerStats), 2, "tried as the fallback");

    fake.fail_next(Rpc::ListContainers, tonic::Status::internal("boom"));
    let e = rig.provider.summary(Detail::CpuAndMemory).await.unwrap_err().to_string();
    assert!(
        e.starts_with(
            "failed to list pod stats: failed to get pod or container map: CRI ListContainers"
        ),
        "{e}"
    );

    fake.fail_next(Rpc::ImageFsInfo, tonic::Status::internal("no snapshotter"));
    let e = rig.provider.summary(Detail::Full(Want::Now)).await.unwrap_err().to_string();
    assert!(e.starts_with("failed to get imageFs stats: CRI ImageFsInfo"), "{e}");
    // The next one succeeds: nothing was left broken.
    assert!(rig.provider.summary(Detail::Full(Want::Now)).await.is_ok());
}

#[tokio::test]
async fn summaries_asked_soon_after_one_another_share_a_reading_until_the_pleg_sees_a_change() {
    let mut rig = Rig::new().await;
    let timeline = Arc::new(PodTimeline::default());
    let period = Duration::from_secs(1);
    rig.provider = rig.provider.with_housekeeping(timeline.clone(), period);
    let relisted = |changed: &[&str]| {
        let now = Instant::now();
        timeline.relisted(now, now, changed.iter().copied(), &Default::default());
    };
    let web = rig.sandbox("web").await;
    let nginx = rig.container(&web, "nginx", true).await;
    rig.uses(&nginx, 3_000, 1 << 20);
    relisted(&["uid-web"]);
    let fake = rig.fake.runtime();
    let reads = || (fake.calls(Rpc::ListContainers), fake.calls(Rpc::ListPodSandboxStats));

    let metrics = rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    rig.uses(&nginx, 9_000, 1 << 21);
    let summary = rig.provider.summary(Detail::Full(Want::Recent)).await.unwrap();
    assert_eq!(reads(), (1, 1), "the second summary answered from the first's reading");
    let cpu = |s: &Summary| s.pods[0].containers[0].cpu.clone().unwrap();
    assert_eq!(cpu(&summary), cpu(&metrics), "the figures and their time as read");
    assert_eq!(summary.pods[0].containers[0].rootfs.as_ref().unwrap().used_bytes, Some(4096));
    assert!(metrics.pods[0].containers[0].rootfs.is_none(), "CPU and memory only");

    // The eviction manager reads afresh, and what it read answers next.
    let evicting = rig.provider.summary(Detail::Full(Want::Now)).await.unwrap();
    assert_eq!(cpu(&evicting).usage_core_nano_seconds, Some(9_000));
    rig.uses(&nginx, 12_000, 1 << 21);
    let next = rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    assert_eq!((reads(), cpu(&next)), ((2, 2), cpu(&evicting)));

    // A container started: once the PLEG saw it, the next summary reads again and carries it.
    rig.container(&web, "sidecar", true).await;
    let stale = rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    assert_eq!(stale.pods[0].containers.len(), 1, "not seen by the PLEG yet");
    relisted(&["uid-web"]);
    let s = rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    let names: Vec<&str> = s.pods[0].containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!((reads(), names), ((3, 3), vec!["nginx", "sidecar"]));
}

#[tokio::test]
async fn without_a_current_pleg_every_summary_reads_afresh() {
    let mut rig = Rig::new().await;
    let timeline = Arc::new(PodTimeline::default());
    rig.provider = rig.provider.with_housekeeping(timeline, Duration::from_secs(1));
    rig.sandbox("web").await;
    rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    rig.provider.summary(Detail::CpuAndMemory).await.unwrap();
    assert_eq!(rig.fake.runtime().calls(Rpc::ListContainers), 2, "never relisted: nothing stands");
}
