use std::path::Path;

use super::*;
use crate::cm::CgroupFs;
use crate::cm::allocatable::Reserved;
use crate::cm::cgroupfs::{CgroupUsage, Processes};
use crate::cm::node_config::Enforcement;
use crate::eviction::Thresholds;

const GIB: u64 = 1 << 30;

/// The v1 hierarchies a cgroup is made in.
const V1_CONTROLLERS: [&str; 5] = ["cpu", "cpuacct", "cpuset", "memory", "pids"];

/// A v1 cgroupfs in a temp dir with `root` made in each controller.
fn v1(root: &str) -> (tempfile::TempDir, Arc<CgroupFs>) {
    let dir = tempfile::tempdir().unwrap();
    for ctl in V1_CONTROLLERS {
        std::fs::create_dir_all(dir.path().join(ctl).join(root.trim_start_matches('/'))).unwrap();
    }
    let fs = Arc::new(CgroupFs::new(dir.path().to_path_buf()));
    (dir, fs)
}

fn node(system: &[(&str, &str)]) -> NodeResources {
    let map = system.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
    NodeResources {
        capacity: Capacity(BTreeMap::from([
            (Reservable::Cpu, 2000),
            (Reservable::Memory, 8 * GIB),
            (Reservable::Pid, 4096),
        ])),
        allocatable: NodeAllocatable {
            system: Reserved::parse(&map).unwrap(),
            kube: Reserved::default(),
            hard: Thresholds::none(),
        },
    }
}

fn manager(fs: Arc<dyn Cgroups>, config: NodeConfig, node: NodeResources) -> ContainerManager {
    ContainerManager::new(fs, config, node, Recorder::default(), "n1".into())
}

fn config(root: &str) -> NodeConfig {
    NodeConfig {
        layout: crate::cm::CgroupLayout {
            root: root.into(),
            per_qos: true,
            driver: crate::cm::CgroupDriver::Cgroupfs,
        },
        ..NodeConfig::default()
    }
}

fn read(root: &Path, file: &str) -> String {
    std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

use crate::test_cri::resources_spec as spec;

#[test]
fn start_limits_kubepods_to_allocatable_and_makes_the_qos_cgroups() {
    let (dir, fs) = v1("/r");
    let cm = manager(fs, config("/r"), node(&[("memory", "1Gi"), ("cpu", "500m")]));
    cm.start().unwrap();
    let r = dir.path();
    assert_eq!(read(r, "memory/r/kubepods/memory.limit_in_bytes"), (7 * GIB).to_string());
    assert_eq!(read(r, "cpu/r/kubepods/cpu.shares"), "1536", "1.5 CPUs");
    assert_eq!(read(r, "pids/r/kubepods/pids.max"), "4096");
    assert_eq!(read(r, "cpu/r/kubepods/besteffort/cpu.shares"), "2");
    assert_eq!(read(r, "cpu/r/kubepods/burstable/cpu.shares"), "2", "no Burstable pods yet");
    let events = cm.recorder.list();
    assert!(
        events.iter().any(|e| e.reason == "SuccessfulNodeAllocatableEnforcement"),
        "{events:?}"
    );
}

#[test]
fn without_pods_enforcement_kubepods_gets_the_whole_capacity() {
    let (dir, fs) = v1("/");
    let mut c = config("/");
    c.enforcement = Enforcement { pods: false, ..Enforcement::default() };
    manager(fs, c, node(&[("memory", "1Gi")])).start().unwrap();
    assert_eq!(read(dir.path(), "memory/kubepods/memory.limit_in_bytes"), (8 * GIB).to_string());
}

#[test]
fn a_missing_root_or_reserved_cgroup_stops_the_start_naming_it() {
    let (_dir, fs) = v1("/present");
    let err = manager(fs.clone(), config("/absent"), node(&[])).start().unwrap_err();
    assert_eq!(err.to_string(), "invalid configuration: cgroup-root \"/absent\" doesn't exist");

    let mut c = config("/present");
    c.enforcement.system_reserved = Some(("/system.slice".into(), Enforce::All));
    let err = manager(fs, c, node(&[("memory", "1Gi")])).start().unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to enforce System Reserved Cgroup Limits on \"/system.slice\": \"/system.slice\" cgroup does not exist"
    );
}

