//! Hollow nodes, as upstream's kubemark: N real kubelet processes, each on its own fake CRI
//! runtime, joined to one apiserver-lite, with the scheduler and any other control-plane
//! process beside them. Scale tests exercise the real kubelet, scheduler and controller paths
//! without containerd's cost. **For scale tests only**: a hollow pod runs nothing.
//!
//! Node `hollow-<i>` is:
//! - a [`FakeRuntime`] served in this process on `<dir>/hollow-<i>/cri.sock`: the test images
//!   present (pulls succeed), containers that run until stopped, `ExecSync` answering exit 0
//!   (exec probes pass), and pod addresses from its own `10.244.<i>.0/24`;
//! - the kubelet binary as a process, joined with its own token (`system:node:hollow-<i>`),
//!   its APIs on 127.0.0.1 and `--node-ip 127.0.0.1` (so `kubectl logs` reaches it), and
//!   `cgroupsPerQOS: false`, so it never touches a cgroup; the runtime reports pod addresses, so
//!   there is no CNI. It needs no privilege: when the test runs as root, kubelets run as
//!   `nobody`.
//!
//! Every wait checks every process: a kubelet (or any component) that died is reported by
//! name with its log tail instead of a timeout. Teardown stops everything and checks that no
//! process mentioning the harness directory is left.

use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use fake_cri::{FakeCriServer, FakeRuntime, PodCidr};
use futures::Future;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use crate::apiserver::ApiServer;
use crate::process::{Exited, Process, Usage};

/// At most this many nodes: each takes one /24 of 10.244.0.0/16, as flannel's default splits it.
pub const MAX_NODES: usize = 256;

/// The user hollow kubelets run as when the test runs as root.
const NOBODY: u32 = 65534;

/// How long a kubelet or companion gets to stop after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// The name of hollow node `i`.
pub fn node_name(i: usize) -> String {
    format!("hollow-{i}")
}

/// The pod subnet of hollow node `i`: `10.244.<i>.0/24`.
pub fn pod_cidr(i: usize) -> anyhow::Result<PodCidr> {
    let third = u8::try_from(i).context("a hollow node's index must be below 256")?;
    Ok(format!("{}/24", Ipv4Addr::new(10, 244, third, 0)).parse()?)
}

/// A control-plane process started beside the nodes as `<binary> --kubeconfig <admin> <args>`:
/// the scheduler, and the controller-manager once it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Companion {
    /// A binary of this workspace (found as [`crate::workspace_binary`] finds it).
    pub binary: String,
    pub args: Vec<String>,
}

/// What to start: a builder, ended by [`HollowSpec::start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HollowSpec {
    nodes: usize,
    companions: Vec<Companion>,
    kubelet_flags: Vec<String>,
    kubelet_log: String,
}

impl HollowSpec {
    /// `nodes` hollow nodes, no companions; kubelets log at `info`.
    pub fn nodes(nodes: usize) -> Self {
        Self {
            nodes,
            companions: Vec::new(),
            kubelet_flags: Vec::new(),
            kubelet_log: "info".into(),
        }
    }

    /// Adds the scheduler (`-v 0`: nothing per pod in its log).
    pub fn scheduler(self) -> Self {
        self.companion("scheduler", &["-v", "0"])
    }

    /// Adds a control-plane process, e.g. `.companion("controller-manager", &[...])`.
    pub fn companion(mut self, binary: &str, args: &[&str]) -> Self {
        let args = args.iter().map(|a| (*a).to_string()).collect();
        self.companions.push(Companion { binary: binary.to_string(), args });
        self
    }

    /// More flags for every kubelet.
    pub fn kubelet_flags(mut self, flags: &[&str]) -> Self {
        self.kubelet_flags.extend(flags.iter().map(|f| (*f).to_string()));
        self
    }

    /// The kubelets' `RUST_LOG` filter (default `info`).
    pub fn kubelet_log(mut self, filter: &str) -> Self {
        self.kubelet_log = filter.to_string();
        self
    }

