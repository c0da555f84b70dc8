//! The controller-manager binary as a process against a harness apiserver, with its log in a
//! temp dir and its secure port on a free loopback port.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::apiserver::ApiServer;
use crate::containerd::terminate;

/// Fast leader election, so handovers take seconds: lease 4 s, renew 3 s, retry 1 s.
pub const FAST_ELECTION: [&str; 3] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

#[derive(Debug)]
pub struct ControllerManager {
    dir: tempfile::TempDir,
    child: Option<Child>,
    port: u16,
}

impl ControllerManager {
    /// Starts `controller-manager -v 2` as `system:kube-controller-manager` (the kubeconfig
    /// apiserver-lite writes for it), each controller as its own service account
    /// (`--use-service-account-credentials`, as kubeadm runs it), plus `extra` flags.
    pub fn start(api: &ApiServer, extra: &[&str]) -> anyhow::Result<Self> {
        let mut flags = vec!["--use-service-account-credentials"];
        flags.extend_from_slice(extra);
        Self::start_with(&api.component_kubeconfig("controller-manager"), 2, &flags)
    }

    pub fn start_with(
        kubeconfig: &std::path::Path,
        verbosity: u8,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-controller-manager-").tempdir()?;
        let port = crate::ports::free_port()?;
        let log = std::fs::File::create(dir.path().join("controller-manager.log"))?;
        let child = Command::new(crate::workspace_binary("controller-manager")?)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-v", &verbosity.to_string()])
            .args(["--bind-address", "127.0.0.1", "--secure-port", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start controller-manager")?;
        Ok(Self { dir, child: Some(child), port })
    }

    /// The secure port (`/healthz`, `/metrics`).
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("controller-manager.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The lease identity it logged at start (`<hostname>_<uuid>`).
    pub fn identity(&self) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.contains("starting the controller-manager"))?;
        let rest = &line[line.find("identity=")? + "identity=".len()..];
        Some(rest.split_whitespace().next()?.to_string())
    }

    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL: no release of the lease.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (up to 10 s): workers finish, the lease is released.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate(&mut c, Duration::from_secs(10));
        }
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        self.stop();
    }
}
