//! What the node is and how it is doing, read from `/proc`, `/sys` and `/etc` under a root path
//! (so tests read a temp dir), the facts upstream takes from cAdvisor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::eviction::{Observation, Observations, Pressure, Signal};

/// Facts that do not change while the kubelet runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineInfo {
    pub cpus: usize,
    pub memory_bytes: u64,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
    /// Go's name for the architecture (`amd64`, `arm64`), as the `kubernetes.io/arch` label.
    pub architecture: String,
}

/// Measurements taken at each status update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readings {
    /// Each eviction signal's reading; `nodefs.available`'s capacity is the node's ephemeral
    /// storage.
    pub observed: Observations,
    /// `Err` with the reason when the runtime (PLEG) is not healthy: the node is not Ready.
    pub runtime_health: Result<(), String>,
    /// The pressure conditions as the eviction manager's last round found them (upstream's
    /// `IsUnderMemoryPressure` and friends), the one verdict admission reads too.
    pub pressures: Vec<Pressure>,
}

pub(crate) fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A `/proc/meminfo` field in bytes.
fn meminfo(root: &Path, field: &str) -> u64 {
    meminfo_field(&read(root, "/proc/meminfo"), field)
}

/// A field of `/proc/meminfo`'s text, in bytes.
fn meminfo_field(text: &str, field: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `PRETTY_NAME` from os-release.
fn os_image(root: &Path) -> String {
    let text = match read(root, "/etc/os-release") {
        t if t.is_empty() => read(root, "/usr/lib/os-release"),
        t => t,
    };
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into())
}

/// Go's GOARCH for Rust's target architecture.
pub fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

impl MachineInfo {
    /// The CPUs in millicores, the unit allocatable and admission count in.
    pub fn milli_cpus(&self) -> u64 {
        self.cpus as u64 * 1000
    }

    /// Reads the machine under `root` (`/` on a real node).
    pub fn read(root: &Path) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Self {
            cpus,
            memory_bytes: meminfo(root, "MemTotal"),
            machine_id: read(root, "/etc/machine-id"),
            system_uuid: read(root, "/sys/class/dmi/id/product_uuid"),
            boot_id: read(root, "/proc/sys/kernel/random/boot_id"),
            kernel_version: read(root, "/proc/sys/kernel/osrelease"),
            os_image: os_image(root),
            architecture: go_arch(std::env::consts::ARCH).to_string(),
        }
    }
}

/// Where readings come from.
#[derive(Debug, Clone)]
pub struct ReadingSource {
    pub root: PathBuf,
    /// The kubelet's root directory, whose filesystem is `nodefs`.
    pub kubelet_dir: PathBuf,
    /// A directory on the runtime's image filesystem (the mountpoint CRI `ImageFsInfo` names),
    /// `imagefs`; `None` when the runtime did not say.
    pub image_fs_dir: Option<PathBuf>,
}

/// A filesystem's figures, as cAdvisor's `FsInfo` takes them from `statvfs`: blocks and files
/// available to unprivileged users, and what is in use (reserved blocks are not free).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsReading {
    pub capacity: u64,
    pub available: u64,
    pub used: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

impl FsReading {
    /// The filesystem `dir` is on; `None` when it cannot be read.
    pub fn of(dir: &Path) -> Option<Self> {
        let s = nix::sys::statvfs::statvfs(dir).ok()?;
        let block = s.fragment_size();
        Some(Self {
            capacity: s.blocks() * block,
            available: s.blocks_available() * block,
            used: s.blocks().saturating_sub(s.blocks_free()) * block,
            inodes: s.files(),
            inodes_free: s.files_available(),
        })
    }
}

/// One look at the node: what the eviction signals and the summary API's node figures are
/// computed from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSample {
    /// `MemTotal`, `MemAvailable` and `MemFree`, in bytes.
    pub memory_total: u64,
    pub memory_available: u64,
    pub memory_free: u64,
    /// The kubelet's root directory's filesystem.
    pub nodefs: Option<FsReading>,
    /// The runtime's image filesystem, when it named one.
    pub imagefs: Option<FsReading>,
    /// The most tasks the kernel allows (the smaller of `kernel.pid_max` and
    /// `kernel.threads-max`, as upstream's `pidlimit`), and the tasks there are (the second
    /// figure of `/proc/loadavg`'s `running/total`).
    pub max_tasks: Option<u64>,
    pub tasks: Option<u64>,
}

impl NodeSample {
    /// Each eviction signal's reading; a signal whose figures were not read is absent.
    pub fn observations(&self) -> Observations {
        let mut observed = BTreeMap::new();
        observed.insert(
            Signal::MemoryAvailable,
            Observation { available: self.memory_available, capacity: self.memory_total },
        );
        let mut fs = |fs: Option<FsReading>, [bytes, inodes]: [Signal; 2]| {
            if let Some(f) = fs {
                observed
                    .insert(bytes, Observation { available: f.available, capacity: f.capacity });
                observed
                    .insert(inodes, Observation { available: f.inodes_free, capacity: f.inodes });
            }
        };
        fs(self.nodefs, [Signal::NodeFsAvailable, Signal::NodeFsInodesFree]);
        fs(self.imagefs, [Signal::ImageFsAvailable, Signal::ImageFsInodesFree]);
        if let (Some(max), Some(tasks)) = (self.max_tasks, self.tasks) {
            observed.insert(
                Signal::PidAvailable,
                Observation { available: max.saturating_sub(tasks), capacity: max },
            );
        }
        Observations(observed)
    }
}

impl ReadingSource {
    /// Reads memory, the filesystems and the tasks once.
    pub fn sample(&self) -> NodeSample {
        let limit = |path| read(&self.root, path).parse::<u64>().ok();
        let max_tasks =
            match (limit("/proc/sys/kernel/pid_max"), limit("/proc/sys/kernel/threads-max")) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        let tasks = read(&self.root, "/proc/loadavg")
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split_once('/'))
            .and_then(|(_, total)| total.parse::<u64>().ok());
        let mem = read(&self.root, "/proc/meminfo");
        NodeSample {
            memory_total: meminfo_field(&mem, "MemTotal"),
            memory_available: meminfo_field(&mem, "MemAvailable"),
            memory_free: meminfo_field(&mem, "MemFree"),
            nodefs: FsReading::of(&self.kubelet_dir),
            imagefs: self.image_fs_dir.as_deref().and_then(FsReading::of),
            max_tasks,
            tasks,
        }
    }

    /// The readings now, under the eviction manager's `pressures`.
    pub fn read(&self, runtime_health: Result<(), String>, pressures: Vec<Pressure>) -> Readings {
        Readings { observed: self.sample().observations(), runtime_health, pressures }
    }
}
