//! What the node is and how it is doing, read from `/proc`, `/sys` and `/etc` under a root path
//! (so tests read a temp dir), the facts upstream takes from cAdvisor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::eviction::{Observation, Observations, Signal};

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
}

fn read(root: &Path, path: &str) -> String {
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

/// Bytes and inodes available of a filesystem's, as upstream's cAdvisor reads them (`statvfs`:
/// blocks and files available to unprivileged users).
fn filesystem(dir: &Path, signals: [Signal; 2], into: &mut BTreeMap<Signal, Observation>) {
    let Ok(s) = nix::sys::statvfs::statvfs(dir) else { return };
    let block = s.fragment_size();
    let [bytes, inodes] = signals;
    into.insert(
        bytes,
        Observation { available: s.blocks_available() * block, capacity: s.blocks() * block },
    );
    into.insert(inodes, Observation { available: s.files_available(), capacity: s.files() });
}

impl ReadingSource {
    pub fn read(&self, runtime_health: Result<(), String>) -> Readings {
        let mut observed = BTreeMap::new();
        let mem = read(&self.root, "/proc/meminfo");
        observed.insert(
            Signal::MemoryAvailable,
            Observation {
                available: meminfo_field(&mem, "MemAvailable"),
                capacity: meminfo_field(&mem, "MemTotal"),
            },
        );
        let nodefs = [Signal::NodeFsAvailable, Signal::NodeFsInodesFree];
        filesystem(&self.kubelet_dir, nodefs, &mut observed);
        if let Some(dir) = &self.image_fs_dir {
            let imagefs = [Signal::ImageFsAvailable, Signal::ImageFsInodesFree];
            filesystem(dir, imagefs, &mut observed);
        }
        // Tasks running: the second figure of /proc/loadavg's `running/total`.
        let max = read(&self.root, "/proc/sys/kernel/pid_max").parse::<u64>().ok();
        let tasks = read(&self.root, "/proc/loadavg")
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split_once('/'))
            .and_then(|(_, total)| total.parse::<u64>().ok());
        if let (Some(max), Some(tasks)) = (max, tasks) {
            observed.insert(
                Signal::PidAvailable,
                Observation { available: max.saturating_sub(tasks), capacity: max },
            );
        }
        Readings { observed: Observations(observed), runtime_health }
    }
}
