//! Pods' and containers' CPU, memory and processes read from their cgroups, as upstream's
//! default provider has cAdvisor read them, instead of asking the runtime: containerd 1.6's
//! `ListPodSandboxStats` takes 1.5 s at 110 pods, these reads a few milliseconds
//! (BENCHMARKS.md). The figures are put in CRI's `PodSandboxStats` form, so the summary is made
//! from them as from the runtime's. A container's cgroup is its pod's cgroup and its ID (the
//! cgroupfs driver), or the runtime's `<prefix>-<id>.scope` in the pod's slice (systemd); the writable layers, which only the runtime knows, come from
//! `ListContainerStats` when the full summary is asked for.

use std::collections::HashMap;

use proto::cri;

use super::cri::Listing;
use crate::cm::ContainerManager;
use crate::cm::cgroupfs::CgroupUsage;

fn value(v: Option<u64>) -> Option<cri::UInt64Value> {
    v.map(|value| cri::UInt64Value { value })
}

fn cpu(u: &CgroupUsage, at: i64) -> Option<cri::CpuUsage> {
    u.cpu_nanos.map(|n| cri::CpuUsage {
        timestamp: at,
        usage_core_nano_seconds: value(Some(n)),
        usage_nano_cores: None,
    })
}

fn memory(u: &CgroupUsage, at: i64) -> cri::MemoryUsage {
    cri::MemoryUsage {
        timestamp: at,
        working_set_bytes: value(u.working_set),
        available_bytes: None,
        usage_bytes: value(u.memory_usage),
        rss_bytes: value(u.rss),
        page_faults: value(u.page_faults),
        major_page_faults: value(u.major_page_faults),
    }
}

