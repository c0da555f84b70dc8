//! The process metrics, as client_golang's process collector reads them at scrape time from
//! `/proc/self` (`stat`, `fd/`, `limits`) and `/proc/stat` (`btime`): CPU time, resident and
//! virtual memory, open and maximum file descriptors, and the start time. A file that cannot be
//! read leaves its metrics out of the scrape, as the collector does.

use std::path::{Path, PathBuf};

use super::text::{Family, Kind};

/// The kernel's clock ticks per second, as procfs assumes (`USER_HZ`).
const USER_HZ: f64 = 100.0;

/// Where the process's figures are read: `/proc` (a temp dir in tests).
#[derive(Debug, Clone)]
pub struct ProcessCollector {
    proc_root: PathBuf,
    pid: String,
    /// `proc_root` is a procfs, whose `fd/` directories give their entry count as their size.
    procfs: bool,
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::at(Path::new("/proc"), "self")
    }
}

/// The fields of `/proc/<pid>/stat` the collector uses.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
}

/// Fields after the command (which may hold spaces and parentheses): field 3 is the state.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3; field n is fields[n - 3].
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// The soft limit of `name` in `/proc/<pid>/limits`; `unlimited` as the largest `u64`, as
/// procfs reads it.
fn soft_limit(limits: &str, name: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    if soft == "unlimited" { Some(u64::MAX) } else { soft.parse().ok() }
}

#[allow(clippy::cast_precision_loss)]
fn float(n: u64) -> f64 {
    n as f64
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(4096)
}

fn gauge(name: &'static str, help: &'static str, value: f64) -> Family {
    let mut f = Family::new(name, help, Kind::Gauge);
    f.push(&[], value, None);
    f
}

impl ProcessCollector {
    /// Reads the process `pid` under `proc_root` instead of this one.
    pub fn at(proc_root: &Path, pid: &str) -> Self {
        let procfs = nix::sys::statfs::statfs(proc_root)
            .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
        Self { proc_root: proc_root.into(), pid: pid.into(), procfs }
    }

    /// The open descriptors. procfs (Linux 6.2 on) gives their count as the size of `fd/`: one
    /// `stat`, where listing reads every entry (the kubelet keeps hundreds of cgroup control
    /// files open). Elsewhere, or where the size is 0, the entries are counted, as procfs does.
    fn open_fds(&self) -> Option<u64> {
        let dir = self.proc_root.join(&self.pid).join("fd");
        if self.procfs
            && let Some(n) = std::fs::metadata(&dir).ok().map(|m| m.len()).filter(|n| *n > 0)
        {
            return Some(n);
        }
        u64::try_from(std::fs::read_dir(&dir).ok()?.count()).ok()
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.proc_root.join(&self.pid).join(rel)).ok()
    }

    fn start_time(&self, stat: &Stat) -> Option<f64> {
        let btime = boot_time(&std::fs::read_to_string(self.proc_root.join("stat")).ok()?)?;
        Some(float(stat.starttime) / USER_HZ + float(btime))
    }

    /// `process_start_time_seconds` alone (what `/metrics/probes` carries besides the probes).
    pub fn start_time_seconds(&self) -> Option<f64> {
        self.start_time(&parse_stat(&self.read("stat")?)?)
    }

    /// The collector's families, read now.
    pub fn families(&self) -> Vec<Family> {
        let mut out = Vec::new();
        if let Some(stat) = self.read("stat").as_deref().and_then(parse_stat) {
            let mut cpu = Family::new(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
                Kind::Counter,
            );
            cpu.push(&[], float(stat.utime + stat.stime) / USER_HZ, None);
            out.push(cpu);
            out.push(gauge(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                float(stat.vsize),
            ));
            out.push(gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                float(stat.rss_pages * page_size()),
            ));
            if let Some(start) = self.start_time(&stat) {
                out.push(gauge(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    start,
                ));
            }
        }
        if let Some(open) = self.open_fds() {
            out.push(gauge("process_open_fds", "Number of open file descriptors.", float(open)));
        }
        if let Some(limits) = self.read("limits") {
            if let Some(n) = soft_limit(&limits, "Max open files") {
                out.push(gauge(
                    "process_max_fds",
                    "Maximum number of open file descriptors.",
                    float(n),
                ));
            }
            if let Some(n) = soft_limit(&limits, "Max address space") {
                out.push(gauge(
                    "process_virtual_memory_max_bytes",
                    "Maximum amount of virtual memory available in bytes.",
                    float(n),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::text::encode;

    const STAT: &str = "4242 (kube let) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 50 0 0 20 0 \
                        12 0 123456 734003200 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 \
                        1 0 0 0 0 0\n";
    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units\n\
                          Max open files            1048576              1048576              files\n\
                          Max address space         unlimited            unlimited            bytes\n";

    #[test]
    fn the_process_figures_are_read_from_proc_as_client_golang_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let me = dir.path().join("4242");
        std::fs::create_dir_all(me.join("fd")).unwrap();
        for fd in ["0", "1", "2"] {
            std::fs::write(me.join("fd").join(fd), "").unwrap();
        }
        std::fs::write(me.join("stat"), STAT).unwrap();
        std::fs::write(me.join("limits"), LIMITS).unwrap();
        std::fs::write(dir.path().join("stat"), "cpu 1 2 3\nbtime 1700000000\n").unwrap();
        let text = encode(ProcessCollector::at(dir.path(), "4242").families());
        let page = float(page_size());
        for line in [
            "process_cpu_seconds_total 3".to_string(),
            "process_open_fds 3".into(),
            "process_max_fds 1.048576e+06".into(),
            "process_virtual_memory_bytes 7.340032e+08".into(),
            "process_virtual_memory_max_bytes 1.8446744073709552e+19".into(),
            format!(
                "process_resident_memory_bytes {}",
                super::super::text::go_float(5000.0 * page)
            ),
            "process_start_time_seconds 1.70000123456e+09".into(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(text.contains("# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\n"));
    }

    #[test]
    fn unreadable_files_leave_their_metrics_out() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ProcessCollector::at(dir.path(), "1").families(), vec![]);
        std::fs::create_dir_all(dir.path().join("1")).unwrap();
        std::fs::write(dir.path().join("1/stat"), "garbage").unwrap();
        assert_eq!(ProcessCollector::at(dir.path(), "1").families(), vec![]);
        assert!(ProcessCollector::default().families().len() >= 6, "this process is readable");
    }

    #[test]
    fn a_process_open_descriptors_are_counted_on_procfs_as_in_a_listing() {
        use std::process::{Command, Stdio};
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let collector = ProcessCollector::at(Path::new("/proc"), &child.id().to_string());
        assert!(collector.procfs, "/proc is a procfs");
        // stdin, stdout, stderr and whatever the test harness leaves inheritable (a jobserver).
        let listed = std::fs::read_dir(format!("/proc/{}/fd", child.id())).unwrap().count();
        assert!(listed >= 3, "{listed}");
        assert_eq!(collector.open_fds(), u64::try_from(listed).ok());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
