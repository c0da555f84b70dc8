use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;
use crate::cm::allocatable::{Capacity, NodeAllocatable, Reservable};
use crate::cm::manager::NodeResources;
use crate::cm::node_config::NodeConfig;
use crate::cm::{CgroupDriver, CgroupLayout, ContainerManager};
use crate::events::Recorder;
use crate::eviction::Thresholds;
use crate::test_cri::resources_spec;

/// What the fake systemd was asked, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Start(String, Vec<Property>),
    Set(String, Vec<Property>),
    Stop(String),
}

/// A systemd that records calls and makes each started slice's directory, as systemd does.
#[derive(Debug, Default)]
struct FakeSystemd {
    calls: Mutex<Vec<Call>>,
    /// A job result other than `done` for this unit's start.
    fail: Option<(String, String)>,
}

impl FakeSystemd {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl Systemd for FakeSystemd {
    fn start_unit(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError> {
        self.calls.lock().unwrap().push(Call::Start(unit.into(), properties.to_vec()));
        match &self.fail {
            Some((u, result)) if u == unit => {
                Err(SystemdError::Job { unit: unit.into(), result: result.clone() })
            }
            _ => Ok(()),
        }
    }

    fn set_properties(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError> {
        self.calls.lock().unwrap().push(Call::Set(unit.into(), properties.to_vec()));
        Ok(())
    }

    fn stop_unit(&self, unit: &str) -> Result<(), SystemdError> {
        self.calls.lock().unwrap().push(Call::Stop(unit.into()));
        Ok(())
    }

    fn version(&self) -> Option<u32> {
        Some(255)
    }
}

const V2: Flavor = Flavor { v2: true, version: Some(255) };
const V1: Flavor = Flavor { v2: false, version: Some(255) };

/// A v2 cgroupfs in a temp dir (the unified hierarchy: `cgroup.controllers` at the root).
fn v2() -> (tempfile::TempDir, CgroupFs) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
    let fs = CgroupFs::new(dir.path().to_path_buf());
    (dir, fs)
}

fn u64_of(props: &[Property], name: &str) -> Option<u64> {
    props.iter().find(|p| p.name == name).and_then(|p| match p.value {
        Value::U64(v) => Some(v),
        _ => None,
    })
}

fn names(props: &[Property]) -> Vec<&'static str> {
    props.iter().map(|p| p.name).collect()
}

#[test]
fn a_new_slice_gets_runcs_properties_then_its_limits() {
    let config = ResourceConfig {
        cpu_shares: Some(1024),
        cpu_quota: Some(50_000),
        cpu_period: Some(100_000),
        memory: Some(64 << 20),
        pids: Some(100),
    };
    let v2 = start_properties("kubepods-podu.slice", "kubepods.slice", &config, V2);
    assert_eq!(
        names(&v2),
        [
            "Description",
            "Wants",
            "MemoryAccounting",
            "CPUAccounting",
            "IOAccounting",
            "TasksAccounting",
            "DefaultDependencies",
            "MemoryMax",
            "CPUWeight",
            "CPUQuotaPeriodUSec",
            "CPUQuotaPerSecUSec",
            "TasksMax",
        ]
    );
    assert_eq!(v2[0].value, Value::Str("libcontainer container kubepods-podu.slice".into()));
    assert_eq!(v2[1].value, Value::Strs(vec!["kubepods.slice".into()]));
    assert_eq!(v2[6].value, Value::Bool(false), "DefaultDependencies=false");
    assert!(!names(&v2).contains(&"Delegate"), "runc delegates scopes, not slices");
    assert_eq!(u64_of(&v2, "MemoryMax"), Some(64 << 20));
    assert_eq!(u64_of(&v2, "CPUWeight"), Some(39));
    assert_eq!(u64_of(&v2, "CPUQuotaPerSecUSec"), Some(500_000), "half a CPU");
    assert_eq!(u64_of(&v2, "TasksMax"), Some(100));
    let v1 = start_properties("a.slice", "-.slice", &config, V1);
    assert!(names(&v1).contains(&"BlockIOAccounting"));
    assert_eq!(u64_of(&v1, "MemoryLimit"), Some(64 << 20));
    assert_eq!(u64_of(&v1, "CPUShares"), Some(1024));
    assert_eq!(u64_of(&v1, "MemoryMax"), None);
}

#[test]
fn quotas_round_up_to_ten_milliseconds_and_unset_limits_are_infinite() {
    let quota = |q, p| {
        let c = ResourceConfig { cpu_quota: q, cpu_period: p, ..ResourceConfig::default() };
        u64_of(&resource_properties(&c, V2), "CPUQuotaPerSecUSec")
    };
    assert_eq!(quota(Some(1000), Some(100_000)), Some(10_000), "1 ms a period, 1 %");
    assert_eq!(quota(Some(1500), Some(100_000)), Some(20_000), "15 ms a second, up to 20");
    assert_eq!(quota(Some(5000), None), Some(50_000), "the default period");
    assert_eq!(quota(Some(-1), Some(100_000)), Some(INFINITY), "cpuCFSQuota: false");
    assert_eq!(quota(None, None), None);
    let unlimited =
        ResourceConfig { memory: Some(-1), pids: Some(-1), ..ResourceConfig::default() };
    let props = resource_properties(&unlimited, V2);
    assert_eq!(
        (u64_of(&props, "MemoryMax"), u64_of(&props, "TasksMax")),
        (Some(INFINITY), Some(INFINITY))
    );
    assert!(resource_properties(&ResourceConfig::default(), V2).is_empty());
}

#[test]
fn the_quota_period_is_sent_to_systemd_242_and_later_only() {
    let c =
        ResourceConfig { cpu_quota: Some(5000), cpu_period: Some(50_000), ..Default::default() };
    let with = |version| names(&resource_properties(&c, Flavor { v2: true, version }));
    assert_eq!(with(Some(242)), ["CPUQuotaPeriodUSec", "CPUQuotaPerSecUSec"]);
    assert_eq!(with(Some(239)), ["CPUQuotaPerSecUSec"], "RHEL 8's systemd");
    assert_eq!(with(None), ["CPUQuotaPerSecUSec"], "unknown, as runc");
    assert_eq!(parse_version("v245.4-1.fc32"), Some(245));
    assert_eq!(parse_version("245"), Some(245));
    assert_eq!(parse_version("245-1.fc32"), Some(245));
    assert_eq!(parse_version("unknown"), None);
}

#[test]
fn the_driver_is_refused_where_systemd_is_not_the_init_system() {
    let root = tempfile::tempdir().unwrap();
    let err = check_booted(root.path()).unwrap_err();
    let marker = root.path().join("run/systemd/system");
    assert_eq!(
        err.to_string(),
        format!(
            "systemd needs systemd as the init system (no {}); set cgroupDriver: cgroupfs",
            marker.display()
        )
    );
    std::fs::create_dir_all(&marker).unwrap();
    check_booted(root.path()).unwrap();
    // What this kubelet says on a host booted without systemd, as the kubelet's start error.
    let start = crate::cm::manager::StartError::from(DriverError::NotBooted {
        marker: "/run/systemd/system".into(),
    });
    assert_eq!(
        crate::KubeletError::from(start).to_string(),
        "cgroups: cgroupDriver: systemd needs systemd as the init system (no /run/systemd/system); set cgroupDriver: cgroupfs"
    );
}

#[test]
fn open_refuses_before_touching_the_bus_without_systemd() {
    let root = tempfile::tempdir().unwrap();
    let (_dir, fs) = v2();
    let err = SystemdCgroups::open(root.path(), fs).unwrap_err();
    assert!(matches!(err, DriverError::NotBooted { .. }), "{err}");
}

fn node() -> NodeResources {
    NodeResources {
        capacity: Capacity(BTreeMap::from([
            (Reservable::Cpu, 2000),
            (Reservable::Memory, 8 << 30),
            (Reservable::Pid, 4096),
        ])),
        allocatable: NodeAllocatable {
            system: Default::default(),
            kube: Default::default(),
            hard: Thresholds::none(),
        },
    }
}

fn manager(fs: CgroupFs, systemd: Arc<FakeSystemd>) -> ContainerManager {
    let config = NodeConfig {
        layout: CgroupLayout { root: "/".into(), per_qos: true, driver: CgroupDriver::Systemd },
        ..NodeConfig::default()
    };
    ContainerManager::new(
        Arc::new(SystemdCgroups::new(fs, systemd)),
        config,
        node(),
        Recorder::default(),
        "n1".into(),
    )
}

#[test]
fn the_container_manager_makes_slices_through_systemd_and_writes_their_files_after() {
    let (dir, fs) = v2();
    let systemd = Arc::new(FakeSystemd::default());
    let cm = manager(fs, systemd.clone());
    cm.start().unwrap();
    let starts: Vec<(String, Option<String>)> = systemd
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Start(unit, props) => {
                let wants = props.iter().find(|p| p.name == "Wants").map(|p| match &p.value {
                    Value::Strs(v) => v.join(","),
                    other => format!("{other:?}"),
                });
                Some((unit, wants))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            ("kubepods.slice".to_string(), Some("-.slice".to_string())),
            ("kubepods-burstable.slice".into(), Some("kubepods.slice".into())),
            ("kubepods-besteffort.slice".into(), Some("kubepods.slice".into())),
        ]
    );
    let r = dir.path();
    let read = |f: &str| std::fs::read_to_string(r.join(f)).unwrap();
    assert_eq!(read("kubepods.slice/memory.max"), (8u64 << 30).to_string());
    assert_eq!(read("kubepods.slice/kubepods-besteffort.slice/cpu.weight"), "1");

