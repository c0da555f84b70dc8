//! The node's own figures, as upstream takes them from cAdvisor's root container and
//! `pidlimit`: CPU and memory from the root cgroup (v1 or v2) and `/proc`, the filesystems and
//! tasks from one [`NodeSample`], all under the [`ReadingSource`]'s root so tests read a temp
//! dir.

use std::path::Path;

use super::summary::{CpuStats, FsStats, MemoryStats, RlimitStats, Time};
use crate::node_status::machine::{FsReading, NodeSample, read};

/// The root cgroup's memory, as cAdvisor reads the `/` container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RootMemory {
    pub usage: u64,
    /// Usage less inactive file pages.
    pub working_set: u64,
    pub rss: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// The root cgroup's readings: cumulative CPU time (core-nanoseconds) and memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RootUsage {
    pub cpu_core_nanos: Option<u64>,
    pub memory: Option<RootMemory>,
}

fn stat_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Reads the root cgroup under `root` (`/sys/fs/cgroup`): the unified hierarchy when
/// `cgroup.controllers` is there, else the v1 `cpuacct` and `memory` controllers. The v2 root
/// has no `memory.current`: its usage is `MemTotal - MemFree` (`sample`), as runc's
/// `rootStatsFromMeminfo`.
pub fn root_usage(root: &Path, sample: &NodeSample) -> RootUsage {
    let unified = root.join("sys/fs/cgroup/cgroup.controllers").is_file();
    let (cpu, stat, usage, keys) = if unified {
        let cpu = stat_field(&read(root, "/sys/fs/cgroup/cpu.stat"), "usage_usec")
            .map(|us| us.saturating_mul(1000));
        let usage = (sample.memory_total > 0)
            .then(|| sample.memory_total.saturating_sub(sample.memory_free));
        (cpu, read(root, "/sys/fs/cgroup/memory.stat"), usage, ["inactive_file", "anon"])
    } else {
        let cpu = ["cpuacct", "cpu,cpuacct"]
            .iter()
            .find_map(|d| read(root, &format!("/sys/fs/cgroup/{d}/cpuacct.usage")).parse().ok());
        let usage = read(root, "/sys/fs/cgroup/memory/memory.usage_in_bytes").parse().ok();
        (
            cpu,
            read(root, "/sys/fs/cgroup/memory/memory.stat"),
            usage,
            ["total_inactive_file", "total_rss"],
        )
    };
    let memory = usage.map(|usage| RootMemory {
        usage,
        working_set: usage.saturating_sub(stat_field(&stat, keys[0]).unwrap_or(0)),
        rss: stat_field(&stat, keys[1]),
        page_faults: stat_field(&stat, "pgfault"),
        major_page_faults: stat_field(&stat, "pgmajfault"),
    });
    RootUsage { cpu_core_nanos: cpu, memory }
}

/// When the node booted (`btime` of `/proc/stat`), the node's `startTime`.
pub fn boot_time(root: &Path) -> Time {
    let btime = read(root, "/proc/stat")
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<i64>().ok());
    Time::from_seconds(btime.unwrap_or(0))
}

pub fn cpu(at: Time, usage: &RootUsage, nano_cores: Option<u64>) -> Option<CpuStats> {
    let total = usage.cpu_core_nanos?;
    Some(CpuStats { time: at, usage_nano_cores: nano_cores, usage_core_nano_seconds: Some(total) })
}

/// The node's memory; `availableBytes` is the capacity less the working set (the root's limit
/// is the machine's memory).
pub fn memory(at: Time, usage: &RootUsage, sample: &NodeSample) -> Option<MemoryStats> {
    let m = usage.memory?;
    Some(MemoryStats {
        time: at,
        available_bytes: Some(sample.memory_total.saturating_sub(m.working_set)),
        usage_bytes: Some(m.usage),
        working_set_bytes: Some(m.working_set),
        rss_bytes: m.rss,
        page_faults: m.page_faults,
        major_page_faults: m.major_page_faults,
    })
}

