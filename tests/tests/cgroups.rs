//! The kubelet's cgroups on real containerd, read back from the cgroup files (v1 here; the v2
//! layout is covered by `kubelet::cm`'s unit tests in a temp dir): `kubepods` held to
//! allocatable, a Guaranteed pod's pod-level limits summed from its containers above the
//! containers' own, a Burstable pod under `kubepods/burstable` bounded only where every
//! container declares a limit, a BestEffort one under `besteffort` with the minimum shares;
//! the Burstable level's shares following its pods; a pod's cgroup gone with the pod; and bad
//! cgroup settings stopping the start with the field and reason.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::cluster::StandaloneNode;
use e2e::containerd::Containerd;
use e2e::kubelet::{Kubelet, NODE};
use e2e::{eventually, require};

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);
const MIB: u64 = 1 << 20;

const GUARANTEED: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: guaranteed
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: busybox:1.35
    command: [sleep, "3600"]
    resources:
      limits: {cpu: 250m, memory: 64Mi}
  - name: b
    image: busybox:1.35
    command: [sleep, "3600"]
    resources:
      limits: {cpu: 500m, memory: 32Mi}
"#;

const BURSTABLE: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: burstable
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.35
    command: [sleep, "3600"]
    resources:
      requests: {cpu: 300m, memory: 16Mi}
      limits: {memory: 128Mi}
"#;

const BEST_EFFORT: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: besteffort
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.35
    command: [sleep, "3600"]
"#;

/// A v1 controller's directory for cgroup `path`.
fn v1(controller: &str, path: &str) -> PathBuf {
    Path::new("/sys/fs/cgroup").join(controller).join(path.trim_start_matches('/'))
}

fn read(dir: &Path, file: &str) -> String {
    let path = dir.join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

fn number(dir: &Path, file: &str) -> i64 {
    read(dir, file).parse().unwrap()
}

fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb * 1024
}

/// The pod's UID and its containers' IDs by name, from the kubelet's `/pods`.
fn ids(pod: &serde_json::Value) -> (String, Vec<(String, String)>) {
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let containers = pod["status"]["containerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let id = c["containerID"].as_str().unwrap();
            let id = id.split_once("://").map_or(id, |(_, id)| id).to_string();
            (c["name"].as_str().unwrap().to_string(), id)
        })
        .collect();
    (uid, containers)
}

