//! etcd clusters for apiserver-lite's etcd backend: Debian's `etcd` (3.4, package
//! `etcd-server`) started by the test on loopback ports, one or three members in a directory of
//! their own (a data dir and a log per member), never one on the host. Members can be killed,
//! stopped and restarted on their data; [`EtcdCluster::leader`] names the member that leads.
//! Dropping the cluster stops every member and removes the directory.
//!
//! Rooms: [`gateway`] (what the harness asks etcd over HTTP: health, status, and keys put, read
//! and listed by prefix, so tests can look at what apiserver-lite stored).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::containerd::terminate;
use crate::process::{alive, tail};

pub mod gateway;

pub use gateway::Status;
use gateway::health;

/// How long a start or a restart waits for members to answer healthy.
const START_WITHIN: Duration = Duration::from_secs(20);

/// How long a graceful stop waits before SIGKILL. A leader stopping hands leadership over first,
/// which etcd bounds at its request timeout (7 s with the default election timeout).
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Member {
    name: String,
    client: SocketAddr,
    peer: SocketAddr,
    /// Its raft ID, learned once it is healthy (kept across restarts: it is in the data dir).
    id: u64,
    child: Option<Child>,
}

/// One to a few etcd members forming one cluster, in a temp dir of their own.
#[derive(Debug)]
pub struct EtcdCluster {
    dir: tempfile::TempDir,
    binary: PathBuf,
    token: String,
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts a cluster of `members` (1, or 3 for a quorum that survives a member) and waits
    /// until every member answers healthy. Fails naming the fix when `etcd` is not installed,
    /// and with each member's log tail when one exits or the cluster is not healthy in 20 s.
    pub fn start(members: usize) -> anyhow::Result<Self> {
        Self::start_binary(&crate::require::tool("etcd")?, members)
    }

    /// Tries again (fresh ports, fresh directory) when a port was taken between the harness
    /// picking it and etcd binding it (by a program outside the tests: [`crate::ports`] keeps
    /// tests from handing out the same port).
    fn start_binary(binary: &Path, members: usize) -> anyhow::Result<Self> {
        if members == 0 {
            bail!("an etcd cluster needs at least one member");
        }
        let mut attempt = 1;
        loop {
            match Self::launch(binary, members) {
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn launch(binary: &Path, members: usize) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-etcd-").tempdir_in("/tmp")?;
        let addrs = (0..2 * members)
            .map(|_| crate::ports::free_port().map(|p| SocketAddr::from(([127, 0, 0, 1], p))))
            .collect::<std::io::Result<Vec<_>>>()?;
        let unique = dir.path().file_name().map(|n| n.to_string_lossy().into_owned());
        let mut me = Self {
            binary: binary.to_path_buf(),
            token: unique.unwrap_or_else(|| "e2e-etcd".into()),
            members: (0..members)
                .map(|i| Member {
                    name: format!("m{i}"),
                    client: addrs[2 * i],
                    peer: addrs[2 * i + 1],
                    id: 0,
                    child: None,
                })
                .collect(),
            dir,
        };
        for i in 0..members {
            me.spawn(i)?;
        }
        let deadline = Instant::now() + START_WITHIN;
        for i in 0..members {
            me.wait_healthy(i, deadline)?;
        }
        for i in 0..members {
            me.members[i].id = me.status(i)?.member_id;
        }
        Ok(me)
    }

    /// The directory holding every member's data dir (`m<i>/`) and log (`m<i>.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// How many members the cluster has (running or not).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Each member's client URL, `http://127.0.0.1:<port>`, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| format!("http://{}", m.client)).collect()
    }

    /// `--etcd-servers=<every client URL, comma-separated>`, for apiserver-lite.
    pub fn servers_flag(&self) -> String {
        format!("--etcd-servers={}", self.endpoints().join(","))
    }

    /// Member `i`'s client address.
    pub fn client_addr(&self, i: usize) -> anyhow::Result<SocketAddr> {
        Ok(self.member(i)?.client)
    }

    /// Whether member `i`'s process runs (false after [`kill`](Self::kill) or
    /// [`stop`](Self::stop), or when it exited by itself).
    pub fn is_running(&self, i: usize) -> bool {
        self.members.get(i).and_then(|m| m.child.as_ref()).is_some_and(|c| alive(c.id()))
    }

    /// Whether member `i` answers `GET /health` with `"health":"true"` (it has a leader and
    /// can serve a read).
    pub fn is_healthy(&self, i: usize) -> bool {
        self.members.get(i).is_some_and(|m| health(m.client).is_ok())
    }

    /// The index of the member that leads, as every running member sees it. An error while
    /// they disagree, know of no leader, or name one that is not running (a stale view right
    /// after the leader died): poll it with [`eventually`](crate::eventually).
    pub fn leader(&self) -> anyhow::Result<usize> {
        let mut views = Vec::new();
        for i in 0..self.members.len() {
            if self.is_running(i) {
                views.push((i, self.status(i).map(|s| s.leader)));
            }
        }
        let seen: Vec<String> = views
            .iter()
            .map(|(i, v)| match v {
                Ok(id) => format!("m{i}: leader {}", self.name_of(*id)),
                Err(e) => format!("m{i}: {e:#}"),
            })
            .collect();
        let ids: Vec<u64> = views.iter().filter_map(|(_, v)| v.as_ref().ok().copied()).collect();
        let Some(&id) = ids.first() else { bail!("no running etcd member answered: {seen:?}") };
        if id == 0 || ids.len() != views.len() || ids.iter().any(|&other| other != id) {
            bail!("etcd members do not agree on a leader: {seen:?}");
        }
        match self.members.iter().position(|m| m.id == id) {
            Some(i) if self.is_running(i) => Ok(i),
            _ => bail!("etcd's leader {} is not running: {seen:?}", self.name_of(id)),
        }
    }

    /// Kills member `i` with SIGKILL (no leadership hand-over, no clean shutdown) and reaps it.
    pub fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        let m = self.member_mut(i)?;
        let mut child =
            m.child.take().with_context(|| format!("etcd {} is not running", m.name))?;
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        child.wait().with_context(|| format!("reaping etcd {}", m.name))?;
        Ok(())
    }

