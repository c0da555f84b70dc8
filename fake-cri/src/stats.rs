//! Resource usage, as CRI `ListContainerStats` and `ListPodSandboxStats` report it. A fake
//! container uses nothing until a test says otherwise ([`Usage`]); like a runtime that does
//! not sample on its own, the fake leaves `usageNanoCores` unset (containerd fills it), so the
//! kubelet computes it from two samples.

use proto::cri;

use crate::runtime::now_ns;
use crate::store::{Container, Phase, Sandbox, Store};

/// What a running fake container has used so far, as a test sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Cumulative CPU time, in core-nanoseconds.
    pub cpu_core_nanos: u64,
    pub memory_working_set_bytes: u64,
    pub memory_usage_bytes: u64,
    pub memory_rss_bytes: u64,
    /// The writable layer's size.
    pub writable_layer_bytes: u64,
    /// The processes the container runs (its share of the pod's `pids.current`).
    pub processes: u64,
}

/// Where the fake says containers' writable layers and images live (`ImageFsInfo`).
pub(crate) const IMAGE_FS: &str = "/fake-cri/images";

fn value(v: u64) -> Option<cri::UInt64Value> {
    Some(cri::UInt64Value { value: v })
}

fn cpu(at: i64, core_nanos: u64) -> cri::CpuUsage {
    cri::CpuUsage {
        timestamp: at,
        usage_core_nano_seconds: value(core_nanos),
        usage_nano_cores: None,
    }
}

fn memory(at: i64, u: &Usage) -> cri::MemoryUsage {
    cri::MemoryUsage {
        timestamp: at,
        working_set_bytes: value(u.memory_working_set_bytes),
        available_bytes: value(0),
        usage_bytes: value(u.memory_usage_bytes),
        rss_bytes: value(u.memory_rss_bytes),
        page_faults: value(0),
        major_page_faults: value(0),
    }
}

fn container_stats(c: &Container, at: i64) -> cri::ContainerStats {
    cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes {
            id: c.id.clone(),
            metadata: c.config.metadata.clone(),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
        }),
        cpu: Some(cpu(at, c.usage.cpu_core_nanos)),
        memory: Some(memory(at, &c.usage)),
        writable_layer: Some(cri::FilesystemUsage {
            timestamp: at,
            fs_id: Some(cri::FilesystemIdentifier { mountpoint: IMAGE_FS.into() }),
            used_bytes: value(c.usage.writable_layer_bytes),
            inodes_used: value(0),
        }),
        swap: None,
    }
}

fn running(c: &Container) -> bool {
    matches!(c.phase, Phase::Running { .. })
}

fn labels_match(
    selector: &std::collections::HashMap<String, String>,
    labels: &std::collections::HashMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl Store {
    /// `ListContainerStats`: the running containers the filter selects.
    pub(crate) fn container_stats(
        &self,
        filter: Option<&cri::ContainerStatsFilter>,
    ) -> Vec<cri::ContainerStats> {
        let at = now_ns();
        self.containers
            .values()
            .filter(|c| running(c))
            .filter(|c| {
                filter.is_none_or(|f| {
                    (f.id.is_empty() || c.id.starts_with(&f.id))
                        && (f.pod_sandbox_id.is_empty()
                            || c.sandbox_id.starts_with(&f.pod_sandbox_id))
                        && labels_match(&f.label_selector, &c.config.labels)
                })
            })
            .map(|c| container_stats(c, at))
            .collect()
    }

    /// `ListPodSandboxStats`: each ready sandbox the filter selects, with its running
    /// containers; the pod's CPU and memory are its containers' sums.
    pub(crate) fn sandbox_stats(
        &self,
        filter: Option<&cri::PodSandboxStatsFilter>,
    ) -> Vec<cri::PodSandboxStats> {
        let at = now_ns();
        let selected = |s: &Sandbox| {
            filter.is_none_or(|f| {
                (f.id.is_empty() || s.id.starts_with(&f.id))
                    && labels_match(&f.label_selector, &s.config.labels)
            })
        };
        self.sandboxes
            .values()
            .filter(|s| s.state == crate::store::SandboxState::Ready && selected(s))
            .map(|s| {
                let containers: Vec<&Container> = self
                    .container_ids_of(&s.id)
                    .iter()
                    .filter_map(|id| self.containers.get(id))
                    .filter(|c| running(c))
                    .collect();
                let mut total = Usage::default();
                for c in &containers {
                    total.cpu_core_nanos += c.usage.cpu_core_nanos;
                    total.memory_working_set_bytes += c.usage.memory_working_set_bytes;
                    total.memory_usage_bytes += c.usage.memory_usage_bytes;
                    total.memory_rss_bytes += c.usage.memory_rss_bytes;
                    total.processes += c.usage.processes;
                }
                cri::PodSandboxStats {
                    attributes: Some(cri::PodSandboxAttributes {
                        id: s.id.clone(),
                        metadata: s.config.metadata.clone(),
                        labels: s.config.labels.clone(),
                        annotations: s.config.annotations.clone(),
                    }),
                    linux: Some(cri::LinuxPodSandboxStats {
                        cpu: Some(cpu(at, total.cpu_core_nanos)),
                        memory: Some(memory(at, &total)),
                        network: None,
                        process: Some(cri::ProcessUsage {
                            timestamp: at,
                            process_count: value(total.processes),
                        }),
                        containers: containers.iter().map(|c| container_stats(c, at)).collect(),
                    }),
                    windows: None,
                }
            })
            .collect()
    }
}