fn is_v1() -> bool {
    !Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_cgroups_under_their_qos_class_with_upstreams_limits() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    assert!(
        is_v1(),
        "this test reads cgroup v1 files; the v2 layout is unit-tested in kubelet::cm"
    );
    let node = StandaloneNode::start_with_config(
        "systemReserved:\n  cpu: 500m\n  memory: 1Gi\npodPidsLimit: 1024\n",
        &[],
    )
    .await
    .unwrap();
    let root = node.cgroup_root();
    let kubepods = format!("{root}/kubepods");

    // kubepods: capacity less systemReserved (not the eviction threshold), as upstream.
    let kp_memory = v1("memory", &kubepods);
    // kubepods' limits are written before its QoS children are made, besteffort's share last.
    let besteffort_shares = v1("cpu", &format!("{kubepods}/besteffort")).join("cpu.shares");
    eventually("kubepods and its QoS cgroups made", WAIT, POLL, || async {
        let shares = std::fs::read_to_string(&besteffort_shares).ok()?;
        (shares.trim() == "2").then_some(())
    })
    .await
    .unwrap_or_else(|e| node.fail(e));
    assert_eq!(number(&kp_memory, "memory.limit_in_bytes") as u64, mem_total() - 1024 * MIB);
    let cpus = std::thread::available_parallelism().unwrap().get() as i64;
    assert_eq!(number(&v1("cpu", &kubepods), "cpu.shares"), (cpus * 1000 - 500) * 1024 / 1000);
    assert_eq!(number(&v1("cpu", &format!("{kubepods}/besteffort")), "cpu.shares"), 2);

    for (file, text) in [("g.yaml", GUARANTEED), ("b.yaml", BURSTABLE), ("e.yaml", BEST_EFFORT)] {
        node.kubelet.write_manifest(file, text).unwrap();
    }
    let guaranteed = node.running(&format!("guaranteed-{NODE}"), WAIT, POLL).await;
    let burstable = node.running(&format!("burstable-{NODE}"), WAIT, POLL).await;
    let besteffort = node.running(&format!("besteffort-{NODE}"), WAIT, POLL).await;

    // Guaranteed: directly under kubepods; the pod's limits are its containers' sums, each
    // container holds its own below.
    let (uid, containers) = ids(&guaranteed);
    let pod = format!("{kubepods}/pod{uid}");
    assert_eq!(number(&v1("memory", &pod), "memory.limit_in_bytes") as u64, 96 * MIB);
    assert_eq!(number(&v1("cpu", &pod), "cpu.cfs_quota_us"), 75_000);
    assert_eq!(number(&v1("cpu", &pod), "cpu.cfs_period_us"), 100_000);
    assert_eq!(number(&v1("cpu", &pod), "cpu.shares"), 768);
    assert_eq!(read(&v1("pids", &pod), "pids.max"), "1024", "podPidsLimit");
    for (name, id) in &containers {
        let (memory, quota) = if name == "a" { (64 * MIB, 25_000) } else { (32 * MIB, 50_000) };
        let c = format!("{pod}/{id}");
        assert_eq!(number(&v1("memory", &c), "memory.limit_in_bytes") as u64, memory, "{name}");
        assert_eq!(number(&v1("cpu", &c), "cpu.cfs_quota_us"), quota, "{name}");
    }

    // Burstable: under kubepods/burstable; memory bounded (every container has a limit), CPU
    // not (none has one); the QoS level's shares are its pods' requests.
    let (uid, containers) = ids(&burstable);
    let pod = format!("{kubepods}/burstable/pod{uid}");
    assert_eq!(number(&v1("memory", &pod), "memory.limit_in_bytes") as u64, 128 * MIB);
    assert_eq!(number(&v1("cpu", &pod), "cpu.cfs_quota_us"), -1, "no CPU limit declared");
    assert_eq!(number(&v1("cpu", &pod), "cpu.shares"), 307);
    assert!(v1("memory", &format!("{pod}/{}", containers[0].1)).is_dir());
    assert_eq!(number(&v1("cpu", &format!("{kubepods}/burstable")), "cpu.shares"), 307);

    // BestEffort: under kubepods/besteffort with the minimum shares, unbounded.
    let (uid, containers) = ids(&besteffort);
    let pod = format!("{kubepods}/besteffort/pod{uid}");
    assert_eq!(number(&v1("cpu", &pod), "cpu.shares"), 2);
    assert_eq!(number(&v1("cpu", &pod), "cpu.cfs_quota_us"), -1);
    assert!(v1("cpu", &format!("{pod}/{}", containers[0].1)).is_dir());

    // A pod's cgroup goes with the pod; the Burstable level's shares drop back.
    std::fs::remove_file(node.kubelet.manifests().join("b.yaml")).unwrap();
    let (uid, _) = ids(&burstable);
    let gone = v1("memory", &format!("{kubepods}/burstable/pod{uid}"));
    eventually("the Burstable pod's cgroup removed", WAIT, POLL, || async {
        (!gone.exists()).then_some(())
    })
    .await
    .unwrap_or_else(|e| node.fail(e));
    assert_eq!(number(&v1("cpu", &format!("{kubepods}/burstable")), "cpu.shares"), 2);
    node.teardown().await;
}

/// Starts a kubelet that must refuse to start; its log's error line.
async fn refused(containerd: &Containerd, config: &str, flags: &[&str]) -> String {
    let mut kubelet = Kubelet::start_standalone_with_config(containerd, config, flags).unwrap();
    let exited = eventually("the kubelet exits", WAIT, POLL, || {
        let exited = kubelet.exited();
        async move { exited }
    })
    .await;
    let log = kubelet.log_tail(1000); // the error, then a backtrace
    assert!(exited.is_ok_and(|s| !s.success()), "the kubelet kept running:\n{log}");
    kubelet.stop();
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cgroup_settings_stop_the_start_naming_the_field_and_reason() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let containerd = Containerd::start(Default::default()).await.unwrap();
    let cases: [(&str, &[&str], &str); 5] = [
        (
            "",
            &["--cgroup-root=/e2e-no-such-cgroup"],
            "invalid configuration: cgroup-root \"/e2e-no-such-cgroup\" doesn't exist",
        ),
        // This host (as CI's container) is not booted with systemd: the driver is refused (its
        // root a slice, as the systemd driver takes it).
        (
            "cgroupDriver: systemd\n",
            &["--cgroup-root=e2e_refused.slice"],
            "cgroups: cgroupDriver: systemd needs systemd as the init system (no /run/systemd/system); set cgroupDriver: cgroupfs",
        ),
        (
            "enforceNodeAllocatable: [pods, system-reserved]\n",
            &[],
            "systemReservedCgroup (--system-reserved-cgroup) must be specified",
        ),
        (
            "cgroupsPerQOS: false\n",
            &[],
            "enforceNodeAllocatable (--enforce-node-allocatable) is not supported unless cgroupsPerQOS",
        ),
        ("qosReserved:\n  memory: ten%\n", &[], "qosReserved: failed to parse percentage \"ten%\""),
    ];
    let systemd_booted = std::path::Path::new("/run/systemd/system").is_dir();
    for (config, flags, want) in cases {
        if systemd_booted && config.starts_with("cgroupDriver: systemd") {
            eprintln!(
                "not checked here: systemd is the init system, so cgroupDriver: systemd runs"
            );
            continue;
        }
        let log = refused(&containerd, config, flags).await;
        assert!(log.contains(want), "{config}{flags:?}: want {want:?} in:\n{log}");
    }
    let report = containerd.stop().await;
    assert!(report.is_clean(), "teardown leaked: {report:#?}");
}

