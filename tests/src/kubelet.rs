//! The kubelet binary as a process, configured against a harness containerd: its own manifest,
//! static config (node-local ConfigMaps and Secrets), state and log directories, a cgroup root under the harness's, the read-only API and the
//! secure kubelet API (logs, exec) on free ports of their own. They listen on every address:
//! the apiserver reaches a kubelet at its node's InternalIP, as in a real cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::containerd::{Containerd, terminate};

/// The node name the harness kubelets use.
pub const NODE: &str = "e2e-node";

/// Where cargo put the kubelet binary.
pub fn kubelet_binary() -> anyhow::Result<PathBuf> {
    crate::workspace_binary("kubelet")
}

/// The test kubelets' disk settings, as kind sets its nodes': the hard eviction thresholds'
/// disk signals off and image garbage collection off, so what a test sees does not hang on how
/// full the machine's disk is (upstream's `nodefs.available<10%` turns a 90%-full build
/// machine's node DiskPressure, and the scheduler then places nothing; its
/// `imageGCHighThresholdPercent: 85` would remove the test images no pod uses at that moment);
/// memory keeps upstream's default. Tests of those features set them with flags.
pub const DISK_SETTINGS: &str = "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: \"0%\"\n  nodefs.inodesFree: \"0%\"\n  imagefs.available: \"0%\"\nimageGCHighThresholdPercent: 100\n";

/// What a kubelet needs of its runtime: a directory to keep its own state under, the CRI
/// endpoint and the cgroup parent of pods.
#[derive(Debug, Clone)]
pub struct RuntimeSide {
    pub dir: PathBuf,
    pub endpoint: String,
    pub cgroup_parent: String,
}

#[derive(Debug)]
pub struct Kubelet {
    dir: PathBuf,
    port: u16,
    secure_port: u16,
    child: Option<Child>,
    binary: PathBuf,
    node: String,
    extra: Vec<String>,
    /// More environment variables than `RUST_LOG`.
    env: Vec<(String, String)>,
}

use crate::ports::free_port;

impl Kubelet {
    /// Writes the config (state under `<containerd dir>/kubelet`) and starts the kubelet.
    pub fn start(containerd: &Containerd) -> anyhow::Result<Self> {
        Self::start_named(containerd, NODE)
    }

    pub fn start_named(containerd: &Containerd, node: &str) -> anyhow::Result<Self> {
        Self::start_with(containerd, node, None)
    }

    /// Starts a kubelet named `node` that joins the apiserver of `kubeconfig`. Its API trusts
    /// client certificates from the CA the kubeconfig trusts (the cluster CA, as kubeadm sets
    /// it up), so the apiserver's kubelet client certificate reaches logs and exec.
    pub fn start_joined(
        containerd: &Containerd,
        node: &str,
        kubeconfig: &std::path::Path,
    ) -> anyhow::Result<Self> {
        Self::start_joined_with(containerd, node, kubeconfig, &[])
    }

