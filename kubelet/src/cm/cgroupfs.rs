//! The cgroup filesystem, as upstream's cgroupfs cgroup manager: [`Cgroups`] is the boundary,
//! [`CgroupFs`] the one implementation, rooted at a path (`/sys/fs/cgroup`; a temp dir in
//! tests). v1 (a hierarchy per controller) and v2 (one unified hierarchy) are told apart by the
//! root's `cgroup.controllers`.
//!
//! v1: a cgroup is a directory in each of `cpu`, `cpuacct`, `cpuset`, `memory`, `pids` (and
//! `hugetlb` where mounted), the controllers upstream checks a cgroup's existence by; a new
//! `cpuset` directory takes its parent's CPUs and memory nodes, or no process could join it.
//! v2: one directory, the `cpu`, `memory` and `pids` controllers enabled on its ancestors.
//!
//! The files written: `cpu.shares`, `cpu.cfs_period_us`, `cpu.cfs_quota_us`,
//! `memory.limit_in_bytes`, `pids.max` (v1); `cpu.weight`, `cpu.max`, `memory.max`, `pids.max`
//! (v2).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::control_files::ControlFiles;
use super::resources::{ResourceConfig, shares_to_weight};

/// A cgroup operation that failed: the file or directory, and why.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("creating cgroup {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("writing {value:?} to {}: {source}", path.display())]
    Write { path: PathBuf, value: String, source: std::io::Error },
    #[error("removing cgroup {}: {source}", path.display())]
    Remove { path: PathBuf, source: std::io::Error },
    /// The systemd driver's call for the cgroup's unit.
    #[error(transparent)]
    Systemd(#[from] super::systemd::SystemdError),
}

/// The cgroup filesystem boundary. Paths are cgroup names (`/kubepods/burstable/pod<uid>`).
pub trait Cgroups: Send + Sync + std::fmt::Debug {
    /// Whether the cgroup exists in every hierarchy it should.
    fn exists(&self, path: &str) -> bool;
    /// Creates the cgroup (and its missing ancestors) where missing, then applies `config`.
    fn create(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError>;
    /// Applies `config` to an existing cgroup.
    fn update(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError>;
    /// Removes the cgroup and its children, deepest first; missing is fine.
    fn remove(&self, path: &str) -> Result<(), CgroupError>;
    /// The names of the cgroup's child directories (in the memory hierarchy on v1).
    fn children(&self, path: &str) -> Vec<String>;
    /// What the cgroup's processes use, as cAdvisor reads it (their count where `processes`
    /// asks for it); `None` when it is gone.
    fn usage(&self, path: &str, processes: Processes) -> Option<CgroupUsage>;
    /// Ends a reading of every pod's usage: the control files kept open for it and not read
    /// since the last one are closed ([`ControlFiles::sweep`]).
    fn end_reading(&self);
}

/// Whether a usage reading counts the cgroup's processes (pods' figures have the count,
/// containers' do not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processes {
    Count,
    Skip,
}

/// A cgroup's CPU, memory and process figures (cAdvisor's, for the summary API).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupUsage {
    /// CPU time in nanoseconds since the cgroup was made.
    pub cpu_nanos: Option<u64>,
    pub memory_usage: Option<u64>,
    /// Usage less inactive file pages (what the eviction manager and `kubectl top` count).
    pub working_set: Option<u64>,
    pub rss: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    pub processes: Option<u64>,
}

/// `key value` lines (`memory.stat`, `cpu.stat`) as a lookup.
fn stat(text: &str, key: &str) -> Option<u64> {
    let [value] = stats(text, [key]);
    value
}

/// The values of `keys` in `key value` lines, found in one pass (v1's `memory.stat` has some
/// 40 lines, the ones read last among them).
fn stats<const N: usize>(text: &str, keys: [&str; N]) -> [Option<u64>; N] {
    let mut out = [None; N];
    for (key, value) in text.lines().filter_map(|l| l.split_once(' ')) {
        if let Some(i) = keys.iter().position(|k| *k == key)
            && out[i].is_none()
        {
            out[i] = value.trim().parse().ok();
        }
    }
    out
}

/// The v1 controllers a cgroup is made in, as upstream's existence check counts them.
const V1_CONTROLLERS: [&str; 5] = ["cpu", "cpuacct", "cpuset", "memory", "pids"];
/// The v2 controllers enabled for the kubelet's cgroups.
const V2_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// cgroupfs mounted at `mount_root` (`/sys/fs/cgroup`).
#[derive(Debug, Clone)]
pub struct CgroupFs {
    mount_root: PathBuf,
    /// The unified (v2) hierarchy is mounted at the root: told once, at [`CgroupFs::new`]
    /// (asked before every control file, it was a fifth of the stats scrapes' CPU).
    v2: bool,
    /// The stats scrapes' reads, through kept directory handles.
    files: Arc<ControlFiles>,
}