    let uid = "0b1c-2d";
    let both = [("cpu", "500m"), ("memory", "64Mi")];
    let parent = cm.ensure_pod(uid, &resources_spec(&both, &both)).unwrap();
    assert_eq!(parent, "/kubepods.slice/kubepods-pod0b1c_2d.slice");
    let Some(Call::Start(unit, props)) =
        systemd.calls().into_iter().rev().find(|c| matches!(c, Call::Start(..)))
    else {
        panic!("no start: {:?}", systemd.calls());
    };
    assert_eq!(unit, "kubepods-pod0b1c_2d.slice");
    assert_eq!(u64_of(&props, "MemoryMax"), Some(64 << 20));
    assert_eq!(u64_of(&props, "CPUQuotaPerSecUSec"), Some(500_000));
    assert_eq!(read("kubepods.slice/kubepods-pod0b1c_2d.slice/cpu.max"), "50000 100000");
    assert_eq!(cm.pod_cgroup_of(uid).as_deref(), Some(parent.as_str()));

    // The QoS slices are resized through SetUnitProperties.
    let burst = resources_spec(&[("cpu", "250m")], &[]);
    cm.ensure_pod("b", &burst).unwrap();
    assert!(
        systemd.calls().iter().any(|c| matches!(c, Call::Set(u, p)
            if u == "kubepods-burstable.slice" && u64_of(p, "CPUWeight") == Some(shares_to_weight(256)))),
        "{:?}",
        systemd.calls()
    );

