//! A private containerd for one test: its own root, state, socket, runc root, CNI config and
//! bridge, registry config and cgroup parent, all under a temp dir, and a teardown that leaves
//! nothing behind (checked by [`crate::leaks`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::{ClientOptions, CriClient, UnixEndpoint};
use rand::Rng;

use crate::leaks::{self, LeakReport};

/// The sandbox (pause) image every harness configures.
pub const SANDBOX_IMAGE: &str = "localhost/pause:1.0";

#[derive(Debug, Clone, Default)]
pub struct ContainerdOptions {
    /// Plain-HTTP registries on loopback that CRI pulls may use.
    pub registries: Vec<SocketAddr>,
    /// A tmpfs of this many bytes mounted over the harness's directory before anything is
    /// written there, so that containerd's root (the image filesystem), the kubelet's root and
    /// its pod logs share one small filesystem a test can fill. Teardown unmounts it.
    pub tmpfs_bytes: Option<u64>,
}

/// A running private containerd. Stop it with [`Containerd::stop`]; dropping it tears down too.
#[derive(Debug)]
pub struct Containerd {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    child: Option<Child>,
    endpoint: UnixEndpoint,
    bridge: String,
    subnet: String,
    cgroup_name: String,
}

fn config_toml(dir: &Path, registry_dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  # Without CAP_SYS_RESOURCE runc cannot raise oom_score_adj and every sandbox fails with
  # "can't get final child's PID from pipe: EOF"; this keeps the adjustment within bounds.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{registry}"
"#,
        registry = registry_dir.display()
    )
}

fn cni_conflist(dir: &Path, name: &str, bridge: &str, subnet: &str) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": name,
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": subnet }]],
                "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": dir.join("cni-ipam"),
            },
        }],
    })
    .to_string()
}

impl Containerd {
    /// Writes the config, starts containerd, and waits until its CRI answers.
    pub async fn start(options: ContainerdOptions) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-ctrd-").tempdir_in("/tmp")?;
        let path = dir.path().to_path_buf();
        if let Some(bytes) = options.tmpfs_bytes {
            let data = format!("size={bytes},mode=0700");
            nix::mount::mount(
                Some("tmpfs"),
                &path,
                Some("tmpfs"),
                nix::mount::MsFlags::empty(),
                Some(data.as_str()),
            )
            .with_context(|| format!("mounting a tmpfs of {bytes} bytes on {}", path.display()))?;
        }
        let mut rng = rand::rng();
        let id: String = (0..6).map(|_| format!("{:x}", rng.random_range(0..16u8))).collect();
        let bridge = format!("e2e{id}");
        let subnet =
            format!("10.{}.{}.0/24", 100 + rng.random_range(0..100u8), rng.random_range(0..=255u8));
        let cgroup_name = format!("e2e-{id}");

        let registry_dir = path.join("certs.d");
        std::fs::create_dir_all(path.join("cni"))?;
        std::fs::create_dir_all(&registry_dir)?;
        for addr in options.registries {
            let host = registry_dir.join(addr.to_string());
            std::fs::create_dir_all(&host)?;
            std::fs::write(
                host.join("hosts.toml"),
                format!(
                    "server = \"http://{addr}\"\n[host.\"http://{addr}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
                ),
            )?;
        }
        std::fs::write(path.join("config.toml"), config_toml(&path, &registry_dir))?;
        std::fs::write(
            path.join("cni/10-e2e.conflist"),
            cni_conflist(&path, &format!("e2e-{id}"), &bridge, &subnet),
        )?;

        make_cgroup_root(&cgroup_name)?;
        let log = std::fs::File::create(path.join("containerd.log"))?;
        let child = Command::new("containerd")
            .arg("--config")
            .arg(path.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start containerd (is it installed? hack/install-deps.sh)")?;
        let endpoint = UnixEndpoint::new(path.join("containerd.sock"));
        let mut me = Self {
            dir: Some(dir),
            path,
            child: Some(child),
            endpoint,
            bridge,
            subnet,
            cgroup_name,
        };
        me.wait_ready().await?;
        Ok(me)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("containerd exited during start ({status}):\n{}", self.log_tail(30));
            }
            let opts = ClientOptions {
                connect_timeout: Duration::from_secs(2),
                ..ClientOptions::default()
            };
            match CriClient::connect(&self.endpoint, opts).await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    bail!("containerd's CRI did not answer within 30 s: {e}\n{}", self.log_tail(30))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    pub fn endpoint(&self) -> &UnixEndpoint {
        &self.endpoint
    }

    /// The harness's private directory (logs, CNI state, pod log root …).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// The cgroup parent pods must use, so teardown can find and remove their cgroups.
    pub fn cgroup_parent(&self) -> String {
        format!("/{}", self.cgroup_name)
    }

    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    pub fn subnet(&self) -> &str {
        &self.subnet
    }