impl CgroupFs {
    pub fn new(mount_root: impl Into<PathBuf>) -> Self {
        let mount_root = mount_root.into();
        let v2 = mount_root.join("cgroup.controllers").exists();
        Self { mount_root, v2, files: Arc::default() }
    }

    /// Whether the unified (v2) hierarchy is mounted at the root.
    pub fn is_v2(&self) -> bool {
        self.v2
    }

    /// The controllers' hierarchies a cgroup is made in: v1's that are mounted, or the root.
    fn hierarchies(&self) -> Vec<PathBuf> {
        if self.is_v2() {
            return vec![self.mount_root.clone()];
        }
        let mut out: Vec<PathBuf> =
            V1_CONTROLLERS.iter().map(|c| self.mount_root.join(c)).filter(|p| p.is_dir()).collect();
        let hugetlb = self.mount_root.join("hugetlb");
        if hugetlb.is_dir() {
            out.push(hugetlb);
        }
        out
    }

    /// Every hierarchy under the root (removal cleans all of them, whoever made the dirs).
    fn all_hierarchies(&self) -> Vec<PathBuf> {
        if self.is_v2() {
            return vec![self.mount_root.clone()];
        }
        std::fs::read_dir(&self.mount_root)
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default()
    }

    /// The directory of `path` in the hierarchy of `controller` (v1) or the unified one.
    fn dir(&self, controller: &str, path: &str) -> PathBuf {
        let rel = path.trim_start_matches('/');
        if self.is_v2() {
            self.mount_root.join(rel)
        } else {
            self.mount_root.join(controller).join(rel)
        }
    }

    fn write(dir: &Path, file: &str, value: String) -> Result<(), CgroupError> {
        let path = dir.join(file);
        std::fs::write(&path, &value).map_err(|source| CgroupError::Write { path, value, source })
    }

    /// A new cpuset cgroup has no CPUs or memory nodes; each level from the top takes its
    /// parent's (where the files exist: not in a temp dir).
    fn inherit_cpuset(hierarchy: &Path, dir: &Path) -> Result<(), CgroupError> {
        let Ok(rel) = dir.strip_prefix(hierarchy) else { return Ok(()) };
        let mut parent = hierarchy.to_path_buf();
        for part in rel.components() {
            let child = parent.join(part);
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let own = std::fs::read_to_string(child.join(file)).unwrap_or_default();
                if !child.join(file).exists() || !own.trim().is_empty() {
                    continue;
                }
                let theirs = std::fs::read_to_string(parent.join(file)).unwrap_or_default();
                Self::write(&child, file, theirs.trim().to_string())?;
            }
            parent = child;
        }
        Ok(())
    }

    /// v2: each level made from the top, its parent first enabling the kubelet's controllers
    /// for its children (those the parent has).
    fn make_v2(&self, dir: &Path) -> Result<(), CgroupError> {
        let Ok(rel) = dir.strip_prefix(&self.mount_root) else { return Ok(()) };
        let mut level = self.mount_root.clone();
        for part in rel.components() {
            let read = |file: &str| std::fs::read_to_string(level.join(file)).unwrap_or_default();
            let (available, enabled) = (read("cgroup.controllers"), read("cgroup.subtree_control"));
            let missing: Vec<String> = V2_CONTROLLERS
                .iter()
                .filter(|c| available.split_whitespace().any(|a| a == **c))
                .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
                .map(|c| format!("+{c}"))
                .collect();
            if !missing.is_empty() {
                Self::write(&level, "cgroup.subtree_control", missing.join(" "))?;
            }
            level = level.join(part);
            if !level.is_dir() {
                std::fs::create_dir(&level)
                    .map_err(|source| CgroupError::Create { path: level.clone(), source })?;
            }
        }
        Ok(())
    }

    fn apply_v1(&self, path: &str, c: &ResourceConfig) -> Result<(), CgroupError> {
        let cpu = self.dir("cpu", path);
        if let Some(shares) = c.cpu_shares {
            Self::write(&cpu, "cpu.shares", shares.to_string())?;
        }
        if let Some(period) = c.cpu_period {
            Self::write(&cpu, "cpu.cfs_period_us", period.to_string())?;
        }
        if let Some(quota) = c.cpu_quota {
            let quota = if quota <= 0 { -1 } else { quota };
            Self::write(&cpu, "cpu.cfs_quota_us", quota.to_string())?;
        }
        if let Some(memory) = c.memory {
            let memory = if memory <= 0 { -1 } else { memory };
            Self::write(&self.dir("memory", path), "memory.limit_in_bytes", memory.to_string())?;
        }
        self.apply_pids(path, c)
    }

    fn apply_v2(&self, path: &str, c: &ResourceConfig) -> Result<(), CgroupError> {
        let dir = self.dir("", path);
        if let Some(shares) = c.cpu_shares {
            Self::write(&dir, "cpu.weight", shares_to_weight(shares).to_string())?;
        }
        if c.cpu_quota.is_some() || c.cpu_period.is_some() {
            let quota = c.cpu_quota.filter(|q| *q > 0).map_or("max".to_string(), |q| q.to_string());
            let period = c.cpu_period.unwrap_or(100_000);
            Self::write(&dir, "cpu.max", format!("{quota} {period}"))?;
        }
        if let Some(memory) = c.memory {
            let value = if memory <= 0 { "max".to_string() } else { memory.to_string() };
            Self::write(&dir, "memory.max", value)?;
        }
        self.apply_pids(path, c)
    }

    fn apply_pids(&self, path: &str, c: &ResourceConfig) -> Result<(), CgroupError> {
        let Some(pids) = c.pids else { return Ok(()) };
        let value = if pids <= 0 { "max".to_string() } else { pids.to_string() };
        Self::write(&self.dir("pids", path), "pids.max", value)
    }
}