/// The control files this process holds open under `dir` (directory handles not counted).
fn open_files_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.starts_with(dir) && target.is_file())
        .count()
}

/// Removes a test cgroup tree in every v1 hierarchy, whatever the test left.
struct RemoveOnDrop(String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for controller in ["cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb"] {
            let top = v1(controller, &self.0);
            for dir in [top.join("qos/pod"), top.join("qos"), top] {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// On the real cgroup filesystem the stats keep a pod's control files open between readings:
/// each reading sees the kernel's figures of that moment, a cgroup the kubelet removes has its
/// files closed first, and one removed and made again by someone else (the kept files then
/// answer `ENODEV`) is read afresh by path; a reading that no longer asks for a file closes it.
#[test]
fn kept_control_files_read_fresh_figures_and_follow_a_cgroup_made_again() {
    if !require::real_runtime(&[]) {
        return;
    }
    assert!(is_v1(), "this test reads cgroup v1 files; the v2 reads are unit-tested");
    use kubelet::cm::cgroupfs::{CgroupFs, Cgroups, Processes};
    use kubelet::cm::resources::ResourceConfig;

    let top = format!("/e2e-kept-{}", std::process::id());
    let _cleanup = RemoveOnDrop(top.clone());
    let pod = format!("{top}/qos/pod");
    let fs = CgroupFs::new("/sys/fs/cgroup");
    fs.create(&pod, &ResourceConfig::default()).unwrap();
    let pids = v1("pids", &pod);

    assert_eq!(fs.usage(&pod, Processes::Count).unwrap().processes, Some(0));
    assert_eq!(open_files_under(&v1("pids", &top)), 1, "pids.current kept open");
    let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    std::fs::write(pids.join("cgroup.procs"), child.id().to_string()).unwrap();
    assert_eq!(
        fs.usage(&pod, Processes::Count).unwrap().processes,
        Some(1),
        "the kept file read again shows the process that joined"
    );
    assert_eq!(fs.usage(&pod, Processes::Skip).unwrap().processes, None);
    child.kill().unwrap();
    child.wait().unwrap();

    // Removed and made again behind the reader's back: the kept files answer ENODEV and the
    // new cgroup's are opened by path.
    for controller in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
        std::fs::remove_dir(v1(controller, &pod)).unwrap();
    }
    assert_eq!(fs.usage(&pod, Processes::Count), None, "gone");
    fs.create(&pod, &ResourceConfig::default()).unwrap();
    assert_eq!(fs.usage(&pod, Processes::Count).unwrap().processes, Some(0), "made again");

    // A reading that does not ask for the pod closes its files; so does removing it.
    fs.end_reading();
    assert!(open_files_under(&v1("memory", &top)) > 0, "read since the last reading's end");
    fs.end_reading();
    assert_eq!(open_files_under(&v1("memory", &top)), 0, "not read in the last reading");
    fs.usage(&pod, Processes::Count).unwrap();
    assert!(open_files_under(&v1("memory", &top)) > 0);
    fs.remove(&pod).unwrap();
    assert_eq!(open_files_under(&v1("memory", &top)), 0, "closed before the cgroup is removed");
    assert!(!v1("memory", &pod).exists());
}