#[test]
fn reserved_cgroups_are_held_to_their_reservation_or_cpu_alone_when_compressible() {
    let (dir, fs) = v1("/system.slice");
    for ctl in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
        std::fs::create_dir_all(dir.path().join(ctl).join("kube.slice")).unwrap();
    }
    let mut c = config("/");
    c.enforcement.system_reserved = Some(("/system.slice".into(), Enforce::All));
    c.enforcement.kube_reserved = Some(("/kube.slice".into(), Enforce::CompressibleOnly));
    let mut n = node(&[("memory", "1Gi"), ("cpu", "250m")]);
    n.allocatable.kube = Reserved::parse(&BTreeMap::from([
        ("memory".to_string(), "512Mi".to_string()),
        ("cpu".to_string(), "100m".to_string()),
    ]))
    .unwrap();
    manager(fs, c, n).start().unwrap();
    let r = dir.path();
    assert_eq!(read(r, "memory/system.slice/memory.limit_in_bytes"), GIB.to_string());
    assert_eq!(read(r, "cpu/system.slice/cpu.shares"), "256");
    assert_eq!(read(r, "cpu/kube.slice/cpu.shares"), "102");
    assert!(!r.join("memory/kube.slice/memory.limit_in_bytes").exists(), "compressible: cpu only");
}

#[test]
fn pods_get_their_own_cgroup_under_their_qos_class_and_burstable_shares_follow_them() {
    let (dir, fs) = v1("/");
    let cm = manager(fs, config("/"), node(&[]));
    cm.start().unwrap();
    let r = dir.path();
    let both = [("cpu", "500m"), ("memory", "64Mi")];
    assert_eq!(cm.ensure_pod("g", &spec(&both, &both)).unwrap(), "/kubepods/podg");
    assert_eq!(read(r, "memory/kubepods/podg/memory.limit_in_bytes"), (64u64 << 20).to_string());
    assert_eq!(read(r, "cpu/kubepods/podg/cpu.cfs_quota_us"), "50000");

    let burst = spec(&[("cpu", "250m")], &[]);
    assert_eq!(cm.ensure_pod("b1", &burst).unwrap(), "/kubepods/burstable/podb1");
    assert_eq!(
        cm.pod_cgroup_of("b1").as_deref(),
        Some("/kubepods/burstable/podb1"),
        "by its class"
    );
    assert_eq!(cm.pod_cgroup_of("g").as_deref(), Some("/kubepods/podg"));
    assert_eq!(cm.pod_cgroup_of("unknown"), None, "looked for in each class, not there");
    cm.ensure_pod("b2", &burst).unwrap();
    assert_eq!(read(r, "cpu/kubepods/burstable/cpu.shares"), "512", "both pods' requests");
    assert!(!r.join("memory/kubepods/burstable/podb1/memory.limit_in_bytes").exists());

    assert_eq!(cm.ensure_pod("e", &spec(&[], &[])).unwrap(), "/kubepods/besteffort/pode");
    assert_eq!(read(r, "cpu/kubepods/besteffort/pode/cpu.shares"), "2");

    cm.remove_pod("b2");
    assert!(!r.join("cpu/kubepods/burstable/podb2").exists());
    assert_eq!(read(r, "cpu/kubepods/burstable/cpu.shares"), "256", "one Burstable pod left");
}

#[test]
fn qos_reserved_keeps_a_share_of_higher_classes_memory_requests_from_lower_ones() {
    let (dir, fs) = v1("/");
    let mut c = config("/");
    c.qos_reserved_memory = Some(50);
    let cm = manager(fs, c, node(&[("memory", "1Gi")]));
    cm.start().unwrap();
    let g = [("cpu", "1"), ("memory", "2Gi")];
    cm.ensure_pod("g", &spec(&g, &g)).unwrap();
    cm.ensure_pod("b", &spec(&[("memory", "1Gi")], &[])).unwrap();
    let r = dir.path();
    // Allocatable 7 GiB; half the Guaranteed 2 GiB kept from Burstable, half the Burstable
    // 1 GiB more from BestEffort.
    assert_eq!(read(r, "memory/kubepods/burstable/memory.limit_in_bytes"), (6 * GIB).to_string());
    assert_eq!(
        read(r, "memory/kubepods/besteffort/memory.limit_in_bytes"),
        (6 * GIB - GIB / 2).to_string()
    );
}