/// Each listed pod whose cgroup is there, with its running containers; `layers`: the writable
/// layers by container ID, where the runtime was asked.
pub fn sandbox_stats(
    listing: &Listing,
    cm: &ContainerManager,
    layers: &HashMap<String, cri::FilesystemUsage>,
    at: i64,
) -> Vec<cri::PodSandboxStats> {
    let mut out = Vec::new();
    for sandbox in listing.sandboxes() {
        let uid = sandbox.metadata.as_ref().map(|m| m.uid.as_str()).unwrap_or_default();
        let Some(path) = cm.pod_cgroup_of(uid) else { continue };
        let Some(pod) = cm.usage(&path) else { continue };
        let container_cgroup = cm.container_cgroups(&path);
        let containers = listing
            .containers_of(&sandbox.id)
            .map(|c| {
                let usage = cm.usage(&container_cgroup(&c.id)).unwrap_or_default();
                cri::ContainerStats {
                    attributes: Some(cri::ContainerAttributes {
                        id: c.id.clone(),
                        ..Default::default()
                    }),
                    cpu: cpu(&usage, at),
                    memory: Some(memory(&usage, at)),
                    writable_layer: layers.get(&c.id).cloned(),
                    swap: None,
                }
            })
            .collect();
        out.push(cri::PodSandboxStats {
            attributes: Some(cri::PodSandboxAttributes {
                id: sandbox.id.clone(),
                ..Default::default()
            }),
            linux: Some(cri::LinuxPodSandboxStats {
                cpu: cpu(&pod, at),
                memory: Some(memory(&pod, at)),
                network: None,
                process: Some(cri::ProcessUsage {
                    timestamp: at,
                    process_count: value(pod.processes),
                }),
                containers,
            }),
            windows: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::cm::CgroupFs;
    use crate::cm::allocatable::{Capacity, NodeAllocatable, Reserved};
    use crate::cm::manager::NodeResources;
    use crate::cm::node_config::NodeConfig;
    use crate::events::Recorder;
    use crate::eviction::Thresholds;
    use crate::test_cri::put;

    #[test]
    fn pods_and_their_running_containers_are_read_from_their_cgroups() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let pod = "kubepods/besteffort/podu1";
        for ctl in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
            std::fs::create_dir_all(r.join(ctl).join(pod).join("c1")).unwrap();
        }
        put(r, &format!("cpuacct/{pod}/cpuacct.usage"), "2000\n");
        put(r, &format!("memory/{pod}/memory.usage_in_bytes"), "900\n");
        put(r, &format!("memory/{pod}/memory.stat"), "total_inactive_file 100\ntotal_rss 700\n");
        put(r, &format!("pids/{pod}/pids.current"), "4\n");
        put(r, &format!("cpuacct/{pod}/c1/cpuacct.usage"), "1500\n");
        put(r, &format!("memory/{pod}/c1/memory.usage_in_bytes"), "600\n");
        let cm = ContainerManager::new(
            Arc::new(CgroupFs::new(r.to_path_buf())),
            NodeConfig::default(),
            NodeResources {
                capacity: Capacity(BTreeMap::new()),
                allocatable: NodeAllocatable {
                    system: Reserved::default(),
                    kube: Reserved::default(),
                    hard: Thresholds::none(),
                },
            },
            Recorder::default(),
            "n1".into(),
        );
        let sandbox = |id: &str, uid: &str| cri::PodSandbox {
            id: id.into(),
            metadata: Some(cri::PodSandboxMetadata {
                name: id.into(),
                uid: uid.into(),
                ..Default::default()
            }),
            state: cri::PodSandboxState::SandboxReady as i32,
            ..Default::default()
        };
        let container = cri::Container {
            id: "c1".into(),
            pod_sandbox_id: "s1".into(),
            state: cri::ContainerState::ContainerRunning as i32,
            ..Default::default()
        };
        // s2's pod has no cgroup (a pod the kubelet did not make): left out.
        let listing = Listing::new(vec![sandbox("s1", "u1"), sandbox("s2", "u2")], vec![container]);
        let layer = cri::FilesystemUsage {
            used_bytes: Some(cri::UInt64Value { value: 42 }),
            ..Default::default()
        };
        let layers = HashMap::from([("c1".to_string(), layer)]);
        let stats = sandbox_stats(&listing, &cm, &layers, 7);
        assert_eq!(stats.len(), 1);
        let linux = stats[0].linux.as_ref().unwrap();
        let n = |v: &Option<cri::UInt64Value>| v.as_ref().map(|v| v.value);
        assert_eq!(n(&linux.cpu.as_ref().unwrap().usage_core_nano_seconds), Some(2000));
        let memory = linux.memory.as_ref().unwrap();
        assert_eq!((n(&memory.working_set_bytes), n(&memory.rss_bytes)), (Some(800), Some(700)));
        assert_eq!(n(&linux.process.as_ref().unwrap().process_count), Some(4));
        let c = &linux.containers[0];
        assert_eq!(n(&c.cpu.as_ref().unwrap().usage_core_nano_seconds), Some(1500));
        assert_eq!(n(&c.memory.as_ref().unwrap().working_set_bytes), Some(600));
        assert_eq!(
            n(&c.writable_layer.as_ref().unwrap().used_bytes),
            Some(42),
            "the runtime's layer"
        );
    }

    #[test]
    fn with_the_systemd_driver_containers_are_read_from_the_runtimes_scopes() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        put(r, "cgroup.controllers", "cpu memory pids\n");
        let pod = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_1.slice";
        put(r, &format!("{pod}/cpu.stat"), "usage_usec 3\n");
        put(r, &format!("{pod}/cri-containerd-c1.scope/cpu.stat"), "usage_usec 2\n");
        let mut config = NodeConfig::default();
        config.layout.driver = crate::cm::CgroupDriver::Systemd;
        let cm = ContainerManager::new(
            Arc::new(CgroupFs::new(r.to_path_buf())),
            config,
            NodeResources {
                capacity: Capacity(BTreeMap::new()),
                allocatable: NodeAllocatable {
                    system: Reserved::default(),
                    kube: Reserved::default(),
                    hard: Thresholds::none(),
                },
            },
            Recorder::default(),
            "n1".into(),
        );
        let sandbox = cri::PodSandbox {
            id: "s1".into(),
            metadata: Some(cri::PodSandboxMetadata { uid: "u-1".into(), ..Default::default() }),
            state: cri::PodSandboxState::SandboxReady as i32,
            ..Default::default()
        };
        let container = cri::Container {
            id: "c1".into(),
            pod_sandbox_id: "s1".into(),
            state: cri::ContainerState::ContainerRunning as i32,
            ..Default::default()
        };
        let listing = Listing::new(vec![sandbox], vec![container]);
        let stats = sandbox_stats(&listing, &cm, &HashMap::new(), 7);
        let linux = stats[0].linux.as_ref().unwrap();
        let cpu = |u: &Option<cri::CpuUsage>| {
            u.as_ref().and_then(|c| c.usage_core_nano_seconds.as_ref()).map(|v| v.value)
        };
        assert_eq!(cpu(&linux.cpu), Some(3000));
        assert_eq!(cpu(&linux.containers[0].cpu), Some(2000));
    }
}