    pub async fn client(&self) -> anyhow::Result<CriClient> {
        let opts =
            ClientOptions { call_timeout: Duration::from_secs(60), ..ClientOptions::default() };
        Ok(CriClient::connect(&self.endpoint, opts).await?)
    }

    /// Builds the offline test images and imports them into the `k8s.io` namespace.
    pub fn import_test_images(&self) -> anyhow::Result<()> {
        let out = self.path.join("images");
        for (image, archive) in images::write_archives(&out, Path::new(images::DEFAULT_BUSYBOX))? {
            let status = Command::new("ctr")
                .arg("--address")
                .arg(self.endpoint.path())
                .args(["-n", "k8s.io", "images", "import"])
                .arg(&archive)
                .stdout(Stdio::null())
                .status()
                .context("run ctr")?;
            anyhow::ensure!(
                status.success(),
                "ctr images import {} ({}) failed",
                archive.display(),
                image.reference()
            );
        }
        Ok(())
    }

    /// The last `n` lines of containerd's log, for failure messages.
    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(self.path.join("containerd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Removes every pod through CRI, stops containerd, and removes what is left; returns what
    /// could not be removed (empty when clean).
    pub async fn stop(mut self) -> LeakReport {
        if self.child.is_some() {
            let opts = ClientOptions {
                connect_timeout: Duration::from_secs(2),
                call_timeout: Duration::from_secs(20),
                ..ClientOptions::default()
            };
            if let Ok(client) = CriClient::connect(&self.endpoint, opts).await {
                remove_all_pods(&client).await;
            }
        }
        self.teardown()
    }

    fn teardown(&mut self) -> LeakReport {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, Duration::from_secs(10));
        }
        let Some(dir) = self.dir.take() else { return LeakReport::default() };
        // Shims and container processes that outlived containerd.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let strays = leaks::processes(&self.path, &self.cgroup_name);
            if strays.is_empty() || Instant::now() > deadline {
                break;
            }
            for (pid, _) in strays {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for mount in leaks::mounts_under(&self.path) {
            let _ = nix::mount::umount2(mount.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        let ports = leaks::bridge_ports(&self.bridge);
        for link in ports.iter().chain(std::iter::once(&self.bridge)) {
            if leaks::interface_exists(link) {
                let _ =
                    Command::new("ip").args(["link", "del", link]).stderr(Stdio::null()).status();
            }
        }
        for root in leaks::cgroups(&self.cgroup_name) {
            remove_cgroup_tree(Path::new(&root));
        }
        if let Err(e) = dir.close() {
            eprintln!("harness: removing {}: {e}", self.path.display());
        }
        LeakReport {
            processes: leaks::processes(&self.path, &self.cgroup_name)
                .into_iter()
                .map(|(p, c)| format!("{p} {c}"))
                .collect(),
            mounts: leaks::mounts_under(&self.path),
            interfaces: ports
                .into_iter()
                .chain(std::iter::once(self.bridge.clone()))
                .filter(|l| leaks::interface_exists(l))
                .collect(),
            cgroups: leaks::cgroups(&self.cgroup_name),
            paths: self
                .path
                .exists()
                .then(|| self.path.display().to_string())
                .into_iter()
                .collect(),
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if self.dir.is_some() {
            let report = self.teardown();
            if !report.is_clean() {
                eprintln!("harness: containerd teardown left {report:?}");
            }
        }
    }
}

/// Stops and removes every sandbox (and so every container), as a kubelet would on drain.
pub async fn remove_all_pods(client: &CriClient) {
    let Ok(list) = client.list_pod_sandbox(Default::default()).await else { return };
    for sandbox in list.items {
        let id = sandbox.id;
        let _ = client
            .stop_pod_sandbox(proto::cri::StopPodSandboxRequest { pod_sandbox_id: id.clone() })
            .await;
        let _ = client
            .remove_pod_sandbox(proto::cri::RemovePodSandboxRequest { pod_sandbox_id: id })
            .await;
    }
}

/// SIGTERM, then SIGKILL after `grace`.
pub fn terminate(child: &mut Child, grace: Duration) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Makes the cgroup the test's kubelets take as `cgroupRoot` (which must exist, as upstream's
/// kubelet checks) in each hierarchy; teardown removes it with all below.
fn make_cgroup_root(cgroup_name: &str) -> anyhow::Result<()> {
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup").context("reading /sys/fs/cgroup")?;
    let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let dirs: Vec<PathBuf> = if unified {
        vec![PathBuf::from("/sys/fs/cgroup").join(cgroup_name)]
    } else {
        hierarchies
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path().join(cgroup_name))
            .collect()
    };
    for dir in dirs {
        std::fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
    }
    Ok(())
}

/// Removes a cgroup directory and its children, deepest first (cgroupfs needs `rmdir`).
fn remove_cgroup_tree(root: &Path) {
    let mut dirs = vec![root.to_path_buf()];
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
    for dir in dirs.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
}