#[test]
fn orphaned_pod_cgroups_are_removed_and_known_ones_stay() {
    let (dir, fs) = v1("/");
    let cm = manager(fs, config("/"), node(&[]));
    cm.start().unwrap();
    cm.ensure_pod("keep", &spec(&[("cpu", "100m")], &[])).unwrap();
    cm.ensure_pod("gone", &spec(&[], &[])).unwrap();
    // Left by a kubelet that died between making a cgroup and starting the sandbox.
    std::fs::create_dir_all(dir.path().join("memory/kubepods/podstray")).unwrap();
    let mut removed = cm.remove_orphans(|uid| uid == "keep");
    removed.sort();
    assert_eq!(removed, vec!["gone".to_string(), "stray".to_string()]);
    assert!(dir.path().join("memory/kubepods/burstable/podkeep").is_dir());
    assert!(!dir.path().join("memory/kubepods/besteffort/podgone").exists());
    assert!(dir.path().join("memory/kubepods/burstable").is_dir(), "QoS levels are not pods");
}

#[test]
fn without_cgroups_per_qos_nothing_is_made_or_removed() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(CgroupFs::new(dir.path().to_path_buf()));
    let c = NodeConfig {
        layout: crate::cm::CgroupLayout {
            root: "/x".into(),
            per_qos: false,
            driver: crate::cm::CgroupDriver::Cgroupfs,
        },
        enforcement: Enforcement { pods: false, ..Enforcement::default() },
        ..NodeConfig::default()
    };
    let cm = manager(fs, c, node(&[]));
    cm.start().unwrap();
    assert_eq!(cm.ensure_pod("u", &spec(&[], &[])).unwrap(), "/x");
    assert!(cm.remove_orphans(|_| false).is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing touched");
}

/// A cgroup filesystem mounted read-only, as the kernel answers it: every cgroup made or written
/// is refused with `EROFS`; reads see the directories that exist.
#[derive(Debug)]
struct ReadOnly {
    fs: Arc<CgroupFs>,
    mount: std::path::PathBuf,
}

impl ReadOnly {
    /// Where the v1 `cpu` hierarchy holds `cgroup` (the first place a write is refused).
    fn cpu_dir(&self, cgroup: &str) -> std::path::PathBuf {
        self.mount.join("cpu").join(cgroup.trim_start_matches('/'))
    }
}

fn erofs() -> std::io::Error {
    std::io::Error::from(nix::errno::Errno::EROFS)
}

impl Cgroups for ReadOnly {
    fn exists(&self, path: &str) -> bool {
        self.fs.exists(path)
    }
    fn create(&self, path: &str, _: &ResourceConfig) -> Result<(), CgroupError> {
        Err(CgroupError::Create { path: self.cpu_dir(path), source: erofs() })
    }
    fn update(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError> {
        let value = config.cpu_shares.map(|s| s.to_string()).unwrap_or_default();
        Err(CgroupError::Write {
            path: self.cpu_dir(path).join("cpu.shares"),
            value,
            source: erofs(),
        })
    }
    fn remove(&self, path: &str) -> Result<(), CgroupError> {
        Err(CgroupError::Remove { path: self.cpu_dir(path), source: erofs() })
    }
    fn children(&self, path: &str) -> Vec<String> {
        self.fs.children(path)
    }
    fn usage(&self, path: &str, processes: Processes) -> Option<CgroupUsage> {
        self.fs.usage(path, processes)
    }
    fn end_reading(&self) {}
}

#[test]
fn a_read_only_cgroup_filesystem_stops_the_start_naming_the_cgroup_and_the_reason() {
    let (dir, fs) = v1("/");
    let read_only = Arc::new(ReadOnly { fs, mount: dir.path().to_path_buf() });
    let m = manager(read_only, config("/"), node(&[]));
    let err = m.start().unwrap_err();
    let want = format!(
        "setting up the kubelet's cgroups: creating cgroup {}: Read-only file system (os error 30)",
        dir.path().join("cpu/kubepods").display()
    );
    assert_eq!(err.to_string(), want);

    // A kubelet restarted on it (kubepods made before the filesystem went read-only) stops at the
    // first QoS cgroup it must size.
    for ctl in V1_CONTROLLERS {
        std::fs::create_dir_all(dir.path().join(ctl).join("kubepods")).unwrap();
    }
    let err = m.start().unwrap_err().to_string();
    assert!(
        err.starts_with("setting up the kubelet's cgroups: ") && err.contains("kubepods/burstable"),
        "{err}"
    );
    assert!(err.ends_with("Read-only file system (os error 30)"), "{err}");
}