    pub async fn start(self) -> anyhow::Result<HollowCluster> {
        HollowCluster::start(self).await
    }
}

/// Every binary the spec needs, or one error naming each missing one (before anything starts).
fn binaries(spec: &HollowSpec) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    let mut missing = Vec::new();
    let mut find = |name: &str| match crate::workspace_binary(name) {
        Ok(path) => Some(path),
        Err(e) => {
            missing.push(format!("{name}: {e}"));
            None
        }
    };
    let kubelet = find("kubelet");
    let _apiserver = find("apiserver-lite");
    let companions: Vec<Option<PathBuf>> =
        spec.companions.iter().map(|c| find(&c.binary)).collect();
    if !missing.is_empty() {
        anyhow::bail!("hollow cluster: missing binaries:\n{}", missing.join("\n"));
    }
    Ok((kubelet.unwrap_or_default(), companions.into_iter().flatten().collect()))
}

/// One hollow node: its fake runtime and its kubelet.
#[derive(Debug)]
pub struct HollowNode {
    name: String,
    dir: PathBuf,
    pod_cidr: PodCidr,
    kubelet: Process,
    runtime: FakeCriServer,
}

impl HollowNode {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its runtime: what runs there, and the knobs (programs, exec results, faults).
    pub fn runtime(&self) -> &FakeRuntime {
        self.runtime.runtime()
    }

    pub fn pod_cidr(&self) -> PodCidr {
        self.pod_cidr
    }

    pub fn kubelet(&self) -> &Process {
        &self.kubelet
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Whom the kubelets run as: `nobody` when we are root, else ourselves.
fn kubelet_user() -> Option<u32> {
    nix::unistd::geteuid().is_root().then_some(NOBODY)
}

fn chown(path: &Path, uid: u32) -> anyhow::Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(uid))
        .with_context(|| format!("chown {} to {uid}", path.display()))
}

impl HollowNode {
    async fn start(
        api: &ApiServer,
        parent: &Path,
        i: usize,
        kubelet: &Path,
        spec: &HollowSpec,
    ) -> anyhow::Result<Self> {
        let name = node_name(i);
        let dir = parent.join(&name);
        for d in ["root", "logs"] {
            std::fs::create_dir_all(dir.join(d))?;
        }
        let pod_cidr = pod_cidr(i)?;
        let runtime = FakeRuntime::new();
        for image in images::TestImage::ALL {
            runtime.add_image(image.reference())?;
        }
        runtime.set_pod_cidr(pod_cidr);
        let socket = dir.join("cri.sock");
        let runtime = FakeCriServer::start_with(runtime, &socket)
            .with_context(|| format!("{name}: serve the fake runtime on {}", socket.display()))?;

        let ca = dir.join("ca.crt");
        std::fs::copy(api.ca_path(), &ca)?;
        api.write_node_kubeconfig(&name, &dir.join("kubeconfig"), &ca)?;
        let config = format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix://{}\npodLogsDir: {}\ncgroupsPerQOS: false\nenforceNodeAllocatable: []\naddress: 127.0.0.1\nreadOnlyPort: 0\nhealthzPort: 0\n{}",
            socket.display(),
            dir.join("logs").display(),
            crate::kubelet::DISK_SETTINGS,
        );
        std::fs::write(dir.join("kubelet.yaml"), config)?;
        let user = kubelet_user();
        if let Some(uid) = user {
            for p in ["", "root", "logs", "cri.sock", "ca.crt", "kubeconfig", "kubelet.yaml"] {
                chown(&dir.join(p), uid)?;
            }
        }

        let mut cmd = Command::new(kubelet);
        cmd.arg("--config")
            .arg(dir.join("kubelet.yaml"))
            .args(["--hostname-override", &name, "--node-ip", "127.0.0.1"])
            .args(["--port", &crate::ports::free_port()?.to_string()])
            .arg("--root-dir")
            .arg(dir.join("root"))
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .arg("--client-ca-file")
            .arg(&ca)
            .args(&spec.kubelet_flags)
            .env("RUST_LOG", &spec.kubelet_log);
        if let Some(uid) = user {
            cmd.uid(uid).gid(uid);
        }
        let kubelet = Process::spawn(&format!("{name}'s kubelet"), cmd, &dir.join("kubelet.log"))?;
        Ok(Self { name, dir, pod_cidr, kubelet, runtime })
    }
}

