//! The scheduler binary as a process against a harness apiserver, with its log in a temp dir;
//! and Node objects with capacity, for scheduling against nodes that have no kubelet.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::apiserver::ApiServer;
use crate::containerd::terminate;

#[derive(Debug)]
pub struct Scheduler {
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Scheduler {
    /// Starts `scheduler -v 2` as `system:kube-scheduler` (the kubeconfig apiserver-lite
    /// writes for it) plus `extra` flags (e.g. the `--leader-elect-*` durations).
    pub fn start(api: &ApiServer, extra: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(&api.component_kubeconfig("scheduler"), 2, extra)
    }

    /// Starts with any kubeconfig (e.g. one per node's kubelet) and log verbosity (`-v`; the
    /// benchmark runs at 0 so per-pod lines cost nothing).
    pub fn start_with(
        kubeconfig: &std::path::Path,
        verbosity: u8,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-scheduler-").tempdir()?;
        let log = std::fs::File::create(dir.path().join("scheduler.log"))?;
        let child = Command::new(crate::workspace_binary("scheduler")?)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-v", &verbosity.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start scheduler")?;
        Ok(Self { dir, child: Some(child) })
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("scheduler.log")
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
        let line = log.lines().find(|l| l.contains("starting the scheduler"))?;
        let rest = &line[line.find("identity=")? + "identity=".len()..];
        Some(rest.split_whitespace().next()?.to_string())
    }

    /// How many pods it logged as bound (`Successfully bound pod to node`, at `-v 2`).
    pub fn bindings(&self) -> usize {
        self.log().matches("Successfully bound pod to node").count()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL: no release of the lease, no draining.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (up to 10 s): bindings finish, the lease is released.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate(&mut c, Duration::from_secs(10));
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Node object as a kubelet would register it: capacity and allocatable, `Ready`, the
/// hostname label, and `labels`/`taints` as given. For scheduling against nodes with no kubelet.
pub fn node(name: &str, cpu: &str, memory: &str, pods: &str) -> Node {
    let resources = serde_json::json!({"cpu": cpu, "memory": memory, "pods": pods});
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        }},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}],
        },
    }))
    .unwrap_or_default()
}
