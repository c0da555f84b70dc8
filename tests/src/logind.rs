//! A private system bus with a stand-in systemd-logind on it, for graceful node shutdown: Debian's
//! `dbus-daemon` on a socket in a temp dir (what `DBUS_SYSTEM_BUS_ADDRESS` names for the
//! kubelet), and this process serving `org.freedesktop.login1.Manager` there through `zbus`:
//! `InhibitDelayMaxUSec`, `Inhibit` (each lock one end of a socket pair, the other kept here to
//! see when it is released) and the `PrepareForShutdown` signal, sent when a test says. What a
//! real logind does beyond that (shutting the machine down) is not the kubelet's to see.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};

const PATH: &str = "/org/freedesktop/login1";

/// An `Inhibit` call as logind received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InhibitCall {
    pub what: String,
    pub who: String,
    pub why: String,
    pub mode: String,
}

#[derive(Debug, Default)]
struct Held {
    calls: Vec<InhibitCall>,
    /// Our end of each lock handed out.
    ends: Vec<UnixStream>,
}

struct Login1 {
    delay_usec: u64,
    held: Arc<Mutex<Held>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Login1 {
    fn inhibit(
        &self,
        what: String,
        who: String,
        why: String,
        mode: String,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.calls.push(InhibitCall { what, who, why, mode });
        held.ends.push(ours);
        Ok(std::os::fd::OwnedFd::from(theirs).into())
    }

    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> u64 {
        self.delay_usec
    }

    #[zbus(signal)]
    async fn prepare_for_shutdown(
        emitter: &zbus::object_server::SignalEmitter<'_>,
        start: bool,
    ) -> zbus::Result<()>;
}

/// `dbus-daemon` and the stand-in logind on it.
pub struct FakeLogind {
    dir: tempfile::TempDir,
    daemon: Option<Child>,
    conn: zbus::Connection,
    held: Arc<Mutex<Held>>,
}

impl std::fmt::Debug for FakeLogind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLogind").field("dir", &self.dir.path()).finish_non_exhaustive()
    }
}

impl FakeLogind {
    /// Starts the bus and serves logind on it, allowing `delay` for delay locks.
    pub async fn start(delay: Duration) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-dbus-").tempdir_in("/tmp")?;
        let socket = dir.path().join("system_bus_socket");
        let config = dir.path().join("system.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )?;
        let log = std::fs::File::create(dir.path().join("dbus-daemon.log"))?;
        let daemon = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .arg("--nofork")
            .arg("--nopidfile")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start dbus-daemon (is it installed? hack/install-deps.sh)")?;
        let me = Self {
            conn: connect_when_up(&socket, &dir).await?,
            dir,
            daemon: Some(daemon),
            held: Arc::default(),
        };
        let login1 = Login1 { delay_usec: delay.as_micros() as u64, held: me.held.clone() };
        me.conn.object_server().at(PATH, login1).await?;
        me.conn.request_name("org.freedesktop.login1").await?;
        Ok(me)
    }

    /// What the kubelet's `DBUS_SYSTEM_BUS_ADDRESS` must say.
    pub fn address(&self) -> String {
        format!("unix:path={}", self.dir.path().join("system_bus_socket").display())
    }

    /// Sends `PrepareForShutdown(start)`, as logind does before a shutdown (or on its cancel).
    pub async fn prepare_for_shutdown(&self, start: bool) -> anyhow::Result<()> {
        let iface = self.conn.object_server().interface::<_, Login1>(PATH).await?;
        Login1::prepare_for_shutdown(iface.signal_emitter(), start).await?;
        Ok(())
    }

    /// Every `Inhibit` call so far.
    pub fn calls(&self) -> Vec<InhibitCall> {
        self.lock().calls.clone()
    }

    /// How many of the locks handed out are still held (their other end open).
    pub fn held(&self) -> usize {
        let held = self.lock();
        held.ends
            .iter()
            .filter(|end| {
                let _ = end.set_nonblocking(true);
                let mut byte = [0u8; 1];
                !matches!((&**end).read(&mut byte), Ok(0))
            })
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn log_tail(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dbus-daemon.log")).unwrap_or_default()
    }
}

impl Drop for FakeLogind {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// Connects once the daemon listens (within 10 s).
async fn connect_when_up(
    socket: &Path,
    dir: &tempfile::TempDir,
) -> anyhow::Result<zbus::Connection> {
    let address = format!("unix:path={}", socket.display());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if socket.exists()
            && let Ok(conn) = zbus::connection::Builder::address(address.as_str())?.build().await
        {
            return Ok(conn);
        }
        if std::time::Instant::now() > deadline {
            let log =
                std::fs::read_to_string(dir.path().join("dbus-daemon.log")).unwrap_or_default();
            bail!("dbus-daemon did not listen on {} within 10 s:\n{log}", socket.display());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