/// N hollow nodes joined to an apiserver.
#[derive(Debug, Default)]
pub struct HollowNodes {
    nodes: Vec<HollowNode>,
}

impl HollowNodes {
    /// Starts `spec`'s nodes under `dir` (which the kubelets' user must be able to enter),
    /// joined to `api` (started with a token for each node name).
    pub async fn start(
        api: &ApiServer,
        dir: &Path,
        kubelet: &Path,
        spec: &HollowSpec,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (1..=MAX_NODES).contains(&spec.nodes),
            "hollow nodes: {} requested; between 1 and {MAX_NODES}",
            spec.nodes
        );
        let mut nodes = Vec::with_capacity(spec.nodes);
        for i in 0..spec.nodes {
            nodes.push(HollowNode::start(api, dir, i, kubelet, spec).await?);
        }
        Ok(Self { nodes })
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &HollowNode> {
        self.nodes.iter()
    }

    /// The node named `name`.
    pub fn get(&self, name: &str) -> Option<&HollowNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The first kubelet found dead, with its log tail.
    pub fn check(&self) -> Result<(), Exited> {
        self.nodes.iter().try_for_each(|n| n.kubelet.check())
    }

    /// SIGTERM to every kubelet at once, each reaped (SIGKILL after the grace period); then
    /// every runtime shut down.
    pub async fn stop(self) -> anyhow::Result<()> {
        for n in &self.nodes {
            n.kubelet.signal_term();
        }
        for n in &self.nodes {
            n.kubelet.stop(STOP_GRACE);
        }
        for n in self.nodes {
            n.runtime.shutdown().await.with_context(|| format!("{}: runtime shutdown", n.name))?;
        }
        Ok(())
    }
}

/// apiserver-lite, hollow nodes and companions, started as one and torn down as one.
#[derive(Debug)]
pub struct HollowCluster {
    // Dropped in this order: companions, kubelets, the apiserver, the directory.
    companions: Vec<Process>,
    nodes: HollowNodes,
    api: ApiServer,
    dir: tempfile::TempDir,
}