    cm.remove_pod(uid);
    assert!(systemd.calls().contains(&Call::Stop("kubepods-pod0b1c_2d.slice".into())));
    assert!(!r.join("kubepods.slice/kubepods-pod0b1c_2d.slice").exists());
}

#[test]
fn orphaned_pod_slices_are_stopped_by_their_uid() {
    let (dir, fs) = v2();
    let systemd = Arc::new(FakeSystemd::default());
    let cm = manager(fs, systemd.clone());
    cm.start().unwrap();
    let besteffort = dir.path().join("kubepods.slice/kubepods-besteffort.slice");
    for uid in ["gone_1", "keep"] {
        std::fs::create_dir_all(besteffort.join(format!("kubepods-besteffort-pod{uid}.slice")))
            .unwrap();
    }
    let removed = cm.remove_orphans(|uid| uid == "keep");
    assert_eq!(removed, ["gone-1"]);
    assert!(systemd.calls().contains(&Call::Stop("kubepods-besteffort-podgone_1.slice".into())));
    assert!(besteffort.join("kubepods-besteffort-podkeep.slice").is_dir());
}

#[test]
fn a_job_that_fails_fails_the_pod_cgroup_naming_the_unit() {
    let (_dir, fs) = v2();
    let unit = "kubepods-besteffort-podu.slice";
    let systemd =
        Arc::new(FakeSystemd { fail: Some((unit.into(), "failed".into())), ..Default::default() });
    let cm = manager(fs, systemd);
    cm.start().unwrap();
    let err = cm.ensure_pod("u", &resources_spec(&[], &[])).unwrap_err();
    assert_eq!(err.to_string(), format!("error creating systemd unit `{unit}`: got `failed`"));
}
