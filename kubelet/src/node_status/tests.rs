use super::machine::ReadingSource;
use super::*;
use crate::eviction::{Observation, Observations, Thresholds};

fn facts() -> NodeFacts {
    NodeFacts {
        name: "node-1".into(),
        hostname: "host-1".into(),
        internal_ip: Some("192.0.2.10".into()),
        max_pods: 110,
        runtime_version: "containerd://1.6.20".into(),
        kubelet_port: 10250,
        allocatable: NodeAllocatable::default(),
    }
}

fn machine() -> MachineInfo {
    MachineInfo {
        cpus: 2,
        memory_bytes: 4 * 1024 * 1024 * 1024,
        architecture: "amd64".into(),
        kernel_version: "6.1.0".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        ..Default::default()
    }
}

fn observe(readings: &[(Signal, u64, u64)]) -> Observations {
    Observations(
        readings
            .iter()
            .map(|&(s, available, capacity)| (s, Observation { available, capacity }))
            .collect(),
    )
}

/// Memory 2 of 4 GiB free, the root filesystem 50 of 100 GiB and half its inodes, 4 Ki PIDs
/// free of 4 Mi.
fn healthy() -> Readings {
    Readings {
        observed: observe(&[
            (Signal::MemoryAvailable, 2 << 30, 4 << 30),
            (Signal::NodeFsAvailable, 50 << 30, 100 << 30),
            (Signal::NodeFsInodesFree, 1 << 20, 2 << 20),
            (Signal::PidAvailable, 4 << 20, 4 << 22),
        ]),
        runtime_health: Ok(()),
        pressures: Vec::new(),
    }
}

fn t(s: i64) -> Time {
    Time(jiff::Timestamp::from_second(s).unwrap())
}

fn cond<'a>(s: &'a NodeStatus, t: &str) -> &'a NodeCondition {
    s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == t).unwrap()
}

#[test]
fn a_healthy_node_reports_capacity_addresses_info_and_ready() {
    let s = status(&facts(), &machine(), &healthy(), None, t(100));
    let cap = s.capacity.as_ref().unwrap();
    assert_eq!(cap["cpu"].0, "2");
    assert_eq!(cap["memory"].0, "4194304Ki");
    assert_eq!(cap["pods"].0, "110");
    assert_eq!(cap["ephemeral-storage"].0, format!("{}Ki", 100u64 << 20));
    let alloc = s.allocatable.as_ref().unwrap();
    assert_eq!((alloc["cpu"].0.as_str(), alloc["pods"].0.as_str()), ("2", "110"));
    // Upstream's default hard thresholds held back: memory.available 100Mi, nodefs 10%.
    assert_eq!(alloc["memory"].0, format!("{}Ki", (4u64 << 20) - 100 * 1024));
    assert_eq!(alloc["ephemeral-storage"].0, format!("{}Ki", (100u64 << 20) / 10 * 9));
    let addrs: Vec<_> = s.addresses.unwrap().into_iter().map(|a| (a.type_, a.address)).collect();
    assert_eq!(
        addrs,
        [("InternalIP".into(), "192.0.2.10".into()), ("Hostname".into(), "host-1".into())]
    );
    let info = s.node_info.as_ref().unwrap();
    assert_eq!(
        (info.container_runtime_version.as_str(), info.kubelet_version.as_str()),
        ("containerd://1.6.20", KUBELET_VERSION)
    );
    let s = status(&facts(), &machine(), &healthy(), None, t(100));
    let ready = cond(&s, "Ready");
    assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("True", Some("KubeletReady")));
    for (c, reason) in [
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    ] {
        assert_eq!(
            (cond(&s, c).status.as_str(), cond(&s, c).reason.as_deref()),
            ("False", Some(reason))
        );
    }
    assert_eq!(s.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port, 10250);
}

#[test]
fn pressure_and_an_unhealthy_runtime_show_in_conditions() {
    let r = Readings {
        observed: observe(&[
            (Signal::MemoryAvailable, 50 << 20, 4 << 30),
            (Signal::NodeFsAvailable, 5 << 30, 100 << 30),
        ]),
        runtime_health: Err("PLEG is not healthy".into()),
        pressures: vec![Pressure::Memory, Pressure::Disk],
    };
    let s = status(&facts(), &machine(), &r, None, t(100));
    assert_eq!(cond(&s, "MemoryPressure").status, "True");
    assert_eq!(cond(&s, "DiskPressure").status, "True");
    let ready = cond(&s, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.message.as_deref()),
        ("False", Some("PLEG is not healthy"))
    );
}

