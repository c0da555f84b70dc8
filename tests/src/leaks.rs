//! What a harness may leave behind: nothing. Each check reads the live system.

use std::path::Path;

/// Everything found that a torn-down harness should have removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LeakReport {
    pub processes: Vec<String>,
    pub mounts: Vec<String>,
    pub interfaces: Vec<String>,
    pub cgroups: Vec<String>,
    pub paths: Vec<String>,
}

impl LeakReport {
    pub fn is_clean(&self) -> bool {
        *self == LeakReport::default()
    }
}

/// Processes whose command line mentions `dir` or whose cgroup path contains `cgroup_name`.
pub fn processes(dir: &Path, cgroup_name: &str) -> Vec<(i32, String)> {
    let dir = dir.to_string_lossy();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == i32::try_from(std::process::id()).unwrap_or(0) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        let in_cgroup = cgroup.lines().any(|l| l.split('/').any(|seg| seg == cgroup_name));
        if cmdline.contains(dir.as_ref()) || in_cgroup {
            found.push((pid, cmdline.trim().to_string()));
        }
    }
    found
}

/// Mount points at or below `dir`, deepest first.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| p.replace("\\040", " "))
        .filter(|p| p.starts_with(dir.as_ref()))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.len()));
    found
}

/// Whether a network interface exists.
pub fn interface_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Interfaces enslaved to a bridge.
pub fn bridge_ports(bridge: &str) -> Vec<String> {
    std::fs::read_dir(Path::new("/sys/class/net").join(bridge).join("brif"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Cgroup directories named `cgroup_name` directly under each hierarchy root.
pub fn cgroups(cgroup_name: &str) -> Vec<String> {
    let Ok(roots) = std::fs::read_dir("/sys/fs/cgroup") else { return Vec::new() };
    roots
        .flatten()
        .map(|r| r.path().join(cgroup_name))
        .filter(|p| p.is_dir())
        .map(|p| p.display().to_string())
        .collect()
}