impl Cgroups for CgroupFs {
    fn exists(&self, path: &str) -> bool {
        let hierarchies = self.hierarchies();
        !hierarchies.is_empty()
            && hierarchies.iter().all(|h| h.join(path.trim_start_matches('/')).is_dir())
    }

    fn create(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError> {
        for h in self.hierarchies() {
            let dir = h.join(path.trim_start_matches('/'));
            if self.is_v2() {
                self.make_v2(&dir)?;
                continue;
            }
            std::fs::create_dir_all(&dir)
                .map_err(|source| CgroupError::Create { path: dir.clone(), source })?;
            if h.ends_with("cpuset") {
                Self::inherit_cpuset(&h, &dir)?;
            }
        }
        self.update(path, config)
    }

    fn update(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError> {
        if self.is_v2() { self.apply_v2(path, config) } else { self.apply_v1(path, config) }
    }

    fn remove(&self, path: &str) -> Result<(), CgroupError> {
        let rel = path.trim_start_matches('/');
        let mut first_error = None;
        for h in self.all_hierarchies() {
            let dir = h.join(rel);
            self.files.close_under(&dir);
            if dir.is_dir()
                && let Err(e) = remove_tree(&dir)
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn usage(&self, path: &str, processes: Processes) -> Option<CgroupUsage> {
        let counted = processes == Processes::Count;
        let read =
            |controller: &str, file: &str| self.files.read(&self.dir(controller, path), file);
        let number = |controller: &str, file: &str| read(controller, file)?.trim().parse().ok();
        if self.is_v2() {
            let memory = read("", "memory.stat").unwrap_or_default();
            let [inactive_file, anon, pgfault, pgmajfault] =
                stats(&memory, ["inactive_file", "anon", "pgfault", "pgmajfault"]);
            let usage: Option<u64> = number("", "memory.current");
            let cpu = read("", "cpu.stat")?;
            return Some(CgroupUsage {
                cpu_nanos: stat(&cpu, "usage_usec").map(|us| us.saturating_mul(1000)),
                memory_usage: usage,
                working_set: usage.map(|u| u.saturating_sub(inactive_file.unwrap_or(0))),
                rss: anon,
                page_faults: pgfault,
                major_page_faults: pgmajfault,
                processes: counted.then(|| number("", "pids.current")).flatten(),
            });
        }
        let memory = read("memory", "memory.stat").unwrap_or_default();
        let [inactive_file, rss, pgfault, pgmajfault] = stats(
            &memory,
            ["total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault"],
        );
        let usage: Option<u64> = number("memory", "memory.usage_in_bytes");
        Some(CgroupUsage {
            cpu_nanos: Some(number("cpuacct", "cpuacct.usage")?),
            memory_usage: usage,
            working_set: usage.map(|u| u.saturating_sub(inactive_file.unwrap_or(0))),
            rss,
            page_faults: pgfault,
            major_page_faults: pgmajfault,
            processes: counted.then(|| number("pids", "pids.current")).flatten(),
        })
    }

    fn children(&self, path: &str) -> Vec<String> {
        std::fs::read_dir(self.dir("memory", path))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn end_reading(&self) {
        self.files.sweep();
    }
}

fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    let mut dirs = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < dirs.len() {
        if let Ok(entries) = std::fs::read_dir(&dirs[i]) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        i += 1;
    }
    for d in dirs.iter().rev() {
        if std::fs::remove_dir(d).is_ok() {
            continue;
        }
        // A temp dir (tests) holds the control files as regular files; cgroupfs refuses to
        // unlink them but removes the directory with them.
        if let Ok(entries) = std::fs::read_dir(d) {
            for e in entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_file())) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        match std::fs::remove_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(CgroupError::Remove { path: d.clone(), source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1() -> (tempfile::TempDir, CgroupFs) {
        let root = tempfile::tempdir().unwrap();
        for ctl in ["cpu", "cpuacct", "cpuset", "memory", "pids", "blkio"] {
            std::fs::create_dir_all(root.path().join(ctl)).unwrap();
        }
        let fs = CgroupFs::new(root.path().to_path_buf());
        (root, fs)
    }

    fn read(root: &Path, file: &str) -> String {
        std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    #[test]
    fn v1_creates_the_cgroup_in_each_controller_and_writes_its_limits() {
        let (root, fs) = v1();
        let config = ResourceConfig {
            cpu_shares: Some(1024),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory: Some(64 << 20),
            pids: Some(100),
        };
        assert!(!fs.exists("/kubepods/podu"));
        fs.create("/kubepods/podu", &config).unwrap();
        assert!(fs.exists("/kubepods/podu"));
        let r = root.path();
        assert_eq!(read(r, "cpu/kubepods/podu/cpu.shares"), "1024");
        assert_eq!(read(r, "cpu/kubepods/podu/cpu.cfs_quota_us"), "50000");
        assert_eq!(read(r, "cpu/kubepods/podu/cpu.cfs_period_us"), "100000");
        assert_eq!(read(r, "memory/kubepods/podu/memory.limit_in_bytes"), "67108864");
        assert_eq!(read(r, "pids/kubepods/podu/pids.max"), "100");
        assert!(
            r.join("cpuacct/kubepods/podu").is_dir() && r.join("cpuset/kubepods/podu").is_dir()
        );
        assert!(!r.join("blkio/kubepods").exists(), "only the controllers a cgroup is made in");
        assert_eq!(fs.children("/kubepods"), vec!["podu".to_string()]);

        fs.update("/kubepods/podu", &ResourceConfig { cpu_quota: Some(-1), ..Default::default() })
            .unwrap();
        assert_eq!(read(r, "cpu/kubepods/podu/cpu.cfs_quota_us"), "-1", "unlimited");
    }

    #[test]
    fn a_new_cpuset_cgroup_takes_its_parents_cpus_and_memory_nodes() {
        let (root, fs) = v1();
        let cpuset = root.path().join("cpuset");
        std::fs::write(cpuset.join("cpuset.cpus"), "0-1\n").unwrap();
        std::fs::write(cpuset.join("cpuset.mems"), "0\n").unwrap();
        // What the kernel does on mkdir: the files exist, empty.
        std::fs::create_dir_all(cpuset.join("kubepods")).unwrap();
        std::fs::write(cpuset.join("kubepods/cpuset.cpus"), "\n").unwrap();
        std::fs::write(cpuset.join("kubepods/cpuset.mems"), "").unwrap();
        fs.create("/kubepods", &ResourceConfig::default()).unwrap();
        assert_eq!(read(&cpuset, "kubepods/cpuset.cpus"), "0-1");
        assert_eq!(read(&cpuset, "kubepods/cpuset.mems"), "0");
    }

    #[test]
    fn v2_enables_the_controllers_on_the_ancestors_and_writes_v2_units() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpuset cpu io memory pids")
            .unwrap();
        std::fs::write(root.path().join("cgroup.subtree_control"), "memory").unwrap();
        let fs = CgroupFs::new(root.path().to_path_buf());
        let config = ResourceConfig {
            cpu_shares: Some(2),
            cpu_quota: Some(20_000),
            cpu_period: Some(100_000),
            memory: Some(1 << 20),
            pids: Some(-1),
        };
        fs.create("/kubepods/besteffort/podu", &config).unwrap();
        let r = root.path();
        assert_eq!(read(r, "cgroup.subtree_control"), "+cpu +pids", "memory was already on");
        assert_eq!(read(r, "kubepods/besteffort/podu/cpu.weight"), "1");
        assert_eq!(read(r, "kubepods/besteffort/podu/cpu.max"), "20000 100000");
        assert_eq!(read(r, "kubepods/besteffort/podu/memory.max"), "1048576");
        assert_eq!(read(r, "kubepods/besteffort/podu/pids.max"), "max");
        assert!(fs.exists("kubepods/besteffort/podu"));
        fs.update(
            "kubepods/besteffort/podu",
            &ResourceConfig {
                cpu_quota: Some(-1),
                cpu_period: Some(100_000),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(read(r, "kubepods/besteffort/podu/cpu.max"), "max 100000");
        fs.remove("kubepods/besteffort/podu").unwrap();
        assert!(!r.join("kubepods/besteffort/podu").exists());
    }

    #[test]
    fn removes_a_pod_cgroup_in_every_v1_hierarchy_and_a_missing_one_is_fine() {
        let (root, fs) = v1();
        for ctl in ["cpu", "memory", "blkio"] {
            std::fs::create_dir_all(root.path().join(ctl).join("kubepods/besteffort/podu1/ctr"))
                .unwrap();
        }
        fs.remove("/kubepods/besteffort/podu1").unwrap();
        for ctl in ["cpu", "memory", "blkio"] {
            assert!(!root.path().join(ctl).join("kubepods/besteffort/podu1").exists(), "{ctl}");
        }
        assert!(root.path().join("cpu/kubepods/besteffort").exists(), "the QoS level stays");
        fs.remove("/kubepods/besteffort/podu1").unwrap();
    }

    #[test]
    fn stat_lines_give_each_key_its_own_first_value_in_one_pass() {
        let text = "rss_huge 1\nrss 2\nbroken\nswap x\nrss 3\npgfault 4\n";
        assert_eq!(
            stats(text, ["rss", "pgfault", "swap", "cache"]),
            [Some(2), Some(4), None, None]
        );
        assert_eq!(stat(text, "rss_huge"), Some(1));
        assert_eq!(stat("", "rss"), None);
    }

    #[test]
    fn usage_is_read_as_cadvisor_reads_it_on_v1_and_v2() {
        let (root, fs) = v1();
        let put = |file: &str, text: &str| {
            let p = root.path().join(file);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("cpuacct/kubepods/podu/cpuacct.usage", "123456789\n");
        put("memory/kubepods/podu/memory.usage_in_bytes", "10000\n");
        put(
            "memory/kubepods/podu/memory.stat",
            "cache 1\ninactive_file 9\ntotal_inactive_file 4000\ntotal_rss_huge 99\ntotal_rss 5000\ntotal_pgfault 7\ntotal_pgmajfault 2\n",
        );
        put("pids/kubepods/podu/pids.current", "3\n");
        let u = fs.usage("/kubepods/podu", Processes::Count).unwrap();
        assert_eq!(
            u,
            CgroupUsage {
                cpu_nanos: Some(123_456_789),
                memory_usage: Some(10_000),
                working_set: Some(6000),
                rss: Some(5000),
                page_faults: Some(7),
                major_page_faults: Some(2),
                processes: Some(3),
            }
        );
        assert_eq!(
            fs.usage("/kubepods/gone", Processes::Count),
            None,
            "a cgroup that is not there"
        );
        let skipped = fs.usage("/kubepods/podu", Processes::Skip).unwrap();
        assert_eq!((skipped.processes, skipped.cpu_nanos), (None, Some(123_456_789)), "no count");

        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
        let pod = root.path().join("kubepods/podu");
        std::fs::create_dir_all(&pod).unwrap();
        std::fs::write(pod.join("cpu.stat"), "usage_usec 42\nuser_usec 40\n").unwrap();
        std::fs::write(pod.join("memory.current"), "8192\n").unwrap();
        std::fs::write(
            pod.join("memory.stat"),
            "anon 4096\ninactive_file 1024\npgfault 5\npgmajfault 1\n",
        )
        .unwrap();
        std::fs::write(pod.join("pids.current"), "2\n").unwrap();
        let u = CgroupFs::new(root.path().to_path_buf())
            .usage("kubepods/podu", Processes::Count)
            .unwrap();
        assert_eq!(
            (u.cpu_nanos, u.working_set, u.rss, u.processes),
            (Some(42_000), Some(7168), Some(4096), Some(2))
        );
    }

    #[test]
    fn a_write_that_fails_names_the_file_and_the_value() {
        let (root, fs) = v1();
        // A directory where the file should be: the write fails.
        std::fs::create_dir_all(root.path().join("memory/kubepods/memory.limit_in_bytes")).unwrap();
        let err = fs
            .create("/kubepods", &ResourceConfig { memory: Some(5), ..Default::default() })
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("memory/kubepods/memory.limit_in_bytes") && text.contains("\"5\""),
            "{text}"
        );
    }
}