    /// [`Kubelet::start_joined`] with more command-line flags.
    pub fn start_joined_with(
        containerd: &Containerd,
        node: &str,
        kubeconfig: &std::path::Path,
        flags: &[&str],
    ) -> anyhow::Result<Self> {
        let mut extra = vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()];
        extra.extend(flags.iter().map(|f| f.to_string()));
        if let Some(ca) = kubeconfig_ca(kubeconfig)? {
            extra.extend(["--client-ca-file".to_string(), ca.display().to_string()]);
        }
        Self::start_full(containerd, node, None, extra, "")
    }

    /// Starts a kubelet named `node`, with the read-only API on `port` (a free one if `None`).
    pub fn start_with(
        containerd: &Containerd,
        node: &str,
        port: Option<u16>,
    ) -> anyhow::Result<Self> {
        Self::start_full(containerd, node, port, Vec::new(), "")
    }

    /// A kubelet with no apiserver (static pods only) and more command-line flags.
    pub fn start_standalone_with(containerd: &Containerd, flags: &[&str]) -> anyhow::Result<Self> {
        Self::start_standalone_with_config(containerd, "", flags)
    }

    /// A kubelet with no apiserver, more `KubeletConfiguration` lines (YAML, one field per
    /// line) and more command-line flags.
    pub fn start_standalone_with_config(
        containerd: &Containerd,
        config: &str,
        flags: &[&str],
    ) -> anyhow::Result<Self> {
        let flags = flags.iter().map(|f| (*f).to_string()).collect();
        Self::start_full(containerd, NODE, None, flags, config)
    }

    /// A kubelet with no apiserver named `node` on any runtime (the fake one, for pods
    /// another kubelet made), with more config lines and flags.
    pub fn start_standalone_on(
        runtime: &RuntimeSide,
        node: &str,
        config: &str,
        flags: &[&str],
    ) -> anyhow::Result<Self> {
        let flags = flags.iter().map(|f| (*f).to_string()).collect();
        Self::start_on(runtime, node, None, flags, config)
    }

    fn start_full(
        containerd: &Containerd,
        node: &str,
        port: Option<u16>,
        extra: Vec<String>,
        extra_config: &str,
    ) -> anyhow::Result<Self> {
        let side = RuntimeSide {
            dir: containerd.dir().to_path_buf(),
            endpoint: containerd.endpoint().to_string(),
            cgroup_parent: containerd.cgroup_parent(),
        };
        Self::start_on(&side, node, port, extra, extra_config)
    }

    fn start_on(
        runtime: &RuntimeSide,
        node: &str,
        port: Option<u16>,
        extra: Vec<String>,
        extra_config: &str,
    ) -> anyhow::Result<Self> {
        let dir = runtime.dir.join(format!("kubelet-{node}"));
        for d in ["manifests", "static-config", "root", "logs"] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        let config = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: {}\nstaticConfigPath: {}\ncontainerRuntimeEndpoint: {}\npodLogsDir: {}\ncgroupRoot: {}\naddress: 0.0.0.0\nreadOnlyPort: 0\nhealthzPort: 0\nfileCheckFrequency: 20s\n{}{extra_config}",
            dir.join("manifests").display(),
            dir.join("static-config").display(),
            runtime.endpoint,
            dir.join("logs").display(),
            runtime.cgroup_parent,
            DISK_SETTINGS,
        );
        std::fs::write(dir.join("kubelet.yaml"), config)?;
        let binary = kubelet_binary()?;
        let mut me = Self {
            dir,
            port: port.unwrap_or(0),
            secure_port: free_port()?,
            child: None,
            binary,
            node: node.to_string(),
            extra,
            env: Vec::new(),
        };
        me.spawn()?;
        Ok(me)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        if self.port == 0 {
            self.port = free_port()?;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("kubelet.log"))?;
        let child = Command::new(&self.binary)
            .arg("--config")
            .arg(self.dir.join("kubelet.yaml"))
            .args(["--hostname-override", &self.node, "--read-only-port", &self.port.to_string()])
            .args(["--port", &self.secure_port.to_string()])
            .arg("--root-dir")
            .arg(self.dir.join("root"))
            .args(&self.extra)
            .env("RUST_LOG", "info,kubelet=debug")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start the kubelet")?;
        self.child = Some(child);
        Ok(())
    }

    /// The read-only API port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The secure kubelet API's port (TLS; the node's `daemonEndpoints.kubeletEndpoint`).
    pub fn secure_port(&self) -> u16 {
        self.secure_port
    }

    /// The kubelet's state directory (`--root-dir`; its self-signed certificate is in `pki/`).
    pub fn root_dir(&self) -> PathBuf {
        self.dir.join("root")
    }

    pub fn manifests(&self) -> PathBuf {
        self.dir.join("manifests")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// The static config directory (`staticConfigPath`): node-local ConfigMaps and Secrets.
    pub fn static_config(&self) -> PathBuf {
        self.dir.join("static-config")
    }

    /// Writes a static config file as an operator's tool should: to a dotfile with `mode`, then
    /// renamed into place.
    pub fn write_static_config(
        &self,
        file: &str,
        text: &str,
        mode: u32,
    ) -> anyhow::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.static_config().join(file);
        let tmp = self.static_config().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// Writes a manifest the way an operator's tool should: to a dotfile, then renamed.
    pub fn write_manifest(&self, file: &str, text: &str) -> anyhow::Result<PathBuf> {
        let path = self.manifests().join(file);
        let tmp = self.manifests().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// `GET path` on the read-only API, decoded as JSON.
    pub async fn get(&self, path: &str) -> Option<Value> {
        serde_json::from_str(&self.get_body(path).await?).ok()
    }

    /// `GET path` on the read-only API: the body, whatever its status.
    pub async fn get_body(&self, path: &str) -> Option<String> {
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: kubelet\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        Some(buf.split_once("\r\n\r\n")?.1.to_string())
    }

    /// The pod named `name` from `/pods`.
    pub async fn pod(&self, name: &str) -> Option<Value> {
        let list = self.get("/pods").await?;
        list["items"].as_array()?.iter().find(|p| p["metadata"]["name"] == name).cloned()
    }

    /// The pod, once Running with every container ready.
    pub async fn running(&self, name: &str) -> Option<Value> {
        let p = self.pod(name).await?;
        let ready = p["status"]["containerStatuses"].as_array()?.iter().all(|c| c["ready"] == true);
        (p["status"]["phase"] == "Running" && ready).then_some(p)
    }

    /// The kubelet's process id, while it runs.
    pub fn pid_u32(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn pid(&self) -> Option<Pid> {
        self.child.as_ref().and_then(|c| i32::try_from(c.id()).ok()).map(Pid::from_raw)
    }

    /// SIGKILL, as an OOM kill or a crash would.
    pub fn kill9(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGKILL);
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (a clean stop: pods keep running). Returns the exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        terminate(&mut c, Duration::from_secs(15));
        c.wait().ok()
    }

    /// The exit status, once the kubelet has exited on its own.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok()?
    }

    /// The `KubeletConfiguration` file it reads at each (re)start.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("kubelet.yaml")
    }

    /// An environment variable the kubelet gets from its next (re)start on.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), value.to_string()));
    }

    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.spawn()
    }

    /// Restarts it with `flags` added to those it was started with.
    pub fn restart_with(&mut self, flags: &[&str]) -> anyhow::Result<()> {
        self.extra.extend(flags.iter().map(|f| f.to_string()));
        self.spawn()
    }

    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// The CA file a kubeconfig's current cluster trusts (written next to it when inline).
fn kubeconfig_ca(path: &std::path::Path) -> anyhow::Result<Option<PathBuf>> {
    let kc = kube::config::Kubeconfig::read_from(path)?;
    let Some(cluster) = kc.clusters.first().and_then(|c| c.cluster.as_ref()) else {
        return Ok(None);
    };
    if let Some(file) = &cluster.certificate_authority {
        return Ok(Some(PathBuf::from(file)));
    }
    let Some(data) = &cluster.certificate_authority_data else { return Ok(None) };
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(data.trim())?;
    let ca = path.with_extension("ca.crt");
    std::fs::write(&ca, pem)?;
    Ok(Some(ca))
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop();
    }
}
