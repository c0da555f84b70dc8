//! A component started as a child process with its log in a file: whether it still runs (an
//! exit is reported with its status and log tail, never waited on), what it costs (RSS and CPU
//! seconds from `/proc`), and a stop path (SIGTERM, then SIGKILL after a grace period).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::containerd::terminate;

/// What a process costs, read from `/proc/<pid>`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Resident set size (`VmRSS`), bytes.
    pub rss_bytes: u64,
    /// Of which anonymous memory (`RssAnon`: heap and stacks, not mapped files), bytes.
    pub anon_bytes: u64,
    /// User plus system CPU time since it started, seconds.
    pub cpu_seconds: f64,
}

impl Usage {
    pub fn rss_mib(&self) -> f64 {
        self.rss_bytes as f64 / (1024.0 * 1024.0)
    }

    pub fn anon_mib(&self) -> f64 {
        self.anon_bytes as f64 / (1024.0 * 1024.0)
    }
}

/// The usage of process `pid`, or `None` once it is gone.
pub fn usage(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is the first, utime the 12th.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100);
    Some(Usage {
        rss_bytes: kb("VmRSS:") * 1024,
        anon_bytes: kb("RssAnon:") * 1024,
        cpu_seconds: (ticks(11) + ticks(12)) as f64 / hz as f64,
    })
}

/// Whether process `pid` is alive: neither gone nor a zombie waiting to be reaped.
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A running component: a child process whose stdout and stderr go to `log`.
#[derive(Debug)]
pub struct Process {
    name: String,
    log: PathBuf,
    child: Mutex<Option<Child>>,
    pid: u32,
}

/// A component that is no longer running, as the harness reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} exited ({status}); the last lines of {log}:\n{tail}")]
pub struct Exited {
    pub name: String,
    pub status: String,
    pub log: PathBuf,
    pub tail: String,
}

impl Process {
    /// Starts `command` (stdin closed, output appended to `log`) as the component `name`.
    ///
    /// An error that ends it is logged without a backtrace (`RUST_LIB_BACKTRACE=0`, unless the
    /// command sets it), so a log's tail shows the error, not the frames of `main`; a panic
    /// still logs its backtrace when `RUST_BACKTRACE` asks.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> anyhow::Result<Self> {
        if !command.get_envs().any(|(k, _)| k == "RUST_LIB_BACKTRACE") {
            command.env("RUST_LIB_BACKTRACE", "0");
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("{name}: open its log {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("start {name} ({:?})", command.get_program()))?;
        Ok(Self {
            name: name.to_string(),
            log: log.to_path_buf(),
            pid: child.id(),
            child: Mutex::new(Some(child)),
        })
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log, n)
    }

    /// `Err` naming the component, how it ended and its log tail, once it has exited (reaping
    /// it); `Ok` while it runs.
    pub fn check(&self) -> Result<(), Exited> {
        let mut guard = self.child();
        let status = match guard.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => return Ok(()),
            Some(Ok(Some(status))) => describe(status),
            Some(Err(e)) => format!("cannot be waited for: {e}"),
            None => "stopped by the harness".to_string(),
        };
        Err(Exited {
            name: self.name.clone(),
            status,
            log: self.log.clone(),
            tail: self.log_tail(20),
        })
    }

    /// What it costs now; `None` once it has exited.
    pub fn usage(&self) -> Option<Usage> {
        self.check().ok()?;
        usage(self.pid)
    }

    /// SIGKILL, as an OOM kill or a crash would (not reaped: [`Process::check`] reports it).
    pub fn kill9(&self) {
        if self.child().is_some()
            && let Ok(pid) = i32::try_from(self.pid)
        {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    /// SIGTERM without waiting (to stop many at once, then [`Process::stop`] each).
    pub fn signal_term(&self) {
        if self.child().is_some()
            && let Ok(pid) = i32::try_from(self.pid)
        {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }

    /// SIGTERM, SIGKILL after `grace`, reaped. Returns how it ended, if it was still ours.
    pub fn stop(&self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child().take()?;
        terminate(&mut child, grace);
        child.wait().ok()
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("killed by {s}"),
            Err(_) => format!("killed by signal {sig}"),
        },
        (None, None) => status.to_string(),
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}
