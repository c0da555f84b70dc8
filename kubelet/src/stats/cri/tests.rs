use super::*;

const S: i64 = 1_000_000_000;

fn sandbox(id: &str, name: &str, ready: bool, created_at: i64) -> brief::Sandbox {
    let state = if ready {
        cri::PodSandboxState::SandboxReady
    } else {
        cri::PodSandboxState::SandboxNotready
    };
    brief::Sandbox {
        id: id.into(),
        metadata: Some(brief::SandboxMetadata {
            name: name.into(),
            uid: format!("uid-{id}").into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        state: state as i32,
        created_at,
        ..Default::default()
    }
}

fn container(id: &str, sandbox: &str, name: &str, running: bool) -> brief::Container {
    let state = if running {
        cri::ContainerState::ContainerRunning
    } else {
        cri::ContainerState::ContainerExited
    };
    brief::Container {
        id: id.into(),
        pod_sandbox_id: sandbox.into(),
        metadata: Some(brief::ContainerMetadata { name: name.into(), attempt: 0 }),
        state: state as i32,
        created_at: 7 * S,
    }
}

fn u(v: u64) -> Option<cri::UInt64Value> {
    Some(cri::UInt64Value { value: v })
}

fn stats(
    id: &str,
    at: i64,
    core_nanos: u64,
    nano_cores: Option<u64>,
    ws: u64,
) -> cri::ContainerStats {
    cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes { id: id.into(), ..Default::default() }),
        cpu: Some(cri::CpuUsage {
            timestamp: at,
            usage_core_nano_seconds: u(core_nanos),
            usage_nano_cores: nano_cores.and_then(u),
        }),
        memory: Some(cri::MemoryUsage {
            timestamp: at,
            working_set_bytes: u(ws),
            usage_bytes: u(ws * 2),
            ..Default::default()
        }),
        writable_layer: None,
        swap: None,
    }
}

fn ctx(cache: &mut CpuUsageCache) -> Context<'_> {
    Context { now: Time(99 * S), cpu: cache, disks: None }
}

#[test]
fn the_listing_keeps_a_pods_ready_sandbox_or_its_newest_and_running_containers_only() {
    let l = Listing::new(
        vec![
            sandbox("old", "web", false, 1),
            sandbox("new", "web", true, 2),
            sandbox("gone1", "done", false, 1),
            sandbox("gone2", "done", false, 2),
            sandbox("alone", "alone", false, 1),
        ],
        vec![container("c1", "new", "nginx", true), container("c0", "old", "nginx", false)],
    );
    let mut ids: Vec<&str> = l.ids().into_iter().collect();
    ids.sort_unstable();
    assert_eq!(ids, ["alone", "c1", "gone2", "new"]);
}

