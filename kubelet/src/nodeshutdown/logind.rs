//! systemd-logind, the boundary graceful shutdown crosses: [`Logind`] and [`SystemLogind`], its
//! D-Bus implementation (`zbus`; the system bus, or `DBUS_SYSTEM_BUS_ADDRESS`), as upstream's
//! `nodeshutdown/systemd`:
//! - `InhibitDelayMaxUSec`: how long logind waits for delay locks;
//! - `Inhibit("shutdown", "kubelet", …, "delay")`: the lock, a file descriptor held until the
//!   kubelet is done (dropping [`InhibitLock`] releases it);
//! - `PrepareForShutdown(bool)`: the signal logind sends before a shutdown (`true`) and when one
//!   is cancelled (`false`);
//! - logind re-reads its configuration on SIGHUP, sent through systemd's `KillUnit`.
//!
//! [`override_inhibit_delay`] writes upstream's drop-in raising `InhibitDelayMaxSec`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

const LOGIN1: &str = "org.freedesktop.login1";
const LOGIN1_PATH: &str = "/org/freedesktop/login1";
const LOGIN1_MANAGER: &str = "org.freedesktop.login1.Manager";
const SYSTEMD1: &str = "org.freedesktop.systemd1";
const SYSTEMD1_PATH: &str = "/org/freedesktop/systemd1";
const SYSTEMD1_MANAGER: &str = "org.freedesktop.systemd1.Manager";
/// Where upstream writes its logind override.
pub const LOGIND_CONF_DIR: &str = "/etc/systemd/logind.conf.d";
const OVERRIDE_FILE: &str = "99-kubelet.conf";

/// A logind call that failed: what was asked, and why.
#[derive(Debug, thiserror::Error)]
pub enum LogindError {
    #[error("connecting to the system bus: {0}")]
    Connect(#[source] Box<zbus::Error>),
    #[error("systemd-logind: {what}: {source}")]
    Call { what: &'static str, source: Box<zbus::Error> },
    #[error("writing the logind override {}: {source}", path.display())]
    Override { path: PathBuf, source: std::io::Error },
}

/// A failed call's error, naming what was asked.
fn call(what: &'static str) -> impl FnOnce(zbus::Error) -> LogindError {
    move |source| LogindError::Call { what, source: Box::new(source) }
}

/// A delay inhibitor lock: logind waits for it (up to `InhibitDelayMaxSec`) while it is open.
#[derive(Debug)]
pub struct InhibitLock(#[allow(dead_code)] OwnedFd);

impl InhibitLock {
    /// The lock logind handed out as this descriptor.
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self(fd)
    }
}

/// What graceful shutdown asks of logind.
pub trait Logind: Send + Sync + std::fmt::Debug {
    /// `InhibitDelayMaxUSec`.
    fn inhibit_delay_max(&self) -> BoxFuture<'_, Result<Duration, LogindError>>;
    /// Takes a shutdown delay lock.
    fn inhibit(&self) -> BoxFuture<'_, Result<InhibitLock, LogindError>>;
    /// Makes logind re-read its configuration.
    fn reload(&self) -> BoxFuture<'_, Result<(), LogindError>>;
    /// `PrepareForShutdown` as it comes; the stream ends when the bus connection does.
    fn shutdown_events(&self) -> BoxFuture<'_, Result<BoxStream<'static, bool>, LogindError>>;
}

/// logind on the system bus.
#[derive(Debug, Clone)]
pub struct SystemLogind {
    conn: zbus::Connection,
}

impl SystemLogind {
    /// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`), checked
    /// to have logind on it.
    pub async fn connect() -> Result<Self, LogindError> {
        let conn =
            zbus::Connection::system().await.map_err(|e| LogindError::Connect(Box::new(e)))?;
        let me = Self { conn };
        me.inhibit_delay_max().await?;
        Ok(me)
    }

    async fn login1(&self) -> Result<zbus::Proxy<'static>, LogindError> {
        zbus::Proxy::new(&self.conn, LOGIN1, LOGIN1_PATH, LOGIN1_MANAGER)
            .await
            .map_err(call("login1 manager"))
    }
}

impl Logind for SystemLogind {
    fn inhibit_delay_max(&self) -> BoxFuture<'_, Result<Duration, LogindError>> {
        Box::pin(async move {
            let usec: u64 =
                self.login1().await?.get_property("InhibitDelayMaxUSec").await.map_err(|e| {
                    LogindError::Call { what: "InhibitDelayMaxUSec", source: e.into() }
                })?;
            Ok(Duration::from_micros(usec))
        })
    }

    fn inhibit(&self) -> BoxFuture<'_, Result<InhibitLock, LogindError>> {
        Box::pin(async move {
            let why = "Kubelet needs time to handle node shutdown";
            let fd: zbus::zvariant::OwnedFd = self
                .login1()
                .await?
                .call("Inhibit", &("shutdown", "kubelet", why, "delay"))
                .await
                .map_err(call("Inhibit"))?;
            Ok(InhibitLock::from_fd(fd.into()))
        })
    }

    fn reload(&self) -> BoxFuture<'_, Result<(), LogindError>> {
        Box::pin(async move {
            let systemd = zbus::Proxy::new(&self.conn, SYSTEMD1, SYSTEMD1_PATH, SYSTEMD1_MANAGER)
                .await
                .map_err(call("systemd1 manager"))?;
            let sighup = nix::sys::signal::Signal::SIGHUP as i32;
            systemd
                .call::<_, _, ()>("KillUnit", &("systemd-logind.service", "all", sighup))
                .await
                .map_err(call("KillUnit systemd-logind.service"))
        })
    }

    fn shutdown_events(&self) -> BoxFuture<'_, Result<BoxStream<'static, bool>, LogindError>> {
        Box::pin(async move {
            let signals = self
                .login1()
                .await?
                .receive_signal("PrepareForShutdown")
                .await
                .map_err(call("PrepareForShutdown"))?;
            let events = signals.filter_map(|m| async move {
                match m.body().deserialize::<bool>() {
                    Ok(start) => Some(start),
                    Err(e) => {
                        tracing::warn!(error = %e, "a PrepareForShutdown signal without its bool");
                        None
                    }
                }
            });
            Ok(events.boxed())
        })
    }
}

/// Upstream's override raising logind's `InhibitDelayMaxSec` to `period`, in `dir`
/// (`/etc/systemd/logind.conf.d`).
pub fn override_inhibit_delay(dir: &Path, period: Duration) -> Result<(), LogindError> {
    let path = dir.join(OVERRIDE_FILE);
    let text = format!(
        "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec={}\n",
        period.as_secs_f64().round()
    );
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|source| LogindError::Override { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_sets_inhibit_delay_max_sec_in_whole_seconds() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("logind.conf.d");
        override_inhibit_delay(&conf, Duration::from_secs(30)).unwrap();
        let text = std::fs::read_to_string(conf.join("99-kubelet.conf")).unwrap();
        assert_eq!(text, "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n");
    }
}