    /// Stops member `i` gracefully (SIGTERM; a leader hands leadership over first), SIGKILL
    /// after 10 s.
    pub fn stop(&mut self, i: usize) -> anyhow::Result<()> {
        let m = self.member_mut(i)?;
        let mut child =
            m.child.take().with_context(|| format!("etcd {} is not running", m.name))?;
        terminate(&mut child, STOP_GRACE);
        Ok(())
    }

    /// Starts member `i` again on its data dir (it rejoins as the member it was; the
    /// `--initial-cluster*` flags are ignored for a member that has data) and waits until it
    /// answers healthy as the same member.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        if self.is_running(i) {
            bail!("etcd m{i} is still running");
        }
        let _ = self.member_mut(i)?.child.take().map(|mut c| c.wait());
        self.spawn(i)?;
        self.wait_healthy(i, Instant::now() + START_WITHIN)?;
        let (was, is) = (self.members[i].id, self.status(i)?.member_id);
        if was != is {
            bail!("etcd m{i} came back as member {is:x}, not {was:x}");
        }
        Ok(())
    }

    /// The last `n` lines of member `i`'s log.
    pub fn log_tail(&self, i: usize, n: usize) -> String {
        tail(&self.dir.path().join(format!("m{i}.log")), n)
    }

    fn member(&self, i: usize) -> anyhow::Result<&Member> {
        let n = self.members.len();
        self.members.get(i).with_context(|| format!("no etcd member {i}: the cluster has {n}"))
    }

    fn member_mut(&mut self, i: usize) -> anyhow::Result<&mut Member> {
        let n = self.members.len();
        self.members.get_mut(i).with_context(|| format!("no etcd member {i}: the cluster has {n}"))
    }

    /// `m<i>` for a member's raft ID, else the ID in hex (as etcd logs it).
    fn name_of(&self, id: u64) -> String {
        match self.members.iter().find(|m| m.id == id && id != 0) {
            Some(m) => m.name.clone(),
            None if id == 0 => "none".into(),
            None => format!("{id:x}"),
        }
    }

    fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let initial_cluster = self
            .members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let d = self.dir.path();
        let m = &self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join(format!("{}.log", m.name)))?;
        let (client, peer) = (format!("http://{}", m.client), format!("http://{}", m.peer));
        let child = Command::new(&self.binary)
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(d.join(&m.name))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial_cluster, "--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.token])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {} (package etcd-server)", self.binary.display()))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    fn wait_healthy(&mut self, i: usize, deadline: Instant) -> anyhow::Result<()> {
        loop {
            let answer = health(self.members[i].client);
            if answer.is_ok() {
                return Ok(());
            }
            let name = self.members[i].name.clone();
            if let Some(status) =
                self.members[i].child.as_mut().and_then(|c| c.try_wait().ok().flatten())
            {
                self.members[i].child = None;
                bail!("etcd {name} exited ({status}):\n{}", self.log_tail(i, 20));
            }
            if Instant::now() > deadline {
                let others: String = (0..self.members.len())
                    .filter(|&j| j != i)
                    .map(|j| format!("\n--- m{j}.log\n{}", self.log_tail(j, 10)))
                    .collect();
                bail!(
                    "etcd {name} not healthy within {START_WITHIN:?} ({:#}):\n{}{others}",
                    answer.err().unwrap_or_else(|| anyhow::anyhow!("?")),
                    self.log_tail(i, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for EtcdCluster {
    /// Stops the members one at a time, so a leader stopping hands over to a live member
    /// rather than waiting on peers that are stopping too; the directory goes after.
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                terminate(&mut c, STOP_GRACE);
            }
        }
    }
}

#[cfg(test)]
mod tests;