/// A filesystem's figures as the summary writes them.
pub fn fs(at: Time, r: &FsReading) -> FsStats {
    FsStats {
        time: at,
        available_bytes: Some(r.available),
        capacity_bytes: Some(r.capacity),
        used_bytes: Some(r.used),
        inodes_free: Some(r.inodes_free),
        inodes: Some(r.inodes),
        inodes_used: Some(r.inodes.saturating_sub(r.inodes_free)),
    }
}

pub fn rlimit(at: Time, sample: &NodeSample) -> RlimitStats {
    let signed = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok());
    RlimitStats { time: at, maxpid: signed(sample.max_tasks), curproc: signed(sample.tasks) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, path: &str, text: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn cgroup_v1_root_gives_cpu_and_the_working_set_without_inactive_files() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        put(r, "sys/fs/cgroup/cpuacct/cpuacct.usage", "114908373519122\n");
        put(r, "sys/fs/cgroup/memory/memory.usage_in_bytes", "14585683968\n");
        put(
            r,
            "sys/fs/cgroup/memory/memory.stat",
            "rss 2834432\npgfault 794669\npgmajfault 3\ninactive_file 12288\ntotal_rss 1261449216\ntotal_inactive_file 10275307520\n",
        );
        let sample = NodeSample { memory_total: 16 << 30, ..Default::default() };
        let u = root_usage(r, &sample);
        assert_eq!(u.cpu_core_nanos, Some(114_908_373_519_122));
        let m = u.memory.unwrap();
        assert_eq!(m.working_set, 14_585_683_968 - 10_275_307_520);
        assert_eq!(
            (m.rss, m.page_faults, m.major_page_faults),
            (Some(1_261_449_216), Some(794_669), Some(3))
        );
        let mem = memory(Time(5), &u, &sample).unwrap();
        assert_eq!(mem.available_bytes, Some((16 << 30) - m.working_set));
    }

    #[test]
    fn cgroup_v2_root_takes_usage_from_meminfo_and_cpu_from_cpu_stat() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        put(r, "sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
        put(r, "sys/fs/cgroup/cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n");
        put(
            r,
            "sys/fs/cgroup/memory.stat",
            "anon 4096\ninactive_file 1000\npgfault 7\npgmajfault 1\n",
        );
        let sample = NodeSample { memory_total: 10_000, memory_free: 4_000, ..Default::default() };
        let u = root_usage(r, &sample);
        assert_eq!(u.cpu_core_nanos, Some(2_500_000));
        let m = u.memory.unwrap();
        assert_eq!((m.usage, m.working_set, m.rss), (6_000, 5_000, Some(4_096)));
    }

    #[test]
    fn unreadable_cgroups_leave_cpu_and_memory_out_rather_than_zero() {
        let root = tempfile::tempdir().unwrap();
        let u = root_usage(root.path(), &NodeSample::default());
        assert_eq!(u, RootUsage::default());
        assert_eq!(cpu(Time(1), &u, None), None);
        assert_eq!(memory(Time(1), &u, &NodeSample::default()), None);
        put(root.path(), "sys/fs/cgroup/cpuacct/cpuacct.usage", "garbage\n");
        assert_eq!(root_usage(root.path(), &NodeSample::default()).cpu_core_nanos, None);
    }

    #[test]
    fn boot_time_is_btime_and_rlimit_the_task_figures() {
        let root = tempfile::tempdir().unwrap();
        put(root.path(), "proc/stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n");
        assert_eq!(boot_time(root.path()), Time::from_seconds(1_700_000_000));
        let s = NodeSample { max_tasks: Some(32768), tasks: Some(96), ..Default::default() };
        let l = rlimit(Time(1), &s);
        assert_eq!((l.maxpid, l.curproc), (Some(32768), Some(96)));
    }
}