#[test]
fn heartbeats_move_transitions_stay_and_only_real_changes_count() {
    let first = status(&facts(), &machine(), &healthy(), None, t(100));
    let second = status(&facts(), &machine(), &healthy(), Some(&first), t(110));
    assert_eq!(cond(&second, "Ready").last_heartbeat_time, Some(t(110)));
    assert_eq!(cond(&second, "Ready").last_transition_time, Some(t(100)));
    assert!(!changed(&first, &second), "a heartbeat alone is not a change");
    let sick = Readings { runtime_health: Err("down".into()), ..healthy() };
    let third = status(&facts(), &machine(), &sick, Some(&second), t(120));
    assert_eq!(cond(&third, "Ready").last_transition_time, Some(t(120)));
    assert!(changed(&second, &third));
}

#[test]
fn the_registered_node_carries_upstreams_labels() {
    let n = node(&facts(), &machine(), NodeStatus::default());
    let labels = n.metadata.labels.unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "node-1");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
}

#[test]
fn machine_facts_and_readings_come_from_the_root_given() {
    let root = tempfile::tempdir().unwrap();
    let put = |p: &str, text: &str| {
        let path = root.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    put(
        "proc/meminfo",
        "MemTotal:        8000000 kB\nMemFree: 1 kB\nMemAvailable:    4000000 kB\n",
    );
    put("etc/machine-id", "abc123\n");
    put("proc/sys/kernel/random/boot_id", "boot-1\n");
    put("proc/sys/kernel/osrelease", "6.1.0-test\n");
    put("etc/os-release", "NAME=Debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n");
    let m = MachineInfo::read(root.path());
    assert_eq!(m.memory_bytes, 8_000_000 * 1024);
    assert_eq!((m.machine_id.as_str(), m.boot_id.as_str()), ("abc123", "boot-1"));
    assert_eq!(
        (m.kernel_version.as_str(), m.os_image.as_str()),
        ("6.1.0-test", "Debian GNU/Linux 12 (bookworm)")
    );
    put("proc/sys/kernel/pid_max", "4194304\n");
    put("proc/loadavg", "0.50 0.40 0.30 2/345 6789\n");
    let source = ReadingSource {
        root: root.path().into(),
        kubelet_dir: root.path().into(),
        image_fs_dir: Some(root.path().join("etc")),
    };
    let r = source.read(Ok(()), Vec::new());
    let memory = r.observed.get(Signal::MemoryAvailable).unwrap();
    assert_eq!((memory.available, memory.capacity), (4_000_000 * 1024, 8_000_000 * 1024));
    let pids = r.observed.get(Signal::PidAvailable).unwrap();
    assert_eq!((pids.available, pids.capacity), (4_194_304 - 345, 4_194_304));
    for s in [
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
    ] {
        let fs = r.observed.get(s).unwrap();
        assert!(fs.capacity > 0 && fs.available <= fs.capacity, "{s}: {fs:?}");
    }
    // The task limit is the smaller of pid_max and threads-max, as upstream's `pidlimit`.
    put("proc/sys/kernel/threads-max", "100000\n");
    let pids = source.read(Ok(()), Vec::new()).observed.get(Signal::PidAvailable).unwrap();
    assert_eq!((pids.available, pids.capacity), (100_000 - 345, 100_000));
    let without = ReadingSource { image_fs_dir: None, ..source }.read(Ok(()), Vec::new());
    assert_eq!(without.observed.get(Signal::ImageFsAvailable), None, "no imagefs named: unread");
}

#[test]
fn each_pressure_condition_is_the_eviction_managers_verdict_not_a_reading_of_its_own() {
    let under = |r: &Readings| {
        let s = status(&facts(), &machine(), r, None, t(100));
        ["MemoryPressure", "DiskPressure", "PIDPressure"].map(|c| cond(&s, c).status.clone())
    };
    // No memory and a full disk, but the manager has not said so: no pressure (upstream's
    // conditions come from the eviction manager alone, as admission's do).
    let full = Readings {
        observed: observe(&[
            (Signal::MemoryAvailable, 0, 4 << 30),
            (Signal::NodeFsAvailable, 0, 100 << 30),
        ]),
        runtime_health: Ok(()),
        pressures: Vec::new(),
    };
    assert_eq!(under(&full), ["False", "False", "False"]);
    let pid = Readings { pressures: vec![Pressure::Pid], ..healthy() };
    assert_eq!(under(&pid), ["False", "False", "True"]);
    let s = status(&facts(), &machine(), &pid, None, t(100));
    assert_eq!(cond(&s, "PIDPressure").reason.as_deref(), Some("KubeletHasInsufficientPID"));
    let disk = Readings { pressures: vec![Pressure::Disk], ..healthy() };
    assert_eq!(under(&disk), ["False", "True", "False"]);
}

#[test]
fn thresholds_turned_off_hold_nothing_back_from_allocatable() {
    let written =
        [("nodefs.available", "0%"), ("imagefs.available", "0%"), ("memory.available", "0%")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let f = NodeFacts {
        allocatable: NodeAllocatable {
            hard: Thresholds::parse(&written, false).unwrap(),
            ..Default::default()
        },
        ..facts()
    };
    let s = status(&f, &machine(), &healthy(), None, t(100));
    assert_eq!(s.allocatable, s.capacity);
}