#[test]
fn sandbox_stats_give_the_pods_own_figures_and_its_running_containers() {
    let l = Listing::new(
        vec![sandbox("s1", "web", true, 5 * S)],
        vec![container("c1", "s1", "nginx", true), container("c2", "s1", "exited", false)],
    );
    let pod_stats = cri::PodSandboxStats {
        attributes: Some(cri::PodSandboxAttributes { id: "s1".into(), ..Default::default() }),
        linux: Some(cri::LinuxPodSandboxStats {
            cpu: Some(cri::CpuUsage {
                timestamp: 10 * S,
                usage_core_nano_seconds: u(900),
                usage_nano_cores: u(0),
            }),
            memory: Some(cri::MemoryUsage {
                timestamp: 10 * S,
                working_set_bytes: u(4096),
                ..Default::default()
            }),
            containers: vec![
                stats("c1", 10 * S, 800, Some(5), 2048),
                stats("c2", 10 * S, 1, None, 1),
            ],
            ..Default::default()
        }),
        windows: None,
    };
    let unknown = cri::PodSandboxStats {
        attributes: Some(cri::PodSandboxAttributes {
            id: "not-listed".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut cache = CpuUsageCache::default();
    let pods = from_sandbox_stats(&[pod_stats, unknown], &l, &mut ctx(&mut cache));
    assert_eq!(pods.len(), 1, "a sandbox the listing does not have is left out");
    let p = &pods[0];
    assert_eq!(
        p.pod_ref,
        PodReference { name: "web".into(), namespace: "default".into(), uid: "uid-s1".into() }
    );
    assert_eq!(p.start_time, Time(5 * S));
    let cpu = p.cpu.as_ref().unwrap();
    assert_eq!(
        (cpu.usage_core_nano_seconds, cpu.usage_nano_cores),
        (Some(900), Some(0)),
        "the runtime's rate, zero included"
    );
    assert_eq!(p.memory.as_ref().unwrap().working_set_bytes, Some(4096));
    assert_eq!(p.containers.len(), 1, "the exited container is not reported");
    let c = &p.containers[0];
    assert_eq!((c.name.as_str(), c.start_time), ("nginx", Time(7 * S)));
    assert_eq!(c.cpu.as_ref().unwrap().usage_nano_cores, Some(5));
    assert_eq!(c.memory.as_ref().unwrap().usage_bytes, Some(4096));
    assert_eq!((c.rootfs.as_ref(), c.logs.as_ref()), (None, None), "CPU and memory only");
}

#[test]
fn without_the_runtimes_rate_it_comes_from_the_previous_sample() {
    let l = Listing::new(
        vec![sandbox("s1", "web", true, 1)],
        vec![container("c1", "s1", "nginx", true)],
    );
    let mut cache = CpuUsageCache::default();
    let first = from_container_stats(&[stats("c1", 10 * S, 0, None, 1)], &l, &mut ctx(&mut cache));
    assert_eq!(first[0].containers[0].cpu.as_ref().unwrap().usage_nano_cores, None);
    // A quarter of a core over 4 s.
    let second =
        from_container_stats(&[stats("c1", 14 * S, S as u64, None, 1)], &l, &mut ctx(&mut cache));
    let cpu = second[0].containers[0].cpu.as_ref().unwrap();
    assert_eq!((cpu.time, cpu.usage_nano_cores), (Time(14 * S), Some(250_000_000)));
}

#[test]
fn container_stats_make_each_pods_totals_the_sum_of_its_containers() {
    let l = Listing::new(
        vec![sandbox("s1", "web", true, 1), sandbox("s2", "db", true, 1)],
        vec![
            container("a", "s1", "nginx", true),
            container("b", "s1", "sidecar", true),
            container("c", "s2", "db", true),
            container("orphan", "no-such-sandbox", "x", true),
        ],
    );
    let mut cache = CpuUsageCache::default();
    let all = [
        stats("a", S, 100, Some(10), 1000),
        stats("b", S, 50, Some(5), 500),
        stats("c", S, 7, Some(1), 70),
        stats("orphan", S, 1, Some(1), 1),
        stats("unlisted", S, 1, Some(1), 1),
    ];
    let pods = from_container_stats(&all, &l, &mut ctx(&mut cache));
    let names: Vec<&str> = pods.iter().map(|p| p.pod_ref.name.as_str()).collect();
    assert_eq!(names, ["db", "web"], "sorted; a container without a listed sandbox is left out");
    let web = &pods[1];
    let cpu = web.cpu.as_ref().unwrap();
    assert_eq!((cpu.usage_core_nano_seconds, cpu.usage_nano_cores), (Some(150), Some(15)));
    let mem = web.memory.as_ref().unwrap();
    assert_eq!((mem.working_set_bytes, mem.usage_bytes), (Some(1500), Some(3000)));
    let names: Vec<&str> = web.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["nginx", "sidecar"]);
}

#[test]
fn a_runtime_that_sends_no_readings_gets_zeros_and_disks_get_their_figures() {
    let root = tempfile::tempdir().unwrap();
    let pod_logs = root.path().join("pods");
    let log_dir = pod_logs.join("default_web_uid-s1/nginx");
    std::fs::create_dir_all(&log_dir).unwrap();
    std::fs::write(log_dir.join("0.log"), vec![b'x'; 5000]).unwrap();
    let l = Listing::new(
        vec![sandbox("s1", "web", true, 1)],
        vec![container("c1", "s1", "nginx", true)],
    );
    let bare = cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes { id: "c1".into(), ..Default::default() }),
        writable_layer: Some(cri::FilesystemUsage {
            timestamp: 3 * S,
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: root.path().display().to_string(),
            }),
            used_bytes: u(123),
            inodes_used: u(4),
        }),
        ..Default::default()
    };
    let nodefs = FsReading::of(root.path());
    let mut cache = CpuUsageCache::default();
    let mut c = ctx(&mut cache);
    c.disks = Some(Disks {
        by_mountpoint: HashMap::new(),
        nodefs,
        pod_logs: crate::stats::logs::PodLogs::open(&pod_logs),
        layers: Default::default(),
    });
    let pods = from_container_stats(&[bare], &l, &mut c);
    let cs = &pods[0].containers[0];
    let cpu = cs.cpu.as_ref().unwrap();
    assert_eq!(
        (cpu.time, cpu.usage_core_nano_seconds, cpu.usage_nano_cores),
        (Time(99 * S), Some(0), Some(0))
    );
    assert_eq!(cs.memory.as_ref().unwrap().working_set_bytes, Some(0));
    let rootfs = cs.rootfs.as_ref().unwrap();
    assert_eq!(
        (rootfs.time, rootfs.used_bytes, rootfs.inodes_used),
        (Time(3 * S), Some(123), Some(4))
    );
    assert!(rootfs.capacity_bytes.is_some_and(|c| c > 0), "the layer's filesystem was read");
    let logs = cs.logs.as_ref().unwrap();
    assert!(logs.used_bytes.is_some_and(|b| b >= 5000) && logs.inodes_used == Some(2), "{logs:?}");
    assert_eq!(
        logs.capacity_bytes,
        nodefs.map(|n| n.capacity),
        "logs are on nodefs, as upstream says"
    );
}