impl HollowCluster {
    async fn start(spec: HollowSpec) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (1..=MAX_NODES).contains(&spec.nodes),
            "hollow cluster: {} nodes requested; between 1 and {MAX_NODES}",
            spec.nodes
        );
        let (kubelet, companion_bins) = binaries(&spec)?;
        let dir = tempfile::Builder::new().prefix("e2e-hollow-").tempdir()?;
        if kubelet_user().is_some() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        }
        let names: Vec<String> = (0..spec.nodes).map(node_name).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let api = ApiServer::start_for_nodes_under(dir.path(), &refs)?;
        let mut me = Self { companions: Vec::new(), nodes: HollowNodes::default(), api, dir };
        me.nodes = HollowNodes::start(&me.api, me.dir.path(), &kubelet, &spec).await?;
        for (k, (c, binary)) in spec.companions.iter().zip(companion_bins).enumerate() {
            let name = if spec.companions.iter().filter(|o| o.binary == c.binary).count() > 1 {
                format!("{}-{k}", c.binary)
            } else {
                c.binary.clone()
            };
            let mut cmd = Command::new(binary);
            cmd.arg("--kubeconfig").arg(me.api.kubeconfig()).args(&c.args);
            let log = me.dir.path().join(format!("{name}.log"));
            me.companions.push(Process::spawn(&name, cmd, &log)?);
        }
        Ok(me)
    }

    pub fn api(&self) -> &ApiServer {
        &self.api
    }

    /// A kube-rs client authenticated as the admin.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.api.admin_client().await
    }

    pub fn nodes(&self) -> &HollowNodes {
        &self.nodes
    }

    /// The companion process started from `binary` (the first, if several).
    pub fn companion(&self, binary: &str) -> Option<&Process> {
        self.companions.iter().find(|p| p.name() == binary || p.name().starts_with(binary))
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `Err` naming the first component found dead (apiserver, kubelet or companion) with its
    /// log tail.
    pub fn check(&self) -> Result<(), Exited> {
        if !self.api.pid().is_some_and(crate::process::alive) {
            return Err(Exited {
                name: "apiserver-lite".into(),
                status: "exited".into(),
                log: self.api.dir().join("apiserver.log"),
                tail: self.api.log_tail(20),
            });
        }
        self.nodes().check()?;
        self.companions.iter().try_for_each(Process::check)
    }

    /// Polls `probe` until it returns `Some`, checking every component each round: fails at
    /// once, naming it, when one has died, and after `within` with `what` and the logs.
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        within: Duration,
        mut probe: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + within;
        loop {
            self.check().with_context(|| format!("while waiting for {what}"))?;
            if let Some(v) = probe().await {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "{}",
                    self.logs(&format!("timed out after {within:?} waiting for {what}"))
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every hollow node is registered and `Ready`.
    pub async fn wait_ready(&self, within: Duration) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(self.client().await?);
        let want = self.nodes().len();
        self.wait_for(&format!("{want} hollow nodes Ready"), within, || async {
            let list = nodes.list(&ListParams::default()).await.ok()?;
            (list.items.iter().filter(|n| is_ready(n)).count() == want).then_some(())
        })
        .await
    }

    /// Kills node `name`'s kubelet with SIGKILL (its pods stay in its runtime); the next
    /// [`check`](Self::check) reports it.
    pub fn kill_kubelet(&self, name: &str) -> anyhow::Result<()> {
        let node = self.nodes().get(name).with_context(|| format!("no hollow node {name}"))?;
        node.kubelet.kill9();
        Ok(())
    }

    /// What each component costs now: every kubelet (by node name), the apiserver and each
    /// companion.
    pub fn usage(&self) -> Vec<(String, Usage)> {
        let mut all: Vec<(String, Usage)> = self
            .nodes()
            .iter()
            .filter_map(|n| Some((n.name.clone(), n.kubelet.usage()?)))
            .collect();
        if let Some(u) = self.api.pid().and_then(crate::process::usage) {
            all.push(("apiserver-lite".into(), u));
        }
        all.extend(self.companions.iter().filter_map(|c| Some((c.name().into(), c.usage()?))));
        all
    }

    /// `what`, then the tails of the apiserver's, the companions' and each kubelet's logs.
    pub fn logs(&self, what: &str) -> String {
        let mut out = format!("{what}\napiserver-lite:\n{}\n", self.api.log_tail(20));
        for c in &self.companions {
            out += &format!("{}:\n{}\n", c.name(), c.log_tail(20));
        }
        for n in self.nodes().iter() {
            out += &format!("{}:\n{}\n", n.kubelet.name(), n.kubelet.log_tail(5));
        }
        out
    }

    /// Stops the companions, the kubelets (all at once), the runtimes and the apiserver, then
    /// checks that no process mentioning the harness directory is left and removes it.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        for c in &self.companions {
            c.signal_term();
        }
        for c in self.companions.drain(..) {
            c.stop(STOP_GRACE);
        }
        std::mem::take(&mut self.nodes).stop().await?;
        let Self { api, dir, .. } = self;
        drop(api);
        let left = crate::leaks::processes(dir.path(), "\0none");
        let path = dir.path().to_path_buf();
        dir.close().with_context(|| format!("remove {}", path.display()))?;
        anyhow::ensure!(left.is_empty(), "hollow teardown left processes: {left:?}");
        anyhow::ensure!(!path.exists(), "hollow teardown left {}", path.display());
        Ok(())
    }
}

/// Whether a Node's `Ready` condition is `True`.
pub fn is_ready(n: &Node) -> bool {
    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}
