use super::machine::ReadingSource;
use super::*;

fn facts() -> NodeFacts {
    NodeFacts {
        name: "node-1".into(),
        hostname: "host-1".into(),
        internal_ip: Some("192.0.2.10".into()),
        max_pods: 110,
        runtime_version: "containerd://1.6.20".into(),
        kubelet_port: 10250,
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

fn healthy() -> Readings {
    Readings {
        memory_available: 2 << 30,
        fs_available: 50 << 30,
        fs_capacity: 100 << 30,
        runtime_health: Ok(()),
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
    assert_eq!(s.allocatable, s.capacity);
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
        memory_available: 50 << 20,
        fs_available: 5 << 30,
        fs_capacity: 100 << 30,
        runtime_health: Err("PLEG is not healthy".into()),
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
    let r =
        ReadingSource { root: root.path().into(), kubelet_dir: root.path().into() }.read(Ok(()));
    assert_eq!(r.memory_available, 4_000_000 * 1024);
    assert!(r.fs_capacity > 0 && r.fs_available <= r.fs_capacity);
}
